// Conv 2-D over a single pixel (1x1 kernel on a 1x1 image: the squeeze-and-excitation blocks'
// convs on pooled features) as a GEMV per image, y[co] = W[co, :] . x + bias, on the packed-weight
// GEMV kernel instead of a GEMM whose 32-column panels would hold one column. Built from a
// GemmDesc (no Node). Tests: tests/runtime/test_conv_gemv.cc.
#pragma once

#include <memory>

#include "runtime/gemm_ops.h"

namespace kiln::conv_ops {

// The op for a float32 Conv descriptor with group 1, a constant [Co, C, 1, 1] weight and a
// [N, C, 1, 1] input without padding, or null otherwise. It takes the whole fused epilogue.
std::unique_ptr<gemm_ops::GemmOp> make_gemv_conv_op(const gemm_ops::GemmDesc& d);
// True when d's geometry is one the GEMV op takes (the op may still decline its operands).
bool gemv_conv_covers(const gemm_ops::GemmDesc& d);

}  // namespace kiln::conv_ops
