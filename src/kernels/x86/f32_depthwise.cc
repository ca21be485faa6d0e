// Depthwise conv dispatch (AVX-512, AVX2 or portable, following f32_gemm_default()'s ISA choice) and
// the portable kernel: direct loops with per-tap bounds checks, parallel over channel planes.
#include "kernels/x86/f32_depthwise.h"

#include <algorithm>

namespace kiln::kernels {

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

void depthwise_conv2d_f32(const DepthwiseGeom& g, const float* x, const float* w, float* y,
                          const DepthwiseEpilogue& ep, const ParallelFor& parallel) {
  const Isa isa = f32_gemm_default().isa;
  if (isa == Isa::kAvx512) depthwise_conv2d_f32_avx512f(g, x, w, y, ep, parallel);
  else if (isa == Isa::kAvx2) depthwise_conv2d_f32_avx2(g, x, w, y, ep, parallel);
  else depthwise_conv2d_f32_generic(g, x, w, y, ep, parallel);
}

}  // namespace kiln::kernels
