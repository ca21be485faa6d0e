// f32 "stem" convolution: a dense conv with few input channels and stride 2 (a network's first
// layer: 3 -> 64 channels 7x7 in ResNets, 3 -> 32 3x3 in MobileNets), computed directly on
// AVX-512 instead of as a GEMM whose K (C * kh * kw = 27 or 147) is too short to amortize its
// packing and tile stores (AVX2: f32_conv_stem_avx2.cc). NCHW in and out, fused bias + clamp +
// activation.
// Tests: tests/kernels/test_conv_stem.cc.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/x86/f32_depthwise.h"
#include "kernels/x86/f32_gemm.h"
#include "kernels/x86/isa_list.h"

namespace kiln::kernels {

struct StemConvGeom {
  int64_t n = 1, c = 1, h = 0, w = 0;  // input [n, c, h, w]
  int64_t co = 0, kh = 0, kw = 0;      // weight [co, c, kh, kw]
  int64_t ho = 0, wo = 0;              // output [n, co, ho, wo]; stride 2, no dilation
  int64_t pt = 0, pl = 0;              // top / left padding (bottom/right follow from ho/wo)
};

// Output channels per register block (the weights are packed per block of this many).
inline constexpr int64_t kStemChannelBlock = 8;

// The kernels' input copy: each padded input row split into its even and odd columns (phase
// rows of `ur` floats each, ur a multiple of the vector width `lanes`), so that the stride-2
// taps are contiguous vector loads.
struct StemPhaseLayout {
  int64_t rows = 0;  // padded input rows read: 2 * (ho - 1) + kh
  int64_t ur = 0;    // floats per phase row
  int64_t row_floats() const { return 2 * ur; }
  int64_t channel_floats() const { return rows * row_floats(); }
};
inline StemPhaseLayout stem_phase_layout(const StemConvGeom& g, int64_t lanes) {
  StemPhaseLayout l;
  l.rows = 2 * (g.ho - 1) + g.kh;
  const int64_t wo_r = (g.wo + lanes - 1) / lanes * lanes;
  l.ur = (wo_r + (g.kw - 1) / 2 + lanes - 1) / lanes * lanes;
  return l;
}

// True when a kernel runs this geometry (the host target's ISA has one in the list): 1-4 input
// channels, a 1x1 to 7x7 filter, stride 2 (given), consistent sizes.
bool conv_stem_supported(const StemConvGeom& g);

// The weights [co, c, kh, kw] as conv_stem_f32 reads them: per block of kStemChannelBlock output
// channels, [c][kh][kw][kStemChannelBlock] (channels past co zero).
std::vector<float> pack_conv_stem_weights(const StemConvGeom& g, const float* w);

// The max pool a stem conv may end in (ResNet, ShuffleNet): 3x3 windows, stride 2, one row and
// column of padding on every side, floor mode. Pooled while the conv rows are in cache, so the
// conv's output (the network's largest activation) is never written out.
struct StemMaxPool {
  bool on = false;
  // Pooled size of a conv output of ho x wo.
  static int64_t pooled(int64_t size) { return (size + 2 - 3) / 2 + 1; }
};

using ConvStemFn = void (*)(const StemConvGeom& g, const float* x, const float* packed_w, float* y,
                           const DepthwiseEpilogue& ep, const ParallelFor& parallel, StemMaxPool pool);
// The family's list (isa_list.h): f32_conv_stem_simd.h instantiated per ISA.
#define KILN_CONV_STEM_F32_KERNELS(X)                        \
  X(conv_stem_f32__avx512f, ::kiln::target::Isa::kAvx512) \
  X(conv_stem_f32__avx2, ::kiln::target::Isa::kAvx2)
#define KILN_DECLARE_CONV_STEM(NAME, ISA)                                                               \
  void NAME(const StemConvGeom& g, const float* x, const float* packed_w, float* y, const DepthwiseEpilogue& ep, \
            const ParallelFor& parallel, StemMaxPool pool);
KILN_CONV_STEM_F32_KERNELS(KILN_DECLARE_CONV_STEM)
#undef KILN_DECLARE_CONV_STEM
const std::vector<IsaKernel<ConvStemFn>>& conv_stem_f32_kernels();

// y = act(clamp(conv(x, w) + bias, lo, hi)) with the epilogue of the depthwise kernels (bias
// per output channel, may be null), then the max pool when pool.on. x [n, c, h, w], y [n, co, ho,
// wo] (pooled: [n, co, pooled(ho), pooled(wo)]). Only when conv_stem_supported(g). Parallel over
// output channel blocks x output row bands.
void conv_stem_f32(const StemConvGeom& g, const float* x, const float* packed_w, float* y,
                   const DepthwiseEpilogue& ep, const ParallelFor& parallel = nullptr, StemMaxPool pool = {});

}  // namespace kiln::kernels
