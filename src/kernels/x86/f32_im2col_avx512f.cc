// Implicit-im2col B packing on AVX-512 for stride-1 convs whose output rows are as wide as the
// input rows (3x3 pad 1 and the like): there every column-matrix row is the channel plane
// shifted by one offset, so a 32-column panel row is two masked loads (border taps masked to 0).
#include <immintrin.h>

#include <vector>

#include "kernels/x86/f32_im2col.h"

namespace kiln::kernels {

bool im2col_pack_b_shifted_avx512f(const Im2colGeom& g, const float* x, int64_t k0, int64_t kc, int64_t j0,
                                   int64_t nc, int nr, float* dst) {
  if (nr != 32 || g.sh != 1 || g.sw != 1 || g.wo != g.w) return false;
  const int64_t taps = g.kh * g.kw, hw = g.h * g.w, panels = (nc + 31) / 32;
  // masks[q * taps + t]: lanes of panel q whose tap t lands inside the image (and inside nc).
  thread_local std::vector<uint32_t> masks;
  masks.assign(static_cast<size_t>(panels * taps), 0u);
  for (int64_t q = 0; q < panels; ++q)
    for (int lane = 0; lane < 32; ++lane) {
      const int64_t p = j0 + q * 32 + lane;
      if (p >= j0 + nc) break;
      const int64_t oy = p / g.wo, ox = p % g.wo;
      for (int64_t t = 0; t < taps; ++t) {
        const int64_t iy = oy + (t / g.kw) * g.dh - g.pt, ix = ox + (t % g.kw) * g.dw - g.pl;
        if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w) masks[static_cast<size_t>(q * taps + t)] |= 1u << lane;
      }
    }
  // Per row of the block: where its shifted plane starts and which tap it is.
  thread_local std::vector<int64_t> offsets;
  thread_local std::vector<int32_t> row_taps;
  offsets.resize(static_cast<size_t>(kc));
  row_taps.resize(static_cast<size_t>(kc));
  for (int64_t kk = 0; kk < kc; ++kk) {
    const int64_t r = k0 + kk, c = r / taps, t = r % taps;
    offsets[static_cast<size_t>(kk)] = c * hw + ((t / g.kw) * g.dh - g.pt) * g.w + (t % g.kw) * g.dw - g.pl;
    row_taps[static_cast<size_t>(kk)] = static_cast<int32_t>(t);
  }
  // Panel by panel, so that the stores run sequentially through the packed panel.
  for (int64_t q = 0; q < panels; ++q) {
    // Masked-off lanes may point outside the image: masked loads do not touch them.
    const float* src = x + j0 + q * 32;
    const uint32_t* m = masks.data() + q * taps;
    float* d = dst + q * kc * 32;
    for (int64_t kk = 0; kk < kc; ++kk) {
      const uint32_t bits = m[row_taps[static_cast<size_t>(kk)]];
      const float* s = src + offsets[static_cast<size_t>(kk)];
      _mm512_storeu_ps(d + kk * 32, _mm512_maskz_loadu_ps(static_cast<__mmask16>(bits), s));
      _mm512_storeu_ps(d + kk * 32 + 16, _mm512_maskz_loadu_ps(static_cast<__mmask16>(bits >> 16), s + 16));
    }
  }
  return true;
}

}  // namespace kiln::kernels
