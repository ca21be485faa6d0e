// Depthwise Conv 2-D (NCHW or NHWC, group == C_in == C_out, weight [C,1,kh,kw]) for the compiled
// executor through kernels::depthwise_conv2d_f32 (parallel over channel planes) or
// kernels::depthwise_conv2d_nhwc_f32 (over output rows and channel blocks) on the current pool. Built from geometry + constant tensors only (no Node), so ahead-of-time compiled models
// can rebuild it. Tests: tests/runtime/test_conv_depthwise.cc.
#pragma once

#include <limits>
#include <memory>

#include "kernels/x86/f32_depthwise.h"
#include "runtime/gemm_ops.h"

namespace kiln::conv_ops {

// `weight` / `bias`: the constant tensors, or null when they arrive at run time (as inputs 1 and
// 2). has_bias: the node has input 2. clamp_lo/hi: a fused Clip/Relu (+-inf for none).
// Returns null when the geometry is not one the kernel handles.
std::unique_ptr<gemm_ops::GemmOp> make_depthwise_conv_op(const kernels::DepthwiseGeom& g, const Tensor* weight,
                                                         bool has_bias, const Tensor* bias,
                                                         float clamp_lo = -std::numeric_limits<float>::infinity(),
                                                         float clamp_hi = std::numeric_limits<float>::infinity());

// The op for a Conv descriptor with group == C_in == C_out > 1, weight [C,1,kh,kw], f32 operands
// (pads / auto_pad resolved as ONNX does), or null when `d` is not such a depthwise conv.
std::unique_ptr<gemm_ops::GemmOp> make_depthwise_conv_op(const gemm_ops::GemmDesc& d);

// The same for a channels-last descriptor (GemmKind::kConvNhwc) through
// kernels::depthwise_conv2d_nhwc_f32; the weight must be a constant (repacked tap-major once).
std::unique_ptr<gemm_ops::GemmOp> make_depthwise_nhwc_conv_op(const gemm_ops::GemmDesc& d);

}  // namespace kiln::conv_ops
