// ConvInteger (uint8 NCHW input x constant int8 weight -> int32) on the int8 GEMM for the
// compiled executor.
#pragma once

#include <memory>

#include "runtime/gemm_ops.h"

namespace kiln::conv_ops {

// The op for a kConvInteger descriptor: 2-D, group 1, x uint8 [N, C, H, W], w a constant int8
// [M, C, kh, kw] with its zero point absent or all 0 (symmetric weights, as kiln quantize and
// ONNX Runtime's quantizer write them), x_zero_point absent or a uint8 scalar; null for anything
// else (the reference kernel runs it).
std::unique_ptr<gemm_ops::GemmOp> make_conv_integer_op(const gemm_ops::GemmDesc& d);
// True when its ops take a requantizing epilogue (GemmDesc::requant_*) on this CPU: with VNNI.
bool conv_integer_requantizes();

}  // namespace kiln::conv_ops
