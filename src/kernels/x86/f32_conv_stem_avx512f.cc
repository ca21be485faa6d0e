// The stem conv kernel for AVX-512F (compiled with -mavx512f -mavx512vl -mfma; called when the
// default f32 microkernel is an AVX-512 one): f32_conv_stem_simd.h on 16 lanes.
#include "kernels/x86/f32_conv_stem_simd.h"

namespace kiln::kernels {

void conv_stem_f32__avx512f(const StemConvGeom& g, const float* x, const float* packed_w, float* y,
                            const DepthwiseEpilogue& ep, const ParallelFor& parallel, StemMaxPool pool) {
  conv_stem_f32_simd<F32x16>(g, x, packed_w, y, ep, parallel, pool);
}

}  // namespace kiln::kernels
