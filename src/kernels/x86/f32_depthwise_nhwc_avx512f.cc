// The AVX-512 channels-last depthwise conv (compiled with -mavx512f -mavx512vl -mfma; called
// only when the CPU has them): f32_depthwise_nhwc_simd.h on 16 lanes.
#include "kernels/x86/f32_depthwise_nhwc_simd.h"

namespace kiln::kernels {

void depthwise_conv2d_nhwc_f32_avx512f(const DepthwiseGeom& g, const float* x, const float* taps, float* y,
                                       const DepthwiseEpilogue& ep, const ParallelFor& parallel) {
  depthwise_nhwc_rows<F32x16>(g, x, taps, y, ep, parallel);
}

}  // namespace kiln::kernels
