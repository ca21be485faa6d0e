// Stem conv kernel (kernels/x86/f32_conv_stem.h) against a double-precision naive reference:
// 1-4 input channels; output channels around the 8-channel block (1, 7, 8, 9, 24, 64); filters
// 1x1 to 7x7 including even sizes; output widths around the vectors and tiles (16 / 48 columns;
// AVX2: 8 / 24) (1, 7-9, 15-17, 23-25, 33, 47-49, 112); pads 0 to k-1, asymmetric (bottom/right from the output
// size); bias / no bias, clamp, SiLU / HardSwish / Sigmoid; batch 2; 1 and 2 threads; the fused
// 3x3 / stride 2 max pool over odd and even sizes (pooled widths around 16, and around 8 for the
// AVX2 kernel's vectors). Runs every kernel of the family's list (conv_stem_f32_kernels) that
// the CPU supports, and the dispatching conv_stem_f32; skipped on CPUs without any.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "../common/two_threads.h"
#include "kernels/x86/f32_conv_stem.h"

namespace kiln::kernels {
namespace {

bool have_stem_kernel() { return host_kernel(conv_stem_f32_kernels()) != nullptr; }

// The dispatching entry point, then every listed kernel the CPU runs.
std::vector<ConvStemFn> kernels_to_test() {
  std::vector<ConvStemFn> fns{&conv_stem_f32};
  for (const auto& k : conv_stem_f32_kernels())
    if (isa_supported(k.isa)) fns.push_back(k.fn);
  return fns;
}

struct Case {
  int64_t n, c, co, h, w, kh, kw, pt, pl, ho, wo;
  bool bias, clamp;
  Activation act = Activation::kNone;
  bool pool = false;
};

void check(const Case& cs, bool threaded, ConvStemFn kernel) {
  StemConvGeom g;
  g.n = cs.n, g.c = cs.c, g.h = cs.h, g.w = cs.w, g.co = cs.co, g.kh = cs.kh, g.kw = cs.kw;
  g.ho = cs.ho, g.wo = cs.wo, g.pt = cs.pt, g.pl = cs.pl;
  ASSERT_TRUE(conv_stem_supported(g)) << "c=" << cs.c << " k=" << cs.kh << "x" << cs.kw << " wo=" << cs.wo;
  std::mt19937 rng(static_cast<unsigned>(cs.co * 31 + cs.w * 7 + cs.kw));
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> x(g.n * g.c * g.h * g.w), w(g.co * g.c * g.kh * g.kw), b(g.co);
  for (auto* v : {&x, &w, &b})
    for (auto& e : *v) e = dist(rng);
  DepthwiseEpilogue ep;
  if (cs.bias) ep.bias = b.data();
  if (cs.clamp) ep.lo = -0.5f, ep.hi = 0.75f;
  ep.act = cs.act;
  const std::vector<float> packed = pack_conv_stem_weights(g, w.data());
  StemMaxPool pool;
  pool.on = cs.pool;
  const int64_t hp = cs.pool ? StemMaxPool::pooled(g.ho) : g.ho, wp = cs.pool ? StemMaxPool::pooled(g.wo) : g.wo;
  std::vector<float> y(g.n * g.co * hp * wp, 1e30f);
  kernel(g, x.data(), packed.data(), y.data(), ep, threaded ? testing::two_threads() : ParallelFor(), pool);
  std::vector<double> want(g.n * g.co * g.ho * g.wo);  // the conv with its epilogue
  for (int64_t img = 0; img < g.n; ++img)
    for (int64_t o = 0; o < g.co; ++o)
      for (int64_t oy = 0; oy < g.ho; ++oy)
        for (int64_t ox = 0; ox < g.wo; ++ox) {
          double s = cs.bias ? b[o] : 0.0;
          for (int64_t c = 0; c < g.c; ++c)
            for (int64_t i = 0; i < g.kh; ++i)
              for (int64_t j = 0; j < g.kw; ++j) {
                const int64_t iy = 2 * oy - g.pt + i, ix = 2 * ox - g.pl + j;
                if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
                s += double(x[((img * g.c + c) * g.h + iy) * g.w + ix]) * w[((o * g.c + c) * g.kh + i) * g.kw + j];
              }
          if (cs.clamp) s = std::min(std::max(s, -0.5), 0.75);
          want[((img * g.co + o) * g.ho + oy) * g.wo + ox] = apply_activation(cs.act, static_cast<float>(s));
        }
  for (int64_t img = 0; img < g.n; ++img)
    for (int64_t o = 0; o < g.co; ++o)
      for (int64_t py = 0; py < hp; ++py)
        for (int64_t px = 0; px < wp; ++px) {
          double v = -1e300;
          const double* plane = want.data() + (img * g.co + o) * g.ho * g.wo;
          if (!cs.pool) v = plane[py * g.wo + px];
          for (int64_t i = 0; cs.pool && i < 3; ++i)
            for (int64_t j = 0; j < 3; ++j) {
              const int64_t yy = 2 * py - 1 + i, xx = 2 * px - 1 + j;
              if (yy >= 0 && yy < g.ho && xx >= 0 && xx < g.wo) v = std::max(v, plane[yy * g.wo + xx]);
            }
          const float got = y[((img * g.co + o) * hp + py) * wp + px];
          ASSERT_NEAR(got, v, 2e-5 * (1 + std::abs(v)) + 1e-6 * g.c * g.kh * g.kw)
              << "c=" << g.c << " co=" << g.co << " " << g.h << "x" << g.w << " k=" << g.kh << "x" << g.kw
              << " pads " << g.pt << "," << g.pl << (cs.pool ? " pooled" : "") << " at " << img << "," << o << ","
              << py << "," << px;
        }
}

// The output size of a stride-2 conv with these pads (pb / pr: bottom / right).
Case make(int64_t n, int64_t c, int64_t co, int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t pt, int64_t pl,
          int64_t pb, int64_t pr, bool bias, bool clamp, Activation act = Activation::kNone) {
  return {n, c, co, h, w, kh, kw, pt, pl, (h + pt + pb - kh) / 2 + 1, (w + pl + pr - kw) / 2 + 1, bias, clamp, act};
}

TEST(ConvStem, MatchesReference) {
  if (!have_stem_kernel()) GTEST_SKIP() << "no AVX-512 or AVX2";
  std::vector<Case> cases = {
      make(1, 3, 64, 37, 37, 7, 7, 3, 3, 3, 3, true, false),                       // ResNet's stem, small
      make(1, 3, 32, 40, 40, 3, 3, 1, 1, 1, 1, true, true, Activation::kSilu),     // EfficientNet's
      make(2, 3, 16, 20, 34, 3, 3, 1, 1, 1, 1, false, false, Activation::kHardSwish),  // MobileNetV3's
      make(1, 3, 24, 31, 31, 3, 3, 0, 0, 0, 0, true, false),                       // SqueezeNet's, no pad
      make(1, 1, 7, 9, 33, 5, 5, 2, 2, 1, 2, false, true, Activation::kSigmoid),
      make(1, 2, 9, 11, 98, 4, 6, 1, 2, 2, 3, true, false),
      make(1, 4, 8, 5, 96, 2, 2, 0, 1, 1, 0, true, true),
      make(1, 3, 1, 8, 2, 1, 1, 0, 0, 0, 0, false, false),
      make(1, 3, 64, 12, 224, 7, 7, 3, 3, 3, 3, false, false),  // 112 columns: two 48-column tiles and 16
  };
  // Output widths around the vector and tile sizes (AVX-512: 16 and 48, AVX2: 8 and 24), 3x3 with pad 1.
  for (int64_t wo : {1, 7, 8, 9, 15, 16, 17, 23, 24, 25, 33, 47, 48, 49}) cases.push_back(make(1, 3, 8, 6, 2 * wo, 3, 3, 1, 1, 0, 1, true, false));
  for (ConvStemFn kernel : kernels_to_test())
    for (const Case& c : cases)
      for (bool threaded : {false, true}) check(c, threaded, kernel);
}

// The fused max pool: ResNet's and ShuffleNet's stems on small planes, conv outputs of odd and
// even sizes, pooled widths around 16 (15, 16, 17, 33).
TEST(ConvStem, FusedMaxPool) {
  if (!have_stem_kernel()) GTEST_SKIP() << "no AVX-512 or AVX2";
  std::vector<Case> cases = {make(1, 3, 64, 40, 40, 7, 7, 3, 3, 3, 3, true, true),
                             make(2, 3, 24, 30, 27, 3, 3, 1, 1, 1, 1, true, false),
                             make(1, 3, 9, 9, 9, 3, 3, 1, 1, 1, 1, false, false, Activation::kSilu)};
  for (int64_t wp : {7, 8, 9, 15, 16, 17, 33}) cases.push_back(make(1, 3, 8, 13, 4 * wp, 3, 3, 1, 1, 1, 1, true, false));
  for (Case& c : cases) c.pool = true;
  for (ConvStemFn kernel : kernels_to_test())
    for (const Case& c : cases)
      for (bool threaded : {false, true}) check(c, threaded, kernel);
}

TEST(ConvStem, Supported) {
  StemConvGeom g;
  g.c = 3, g.h = 8, g.w = 8, g.co = 4, g.kh = 3, g.kw = 3, g.ho = 4, g.wo = 4, g.pt = 1, g.pl = 1;
  EXPECT_EQ(conv_stem_supported(g), have_stem_kernel());
  StemConvGeom e = g;
  e.c = 5;  // more input channels than a stem has
  EXPECT_FALSE(conv_stem_supported(e));
  e = g;
  e.kh = e.kw = 9;
  EXPECT_FALSE(conv_stem_supported(e));
  e = g;
  e.pt = 3;  // a pad as large as the filter
  EXPECT_FALSE(conv_stem_supported(e));
  e = g;
  e.ho = 9;  // outputs past the input
  EXPECT_FALSE(conv_stem_supported(e));
}

}  // namespace
}  // namespace kiln::kernels
