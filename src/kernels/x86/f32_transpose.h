// f32 matrix transpose (rows x cols, strided) for ops that compute in one orientation and store
// in the other (a 1x1 conv computed with the pixels as GEMM rows, stored NCHW): 16x16 blocks
// transposed in AVX-512 registers or 8x8 in AVX2 ones, masked at the edges; a portable loop
// elsewhere.
// Tests: tests/kernels/test_transpose.cc.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/x86/isa_list.h"

namespace kiln::kernels {

// dst[j * ldd + i] = src[i * lds + j] for i < rows, j < cols.
void transpose_f32(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst, int64_t ldd);
// The family's list (isa_list.h): call an entry only when the CPU has its ISA (isa_supported).
using TransposeFn = void (*)(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst, int64_t ldd);
#define KILN_TRANSPOSE_F32_KERNELS(X)                       \
  X(transpose_f32_avx512f, ::kiln::target::Isa::kAvx512) \
  X(transpose_f32_avx2, ::kiln::target::Isa::kAvx2)      \
  X(transpose_f32_generic, ::kiln::target::Isa::kGeneric)
#define KILN_DECLARE_TRANSPOSE(NAME, ISA) \
  void NAME(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst, int64_t ldd);
KILN_TRANSPOSE_F32_KERNELS(KILN_DECLARE_TRANSPOSE)
#undef KILN_DECLARE_TRANSPOSE
const std::vector<IsaKernel<TransposeFn>>& transpose_f32_kernels();

// out[k * mr + i] = alpha * a[i * lda + k] for i < rows, 0 for rows <= i < mr, k < kc (1 <= rows
// <= mr <= 8): one MR-row micro-panel of a GEMM's A in the layout f32_gemm_pack_a writes (the same
// values), from 8x8 AVX2 register transposes. Call only when the CPU has AVX2 and FMA.
void pack_rows_k_major_avx2(int mr, int64_t rows, int64_t kc, const float* a, int64_t lda, float alpha, float* out);

}  // namespace kiln::kernels
