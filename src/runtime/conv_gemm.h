// Conv 2-D with group 1 and constant weights as Y[Co, pixels] = W[Co, C*kh*kw] * col + bias per
// image: W packed once (kernels::pack_a), the column matrix packed per run straight from the
// image (implicit im2col; 1x1/stride 1/no pad reads the image as B directly), output written in
// NCHW with bias and an optional clamp fused in the store. Built from a GemmDesc (no Node).
// A fused input scale per channel (GemmDesc::input_scale) scales the packed weights per run.
// Tests: tests/runtime/test_conv_gemm.cc.
#pragma once

#include <limits>
#include <memory>

#include "runtime/gemm_ops.h"

namespace kiln::conv_ops {

// The op for a float32 Conv descriptor with group 1 and a constant weight, or null otherwise.
// clamp_lo/hi: a fused Clip/Relu (+-inf for none).
std::unique_ptr<gemm_ops::GemmOp> make_gemm_conv_op(const gemm_ops::GemmDesc& d,
                                                    float clamp_lo = -std::numeric_limits<float>::infinity(),
                                                    float clamp_hi = std::numeric_limits<float>::infinity());

}  // namespace kiln::conv_ops
