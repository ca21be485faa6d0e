// kernels::im2col_rows and im2col_pack_b against a per-element reference: pads 0-2
// (asymmetric via output size), strides 1-3, dilation 1-2, kernels 1x1 to 5x5, widths
// around and below the stride; packed panels of 4, 16 and 32 columns (16: the AVX2 packer on
// AVX2 machines, 32: the AVX-512 ones on AVX-512 machines, the portable one otherwise); every
// packer of the family's list the CPU runs, on its own; the AVX2 stride-2 packer over the
// polyphase split.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "kernels/x86/f32_gemm.h"
#include "kernels/x86/f32_im2col.h"

namespace kiln::kernels {
namespace {

// The NR-column panels of rows [k0, k0 + kb) x columns [j0, j0 + nb) of the column matrix `col`
// (ohw columns a row) hold its values, zeros past column j0 + nb.
void expect_panels_match(const float* packed, const float* col, int64_t ohw, int64_t k0, int64_t kb, int64_t j0,
                         int64_t nb, int nr, const std::string& note) {
  const int64_t panels = (nb + nr - 1) / nr;
  for (int64_t q = 0; q < panels; ++q)
    for (int64_t kk = 0; kk < kb; ++kk)
      for (int64_t cc = 0; cc < nr; ++cc) {
        const int64_t p = j0 + q * nr + cc;
        const float want = p < j0 + nb ? col[(k0 + kk) * ohw + p] : 0.0f;
        ASSERT_EQ(packed[(q * kb + kk) * nr + cc], want) << "nr " << nr << note << " row " << k0 + kk << " pixel " << p;
      }
}

TEST(ConvIm2col, MatchesReference) {
  std::mt19937 rng(3);
  int cases = 0;
  for (int it = 0; it < 600; ++it) {
    Im2colGeom g;
    g.c = 1 + rng() % 3, g.h = 1 + rng() % 12, g.w = 1 + rng() % 12;
    g.kh = 1 + rng() % 5, g.kw = 1 + rng() % 5, g.sh = 1 + rng() % 3, g.sw = 1 + rng() % 3;
    g.dh = 1 + rng() % 2, g.dw = 1 + rng() % 2, g.pt = rng() % 3, g.pl = rng() % 3;
    const int64_t pb = rng() % 3, pr = rng() % 3;
    const int64_t eh = (g.kh - 1) * g.dh + 1, ew = (g.kw - 1) * g.dw + 1;
    if (g.h + g.pt + pb < eh || g.w + g.pl + pr < ew) continue;
    g.ho = (g.h + g.pt + pb - eh) / g.sh + 1;
    g.wo = (g.w + g.pl + pr - ew) / g.sw + 1;
    std::vector<float> x(g.c * g.h * g.w);
    for (size_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>(k + 1);
    const int64_t rows = g.c * g.kh * g.kw, ohw = g.ho * g.wo;
    std::vector<float> col(rows * ohw, -1.0f);
    im2col_rows(g, x.data(), col.data(), 0, rows);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t c = r / (g.kh * g.kw), i = r / g.kw % g.kh, j = r % g.kw;
      for (int64_t oy = 0; oy < g.ho; ++oy)
        for (int64_t ox = 0; ox < g.wo; ++ox) {
          const int64_t iy = oy * g.sh - g.pt + i * g.dh, ix = ox * g.sw - g.pl + j * g.dw;
          const float want = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w ? x[(c * g.h + iy) * g.w + ix] : 0.0f;
          ASSERT_EQ(col[r * ohw + oy * g.wo + ox], want) << "row " << r << " at " << oy << "," << ox;
        }
    }
    // The implicit packer gives the same values, panel by panel, for blocks of rows/columns.
    for (int nr : {4, 16, 32}) {
      const int64_t kc = std::max<int64_t>(1, rows / 2 + 1), nc = std::max<int64_t>(1, ohw / 2 + 3);
      for (int64_t k0 = 0; k0 < rows; k0 += kc)
        for (int64_t j0 = 0; j0 < ohw; j0 += nc) {
          const int64_t kb = std::min(kc, rows - k0), nb = std::min(nc, ohw - j0);
          const int64_t panels = (nb + nr - 1) / nr;
          std::vector<float> packed(panels * kb * nr, -1.0f);
          im2col_pack_b(g, x.data(), k0, kb, j0, nb, nr, packed.data());
          expect_panels_match(packed.data(), col.data(), ohw, k0, kb, j0, nb, nr, "");
          if (HasFatalFailure()) return;
        }
    }
    ++cases;
  }
  EXPECT_GT(cases, 300);
}

// The dispatching entry point as a packer of the list's type.
bool dispatched(const Im2colGeom& g, const float* x, int64_t k0, int64_t kc, int64_t j0, int64_t nc, int nr,
                float* dst) {
  im2col_pack_b(g, x, k0, kc, j0, nc, nr, dst);
  return true;
}

// Packs blocks of the column matrix of `g` (starting mid-row, ending mid-panel) into 32- and
// 16-column panels with `pack` and compares them with im2col_rows; the floats just past the
// block stay untouched, and a packer that declines the case writes nothing. `taken` counts the
// blocks it packed.
void expect_packed_matches_rows(const Im2colGeom& g, Im2colPackFn pack = &dispatched, int* taken = nullptr) {
  std::vector<float> x(g.c * g.h * g.w);
  for (size_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>(k + 1);
  const int64_t rows = g.c * g.kh * g.kw, ohw = g.ho * g.wo;
  std::vector<float> col(rows * ohw);
  im2col_rows(g, x.data(), col.data(), 0, rows);
  for (int nr : {32, 16})
    for (int64_t j0 : {int64_t{0}, int64_t{5}, ohw / 3}) {
      const int64_t nb = std::min<int64_t>(ohw - j0, 100), k0 = rows > 4 ? 3 : 0, kb = rows - k0;
      const int64_t panels = (nb + nr - 1) / nr, block = panels * kb * nr;
      std::vector<float> packed(block + 8, -1.0f);
      if (!pack(g, x.data(), k0, kb, j0, nb, nr, packed.data())) {
        for (float v : packed) ASSERT_EQ(v, -1.0f) << "a declining packer wrote (nr " << nr << ")";
        continue;
      }
      if (taken) ++*taken;
      expect_panels_match(packed.data(), col.data(), ohw, k0, kb, j0, nb, nr, " h " + std::to_string(g.h));
      if (::testing::Test::HasFatalFailure()) return;
      for (int64_t k = block; k < block + 8; ++k) ASSERT_EQ(packed[k], -1.0f) << "nr " << nr << " past the block";
    }
}

// Stride-1 "same" convs take the shifted-plane packer on AVX-512 machines, the segment packer
// (32 columns and wider) or the gather packer on AVX2 ones: wide images, dilation, asymmetric
// padding (ho != h).
std::vector<Im2colGeom> same_width_stride1_cases() {
  struct Case { int64_t c, h, w, k, d, pt, pb; } cases[] = {
      {3, 56, 56, 3, 1, 1, 1}, {2, 7, 7, 3, 1, 1, 1}, {2, 13, 9, 5, 1, 2, 2}, {2, 17, 11, 3, 2, 2, 0}, {1, 1, 40, 3, 1, 1, 1},
      {2, 9, 41, 3, 2, 2, 0}};
  std::vector<Im2colGeom> out;
  for (const Case& cs : cases) {
    Im2colGeom g;
    g.c = cs.c, g.h = cs.h, g.w = cs.w, g.kh = g.kw = cs.k, g.dh = g.dw = cs.d, g.pt = cs.pt, g.pl = (cs.k - 1) * cs.d / 2;
    g.ho = g.h + cs.pt + cs.pb - (cs.k - 1) * cs.d, g.wo = g.w;
    out.push_back(g);
  }
  return out;
}

TEST(ConvIm2col, PackedSameWidthStride1MatchesReference) {
  for (const Im2colGeom& g : same_width_stride1_cases()) {
    expect_packed_matches_rows(g);
    if (HasFatalFailure()) return;
  }
}

// Stems and downsampling convs (stride 2, 7x7 pad 3, 3x3 pad 0/1, odd sizes) take the
// row-segment packer on AVX-512 machines, or, with outputs narrower than 32 columns (22, 14, 10
// here, and stride 3), the gather packer; on AVX2 machines the same split at 32 columns (stride
// 3 and 32 columns or more: the portable packer).
std::vector<Im2colGeom> strided_cases() {
  struct Case { int64_t c, h, w, k, s, p; } cases[] = {
      {3, 64, 64, 7, 2, 3}, {3, 57, 45, 3, 2, 0}, {2, 28, 28, 3, 2, 1}, {2, 33, 19, 1, 2, 0}, {2, 20, 37, 3, 1, 0},
      {2, 30, 31, 5, 3, 2}, {3, 13, 7, 3, 2, 1}, {2, 9, 70, 3, 2, 1}, {2, 6, 81, 1, 2, 0}};
  std::vector<Im2colGeom> out;
  for (const Case& cs : cases) {
    Im2colGeom g;
    g.c = cs.c, g.h = cs.h, g.w = cs.w, g.kh = g.kw = cs.k, g.sh = g.sw = cs.s, g.pt = g.pl = cs.p;
    g.ho = (g.h + 2 * cs.p - cs.k) / cs.s + 1, g.wo = (g.w + 2 * cs.p - cs.k) / cs.s + 1;
    out.push_back(g);
  }
  return out;
}

TEST(ConvIm2col, PackedStridedMatchesReference) {
  for (const Im2colGeom& g : strided_cases()) {
    expect_packed_matches_rows(g);
    if (HasFatalFailure()) return;
  }
}

// Every packer of the family's list that the CPU runs (the AVX2 ones on AVX-512 machines too),
// on its own: it packs what the reference does where it takes a case, writes nothing where it
// declines, and takes at least one of these cases.
TEST(ConvIm2col, EveryPackerOfTheList) {
  std::vector<Im2colGeom> cases = same_width_stride1_cases();
  for (const Im2colGeom& g : strided_cases()) cases.push_back(g);
  int supported = 0;
  for (const auto& k : im2col_pack_f32_kernels()) {
    if (!isa_supported(k.isa)) continue;
    ++supported;
    int taken = 0;
    for (const Im2colGeom& g : cases) {
      expect_packed_matches_rows(g, k.fn, &taken);
      if (HasFatalFailure()) return;
    }
    EXPECT_GT(taken, 0) << k.name << " took none of the cases";
  }
  EXPECT_GE(supported, 2);  // at least an ISA's packers and the portable one
}

// The AVX2 stride-2 packer over the polyphase split: kernels 1x1 to 7x7 (odd and even), pads
// 0-3 and asymmetric ones, output widths 1 to 40 (panels spanning one to many output rows),
// blocks starting mid-row and ending mid-panel, 16-column panels; nothing written past a block.
TEST(ConvIm2col, PhasedStride2MatchesReference) {
  Im2colGeom probe;
  probe.sh = probe.sw = 2;
  if (!im2col_phases_supported(probe)) GTEST_SKIP() << "no AVX2 default microkernel";
  struct Case { int64_t c, h, w, kh, kw, pt, pl, pb, pr; } cases[] = {
      {3, 56, 56, 3, 3, 1, 1, 1, 1}, {2, 28, 28, 3, 3, 1, 1, 1, 1}, {2, 14, 14, 3, 3, 1, 1, 1, 1},
      {3, 33, 29, 1, 1, 0, 0, 0, 0}, {2, 20, 80, 7, 7, 3, 3, 3, 3}, {2, 9, 13, 5, 4, 2, 1, 1, 2},
      {1, 3, 3, 3, 3, 1, 1, 1, 1},   {2, 11, 2, 2, 3, 0, 1, 1, 1},  {3, 57, 45, 3, 3, 0, 0, 0, 0}};
  for (const Case& cs : cases) {
    Im2colGeom g;
    g.c = cs.c, g.h = cs.h, g.w = cs.w, g.kh = cs.kh, g.kw = cs.kw, g.sh = g.sw = 2, g.pt = cs.pt, g.pl = cs.pl;
    g.ho = (g.h + cs.pt + cs.pb - g.kh) / 2 + 1, g.wo = (g.w + cs.pl + cs.pr - g.kw) / 2 + 1;
    ASSERT_TRUE(im2col_phases_supported(g));
    std::vector<float> x(g.c * g.h * g.w);
    for (size_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>(k + 1);
    const int64_t rows = g.c * g.kh * g.kw, ohw = g.ho * g.wo;
    std::vector<float> col(rows * ohw);
    im2col_rows(g, x.data(), col.data(), 0, rows);
    std::vector<float> phases(static_cast<size_t>(im2col_phase_floats(g)), 0.0f);
    im2col_split_phases(g, x.data(), 0, g.c, phases.data());
    for (int64_t j0 : {int64_t{0}, int64_t{5}, ohw / 3})
      for (int64_t k0 : {int64_t{0}, rows / 2}) {
        const int64_t nb = std::min<int64_t>(ohw - j0, 100), kb = rows - k0;
        if (nb <= 0 || kb <= 0) continue;
        const int64_t panels = (nb + 15) / 16, block = panels * kb * 16;
        std::vector<float> packed(block + 8, -1.0f);
        ASSERT_TRUE(im2col_pack_b_phased(g, phases.data(), k0, kb, j0, nb, 16, packed.data()));
        for (int64_t q = 0; q < panels; ++q)
          for (int64_t kk = 0; kk < kb; ++kk)
            for (int64_t cc = 0; cc < 16; ++cc) {
              const int64_t p = j0 + q * 16 + cc;
              const float want = p < j0 + nb ? col[(k0 + kk) * ohw + p] : 0.0f;
              ASSERT_EQ(packed[(q * kb + kk) * 16 + cc], want)
                  << g.h << "x" << g.w << " k " << g.kh << "x" << g.kw << " row " << k0 + kk << " pixel " << p;
            }
        for (int64_t k = block; k < block + 8; ++k) ASSERT_EQ(packed[k], -1.0f) << "past the block";
      }
  }
}

}  // namespace
}  // namespace kiln::kernels
