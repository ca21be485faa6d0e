// Depthwise conv kernels (kernels/x86/f32_depthwise.h) against a double-precision naive
// reference: odd H/W, W below and around the vector width, pads 0-2 (asymmetric), strides 1-3,
// dilation, kernels 1x1 to 7x7, bias / no bias, clamp epilogue, batch > 1, 1 and 2 threads, plus a
// sweep of small/medium planes and channel counts around 16 for the channel-blocked path.
// The channels-last (NHWC) kernels run the same cases between layout permutes.
// The AVX-512 and AVX2 kernels are skipped on CPUs without them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "../common/two_threads.h"
#include "kernels/x86/f32_depthwise.h"

namespace kiln::kernels {
namespace {

using Kernel = void (*)(const DepthwiseGeom&, const float*, const float*, float*, const DepthwiseEpilogue&,
                        const ParallelFor&);

// Splits [0, n) into two halves run on two threads.
struct Case {
  int64_t n, c, h, w, k_h, k_w, s_h, s_w, d_h, d_w, pt, pl, pb, pr;
  bool bias, clamp;
  Activation act = Activation::kNone;
};

void check(const Case& cs, Kernel kernel, bool threaded) {
  DepthwiseGeom g;
  g.n = cs.n, g.c = cs.c, g.h = cs.h, g.w = cs.w, g.kh = cs.k_h, g.kw = cs.k_w;
  g.sh = cs.s_h, g.sw = cs.s_w, g.dh = cs.d_h, g.dw = cs.d_w, g.pt = cs.pt, g.pl = cs.pl;
  g.ho = (cs.h + cs.pt + cs.pb - (cs.k_h - 1) * cs.d_h - 1) / cs.s_h + 1;
  g.wo = (cs.w + cs.pl + cs.pr - (cs.k_w - 1) * cs.d_w - 1) / cs.s_w + 1;
  ASSERT_TRUE(depthwise_geom_ok(g));
  std::mt19937 rng(static_cast<unsigned>(cs.h * 131 + cs.w * 7 + cs.k_w));
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> x(g.n * g.c * g.h * g.w), w(g.c * g.kh * g.kw), b(g.c);
  for (auto& v : x) v = dist(rng);
  for (auto& v : w) v = dist(rng);
  for (auto& v : b) v = dist(rng);
  DepthwiseEpilogue ep;
  if (cs.bias) ep.bias = b.data();
  if (cs.clamp) ep.lo = -0.25f, ep.hi = 0.5f;
  ep.act = cs.act;
  std::vector<float> y(g.n * g.c * g.ho * g.wo, 1e30f);
  kernel(g, x.data(), w.data(), y.data(), ep, threaded ? testing::two_threads() : ParallelFor());
  for (int64_t p = 0; p < g.n * g.c; ++p)
    for (int64_t oy = 0; oy < g.ho; ++oy)
      for (int64_t ox = 0; ox < g.wo; ++ox) {
        const int64_t ch = p % g.c;
        double acc = cs.bias ? b[ch] : 0.0;
        for (int64_t i = 0; i < g.kh; ++i)
          for (int64_t j = 0; j < g.kw; ++j) {
            const int64_t iy = oy * g.sh - g.pt + i * g.dh, ix = ox * g.sw - g.pl + j * g.dw;
            if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w)
              acc += double(x[(p * g.h + iy) * g.w + ix]) * w[(ch * g.kh + i) * g.kw + j];
          }
        if (cs.clamp) acc = std::min(std::max(acc, -0.25), 0.5);
        acc = apply_activation(cs.act, static_cast<float>(acc));
        const float got = y[(p * g.ho + oy) * g.wo + ox];
        ASSERT_NEAR(got, acc, 1e-4) << "plane " << p << " at (" << oy << ", " << ox << ") of " << g.ho << "x"
                                    << g.wo << ", input " << g.h << "x" << g.w << ", kernel " << g.kh << "x"
                                    << g.kw << ", stride " << g.sh << "," << g.sw;
      }
}

std::vector<Case> cases() {
  std::vector<Case> v = {
      // MobileNet-like 3x3, pad 1, stride 1 and 2, with bias + clamp (ReLU6-style).
      {1, 32, 112, 112, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, true, true},
      {1, 19, 15, 15, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, true},
      {2, 5, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, false},
      // W smaller than, equal to, and just above the vector width; odd sizes.
      {1, 3, 5, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, true, false},
      {1, 3, 9, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true},
      {1, 3, 9, 17, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, true, false},
      {1, 2, 33, 65, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, true, false},
      {1, 2, 31, 79, 5, 5, 2, 2, 1, 1, 2, 2, 2, 2, false, false},
      // No padding, asymmetric padding, stride 3, dilation 2, 1x1 and 7x7, non-square kernels.
      {1, 4, 12, 12, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0, true, false},
      {1, 4, 12, 13, 3, 3, 1, 2, 1, 1, 0, 1, 2, 0, true, false},
      {1, 3, 20, 37, 3, 3, 3, 3, 1, 1, 1, 2, 0, 1, false, false},
      {1, 3, 20, 37, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, true, false},
      {1, 3, 20, 37, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, true, true},
      {1, 6, 9, 10, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, true, false},
      {1, 6, 9, 10, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, false, false},
      {1, 3, 14, 14, 7, 7, 1, 1, 1, 1, 3, 3, 3, 3, true, false},
      {1, 3, 11, 40, 1, 5, 1, 1, 1, 1, 0, 2, 0, 2, true, false},
      {1, 3, 11, 40, 5, 1, 1, 2, 1, 1, 2, 0, 2, 0, false, true},
      // A 1x1 input with padding (only the centre tap sees data), and a single output row.
      {1, 17, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, true, false},
      {3, 2, 3, 50, 3, 3, 1, 1, 1, 1, 0, 1, 0, 1, true, false},
  };
  // Sweep for the channel-blocked path: planes 1x1 to 56x56, stride 1 and 2, 3x3 and 5x5, pads 0-2
  // (asymmetric), dilation 2, channel counts around the 16-lane block, batch 2.
  const int64_t planes[][2] = {{1, 1}, {2, 3}, {7, 7}, {14, 14}, {15, 17}, {28, 28}, {56, 56}};
  const int64_t channels[] = {1, 15, 16, 17, 33};
  int i = 0;
  for (const auto& hw : planes)
    for (int64_t s : {1, 2})
      for (int64_t k : {3, 5}) {
        const int64_t p = k / 2, c = channels[i % 5], n = i % 3 == 0 ? 2 : 1;
        const bool bias = i % 2 == 0, clamp = i % 4 < 2;
        v.push_back({n, c, hw[0], hw[1], k, k, s, s, 1, 1, p, p, p, p, bias, clamp});
        v.push_back({1, channels[(i + 2) % 5], hw[0], hw[1], k, k, s, s, 1, 1, 0, 0, 0, 0, !bias, clamp});
        if (hw[0] >= 7) {
          v.push_back({n, channels[(i + 3) % 5], hw[0], hw[1], k, k, s, s, 1, 1, p, 0, p - 1 + s, 2, bias, !clamp});
          v.push_back({1, 17, hw[0], hw[1], k, k, s, s, 2, 2, 2 * p, 2 * p, 2 * p, 2 * p, true, false});
        }
        ++i;
      }
  // Activations after the clamp (SiLU: EfficientNet; HardSwish: MobileNetV3), both kernels' paths.
  v.push_back({1, 17, 14, 14, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, true, false, Activation::kSilu});
  v.push_back({2, 20, 56, 56, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, true, true, Activation::kHardSwish});
  v.push_back({1, 18, 28, 28, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, false, Activation::kSigmoid});
  v.push_back({1, 3, 64, 70, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, true, false, Activation::kSilu});
  // Drop sweep cases whose filter does not fit the padded plane (no output).
  std::erase_if(v, [](const Case& c) {
    return c.h + c.pt + c.pb < (c.k_h - 1) * c.d_h + 1 || c.w + c.pl + c.pr < (c.k_w - 1) * c.d_w + 1;
  });
  return v;
}

TEST(Depthwise, GenericMatchesReference) {
  for (const Case& c : cases()) {
    check(c, depthwise_conv2d_f32_generic, false);
    check(c, depthwise_conv2d_f32_generic, true);
  }
}

TEST(Depthwise, Avx512MatchesReference) {
  if (!isa_supported(Isa::kAvx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  for (const Case& c : cases()) {
    check(c, depthwise_conv2d_f32_avx512f, false);
    check(c, depthwise_conv2d_f32_avx512f, true);
  }
}

TEST(Depthwise, Avx512BlockedAndPlanesMatchReference) {
  if (!isa_supported(Isa::kAvx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  for (const Case& c : cases())
    for (Kernel k : {depthwise_conv2d_f32_avx512f_blocked, depthwise_conv2d_f32_avx512f_planes}) {
      check(c, k, false);
      check(c, k, true);
    }
}

// The stride-2 kernel on every case it accepts (any plane size; dispatch picks it for large ones),
// plus MobileNet/EfficientNet shapes: 112x112 3x3 and 56x56 5x5 at stride 2.
TEST(Depthwise, Avx512Stride2MatchesReference) {
  if (!isa_supported(Isa::kAvx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  std::vector<Case> all = cases();
  all.push_back({1, 3, 112, 112, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, true});
  all.push_back({1, 2, 57, 57, 5, 5, 2, 2, 1, 1, 2, 2, 2, 2, true, false, Activation::kSilu});
  all.push_back({1, 2, 40, 83, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3, false, true});
  int ran = 0;
  for (const Case& c : all) {
    if (c.s_h != 2 || c.s_w != 2 || c.d_h != 1 || c.d_w != 1 || (c.k_w != 3 && c.k_w != 5 && c.k_w != 7)) continue;
    check(c, depthwise_conv2d_f32_avx512f_s2, false);
    check(c, depthwise_conv2d_f32_avx512f_s2, true);
    ++ran;
  }
  EXPECT_GE(ran, 20);
}

// Channel counts around the 8-lane block of the AVX2 kernels, on both of their paths (blocked and
// per plane) with strides 1 and 2, 3x3 / 5x5 / 7x7 filters, padding, dilation and activations.
std::vector<Case> avx2_cases() {
  std::vector<Case> v = cases();
  const int64_t channels[] = {7, 8, 9, 24, 25};
  int i = 0;
  for (int64_t hw : {5, 13, 29})
    for (int64_t s : {1, 2})
      for (int64_t k : {3, 5, 7}) {
        const int64_t p = k / 2, c = channels[i % 5];
        const Activation act = i % 3 == 0 ? Activation::kHardSwish : i % 3 == 1 ? Activation::kSilu : Activation::kNone;
        v.push_back({1 + i % 2, c, hw, hw + 2, k, k, s, s, 1, 1, p, p, p, p, i % 2 == 0, i % 4 < 2, act});
        v.push_back({1, channels[(i + 1) % 5], hw, hw, k, k, s, s, 2, 1, p, p - 1, p, p + 1, true, true});
        ++i;
      }
  v.push_back({1, 9, 57, 61, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, true, true, Activation::kTanh});
  v.push_back({1, 7, 113, 113, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, true});
  v.push_back({2, 3, 100, 97, 3, 3, 2, 2, 1, 1, 1, 1, 0, 1, false, true, Activation::kSilu});
  std::erase_if(v, [](const Case& c) {
    return c.h + c.pt + c.pb < (c.k_h - 1) * c.d_h + 1 || c.w + c.pl + c.pr < (c.k_w - 1) * c.d_w + 1;
  });
  return v;
}

TEST(Depthwise, Avx2MatchesReference) {
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  for (const Case& c : avx2_cases()) {
    check(c, depthwise_conv2d_f32_avx2, false);
    check(c, depthwise_conv2d_f32_avx2, true);
  }
}

TEST(Depthwise, Avx2BlockedAndPlanesMatchReference) {
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  for (const Case& c : avx2_cases())
    for (Kernel k : {depthwise_conv2d_f32_avx2_blocked, depthwise_conv2d_f32_avx2_planes}) {
      check(c, k, false);
      check(c, k, true);
    }
}

TEST(Depthwise, Avx2Stride2MatchesReference) {
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  std::vector<Case> all = avx2_cases();
  all.push_back({1, 3, 112, 112, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, true});
  all.push_back({1, 2, 57, 57, 5, 5, 2, 2, 1, 1, 2, 2, 2, 2, true, false, Activation::kSilu});
  all.push_back({1, 2, 40, 83, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3, false, true});
  all.push_back({1, 2, 9, 150, 3, 3, 2, 2, 1, 1, 0, 2, 1, 0, true, false, Activation::kHardSwish});
  int ran = 0;
  for (const Case& c : all) {
    if (c.s_h != 2 || c.s_w != 2 || c.d_h != 1 || c.d_w != 1 || (c.k_w != 3 && c.k_w != 5 && c.k_w != 7)) continue;
    check(c, depthwise_conv2d_f32_avx2_s2, false);
    check(c, depthwise_conv2d_f32_avx2_s2, true);
    ++ran;
  }
  EXPECT_GE(ran, 30);
}

// A channels-last kernel with the NCHW kernels' signature: x permuted to [n, h, w, c], the weight
// repacked tap-major, the [n, ho, wo, c] result (poisoned first, so unwritten lanes fail) permuted back.
template <Kernel kChannelsLast>
void via_channels_last(const DepthwiseGeom& g, const float* x, const float* w, float* y, const DepthwiseEpilogue& ep,
                       const ParallelFor& parallel) {
  std::vector<float> xl(g.n * g.h * g.w * g.c), taps(g.kh * g.kw * g.c), yl(g.n * g.ho * g.wo * g.c, 1e30f);
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t c = 0; c < g.c; ++c)
      for (int64_t p = 0; p < g.h * g.w; ++p) xl[(n * g.h * g.w + p) * g.c + c] = x[(n * g.c + c) * g.h * g.w + p];
  depthwise_nhwc_taps(g, w, taps.data());
  kChannelsLast(g, xl.data(), taps.data(), yl.data(), ep, parallel);
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t c = 0; c < g.c; ++c)
      for (int64_t p = 0; p < g.ho * g.wo; ++p) y[(n * g.c + c) * g.ho * g.wo + p] = yl[(n * g.ho * g.wo + p) * g.c + c];
}

TEST(Depthwise, ChannelsLastMatchesReference) {
  std::vector<Case> all = cases();
  // MobileNetV2's 7x7 stage (960 channels) and its stride-2 entry from 14x14; rows wider than a tile.
  all.push_back({1, 960, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, true, true});
  all.push_back({1, 576, 14, 14, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, true});
  all.push_back({2, 40, 9, 29, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, true, false, Activation::kHardSwish});
  for (const Case& c : all) {
    check(c, via_channels_last<depthwise_conv2d_nhwc_f32_generic>, false);
    check(c, via_channels_last<depthwise_conv2d_nhwc_f32>, true);
    if (isa_supported(Isa::kAvx512)) {
      check(c, via_channels_last<depthwise_conv2d_nhwc_f32_avx512f>, false);
      check(c, via_channels_last<depthwise_conv2d_nhwc_f32_avx512f>, true);
    }
  }
}

// The AVX2 channels-last kernels (the dispatching one and the blocked one on every case) on the
// AVX2 sweep (channel tails around 8) and MobileNet shapes.
TEST(Depthwise, ChannelsLastAvx2MatchesReference) {
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  std::vector<Case> all = avx2_cases();
  all.push_back({1, 960, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, true, true});
  all.push_back({1, 576, 14, 14, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, true});
  all.push_back({2, 43, 9, 29, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, true, false, Activation::kHardSwish});
  all.push_back({1, 12, 15, 31, 5, 5, 2, 2, 1, 1, 2, 2, 2, 2, false, true, Activation::kSilu});
  all.push_back({1, 20, 56, 56, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, true});
  for (const Case& c : all) {
    check(c, via_channels_last<depthwise_conv2d_nhwc_f32_avx2>, false);
    check(c, via_channels_last<depthwise_conv2d_nhwc_f32_avx2>, true);
    check(c, via_channels_last<depthwise_conv2d_nhwc_f32_avx2_blocked>, false);
    check(c, via_channels_last<depthwise_conv2d_nhwc_f32_avx2_blocked>, true);
  }
}

TEST(Depthwise, DispatchMatchesReference) {
  for (const Case& c : cases()) check(c, depthwise_conv2d_f32, true);
}

}  // namespace
}  // namespace kiln::kernels
