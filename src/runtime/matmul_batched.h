// f32 MatMul shapes beyond make_matmul's A[..., M, K] x B[K, N]: N-D x N-D with numpy batch
// broadcasting (either side), rank-1 operands per the ONNX spec, constant or computed B (e.g.
// attention's Q x K^T and P x V), one packed GEMM per output batch on the f32 microkernels,
// parallel over batches (or within one GEMM when there are too few batches for the pool).
// Also the GEMV op: M = 1 MatMul and Gemm with a constant B (classifier heads), single-pixel convs.
// Tests: tests/runtime/test_matmul_batched.cc
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "kernels/x86/f32_gemv.h"
#include "runtime/gemm_ops.h"

namespace kiln::gemm_ops {

// numpy-matmul geometry of A x B: each output batch t multiplies A matrix a_index[t] (M x K)
// by B matrix b_index[t] (K x N). Rank-1 A is [1, K] (M dropped from the output), rank-1 B is
// [K, 1] (N dropped). nullopt when the dims do not broadcast or K differs.
struct MatMulShape {
  int64_t m = 0, k = 0, n = 0;
  int64_t a_matrices = 0, b_matrices = 0;
  std::vector<int64_t> a_index, b_index;
  std::vector<int64_t> out_dims;
};
std::optional<MatMulShape> matmul_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

// MatMul: the M = 1 GEMV op when B is a constant 2-D (or rank-1) tensor, else the batched op
// for shapes make_matmul's flattened GEMM does not cover (rank-1 operands, B of rank > 2).
// Null for [..., M, K] x [K, N] with M > 1, for fused epilogues, and for dims that disagree.
std::unique_ptr<GemmOp> make_matmul_fast_path(const GemmDesc& d);

// y[r, :] = alpha * x[r, :] * op(B) + beta * C for each of `rows` rows of input 0, with op(B)
// packed for the GEMV kernel (f32_gemv.h) and C the operand `c` (input 2; null: none), broadcast
// to [N]. Takes the fused epilogue (bias per N, residual, clamp, activation). The M = 1 MatMul
// and Gemm ops, and single-pixel convs (one row per image, runtime/conv_gemv.h).
std::unique_ptr<GemmOp> make_gemv_op(kernels::PackedGemvB w, float alpha, float beta, const Operand* c,
                                     std::vector<int64_t> out_dims, int64_t rows = 1);

// Gemm with M = 1 and a constant B as a GEMV (weights pre-packed for streaming,
// kernels/x86/f32_gemv.h); null otherwise.
std::unique_ptr<GemmOp> make_gemv_gemm(const GemmDesc& d);

}  // namespace kiln::gemm_ops
