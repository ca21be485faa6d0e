// Stem conv: the supported geometries, the weight packing and the dispatch (see
// f32_conv_stem.h); the kernels (f32_conv_stem_simd.h per ISA) are listed in f32_conv_stem.h.
#include "kernels/x86/f32_conv_stem.h"

namespace kiln::kernels {

const std::vector<IsaKernel<ConvStemFn>>& conv_stem_f32_kernels() {
  static const std::vector<IsaKernel<ConvStemFn>> list = {KILN_CONV_STEM_F32_KERNELS(KILN_ISA_KERNEL_ENTRY)};
  return list;
}

bool conv_stem_supported(const StemConvGeom& g) {
  if (!host_kernel(conv_stem_f32_kernels())) return false;
  if (g.n < 1 || g.c < 1 || g.c > 4 || g.co < 1 || g.kh < 1 || g.kh > 7 || g.kw < 1 || g.kw > 7) return false;
  if (g.h < 1 || g.w < 1 || g.ho < 1 || g.wo < 1 || g.pt < 0 || g.pl < 0 || g.pt >= g.kh || g.pl >= g.kw) return false;
  // Every output reads at least one input row and column (the output sizes agree with the pads).
  return 2 * (g.ho - 1) - g.pt < g.h && 2 * (g.wo - 1) - g.pl < g.w;
}

std::vector<float> pack_conv_stem_weights(const StemConvGeom& g, const float* w) {
  const int64_t cb = kStemChannelBlock, blocks = (g.co + cb - 1) / cb, taps = g.c * g.kh * g.kw;
  std::vector<float> out(static_cast<size_t>(blocks * taps * cb), 0.0f);
  for (int64_t o = 0; o < g.co; ++o)
    for (int64_t t = 0; t < taps; ++t) out[static_cast<size_t>(((o / cb) * taps + t) * cb + o % cb)] = w[o * taps + t];
  return out;
}

void conv_stem_f32(const StemConvGeom& g, const float* x, const float* packed_w, float* y,
                   const DepthwiseEpilogue& ep, const ParallelFor& parallel, StemMaxPool pool) {
  static const ConvStemFn fn = host_kernel(conv_stem_f32_kernels());
  fn(g, x, packed_w, y, ep, parallel, pool);
}

}  // namespace kiln::kernels
