// col2im for ConvTranspose: the ISA dispatch and the portable loops (see f32_col2im.h).
#include "kernels/x86/f32_col2im.h"

#include <algorithm>
#include <utility>

#include "kernels/x86/f32_gemm.h"

namespace kiln::kernels {

const std::vector<IsaKernel<Col2imPairRowFn>>& col2im_pair_row_kernels() {
  static const std::vector<IsaKernel<Col2imPairRowFn>> list = {KILN_COL2IM_PAIR_ROW_KERNELS(KILN_ISA_KERNEL_ENTRY)};
  return list;
}

namespace {

// [lo, hi] of the input positions i whose output i * stride + offset falls in [0, out).
std::pair<int64_t, int64_t> input_range(int64_t in, int64_t out, int64_t stride, int64_t offset) {
  const int64_t lo = offset >= 0 ? 0 : ceil_div(-offset, stride);
  const int64_t hi = out - 1 - offset < 0 ? -1 : std::min(in - 1, (out - 1 - offset) / stride);
  return {lo, hi};
}

// d[k * stride] += s[k] for k in [0, n).
void add_strided(const float* s, int64_t n, int64_t stride, float* d) {
  if (stride == 1) {
    for (int64_t k = 0; k < n; ++k) d[k] += s[k];
  } else {
    for (int64_t k = 0; k < n; ++k) d[k * stride] += s[k];
  }
}

}  // namespace

void col2im_add_plane(const Col2imGeom& g, const float* col, float* plane) {
  static const Col2imPairRowFn pair_row = host_kernel(col2im_pair_row_kernels());
  const int64_t hw = g.h * g.w;
  for (int64_t i = 0; i < g.kh; ++i) {
    const auto [iy0, iy1] = input_range(g.h, g.ho, g.sh, i * g.dh - g.pt);
    for (int64_t j = 0; j < g.kw; ++j) {
      const int64_t ox0 = j * g.dw - g.pl;
      const auto [ix0, ix1] = input_range(g.w, g.wo, g.sw, ox0);
      const float* src = col + (i * g.kw + j) * hw;
      // Stride 2, taps j and j + 1 one column apart: their outputs interleave. The range both
      // taps share goes through the pair kernel, each tap's leftover ends element by element.
      if (pair_row && g.sw == 2 && g.dw == 1 && j + 1 < g.kw) {
        const auto [jx0, jx1] = input_range(g.w, g.wo, 2, ox0 + 1);
        const int64_t c0 = std::max(ix0, jx0), c1 = std::min(ix1, jx1);
        // From 16 pairs (AVX2, 16 planes of 4x4/s2 taps: 14-wide rows 25 against 22 us element
        // by element, 28-wide 53 against 73, 56-wide 179 against 304).
        if (c1 - c0 + 1 >= 16) {
          const float* src1 = src + hw;
          for (int64_t iy = iy0; iy <= iy1; ++iy) {
            float* row = plane + (iy * g.sh + i * g.dh - g.pt) * g.wo;
            const float *s0 = src + iy * g.w, *s1 = src1 + iy * g.w;
            pair_row(s0 + c0, s1 + c0, c1 - c0 + 1, row + c0 * 2 + ox0);
            for (int64_t ix = ix0; ix < c0; ++ix) row[ix * 2 + ox0] += s0[ix];
            for (int64_t ix = c1 + 1; ix <= ix1; ++ix) row[ix * 2 + ox0] += s0[ix];
            for (int64_t ix = jx0; ix < c0; ++ix) row[ix * 2 + ox0 + 1] += s1[ix];
            for (int64_t ix = c1 + 1; ix <= jx1; ++ix) row[ix * 2 + ox0 + 1] += s1[ix];
          }
          ++j;  // tap j + 1 is done too
          continue;
        }
      }
      const int64_t n = ix1 - ix0 + 1;
      if (n <= 0) continue;
      for (int64_t iy = iy0; iy <= iy1; ++iy)
        add_strided(src + iy * g.w + ix0, n, g.sw, plane + (iy * g.sh + i * g.dh - g.pt) * g.wo + ix0 * g.sw + ox0);
    }
  }
}

}  // namespace kiln::kernels
