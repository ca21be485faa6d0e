// GEMM conv op (runtime/conv_gemm.h) made from a GemmDesc, against a double-precision naive
// conv: 1x1 direct and strided, 3x3 pad 0/1/2, stride 2, dilation, asymmetric and SAME pads,
// odd sizes and channel counts around the microkernel blocking, bias / no bias, clamp,
// batch 2, 1 and 2 threads; and what it declines.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "runtime/conv_gemm.h"
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
  auto op = cs.clamp ? conv_ops::make_gemm_conv_op(d, -0.5f, 0.75f) : conv_ops::make_gemm_conv_op(d);
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
          ASSERT_NEAR(got, s, 1e-4 * (1 + std::abs(s))) << "image " << img << " channel " << o << " at " << oy
                                                           << "," << ox << " (case c=" << cs.c << " co=" << cs.co
                                                           << " " << cs.kh << "x" << cs.kw << ")";
        }
}

TEST(ConvGemm, MatchesReference) {
  const std::vector<Case> cases = {
      {1, 13, 7, 9, 17, 1, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, "NOTSET", true, false},
      {2, 16, 9, 9, 33, 1, 1, {2, 2}, {1, 1}, {0, 0, 0, 0}, "NOTSET", false, true},
      {1, 5, 11, 13, 19, 3, 3, {2, 2}, {1, 1}, {1, 1, 1, 1}, "NOTSET", true, false},
      {1, 8, 15, 15, 14, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, "NOTSET", true, true},
      {1, 3, 10, 9, 7, 3, 2, {1, 1}, {2, 1}, {1, 0, 2, 1}, "NOTSET", false, false},
      {1, 3, 23, 21, 8, 7, 7, {2, 2}, {1, 1}, {3, 3, 3, 3}, "NOTSET", true, false},
      {2, 4, 6, 5, 3, 3, 3, {1, 1}, {1, 1}, {2, 2, 2, 2}, "NOTSET", true, true},
      {1, 6, 12, 11, 29, 3, 3, {2, 2}, {1, 1}, {0, 0, 0, 0}, "SAME_UPPER", true, false},
      {1, 70, 5, 4, 120, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, "NOTSET", true, false},  // K > KC, M > MC
      {1, 2, 3, 40, 5, 1, 3, {1, 3}, {1, 1}, {0, 1, 0, 1}, "NOTSET", false, false},
  };
  for (int threads : {1, 2})
    for (const Case& c : cases) check(c, threads);
}

TEST(ConvGemm, Declines) {
  Tensor w(DType::kFloat32, {4, 2, 3, 3});
  gemm_ops::GemmDesc d;
  d.kind = gemm_ops::GemmKind::kConv;
  d.out_dims = {1, 4, 3, 3};
  d.out_dtype = DType::kFloat32;
  d.operands.push_back({true, DType::kFloat32, {1, 2, 5, 5}, nullptr});
  d.operands.push_back({true, DType::kFloat32, {4, 2, 3, 3}, &w});
  EXPECT_TRUE(conv_ops::make_gemm_conv_op(d));
  d.operands[1].constant = nullptr;  // run-time weights: the im2col ConvOp handles those
  EXPECT_FALSE(conv_ops::make_gemm_conv_op(d));
  d.operands[1].constant = &w;
  d.out_dims = {1, 4, 4, 3};  // disagrees with the attributes
  EXPECT_FALSE(conv_ops::make_gemm_conv_op(d));
  d.out_dims = {1, 4, 3, 3};
  d.group = 2;
  EXPECT_FALSE(conv_ops::make_gemm_conv_op(d));
}

}  // namespace
}  // namespace kiln
