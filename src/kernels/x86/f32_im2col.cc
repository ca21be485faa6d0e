// im2col rows with bulk interior copies, the portable B packer and the dispatch to the AVX-512
// and AVX2 packers (see f32_im2col.h).
#include "kernels/x86/f32_im2col.h"

#include <algorithm>
#include <cstring>

#include "kernels/x86/f32_gemm.h"

namespace kiln::kernels {

void im2col_split_phases_avx2(const Im2colGeom& g, const float* x, int64_t c0, int64_t c1, float* phases);
bool im2col_pack_b_phased_avx2(const Im2colGeom& g, const float* phases, int64_t k0, int64_t kc, int64_t j0,
                               int64_t nc, int nr, float* dst);

void im2col_rows(const Im2colGeom& g, const float* x, float* col, int64_t r_begin, int64_t r_end) {
  const int64_t hw = g.h * g.w, ohw = g.ho * g.wo;
  for (int64_t r = r_begin; r < r_end; ++r) {
    const int64_t c = r / (g.kh * g.kw), i = r / g.kw % g.kh, j = r % g.kw;
    const float* xc = x + c * hw;
    float* dst = col + r * ohw;
    // Output columns whose tap lands inside the input: ox in [lo, hi).
    const int64_t off = j * g.dw - g.pl;  // ix = ox * sw + off
    const int64_t lo = std::min(g.wo, off >= 0 ? 0 : (-off + g.sw - 1) / g.sw);
    const int64_t hi = std::max(lo, std::min(g.wo, g.w - off <= 0 ? 0 : (g.w - off + g.sw - 1) / g.sw));
    for (int64_t oy = 0; oy < g.ho; ++oy) {
      const int64_t iy = oy * g.sh - g.pt + i * g.dh;
      float* d = dst + oy * g.wo;
      if (iy < 0 || iy >= g.h) {
        std::memset(d, 0, sizeof(float) * static_cast<size_t>(g.wo));
        continue;
      }
      const float* xr = xc + iy * g.w + off;
      if (lo > 0) std::memset(d, 0, sizeof(float) * static_cast<size_t>(lo));
      if (g.sw == 1) {
        std::memcpy(d + lo, xr + lo, sizeof(float) * static_cast<size_t>(hi - lo));
      } else {
        for (int64_t ox = lo; ox < hi; ++ox) d[ox] = xr[ox * g.sw];
      }
      if (hi < g.wo) std::memset(d + hi, 0, sizeof(float) * static_cast<size_t>(g.wo - hi));
    }
  }
}

const std::vector<IsaKernel<Im2colPackFn>>& im2col_pack_f32_kernels() {
  static const std::vector<IsaKernel<Im2colPackFn>> list = {KILN_IM2COL_PACK_F32_KERNELS(KILN_ISA_KERNEL_ENTRY)};
  return list;
}

void im2col_pack_b(const Im2colGeom& g, const float* x, int64_t k0, int64_t kc, int64_t j0, int64_t nc, int nr,
                   float* dst) {
  // The packers of the default microkernel's ISA (KILN_ISA may make it AVX2 on AVX-512), in
  // list order, then the portable one.
  static const std::vector<Im2colPackFn> packers = [] {
    const Isa isa = f32_gemm_default().isa;
    std::vector<Im2colPackFn> fns;
    for (const auto& k : im2col_pack_f32_kernels())
      if (k.isa == isa) fns.push_back(k.fn);
    fns.push_back(&im2col_pack_b_generic);
    return fns;
  }();
  for (Im2colPackFn fn : packers)
    if (fn(g, x, k0, kc, j0, nc, nr, dst)) return;
}

bool im2col_pack_b_generic(const Im2colGeom& g, const float* x, int64_t k0, int64_t kc, int64_t j0, int64_t nc,
                           int nr, float* dst) {
  const int64_t hw = g.h * g.w;
  const int64_t panels = (nc + nr - 1) / nr;
  for (int64_t kk = 0; kk < kc; ++kk) {
    const int64_t r = k0 + kk;
    const int64_t c = r / (g.kh * g.kw), i = r / g.kw % g.kh, j = r % g.kw;
    const float* xc = x + c * hw;
    const int64_t off = j * g.dw - g.pl;  // ix = ox * sw + off; valid for ox in [lo, hi)
    const int64_t lo = std::min(g.wo, off >= 0 ? 0 : (-off + g.sw - 1) / g.sw);
    const int64_t hi = std::max(lo, std::min(g.wo, g.w - off <= 0 ? 0 : (g.w - off + g.sw - 1) / g.sw));
    for (int64_t q = 0; q < panels; ++q) {
      float* d = dst + q * kc * nr + kk * nr;
      int64_t p = j0 + q * nr;
      const int64_t pend = std::min(j0 + nc, p + nr);
      int64_t oy = p / g.wo, ox = p % g.wo, col = 0;
      // One output-row segment [ox, ox + seg) at a time: zeros, the in-bounds run, zeros.
      while (p < pend) {
        const int64_t seg = std::min(g.wo - ox, pend - p);
        const int64_t iy = oy * g.sh - g.pt + i * g.dh;
        const int64_t base = col - ox;  // d[base + o] holds output column o of this row
        if (iy < 0 || iy >= g.h) {
          for (int64_t o = ox; o < ox + seg; ++o) d[base + o] = 0.0f;
        } else {
          const float* xr = xc + iy * g.w + off;
          const int64_t a = std::clamp(lo, ox, ox + seg), b = std::clamp(hi, a, ox + seg);
          for (int64_t o = ox; o < a; ++o) d[base + o] = 0.0f;
          if (g.sw == 1) {
            for (int64_t o = a; o < b; ++o) d[base + o] = xr[o];
          } else {
            for (int64_t o = a; o < b; ++o) d[base + o] = xr[o * g.sw];
          }
          for (int64_t o = b; o < ox + seg; ++o) d[base + o] = 0.0f;
        }
        col += seg;
        p += seg;
        ++oy;
        ox = 0;
      }
      for (; col < nr; ++col) d[col] = 0.0f;
    }
  }
  return true;
}

bool im2col_phases_supported(const Im2colGeom& g) {
  static const bool avx2 = f32_gemm_default().isa == Isa::kAvx2;
  return avx2 && g.sh == 2 && g.sw == 2 && g.dh == 1 && g.dw == 1;
}

void im2col_split_phases(const Im2colGeom& g, const float* x, int64_t c0, int64_t c1, float* phases) {
  im2col_split_phases_avx2(g, x, c0, c1, phases);
}

bool im2col_pack_b_phased(const Im2colGeom& g, const float* phases, int64_t k0, int64_t kc, int64_t j0, int64_t nc,
                          int nr, float* dst) {
  return im2col_pack_b_phased_avx2(g, phases, k0, kc, j0, nc, nr, dst);
}

}  // namespace kiln::kernels
