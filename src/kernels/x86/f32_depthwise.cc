// Depthwise conv dispatch (AVX-512, AVX2 or portable, following f32_gemm_default()'s ISA choice) and
// the portable kernel: direct loops with per-tap bounds checks, parallel over channel planes.
#include "kernels/x86/f32_depthwise.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <map>

namespace kiln::kernels {

namespace {

DepthwiseBlockedLayout make_blocked_layout(const DepthwiseGeom& g, int64_t lanes) {
  DepthwiseBlockedLayout l;
  l.hq = (g.ho - 1) * g.sh + (g.kh - 1) * g.dh + 1;
  l.wp = (g.wo - 1) * g.sw + (g.kw - 1) * g.dw + 1;
  l.in_floats = l.hq * l.wp * lanes;
  // + a chunk: row parts start unaligned
  l.out_floats = ((g.ho * g.wo + lanes - 1) / lanes * lanes + lanes) * lanes;
  for (int64_t i = 0; i < g.kh; ++i)
    for (int64_t j = 0; j < g.kw; ++j) l.tap_off.push_back((i * g.dh * l.wp + j * g.dw) * lanes);
  l.dst.resize(static_cast<size_t>(g.h * g.w));
  for (int64_t iy = 0; iy < g.h; ++iy)
    for (int64_t ix = 0; ix < g.w; ++ix) {
      const int64_t yq = iy + g.pt, xq = ix + g.pl;
      l.dst[iy * g.w + ix] = static_cast<int32_t>(yq < l.hq && xq < l.wp ? (yq * l.wp + xq) * lanes : -1);
    }
  l.run.resize(static_cast<size_t>(g.h * g.w));
  for (int64_t iy = 0; iy < g.h; ++iy)
    for (int64_t ix = 0; ix < g.w; ++ix) {
      const int64_t f = iy * g.w + ix;
      l.run[f] = ix + lanes <= g.w && l.dst[f] >= 0 && l.dst[f + lanes - 1] >= 0;
    }
  return l;
}

}  // namespace

const DepthwiseBlockedLayout& depthwise_blocked_layout(const DepthwiseGeom& g, int64_t lanes) {
  using Key = std::array<int64_t, 13>;
  thread_local std::map<Key, DepthwiseBlockedLayout> built;
  const Key key{g.h, g.w, g.kh, g.kw, g.ho, g.wo, g.sh, g.sw, g.dh, g.dw, g.pt, g.pl, lanes};
  auto it = built.find(key);
  if (it != built.end()) return it->second;
  if (built.size() >= 64) built.clear();  // a bound for programs that see many shapes
  return built.emplace(key, make_blocked_layout(g, lanes)).first->second;
}

void depthwise_zero_border(const DepthwiseGeom& g, const DepthwiseBlockedLayout& l, int64_t lanes, float* s) {
  const int64_t row = l.wp * lanes;
  const int64_t y0 = std::min(g.pt, l.hq), y1 = std::min(g.pt + g.h, l.hq);
  const int64_t x0 = std::min(g.pl, l.wp), x1 = std::min(g.pl + g.w, l.wp);
  std::memset(s, 0, sizeof(float) * y0 * row);
  std::memset(s + y1 * row, 0, sizeof(float) * (l.hq - y1) * row);
  for (int64_t yq = y0; yq < y1; ++yq) {
    std::memset(s + yq * row, 0, sizeof(float) * x0 * lanes);
    std::memset(s + yq * row + x1 * lanes, 0, sizeof(float) * (l.wp - x1) * lanes);
  }
}

bool depthwise_geom_ok(const DepthwiseGeom& g) {
  if (g.n <= 0 || g.c <= 0 || g.h <= 0 || g.w <= 0 || g.kh <= 0 || g.kw <= 0 || g.ho <= 0 || g.wo <= 0) return false;
  if (g.sh <= 0 || g.sw <= 0 || g.dh <= 0 || g.dw <= 0 || g.pt < 0 || g.pl < 0) return false;
  return true;
}

void depthwise_conv2d_f32_generic(const DepthwiseGeom& g, const float* x, const float* w, float* y,
                                  const DepthwiseEpilogue& ep, const ParallelFor& parallel) {
  auto planes = [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const int64_t ch = p % g.c;
      const float* xp = x + p * g.h * g.w;
      const float* wp = w + ch * g.kh * g.kw;
      float* yp = y + p * g.ho * g.wo;
      const float b = ep.bias ? ep.bias[ch] : 0.0f;
      for (int64_t oy = 0; oy < g.ho; ++oy)
        for (int64_t ox = 0; ox < g.wo; ++ox) {
          float acc = 0.0f;
          for (int64_t i = 0; i < g.kh; ++i) {
            const int64_t iy = oy * g.sh - g.pt + i * g.dh;
            if (iy < 0 || iy >= g.h) continue;
            for (int64_t j = 0; j < g.kw; ++j) {
              const int64_t ix = ox * g.sw - g.pl + j * g.dw;
              if (ix >= 0 && ix < g.w) acc += xp[iy * g.w + ix] * wp[i * g.kw + j];
            }
          }
          yp[oy * g.wo + ox] = apply_activation(ep.act, std::min(std::max(acc + b, ep.lo), ep.hi));
        }
    }
  };
  const int64_t n = g.n * g.c;
  run_parallel(parallel, n, planes);
}

bool DepthwiseKernel::accepts(const DepthwiseGeom& g) const {
  switch (kind) {
    case kDispatch:
    case kAny: return true;
    case kStride2: return depthwise_stride2_geometry(g);
    case kBlockedFits: return depthwise_nhwc_avx2_blocked_fits(g);
  }
  return false;
}

#define KILN_DEPTHWISE_ENTRY(NAME, ISA, KIND) DepthwiseKernel{#NAME, ISA, DepthwiseKernel::KIND, &NAME},
const std::vector<DepthwiseKernel>& depthwise_f32_kernels() {
  static const std::vector<DepthwiseKernel> table = {KILN_DEPTHWISE_F32_KERNELS(KILN_DEPTHWISE_ENTRY)};
  return table;
}

const std::vector<DepthwiseKernel>& depthwise_nhwc_f32_kernels() {
  static const std::vector<DepthwiseKernel> table = {KILN_DEPTHWISE_NHWC_F32_KERNELS(KILN_DEPTHWISE_ENTRY)};
  return table;
}
#undef KILN_DEPTHWISE_ENTRY

namespace {

// The first entry of the host target's ISA (its dispatching kernel).
DepthwiseKernelFn host_kernel(const std::vector<DepthwiseKernel>& table) {
  const Isa isa = target::Target::host().isa;
  for (const DepthwiseKernel& k : table)
    if (k.isa == isa) return k.fn;
  return table.back().fn;
}

}  // namespace

void depthwise_conv2d_f32(const DepthwiseGeom& g, const float* x, const float* w, float* y,
                          const DepthwiseEpilogue& ep, const ParallelFor& parallel) {
  static const DepthwiseKernelFn fn = host_kernel(depthwise_f32_kernels());
  fn(g, x, w, y, ep, parallel);
}

void depthwise_conv2d_nhwc_f32(const DepthwiseGeom& g, const float* x, const float* taps, float* y,
                               const DepthwiseEpilogue& ep, const ParallelFor& parallel) {
  static const DepthwiseKernelFn fn = host_kernel(depthwise_nhwc_f32_kernels());
  fn(g, x, taps, y, ep, parallel);
}

}  // namespace kiln::kernels
