// Reference GEMM shared by the reference kernels (Conv via im2col, MatMul, Gemm): a cache-blocked,
// packed loop nest that the compiler auto-vectorizes. Row-major operands with explicit strides.
#pragma once

#include <cstdint>

namespace kiln {

// C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C[M,N], all row-major.
// op(A) = A (element (m,k) at A[m*lda + k]) or, when trans_a, A^T (element (m,k) at A[k*lda + m]);
// likewise for B with ldb. ldc is the row stride of C. When beta == 0, C is not read (NaNs in C
// do not propagate). Accumulates in the element type (float for f32, double for f64).
void gemm_ref(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
              const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
              int64_t ldc);
void gemm_ref(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
              const double* A, int64_t lda, const double* B, int64_t ldb, double beta, double* C,
              int64_t ldc);

}  // namespace kiln
