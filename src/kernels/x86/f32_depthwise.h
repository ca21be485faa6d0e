// f32 depthwise 2-D convolution (NCHW, one kh x kw filter per channel) with a fused bias + clamp
// + activation epilogue: AVX-512 and AVX2 kernels (channel-blocked, per plane along W, per plane
// at stride 2) and a portable scalar kernel, run in parallel; one list per layout below.
// Tests: tests/kernels/test_depthwise.cc.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/x86/f32_gemm.h"

namespace kiln::kernels {

struct DepthwiseGeom {
  int64_t n = 1, c = 1;          // images, channels (= groups)
  int64_t h = 0, w = 0;          // input plane
  int64_t kh = 0, kw = 0;        // filter
  int64_t ho = 0, wo = 0;        // output plane
  int64_t sh = 1, sw = 1;        // strides
  int64_t dh = 1, dw = 1;        // dilations
  int64_t pt = 0, pl = 0;        // top / left padding (bottom/right follow from ho/wo)
};

// y = act(clamp(conv(x, w) + bias, lo, hi)); bias may be null. lo/hi = -inf/+inf: no clamp.
struct DepthwiseEpilogue {
  const float* bias = nullptr;
  float lo = -std::numeric_limits<float>::infinity();
  float hi = std::numeric_limits<float>::infinity();
  Activation act = Activation::kNone;  // applied while the output is still in cache
};

// The channel-blocked kernels' scratch geometry, `lanes` channels per block (AVX2 8, AVX-512
// 16): a block's input planes transposed into a zero-bordered [hq][wp][lanes] scratch, so that
// every tap of every output is one contiguous vector load.
struct DepthwiseBlockedLayout {
  int64_t hq = 0, wp = 0;        // scratch rows / columns actually read
  int64_t in_floats = 0;         // hq * wp * lanes
  int64_t out_floats = 0;        // [ho * wo][lanes] plus slack for a last lanes-row transpose
  std::vector<int64_t> tap_off;  // per tap: scratch floats from an output's first input
  std::vector<int32_t> dst;      // per input pixel: its scratch offset, -1 when outside the scratch
  std::vector<uint8_t> run;      // per input pixel f: 1 when pixels f .. f + lanes - 1 land consecutively
};
// Built once per geometry and lane count on each calling thread and kept (a model runs the same
// convs every inference); valid until the thread's next call.
const DepthwiseBlockedLayout& depthwise_blocked_layout(const DepthwiseGeom& g, int64_t lanes);
// Zeroes the scratch cells no input lands in (the padding border); the rest is rewritten per block.
void depthwise_zero_border(const DepthwiseGeom& g, const DepthwiseBlockedLayout& l, int64_t lanes, float* s);

// The channels-last kernels' row plan in tiles of 8 output pixels (the last one shorter): the
// pixels whose taps all fall inside the input row, [in_lo, in_hi), and per tile k and filter column
// j the tile's pixels whose tap j does, inside[k * kw + j] (tile-relative [lo, hi)).
struct DepthwiseNhwcRowPlan {
  struct Inside {
    int64_t lo, hi;
  };
  int64_t tiles = 0, in_lo = 0, in_hi = 0;
  std::vector<Inside> inside;
};
DepthwiseNhwcRowPlan depthwise_nhwc_row_plan(const DepthwiseGeom& g);

// True when the geometry is one the kernels handle (positive sizes, strides, dilations;
// non-negative pads).
bool depthwise_geom_ok(const DepthwiseGeom& g);

using DepthwiseKernelFn = void (*)(const DepthwiseGeom& g, const float* x, const float* w, float* y,
                                   const DepthwiseEpilogue& ep, const ParallelFor& parallel);

// The one list of NCHW depthwise kernels: X(name, Isa, kind). It drives the declarations below,
// depthwise_f32_kernels() (the tests run every entry the CPU supports on every case its kind
// accepts) and the dispatch (the first entry of target::Target::host().isa). Kinds:
// kDispatch picks a path per geometry (the ISA's entry point); kAny handles any geometry;
// kStride2 only stride 2 both ways, no dilation, 3/5/7 columns (depthwise_stride2_geometry).
// x: [n, c, h, w], w: [c, 1, kh, kw], y: [n, c, ho, wo].
// - _avx512f: _s2 where depthwise_s2_preferred(), else _blocked where depthwise_blocked_preferred(),
//   else _planes. _avx2: _s2 for 3x3 stride 2 on planes 96 wide and more (48 when the output rows
//   are whole vectors), else _blocked (which falls back to _planes for huge planes).
// - _blocked: L channels in the vector lanes (16 on AVX-512, 8 on AVX2) via in-register
//   transposes, any geometry; _planes: one plane at a time, vectorized along W over a padded
//   copy; _s2: per plane straight from the input (masked loads and even/odd permutes, no scratch).
#define KILN_DEPTHWISE_F32_KERNELS(X)                                      \
  X(depthwise_conv2d_f32_avx512f, ::kiln::kernels::Isa::kAvx512, kDispatch) \
  X(depthwise_conv2d_f32_avx512f_blocked, ::kiln::kernels::Isa::kAvx512, kAny) \
  X(depthwise_conv2d_f32_avx512f_planes, ::kiln::kernels::Isa::kAvx512, kAny)  \
  X(depthwise_conv2d_f32_avx512f_s2, ::kiln::kernels::Isa::kAvx512, kStride2)  \
  X(depthwise_conv2d_f32_avx2, ::kiln::kernels::Isa::kAvx2, kDispatch)          \
  X(depthwise_conv2d_f32_avx2_blocked, ::kiln::kernels::Isa::kAvx2, kAny)       \
  X(depthwise_conv2d_f32_avx2_planes, ::kiln::kernels::Isa::kAvx2, kAny)        \
  X(depthwise_conv2d_f32_avx2_s2, ::kiln::kernels::Isa::kAvx2, kStride2)        \
  X(depthwise_conv2d_f32_generic, ::kiln::kernels::Isa::kGeneric, kDispatch)

// The channels-last (NHWC) kernels, the layout the assign-layouts pass gives small-plane conv
// chains: x [n, h, w, c], taps [kh * kw, c] (depthwise_nhwc_taps of the [c, 1, kh, kw] weight), y
// [n, ho, wo, c]. The channels are the vector lanes, so no transposes are needed: L channels x up
// to 8 output pixels of a row in registers, one tap vector per 8 FMAs, border pixels skip the
// taps that fall into padding. _avx2 takes _avx2_blocked (the NCHW blocked kernel's tiles over a
// copy of each 8-channel block, stored back at the channel stride) where that wins (stride 1, and
// strided planes up to 28x28); kind kBlockedFits: only where depthwise_nhwc_avx2_blocked_fits()
// (the scratch stays addressable).
#define KILN_DEPTHWISE_NHWC_F32_KERNELS(X)                                           \
  X(depthwise_conv2d_nhwc_f32_avx512f, ::kiln::kernels::Isa::kAvx512, kDispatch)     \
  X(depthwise_conv2d_nhwc_f32_avx2, ::kiln::kernels::Isa::kAvx2, kDispatch)          \
  X(depthwise_conv2d_nhwc_f32_avx2_blocked, ::kiln::kernels::Isa::kAvx2, kBlockedFits) \
  X(depthwise_conv2d_nhwc_f32_generic, ::kiln::kernels::Isa::kGeneric, kDispatch)

#define KILN_DECLARE_DEPTHWISE(NAME, ISA, KIND)                                                  \
  void NAME(const DepthwiseGeom& g, const float* x, const float* w, float* y, const DepthwiseEpilogue& ep, \
            const ParallelFor& parallel = nullptr);
KILN_DEPTHWISE_F32_KERNELS(KILN_DECLARE_DEPTHWISE)
KILN_DEPTHWISE_NHWC_F32_KERNELS(KILN_DECLARE_DEPTHWISE)
#undef KILN_DECLARE_DEPTHWISE

struct DepthwiseKernel {
  enum Kind { kDispatch, kAny, kStride2, kBlockedFits };
  const char* name;
  Isa isa;
  Kind kind;
  DepthwiseKernelFn fn;
  // True when this kernel takes geometry g (depthwise_geom_ok(g) assumed).
  bool accepts(const DepthwiseGeom& g) const;
};
const std::vector<DepthwiseKernel>& depthwise_f32_kernels();
const std::vector<DepthwiseKernel>& depthwise_nhwc_f32_kernels();

// Stride 2 both ways, no dilation, 3/5/7 columns: what the _s2 kernels take.
inline bool depthwise_stride2_geometry(const DepthwiseGeom& g) {
  return g.sh == 2 && g.sw == 2 && g.dh == 1 && g.dw == 1 && (g.kw == 3 || g.kw == 5 || g.kw == 7);
}

// The NCHW kernel of target::Target::host().isa (the first of its entries).
void depthwise_conv2d_f32(const DepthwiseGeom& g, const float* x, const float* w, float* y,
                          const DepthwiseEpilogue& ep, const ParallelFor& parallel = nullptr);
// Measured (MobileNetV2 shapes, 1 thread): blocked wins on every strided conv and on planes up
// to ~40x40; at stride 1 on 56x56 and larger both are memory bound and _planes is a little ahead.
inline bool depthwise_blocked_preferred(const DepthwiseGeom& g) {
  return g.sh > 1 || g.sw > 1 || g.h * g.w <= 40 * 40;
}
// AVX-512: stride 2 on large planes. Measured (1 thread, the blocked path's time in parentheses):
// 96 channels 112x112 3x3 0.28 (0.56) ms, 144 at 56x56 3x3 0.146 (0.174), 5x5 0.238 (0.226); at
// 28x28 and below the blocked path wins (192 3x3: 0.058 vs 0.046).
inline bool depthwise_s2_preferred(const DepthwiseGeom& g) {
  return depthwise_stride2_geometry(g) && (g.w >= 96 || (g.w >= 48 && g.kw == 3));
}

void depthwise_nhwc_taps(const DepthwiseGeom& g, const float* w, float* taps);
// The NHWC kernel of target::Target::host().isa.
void depthwise_conv2d_nhwc_f32(const DepthwiseGeom& g, const float* x, const float* taps, float* y,
                               const DepthwiseEpilogue& ep, const ParallelFor& parallel = nullptr);
bool depthwise_nhwc_avx2_blocked_fits(const DepthwiseGeom& g);

}  // namespace kiln::kernels
