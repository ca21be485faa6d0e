// f32 GEMV for M = 1 (classifier heads): y[N] = alpha * x[K] * op(B)[K, N] + bias. Memory bound,
// so op(B) is pre-packed once into the layout the kernel streams: blocks of 64 columns, each
// K x 64 contiguous (the last block K x round_up(rest, 16), zero-padded), read exactly once per call.
// Tests: tests/kernels/test_gemv.cc
#pragma once

#include <cstdint>
#include <vector>

#include "core/large_alloc.h"
#include "kernels/x86/f32_gemm.h"
#include "kernels/x86/isa_list.h"

namespace kiln::kernels {

struct PackedGemvB {
  static constexpr int64_t kBlock = 64;  // columns per block (4 AVX-512 vectors)
  int64_t k = 0, n = 0;
  LargeVector<float> data;  // [block][K][width], width = min(64, round_up(N - 64*block, 16))
  int64_t blocks() const { return (n + kBlock - 1) / kBlock; }
  int64_t block_width(int64_t b) const;
  const float* block_data(int64_t b) const { return data.data() + b * k * kBlock; }
};

// Packs op(B) (B is K x N with row stride ldb, or N x K when trans_b) for gemv_packed.
PackedGemvB pack_gemv_b(bool trans_b, int64_t K, int64_t N, const float* B, int64_t ldb,
                        const ParallelFor& parallel = nullptr);

// y[j] = alpha * sum_k x[k] * op(B)[k][j] (+ bias[j] when bias is set; then relu if asked).
// K == 0 gives bias (or 0). Parallel over column blocks.
void gemv_packed(const float* x, float alpha, const PackedGemvB& b, const float* bias, bool relu,
                 float* y, const ParallelFor& parallel = nullptr);

// Blocks [b0, b1) of gemv_packed. The family's list (isa_list.h); an entry is called only when
// the CPU has its ISA.
using GemvBlocksFn = void (*)(const float* x, float alpha, const PackedGemvB& b, const float* bias, bool relu,
                              float* y, int64_t b0, int64_t b1);
#define KILN_GEMV_F32_KERNELS(X)                          \
  X(gemv_blocks_avx512f, ::kiln::target::Isa::kAvx512) \
  X(gemv_blocks_avx2, ::kiln::target::Isa::kAvx2)      \
  X(gemv_blocks_generic, ::kiln::target::Isa::kGeneric)
#define KILN_DECLARE_GEMV(NAME, ISA)                                                                        \
  void NAME(const float* x, float alpha, const PackedGemvB& b, const float* bias, bool relu, float* y, int64_t b0, \
            int64_t b1);
KILN_GEMV_F32_KERNELS(KILN_DECLARE_GEMV)
#undef KILN_DECLARE_GEMV
const std::vector<IsaKernel<GemvBlocksFn>>& gemv_f32_kernels();

}  // namespace kiln::kernels
