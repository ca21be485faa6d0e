// col2im_add_plane (kernels/x86/f32_col2im.h) against a direct loop over taps and input pixels:
// strides 1-3, dilation 1-2, kernels 1x1 to 5x4, pads that cut into the full result or extend
// past it (negative), output planes cut short on the right, rows around the 16-pair threshold
// and the 8- and 16-lane vectors (the AVX2 or AVX-512 pair kernel, whichever the CPU runs).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/x86/f32_col2im.h"
#include "kernels/x86/f32_gemm.h"

namespace kiln::kernels {
namespace {

std::vector<float> reference(const Col2imGeom& g, const std::vector<float>& col, std::vector<float> plane) {
  for (int64_t i = 0; i < g.kh; ++i)
    for (int64_t j = 0; j < g.kw; ++j)
      for (int64_t iy = 0; iy < g.h; ++iy)
        for (int64_t ix = 0; ix < g.w; ++ix) {
          const int64_t oy = iy * g.sh - g.pt + i * g.dh, ox = ix * g.sw - g.pl + j * g.dw;
          if (oy >= 0 && oy < g.ho && ox >= 0 && ox < g.wo)
            plane[oy * g.wo + ox] += col[((i * g.kw + j) * g.h + iy) * g.w + ix];
        }
  return plane;
}

TEST(Col2im, MatchesDirectLoop) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uni(-1, 1);
  int cases = 0;
  for (int64_t s : {1, 2, 3})
    for (int64_t d : {1, 2})
      for (auto [kh, kw] : {std::pair<int64_t, int64_t>{1, 1}, {2, 2}, {3, 3}, {4, 4}, {5, 4}})
        for (int64_t w : {1, 7, 8, 9, 15, 16, 17, 23, 33})
          for (int64_t pad : {-1, 0, 1, 2}) {
            Col2imGeom g;
            g.h = 3, g.w = w, g.kh = kh, g.kw = kw, g.sh = s, g.sw = s, g.dh = d, g.dw = d;
            g.pt = pad, g.pl = pad;
            const int64_t full_h = s * (g.h - 1) + d * (kh - 1) + 1, full_w = s * (w - 1) + d * (kw - 1) + 1;
            g.ho = full_h - 2 * pad;
            g.wo = full_w - 2 * pad - (w % 2);  // odd widths: the plane stops short of the full result
            if (g.ho <= 0 || g.wo <= 0) continue;
            std::vector<float> col(static_cast<size_t>(kh * kw * g.h * w)), plane(static_cast<size_t>(g.ho * g.wo));
            for (float& v : col) v = uni(rng);
            for (float& v : plane) v = uni(rng);
            const std::vector<float> want = reference(g, col, plane);
            col2im_add_plane(g, col.data(), plane.data());
            for (size_t k = 0; k < plane.size(); ++k)
              ASSERT_NEAR(plane[k], want[k], 1e-5f) << "stride " << s << " dilation " << d << " kernel " << kh << "x"
                                                    << kw << " width " << w << " pad " << pad << " at " << k;
            ++cases;
          }
  EXPECT_GT(cases, 400);
}

// Every pair-row kernel of the family's list that the CPU runs: d[2k] += s0[k], d[2k+1] += s1[k]
// for lengths around the 8- and 16-lane vectors.
TEST(Col2im, EveryPairRowKernelInterleaves) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uni(-1, 1);
  int ran = 0;
  for (const auto& k : col2im_pair_row_kernels()) {
    if (!isa_supported(k.isa)) continue;
    for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 31, 33, 100}) {
      std::vector<float> s0(n), s1(n), d(2 * n + 1), want;
      for (auto* v : {&s0, &s1, &d})
        for (float& e : *v) e = uni(rng);
      want = d;
      for (int64_t i = 0; i < n; ++i) want[2 * i] += s0[i], want[2 * i + 1] += s1[i];
      k.fn(s0.data(), s1.data(), n, d.data());
      for (int64_t i = 0; i < 2 * n + 1; ++i) ASSERT_EQ(d[i], want[i]) << k.name << " n=" << n << " at " << i;
    }
    ++ran;
  }
  if (ran == 0) GTEST_SKIP() << "no kernel of the list runs on this CPU";
}

}  // namespace
}  // namespace kiln::kernels
