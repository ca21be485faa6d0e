// Winograd F(4x4, 3x3) conv op (runtime/conv_winograd.h) made from a GemmDesc, against a
// double-precision naive conv: pads 0/1/2 and asymmetric/SAME, output sizes not a multiple of
// the 4x4 tile (1x1 to 57x57), channel counts around the microkernel blocking, bias / no bias,
// clamp, batch 2, 1 and 2 threads; and what it declines (stride 2, dilation, 5x5, groups).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "runtime/conv_winograd.h"
#include "runtime/thread_pool.h"

namespace kiln {
namespace {

struct Case {
  int64_t n, c, h, w, co, kh, kw;
  std::vector<int64_t> strides, dilations, pads;
  std::string auto_pad;
  bool bias, clamp;
};

void check(const Case& cs, int threads) {
  const int64_t eh = (cs.kh - 1) * cs.dilations[0] + 1, ew = (cs.kw - 1) * cs.dilations[1] + 1;
  int64_t ho, wo, pt, pl;
  if (cs.auto_pad == "SAME_UPPER") {
    ho = (cs.h + cs.strides[0] - 1) / cs.strides[0], wo = (cs.w + cs.strides[1] - 1) / cs.strides[1];
    pt = std::max<int64_t>(0, (ho - 1) * cs.strides[0] + eh - cs.h) / 2;
    pl = std::max<int64_t>(0, (wo - 1) * cs.strides[1] + ew - cs.w) / 2;
  } else {
    ho = (cs.h + cs.pads[0] + cs.pads[2] - eh) / cs.strides[0] + 1;
    wo = (cs.w + cs.pads[1] + cs.pads[3] - ew) / cs.strides[1] + 1;
    pt = cs.pads[0], pl = cs.pads[1];
  }
  std::mt19937 rng(static_cast<unsigned>(cs.c * 97 + cs.co * 13 + cs.h));
  std::uniform_real_distribution<float> dist(-1, 1);
  Tensor x(DType::kFloat32, {cs.n, cs.c, cs.h, cs.w}), w(DType::kFloat32, {cs.co, cs.c, cs.kh, cs.kw}),
      b(DType::kFloat32, {cs.co});
  for (Tensor* t : {&x, &w, &b})
    for (int64_t i = 0; i < t->numel(); ++i) t->data<float>()[i] = dist(rng);
  gemm_ops::GemmDesc d;
  d.kind = gemm_ops::GemmKind::kConv;
  d.strides = cs.strides, d.dilations = cs.dilations, d.pads = cs.pads, d.auto_pad = cs.auto_pad;
  d.out_dims = {cs.n, cs.co, ho, wo};
  d.out_dtype = DType::kFloat32;
  d.operands.push_back({true, DType::kFloat32, x.dims(), nullptr});
  d.operands.push_back({true, DType::kFloat32, w.dims(), &w});
  if (cs.bias) d.operands.push_back({true, DType::kFloat32, b.dims(), &b});
  auto op = cs.clamp ? conv_ops::make_winograd_conv_op(d, -0.5f, 0.75f) : conv_ops::make_winograd_conv_op(d);
  ASSERT_TRUE(op);
  ThreadPool pool(threads);
  ScopedThreadPool scoped(&pool);
  RtValue xv(x);
  Tensor y = op->run({&xv, nullptr, nullptr});
  ASSERT_EQ(y.dims(), d.out_dims);
  for (int64_t img = 0; img < cs.n; ++img)
    for (int64_t o = 0; o < cs.co; ++o)
      for (int64_t oy = 0; oy < ho; ++oy)
        for (int64_t ox = 0; ox < wo; ++ox) {
          double s = cs.bias ? b.data<float>()[o] : 0.0;
          for (int64_t c = 0; c < cs.c; ++c)
            for (int64_t i = 0; i < cs.kh; ++i)
              for (int64_t j = 0; j < cs.kw; ++j) {
                const int64_t iy = oy * cs.strides[0] - pt + i * cs.dilations[0];
                const int64_t ix = ox * cs.strides[1] - pl + j * cs.dilations[1];
                if (iy < 0 || iy >= cs.h || ix < 0 || ix >= cs.w) continue;
                s += double(x.data<float>()[((img * cs.c + c) * cs.h + iy) * cs.w + ix]) *
                     w.data<float>()[((o * cs.c + c) * cs.kh + i) * cs.kw + j];
              }
          if (cs.clamp) s = std::min(std::max(s, -0.5), 0.75);
          const float got = y.data<float>()[((img * cs.co + o) * ho + oy) * wo + ox];
          ASSERT_NEAR(got, s, 2e-4 * (1 + std::abs(s)) + 2e-5 * cs.c) << "image " << img << " channel " << o << " at " << oy
                                                           << "," << ox << " (case c=" << cs.c << " co=" << cs.co
                                                           << " " << cs.kh << "x" << cs.kw << ")";
        }
}

TEST(ConvWinograd, MatchesReference) {
  const std::vector<Case> cases = {
      {1, 8, 15, 15, 14, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, "NOTSET", true, true},
      {1, 16, 16, 16, 16, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, "NOTSET", true, false},
      {2, 5, 9, 7, 19, 3, 3, {1, 1}, {1, 1}, {0, 0, 0, 0}, "NOTSET", false, false},
      {1, 3, 10, 9, 7, 3, 3, {1, 1}, {1, 1}, {1, 0, 2, 1}, "NOTSET", true, false},
      {1, 4, 6, 5, 3, 3, 3, {1, 1}, {1, 1}, {2, 2, 2, 2}, "NOTSET", true, true},
      {1, 6, 12, 11, 29, 3, 3, {1, 1}, {1, 1}, {0, 0, 0, 0}, "SAME_UPPER", true, false},
      {1, 2, 3, 3, 2, 3, 3, {1, 1}, {1, 1}, {0, 0, 0, 0}, "NOTSET", true, false},  // one output pixel
      {1, 70, 5, 4, 120, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, "NOTSET", true, false},  // K > KC, M > MC
      {1, 32, 57, 57, 20, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, "NOTSET", false, true},
  };
  for (int threads : {1, 2})
    for (const Case& c : cases) check(c, threads);
}

TEST(ConvWinograd, Declines) {
  Tensor w(DType::kFloat32, {4, 2, 3, 3});
  gemm_ops::GemmDesc d;
  d.kind = gemm_ops::GemmKind::kConv;
  d.out_dims = {1, 4, 3, 3};
  d.out_dtype = DType::kFloat32;
  d.operands.push_back({true, DType::kFloat32, {1, 2, 5, 5}, nullptr});
  d.operands.push_back({true, DType::kFloat32, {4, 2, 3, 3}, &w});
  EXPECT_TRUE(conv_ops::make_winograd_conv_op(d));
  d.operands[1].constant = nullptr;  // run-time weights
  EXPECT_FALSE(conv_ops::make_winograd_conv_op(d));
  d.operands[1].constant = &w;
  d.strides = {2, 2};
  d.out_dims = {1, 4, 2, 2};
  EXPECT_FALSE(conv_ops::make_winograd_conv_op(d));
  d.strides = {1, 1};
  d.dilations = {2, 2};
  d.out_dims = {1, 4, 1, 1};
  EXPECT_FALSE(conv_ops::make_winograd_conv_op(d));
  Tensor w5(DType::kFloat32, {4, 2, 5, 5});
  d.dilations = {1, 1};
  d.operands[1] = {true, DType::kFloat32, {4, 2, 5, 5}, &w5};
  d.out_dims = {1, 4, 1, 1};
  EXPECT_FALSE(conv_ops::make_winograd_conv_op(d));
}

}  // namespace
}  // namespace kiln
