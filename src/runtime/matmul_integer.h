// MatMulInteger (uint8 x constant int8) on the int8 GEMM for the compiled executor.
#pragma once

#include <memory>

#include "runtime/gemm_ops.h"

namespace kiln::gemm_ops {

// The op for a kMatMulInteger descriptor: A uint8 [..., M, K] (K = B's rows), B a constant int8
// [K, N], a_zero_point absent or a uint8 scalar, b_zero_point absent or a constant int8 scalar or
// [N]; null for anything else (the reference kernel runs it).
std::unique_ptr<GemmOp> make_matmul_integer_op(const GemmDesc& d);

}  // namespace kiln::gemm_ops
