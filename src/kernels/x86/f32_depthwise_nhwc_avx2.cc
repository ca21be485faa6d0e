// The AVX2 channels-last depthwise conv: the AVX-512 kernel's design on 8 lanes (per task a range
// of (image, output row, 8-channel block) items; per item the row's pixels in tiles of up to 8
// accumulators), or, where it wins, the blocked NCHW kernel's tiles over a copy of each channel
// block (f32_depthwise_avx2.cc). Compiled with -mavx2 -mfma; called only when the CPU has them.
#include "kernels/x86/f32_depthwise_nhwc_simd.h"

namespace kiln::kernels {

void depthwise_conv2d_nhwc_f32_avx2(const DepthwiseGeom& g, const float* x, const float* taps, float* y,
                                    const DepthwiseEpilogue& ep, const ParallelFor& parallel) {
  // The blocked kernel (the NCHW kernel's tiles over a zero-bordered copy of the block) wins at
  // stride 1 and on small strided planes (1 thread, this kernel's time in parentheses): 960
  // channels 7x7 3x3 0.032 (0.050) ms, 1152 7x7 5x5 0.063 (0.085), 576 14x14 3x3/2 0.036 (0.042),
  // 144 56x56 3x3 0.38 (0.54); with the input rows read in place this one wins on large strided
  // planes: 96 112x112 3x3/2 0.43 (0.71), 144 56x56 5x5/2 0.24 (0.27).
  if ((g.sh == 1 || g.h * g.w <= 28 * 28) && depthwise_nhwc_avx2_blocked_fits(g))
    return depthwise_conv2d_nhwc_f32_avx2_blocked(g, x, taps, y, ep, parallel);
  depthwise_nhwc_rows<F32x8>(g, x, taps, y, ep, parallel);
}

}  // namespace kiln::kernels
