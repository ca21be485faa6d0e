// ConvTranspose 2-D (NCHW, any group, stride, dilation and pads) for the compiled executor: per
// block of output channels one GEMM, col[channels * kh * kw, H * W] = W_g^T * X_g, on the f32
// microkernels with the weights packed once, then col2im into the block's output planes (bias
// first; the fused residual, clamp and activation once a plane is complete) while the block's
// columns are still in cache. Constant weights are packed once, run-time ones on every run. Built from a GemmDesc only, so ahead-of-time compiled models can
// rebuild it. Tests: tests/runtime/test_conv_transpose.cc.
#pragma once

#include <memory>

#include "runtime/gemm_ops.h"

namespace kiln::conv_ops {

// The op for a ConvTranspose descriptor (pads resolved, see GemmDesc) with f32 operands, 4-D
// input and output and a weight [C_in, C_out / group, kh, kw]; null otherwise (other ranks or
// dtypes, dims that disagree: the reference kernel runs those).
std::unique_ptr<gemm_ops::GemmOp> make_conv_transpose_op(const gemm_ops::GemmDesc& d);

}  // namespace kiln::conv_ops
