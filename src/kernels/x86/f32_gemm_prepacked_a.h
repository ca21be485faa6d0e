// SGEMM with a constant left operand packed once: C[M,N] = A[M,K] * B[K,N] + per-row bias,
// clamped. For convolutions as Y[Co, pixels] = W[Co, C*kh*kw] * col[C*kh*kw, pixels]: the
// weights are packed when the op is made, the activations are packed per run (contiguous row
// copies), and the output comes out in NCHW order with no transpose. Uses the f32 GEMM
// microkernels of f32_gemm.h. Tests: tests/kernels/test_sgemm_prepacked_a.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "core/large_alloc.h"
#include "kernels/x86/f32_gemm.h"

namespace kiln::kernels {

// A [M, K] row-major packed into MR-row micro-panels per (M block, K block).
struct PackedA {
  const F32GemmUkernel* kernel = nullptr;
  int64_t m = 0, k = 0, mc = 0;  // mc: rows per M block (a multiple of MR)
  LargeVector<float> data;       // [M block][K][mc] layout, zero-padded rows
  const float* block(int64_t i0, int64_t k0) const { return data.data() + (i0 / mc) * mc * k + k0 * mc; }
};

PackedA pack_a(int64_t M, int64_t K, const float* A, int64_t lda, const F32GemmUkernel* kernel = nullptr);

// out = A with column k scaled by col_scale[k], k in [0, K): A * diag(col_scale) without
// repacking. `out` must have A's geometry (a copy of A); only its data is rewritten. For a conv
// whose input arrives scaled per channel (a fused squeeze-and-excitation Mul). `parallel`
// spreads the micro-panels over threads.
void scale_packed_a_columns(const PackedA& a, const float* col_scale, PackedA& out,
                            const ParallelFor& parallel = nullptr);

// C = act(clamp(A*B + bias + residual, lo, hi)), applied in the store of each tile's last K block.
struct RowEpilogue {
  const float* bias = nullptr;  // per-row (M) bias, or null
  float lo = -std::numeric_limits<float>::infinity();
  float hi = std::numeric_limits<float>::infinity();
  const float* residual = nullptr;  // [M, N] with leading dim ldr, added after the bias; or null
  int64_t ldr = 0;
  Activation act = Activation::kNone;  // after the clamp
};

// Packs rows [k0, k0+kc) x columns [j0, j0+nc) of B into NR-column panels (panel q at
// dst + q*kc*nr, row-major kc x nr, columns past nc zeroed), like f32_gemm_pack_b. Lets a conv
// pack straight from the image (implicit im2col) instead of materializing B.
using PackBFn = std::function<void(int64_t k0, int64_t kc, int64_t j0, int64_t nc, int nr, float* dst)>;

// C = A * B (+ bias per row, clamped to [lo, hi]), B [K, N] given by its packer. Parallel over
// column chunks x row groups of C; each task packs its own B block. `threads`: how many workers
// `parallel` spreads over (0: unknown, assumed 4), used to balance the split.
// `split`: the thread split to use (a tuned one: chunks and groups clamped to the panels there
// are), or null for choose_gemm_split's.
void sgemm_prepacked_a(const PackedA& A, int64_t N, const PackBFn& pack_b, float* C, int64_t ldc,
                       const RowEpilogue& epilogue = {}, const ParallelFor& parallel = nullptr, int threads = 0,
                       const GemmSplit* split = nullptr);
// B [K, N] row-major with leading dim ldb (read in place, unpacked, when A has few micro-panel rows).
void sgemm_prepacked_a(const PackedA& A, int64_t N, const float* B, int64_t ldb, float* C, int64_t ldc,
                       const RowEpilogue& epilogue = {}, const ParallelFor& parallel = nullptr, int threads = 0,
                       const GemmSplit* split = nullptr);

}  // namespace kiln::kernels
