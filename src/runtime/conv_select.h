// Which conv op runs a Conv GemmDesc: the depthwise kernel, a GEMV for single-pixel convs, the
// direct stem kernel (few input channels, stride 2), the prepacked-weight GEMM with implicit
// im2col, or Winograd F(4x4, 3x3) for large-enough 3x3 stride-1 convs (AVX-512); null leaves the
// descriptor to gemm_ops' im2col ConvOp (run-time weights, grouped convs). The single entry point gemm_ops.cc calls. Tests: tests/runtime/test_conv_select.cc.
#pragma once

#include <memory>

#include "runtime/gemm_ops.h"

namespace kiln::conv_ops {

// The chosen op, or null. KILN_CONV_OPS (read once): "legacy" always returns null, so that A/B
// runs can compare against the im2col ConvOp and the generated depthwise kernel; "direct"
// never uses Winograd (the GEMM path instead).
std::unique_ptr<gemm_ops::GemmOp> make_conv_op(const gemm_ops::GemmDesc& d);

// True when Winograd is measured faster than the GEMM path for this conv (it covers it or not).
bool winograd_preferred(const gemm_ops::GemmDesc& d);

}  // namespace kiln::conv_ops
