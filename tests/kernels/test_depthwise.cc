// Depthwise conv kernels (kernels/x86/f32_depthwise.h) against a double-precision naive
// reference: odd H/W, W below and around the vector width, pads 0-2 (asymmetric), strides 1-3,
// dilation, kernels 1x1 to 7x7, bias / no bias, clamp epilogue, batch > 1, 1 and 2 threads, plus a
// sweep of small/medium planes and channel counts around 8 and 16 for the channel-blocked paths.
// Every kernel of f32_depthwise.h's two lists that the CPU runs takes every case its kind accepts;
// the channels-last (NHWC) ones run between layout permutes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "../common/two_threads.h"
#include "kernels/x86/f32_depthwise.h"

namespace kiln::kernels {
namespace {

using Kernel = std::function<void(const DepthwiseGeom&, const float*, const float*, float*, const DepthwiseEpilogue&,
                                  const ParallelFor&)>;

// Splits [0, n) into two halves run on two threads.
struct Case {
  int64_t n, c, h, w, k_h, k_w, s_h, s_w, d_h, d_w, pt, pl, pb, pr;
  bool bias, clamp;
  Activation act = Activation::kNone;
};

DepthwiseGeom geom_of(const Case& cs) {
  DepthwiseGeom g;
  g.n = cs.n, g.c = cs.c, g.h = cs.h, g.w = cs.w, g.kh = cs.k_h, g.kw = cs.k_w;
  g.sh = cs.s_h, g.sw = cs.s_w, g.dh = cs.d_h, g.dw = cs.d_w, g.pt = cs.pt, g.pl = cs.pl;
  g.ho = (cs.h + cs.pt + cs.pb - (cs.k_h - 1) * cs.d_h - 1) / cs.s_h + 1;
  g.wo = (cs.w + cs.pl + cs.pr - (cs.k_w - 1) * cs.d_w - 1) / cs.s_w + 1;
  return g;
}

void check(const Case& cs, const Kernel& kernel, bool threaded) {
  const DepthwiseGeom g = geom_of(cs);
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

// cases() plus channel counts around the 8-lane block of the AVX2 kernels with strides 1 and 2,
// 3x3 / 5x5 / 7x7 filters, padding, dilation and activations, and large stride-2 planes.
std::vector<Case> all_cases() {
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

// A channels-last kernel with the NCHW kernels' signature: x permuted to [n, h, w, c], the weight
// repacked tap-major, the [n, ho, wo, c] result (poisoned first, so unwritten lanes fail) permuted back.
Kernel via_channels_last(DepthwiseKernelFn channels_last) {
  return [channels_last](const DepthwiseGeom& g, const float* x, const float* w, float* y,
                         const DepthwiseEpilogue& ep, const ParallelFor& parallel) {
  std::vector<float> xl(g.n * g.h * g.w * g.c), taps(g.kh * g.kw * g.c), yl(g.n * g.ho * g.wo * g.c, 1e30f);
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t c = 0; c < g.c; ++c)
      for (int64_t p = 0; p < g.h * g.w; ++p) xl[(n * g.h * g.w + p) * g.c + c] = x[(n * g.c + c) * g.h * g.w + p];
  depthwise_nhwc_taps(g, w, taps.data());
  channels_last(g, xl.data(), taps.data(), yl.data(), ep, parallel);
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t c = 0; c < g.c; ++c)
      for (int64_t p = 0; p < g.ho * g.wo; ++p) y[(n * g.c + c) * g.ho * g.wo + p] = yl[(n * g.ho * g.wo + p) * g.c + c];
  };
}

// Every kernel of a list that this CPU runs, on every case its kind accepts, 1 and 2 threads.
// MobileNet/EfficientNet shapes (112x112 3x3 and 56x56 5x5 at stride 2, the 7x7 stage) included.
void check_list(const std::vector<DepthwiseKernel>& list, const std::vector<Case>& all, const Kernel& wrap_nhwc = {}) {
  int tested = 0;
  for (const DepthwiseKernel& k : list) {
    if (!isa_supported(k.isa)) continue;
    const Kernel fn = wrap_nhwc ? via_channels_last(k.fn) : Kernel(k.fn);
    int ran = 0;
    for (const Case& c : all) {
      if (!k.accepts(geom_of(c))) continue;
      SCOPED_TRACE(k.name);
      check(c, fn, false);
      check(c, fn, true);
      ++ran;
    }
    EXPECT_GE(ran, 20) << k.name << " ran on too few cases";
    ++tested;
  }
  EXPECT_GE(tested, 1);
}

std::vector<Case> mobilenet_cases() {
  std::vector<Case> v = all_cases();
  v.push_back({1, 96, 112, 112, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, true});
  v.push_back({1, 40, 56, 56, 5, 5, 2, 2, 1, 1, 2, 2, 2, 2, true, false, Activation::kSilu});
  v.push_back({1, 960, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, true, true});
  v.push_back({1, 576, 14, 14, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, true});
  v.push_back({2, 43, 9, 29, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, true, false, Activation::kHardSwish});
  v.push_back({1, 12, 15, 31, 5, 5, 2, 2, 1, 1, 2, 2, 2, 2, false, true, Activation::kSilu});
  v.push_back({1, 20, 56, 56, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, true});
  return v;
}

TEST(Depthwise, EveryNchwKernelMatchesReference) { check_list(depthwise_f32_kernels(), mobilenet_cases()); }

TEST(Depthwise, EveryChannelsLastKernelMatchesReference) {
  check_list(depthwise_nhwc_f32_kernels(), mobilenet_cases(), via_channels_last(depthwise_conv2d_nhwc_f32_generic));
}

TEST(Depthwise, DispatchMatchesReference) {
  for (const Case& c : cases()) {
    check(c, depthwise_conv2d_f32, true);
    check(c, via_channels_last(depthwise_conv2d_nhwc_f32), true);
  }
}

}  // namespace
}  // namespace kiln::kernels
