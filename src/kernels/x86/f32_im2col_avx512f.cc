// Implicit-im2col B packing on AVX-512 (32-column panels). Stride-1 convs whose output rows are
// as wide as the input rows (3x3 pad 1 and the like): every column-matrix row is the channel
// plane shifted by one offset, so a panel row is two masked loads (border taps masked to 0).
// Other stride-1 and stride-2 convs (stems, downsampling): per output-row segment of a panel
// row, masked vector copies (stride 2: two loads and one even-lane permute per 16 pixels); for
// outputs narrower than a panel, masked gathers.
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "kernels/x86/f32_im2col.h"
#include "kernels/x86/lane_mask.h"

namespace kiln::kernels {

namespace {

// What the per-tap packers (shifted, gather) need for block rows [k0, k0+kc) and pixels
// [j0, j0+nc) in 32-column panels.
struct TapPlan {
  std::vector<uint32_t> masks;    // [panel][tap]: lanes whose tap lands inside the image (and inside nc)
  std::vector<int32_t> lane_off;  // [panel][lane]: input offset of the lane's output pixel's top-left tap
  std::vector<int64_t> row_off;   // [kk]: input offset of row kk's tap (its channel plane, tap shift)
  std::vector<int32_t> row_tap;   // [kk]: row kk's tap
};

void plan_taps(const Im2colGeom& g, int64_t k0, int64_t kc, int64_t j0, int64_t nc, TapPlan& t) {
  const int64_t taps = g.kh * g.kw, panels = (nc + 31) / 32;
  t.masks.assign(static_cast<size_t>(panels * taps), 0u);
  t.lane_off.assign(static_cast<size_t>(panels * 32), 0);
  for (int64_t q = 0; q < panels; ++q)
    for (int lane = 0; lane < 32; ++lane) {
      const int64_t p = j0 + q * 32 + lane;
      if (p >= j0 + nc) break;
      const int64_t oy = p / g.wo, ox = p % g.wo;
      t.lane_off[static_cast<size_t>(q * 32 + lane)] = static_cast<int32_t>(oy * g.sh * g.w + ox * g.sw);
      for (int64_t tap = 0; tap < taps; ++tap) {
        const int64_t iy = oy * g.sh + (tap / g.kw) * g.dh - g.pt, ix = ox * g.sw + (tap % g.kw) * g.dw - g.pl;
        if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w) t.masks[static_cast<size_t>(q * taps + tap)] |= 1u << lane;
      }
    }
  t.row_off.resize(static_cast<size_t>(kc));
  t.row_tap.resize(static_cast<size_t>(kc));
  for (int64_t kk = 0; kk < kc; ++kk) {
    const int64_t r = k0 + kk, c = r / taps, tap = r % taps;
    t.row_off[static_cast<size_t>(kk)] = c * g.h * g.w + ((tap / g.kw) * g.dh - g.pt) * g.w + (tap % g.kw) * g.dw - g.pl;
    t.row_tap[static_cast<size_t>(kk)] = static_cast<int32_t>(tap);
  }
}

}  // namespace

bool im2col_pack_b_shifted_avx512f(const Im2colGeom& g, const float* x, int64_t k0, int64_t kc, int64_t j0,
                                   int64_t nc, int nr, float* dst) {
  if (nr != 32 || g.sh != 1 || g.sw != 1 || g.wo != g.w) return false;
  const int64_t taps = g.kh * g.kw, panels = (nc + 31) / 32;
  thread_local TapPlan t;
  plan_taps(g, k0, kc, j0, nc, t);
  // Panel by panel, so that the stores run sequentially through the packed panel.
  for (int64_t q = 0; q < panels; ++q) {
    // Output rows as wide as the input: a panel row is the plane shifted by its tap's offset.
    // Masked-off lanes may point outside the image: masked loads do not touch them.
    const float* src = x + j0 + q * 32;
    const uint32_t* m = t.masks.data() + q * taps;
    float* d = dst + q * kc * 32;
    for (int64_t kk = 0; kk < kc; ++kk) {
      const uint32_t bits = m[t.row_tap[static_cast<size_t>(kk)]];
      const float* s = src + t.row_off[static_cast<size_t>(kk)];
      _mm512_storeu_ps(d + kk * 32, _mm512_maskz_loadu_ps(static_cast<__mmask16>(bits), s));
      _mm512_storeu_ps(d + kk * 32 + 16, _mm512_maskz_loadu_ps(static_cast<__mmask16>(bits >> 16), s + 16));
    }
  }
  return true;
}

bool im2col_pack_b_segments_avx512f(const Im2colGeom& g, const float* x, int64_t k0, int64_t kc, int64_t j0,
                                    int64_t nc, int nr, float* dst) {
  if (nr != 32 || (g.sw != 1 && g.sw != 2)) return false;
  const int64_t hw = g.h * g.w, panels = (nc + 31) / 32;
  const __m512i even = even_lanes();
  const __m512 zero = _mm512_setzero_ps();
  // Where each panel starts (output row and column): divisions once per block, not per row.
  thread_local std::vector<int64_t> starts;
  starts.resize(static_cast<size_t>(2 * panels));
  for (int64_t q = 0; q < panels; ++q) {
    starts[static_cast<size_t>(2 * q)] = (j0 + q * 32) / g.wo;
    starts[static_cast<size_t>(2 * q + 1)] = (j0 + q * 32) % g.wo;
  }
  for (int64_t kk = 0; kk < kc; ++kk) {
    const int64_t r = k0 + kk;
    const int64_t c = r / (g.kh * g.kw), i = r / g.kw % g.kh, j = r % g.kw;
    const float* xc = x + c * hw;
    const int64_t off = j * g.dw - g.pl;  // ix = ox * sw + off; inside the image for ox in [lo, hi)
    const int64_t lo = std::min(g.wo, off >= 0 ? 0 : (-off + g.sw - 1) / g.sw);
    const int64_t hi = std::max(lo, std::min(g.wo, g.w - off <= 0 ? 0 : (g.w - off + g.sw - 1) / g.sw));
    for (int64_t q = 0; q < panels; ++q) {
      float* d = dst + q * kc * 32 + kk * 32;
      _mm512_storeu_ps(d, zero);
      _mm512_storeu_ps(d + 16, zero);
      int64_t p = j0 + q * 32;
      const int64_t pend = std::min(j0 + nc, p + 32);
      int64_t oy = starts[static_cast<size_t>(2 * q)], ox = starts[static_cast<size_t>(2 * q + 1)], col = 0;
      while (p < pend) {  // one output-row segment [ox, ox + seg) at a time
        const int64_t seg = std::min(g.wo - ox, pend - p);
        const int64_t iy = oy * g.sh - g.pt + i * g.dh;
        if (iy >= 0 && iy < g.h) {
          const int64_t a = std::clamp(lo, ox, ox + seg), b = std::clamp(hi, a, ox + seg);
          const float* xr = xc + iy * g.w + off;
          float* out = d + col - ox;  // out[o] holds output column o of this row
          for (int64_t o = a; o < b; o += 16) {
            const int64_t n = std::min<int64_t>(16, b - o);
            const __mmask16 store = F32x16::first(n);
            if (g.sw == 1) {
              _mm512_mask_storeu_ps(out + o, store, _mm512_maskz_loadu_ps(store, xr + o));
            } else {
              const int64_t e = 2 * n - 1;  // source elements xr[2o .. 2o + e)
              const __mmask16 m0 = F32x16::first(e), m1 = F32x16::first(e - 16);
              const __m512 v0 = _mm512_maskz_loadu_ps(m0, xr + 2 * o), v1 = _mm512_maskz_loadu_ps(m1, xr + 2 * o + 16);
              _mm512_mask_storeu_ps(out + o, store, _mm512_permutex2var_ps(v0, even, v1));
            }
          }
        }
        col += seg;
        p += seg;
        ++oy;
        ox = 0;
      }
    }
  }
  return true;
}

// Output rows narrower than a panel (28x28 and smaller outputs of stride-2 convs): a panel row
// spans several output rows, so per-segment copies pay their setup several times per 32 pixels;
// one masked gather per 16 pixels (per-lane offsets made once per block) costs less: ResNet-50's
// 128-channel 3x3/s2 conv spends 21% instead of 27% of its time packing.
bool im2col_pack_b_gather_avx512f(const Im2colGeom& g, const float* x, int64_t k0, int64_t kc, int64_t j0,
                                  int64_t nc, int nr, float* dst) {
  if (nr != 32 || g.wo >= 32 || g.c * g.h * g.w >= (int64_t(1) << 30)) return false;
  const int64_t taps = g.kh * g.kw, panels = (nc + 31) / 32;
  thread_local TapPlan t;
  plan_taps(g, k0, kc, j0, nc, t);
  for (int64_t q = 0; q < panels; ++q) {
    const __m512i off0 = _mm512_loadu_si512(t.lane_off.data() + q * 32);
    const __m512i off1 = _mm512_loadu_si512(t.lane_off.data() + q * 32 + 16);
    const uint32_t* m = t.masks.data() + q * taps;
    float* d = dst + q * kc * 32;
    for (int64_t kk = 0; kk < kc; ++kk) {
      const uint32_t bits = m[t.row_tap[static_cast<size_t>(kk)]];
      // Each lane's input is its top-left tap's offset from the row's; masked-off lanes are not read.
      const float* base = x + t.row_off[static_cast<size_t>(kk)];
      const __m512 v0 = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), static_cast<__mmask16>(bits), off0, base, 4);
      const __m512 v1 = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), static_cast<__mmask16>(bits >> 16), off1, base, 4);
      _mm512_storeu_ps(d + kk * 32, v0);
      _mm512_storeu_ps(d + kk * 32 + 16, v1);
    }
  }
  return true;
}

}  // namespace kiln::kernels
