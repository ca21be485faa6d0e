// Channels-last depthwise conv: the weight repack to tap-major order, the dispatch (AVX-512, AVX2
// or portable, following f32_gemm_default()'s ISA choice) and the portable kernel, parallel over
// output rows.
#include <algorithm>

#include "kernels/x86/f32_depthwise.h"

namespace kiln::kernels {

DepthwiseNhwcRowPlan depthwise_nhwc_row_plan(const DepthwiseGeom& g) {
  DepthwiseNhwcRowPlan p;
  p.in_lo = std::min(g.wo, (g.pl + g.sw - 1) / g.sw);
  const int64_t last = g.w - 1 + g.pl - (g.kw - 1) * g.dw;  // the largest ox * sw that fits
  p.in_hi = std::max(p.in_lo, std::min(g.wo, last < 0 ? 0 : last / g.sw + 1));
  p.tiles = (g.wo + 7) / 8;
  p.inside.resize(static_cast<size_t>(p.tiles * g.kw));
  for (int64_t k = 0; k < p.tiles; ++k)
    for (int64_t j = 0; j < g.kw; ++j) {
      const int64_t ix0 = k * 8 * g.sw - g.pl + j * g.dw, count = std::min<int64_t>(8, g.wo - k * 8);
      DepthwiseNhwcRowPlan::Inside& in = p.inside[static_cast<size_t>(k * g.kw + j)];
      in.lo = std::min(count, ix0 >= 0 ? 0 : (-ix0 + g.sw - 1) / g.sw);
      in.hi = std::max(in.lo, ix0 > g.w - 1 ? 0 : std::min(count, (g.w - 1 - ix0) / g.sw + 1));
    }
  return p;
}

void depthwise_nhwc_taps(const DepthwiseGeom& g, const float* w, float* taps) {
  const int64_t k = g.kh * g.kw;
  for (int64_t ch = 0; ch < g.c; ++ch)
    for (int64_t t = 0; t < k; ++t) taps[t * g.c + ch] = w[ch * k + t];
}

void depthwise_conv2d_nhwc_f32_generic(const DepthwiseGeom& g, const float* x, const float* taps, float* y,
                                       const DepthwiseEpilogue& ep, const ParallelFor& parallel) {
  auto rows = [&](int64_t begin, int64_t end) {
    std::vector<float> acc(static_cast<size_t>(g.c));
    for (int64_t r = begin; r < end; ++r) {
      const int64_t n = r / g.ho, oy = r % g.ho;
      for (int64_t ox = 0; ox < g.wo; ++ox) {
        for (int64_t ch = 0; ch < g.c; ++ch) acc[ch] = ep.bias ? ep.bias[ch] : 0.0f;
        for (int64_t i = 0; i < g.kh; ++i) {
          const int64_t iy = oy * g.sh - g.pt + i * g.dh;
          if (iy < 0 || iy >= g.h) continue;
          for (int64_t j = 0; j < g.kw; ++j) {
            const int64_t ix = ox * g.sw - g.pl + j * g.dw;
            if (ix < 0 || ix >= g.w) continue;
            const float* xp = x + ((n * g.h + iy) * g.w + ix) * g.c;
            const float* tp = taps + (i * g.kw + j) * g.c;
            for (int64_t ch = 0; ch < g.c; ++ch) acc[ch] += xp[ch] * tp[ch];
          }
        }
        float* yp = y + ((n * g.ho + oy) * g.wo + ox) * g.c;
        for (int64_t ch = 0; ch < g.c; ++ch)
          yp[ch] = apply_activation(ep.act, std::min(std::max(acc[ch], ep.lo), ep.hi));
      }
    }
  };
  run_parallel(parallel, g.n * g.ho, rows);
}

}  // namespace kiln::kernels
