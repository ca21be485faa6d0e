// The stem conv kernel for AVX2 + FMA (compiled with -mavx2 -mfma; called when the default f32
// microkernel is the AVX2 one): f32_conv_stem_simd.h on 8 lanes.
#include "kernels/x86/f32_conv_stem_simd.h"

namespace kiln::kernels {

void conv_stem_f32__avx2(const StemConvGeom& g, const float* x, const float* packed_w, float* y,
                         const DepthwiseEpilogue& ep, const ParallelFor& parallel, StemMaxPool pool) {
  conv_stem_f32_simd<F32x8>(g, x, packed_w, y, ep, parallel, pool);
}

}  // namespace kiln::kernels
