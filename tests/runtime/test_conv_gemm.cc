// GEMM conv op (runtime/conv_gemm.h) made from a GemmDesc, against a double-precision naive
// conv: 1x1 direct and strided, 3x3 pad 0/1/2, stride 2, dilation, asymmetric and SAME pads,
// odd sizes and channel counts around the microkernel blocking, bias / no bias, clamp,
// batch 2, 1 and 2 threads; the pixels as GEMM rows (1x1 convs, and on AVX2 strided and dilated
// ones to 7x7 outputs); a fused input scale (GemmDesc::input_scale) against the conv of the
// scaled input; and what it declines.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>

#include "kernels/x86/f32_gemm.h"
#include "runtime/conv_gemm.h"
#include "conv_test_util.h"
#include "runtime/thread_pool.h"

namespace kiln {
namespace {

using conv_test::Case;

void check(const Case& cs, int threads) {
  conv_test::check_conv(cs, threads,
                        [](const gemm_ops::GemmDesc& d, bool clamp) {
                          return clamp ? conv_ops::make_gemm_conv_op(d, -0.5f, 0.75f) : conv_ops::make_gemm_conv_op(d);
                        },
                        1e-4);
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
      // Few pixels (7x7): 1x1, 3x3 and stride 2 with a partial last column panel.
      {2, 32, 7, 7, 64, 1, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, "NOTSET", true, true},
      {1, 16, 7, 7, 64, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, "NOTSET", true, true},
      {1, 8, 14, 14, 96, 3, 3, {2, 2}, {1, 1}, {1, 1, 1, 1}, "NOTSET", false, false},
      // 1x1 convs computed with the pixels as rows (pixel_rows_pay): 7x7 and 3x3 planes, two K
      // blocks, output channels that leave a partial column panel and a partial 16-block.
      {2, 160, 7, 7, 96, 1, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, "NOTSET", true, true},
      {1, 600, 7, 7, 50, 1, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, "NOTSET", false, false},
      {1, 130, 3, 3, 64, 1, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, "NOTSET", true, false},
      // On AVX2 also convs that are no plain 1x1, through their column matrix: 3x3 stride 2,
      // 1x1 stride 2, 3x3 dilation 2 to 7x7 outputs.
      {2, 128, 14, 14, 40, 3, 3, {2, 2}, {1, 1}, {1, 1, 1, 1}, "NOTSET", true, true},
      {1, 136, 13, 13, 33, 1, 1, {2, 2}, {1, 1}, {0, 0, 0, 0}, "NOTSET", false, false},
      {1, 128, 11, 11, 48, 3, 3, {1, 1}, {2, 2}, {0, 0, 0, 0}, "NOTSET", true, false},
  };
  for (int threads : {1, 2})
    for (const Case& c : cases) check(c, threads);
}

// Conv(x * s) with s per channel ([C,1,1], [1,C,1,1]) or per image and channel ([N,C,1,1]):
// the op scales its packed weights per run; it matches the plain op on the scaled input. 1x1
// direct with two K blocks and several M blocks, 3x3 padded and strided (im2col), with bias,
// the epilogue's residual and activation, 1 and 2 threads.
TEST(ConvGemm, InputScale) {
  struct ScaleCase {
    int64_t n, c, hw, co, k, stride;
    std::vector<int64_t> scale_dims;
  };
  const std::vector<ScaleCase> cases = {
      {1, 600, 6, 250, 1, 1, {1, 600, 1, 1}},
      {2, 24, 9, 10, 3, 2, {2, 24, 1, 1}},
      {2, 16, 7, 5, 3, 1, {16, 1, 1}},
      {1, 32, 14, 40, 1, 1, {32, 1, 1}},
      {2, 192, 7, 40, 1, 1, {2, 192, 1, 1}},  // pixels as rows: the packed W^T rows scaled
      {1, 128, 14, 40, 3, 2, {1, 128, 1, 1}},  // AVX2: pixels as rows of the column matrix, 9 rows a channel
  };
  for (int threads : {1, 2})
    for (const ScaleCase& cs : cases) {
      std::mt19937 rng(static_cast<unsigned>(cs.c * 5 + cs.co));
      std::uniform_real_distribution<float> dist(-1, 1);
      const int64_t ho = (cs.hw + 2 * (cs.k / 2) - cs.k) / cs.stride + 1;
      Tensor x(DType::kFloat32, {cs.n, cs.c, cs.hw, cs.hw}), w(DType::kFloat32, {cs.co, cs.c, cs.k, cs.k}),
          b(DType::kFloat32, {cs.co}), s(DType::kFloat32, cs.scale_dims), r(DType::kFloat32, {cs.n, cs.co, ho, ho});
      for (Tensor* t : {&x, &w, &b, &s, &r})
        for (int64_t i = 0; i < t->numel(); ++i) t->data<float>()[i] = dist(rng);
      Tensor xs(DType::kFloat32, x.dims());
      const int64_t plane = cs.hw * cs.hw;
      for (int64_t i = 0; i < x.numel(); ++i) {
        const int64_t img = i / (cs.c * plane), ch = i / plane % cs.c;
        const int64_t si = s.numel() == cs.c ? ch : img * cs.c + ch;
        xs.data<float>()[i] = x.data<float>()[i] * s.data<float>()[si];
      }
      gemm_ops::GemmDesc d = conv_test::residual_conv_desc(x, w, b, r, cs.stride, cs.k / 2);
      d.operands.push_back({true, DType::kFloat32, s.dims(), nullptr});
      d.epilogue_activation = static_cast<int32_t>(kernels::Activation::kSilu);
      gemm_ops::GemmDesc scaled = d;
      scaled.input_scale = 4;
      std::unique_ptr<gemm_ops::GemmOp> op = gemm_ops::make_gemm_op(scaled), plain = gemm_ops::make_gemm_op(d);
      ASSERT_TRUE(op);
      ASSERT_TRUE(plain);
      ThreadPool pool(threads);
      ScopedThreadPool scoped(&pool);
      RtValue xv(x), xsv(xs), rv(r), sv(s);
      const Tensor got = op->run({&xv, nullptr, nullptr, &rv, &sv});
      const Tensor want = plain->run({&xsv, nullptr, nullptr, &rv, nullptr});
      ASSERT_EQ(got.dims(), want.dims());
      for (int64_t i = 0; i < got.numel(); ++i) {
        const float v = want.data<float>()[i];
        ASSERT_NEAR(got.data<float>()[i], v, 1e-5 * cs.c * cs.k * cs.k * (1 + std::abs(v)))
            << "case c=" << cs.c << " co=" << cs.co << " at " << i << ", threads " << threads;
      }
    }
}

// The pixels-as-rows 1x1 conv with a residual: the GEMM stores bias only, then the transpose
// pass adds the residual and applies the clamp or the activation (in that order), per image.
TEST(ConvGemm, PixelRowsResidualEpilogue) {
  const int64_t n = 2, c = 144, hw = 7, co = 40, P = hw * hw;
  for (int act : {0, 1})
    for (int threads : {1, 2}) {
      std::mt19937 rng(static_cast<unsigned>(act * 7 + threads));
      std::uniform_real_distribution<float> dist(-1, 1);
      Tensor x(DType::kFloat32, {n, c, hw, hw}), w(DType::kFloat32, {co, c, 1, 1}), b(DType::kFloat32, {co}),
          r(DType::kFloat32, {n, co, hw, hw});
      for (Tensor* t : {&x, &w, &b, &r})
        for (int64_t i = 0; i < t->numel(); ++i) t->data<float>()[i] = dist(rng);
      gemm_ops::GemmDesc d = conv_test::residual_conv_desc(x, w, b, r);
      if (act) {
        d.epilogue_activation = static_cast<int32_t>(kernels::Activation::kSilu);
      } else {
        d.clamp_lo = -0.5f;
        d.clamp_hi = 0.75f;
      }
      std::unique_ptr<gemm_ops::GemmOp> op = gemm_ops::make_gemm_op(d);
      ASSERT_TRUE(op);
      ThreadPool pool(threads);
      ScopedThreadPool scoped(&pool);
      RtValue xv(x), rv(r);
      const Tensor got = op->run({&xv, nullptr, nullptr, &rv});
      for (int64_t img = 0; img < n; ++img)
        for (int64_t o = 0; o < co; ++o)
          for (int64_t p = 0; p < P; ++p) {
            double v = b.data<float>()[o] + r.data<float>()[(img * co + o) * P + p];
            for (int64_t k = 0; k < c; ++k)
              v += double(w.data<float>()[o * c + k]) * x.data<float>()[(img * c + k) * P + p];
            v = act ? v / (1 + std::exp(-v)) : std::min(std::max(v, -0.5), 0.75);
            ASSERT_NEAR(got.data<float>()[(img * co + o) * P + p], v, 1e-4 * (1 + std::abs(v)))
                << "image " << img << " channel " << o << " pixel " << p << ", act " << act << ", threads " << threads;
          }
    }
}

TEST(ConvGemm, InputScaleDeclines) {
  Tensor w(DType::kFloat32, {4, 2, 1, 1});
  gemm_ops::GemmDesc d;
  d.kind = gemm_ops::GemmKind::kConv;
  d.out_dims = {1, 4, 5, 5};
  d.out_dtype = DType::kFloat32;
  d.operands.push_back({true, DType::kFloat32, {1, 2, 5, 5}, nullptr});
  d.operands.push_back({true, DType::kFloat32, {4, 2, 1, 1}, &w});
  d.operands.push_back({});
  d.operands.push_back({true, DType::kFloat32, {1, 2, 1, 1}, nullptr});
  d.input_scale = 3;
  EXPECT_TRUE(gemm_ops::make_gemm_op(d));
  EXPECT_TRUE(gemm_ops::input_scale_pays(d));  // 4 weights per input channel, 25 pixels
  for (const std::vector<int64_t>& bad : std::vector<std::vector<int64_t>>{{1, 1, 1, 5}, {1, 2, 5, 5}, {2}, {3, 2, 1, 1}}) {
    gemm_ops::GemmDesc e = d;
    e.operands[3].dims = bad;  // broadcasts along other axes than the channels
    EXPECT_FALSE(gemm_ops::make_gemm_op(e));
  }
  gemm_ops::GemmDesc e = d;
  e.input_scale = 2;  // the node's own (absent) bias operand
  EXPECT_FALSE(gemm_ops::make_gemm_op(e));
  e = d;
  e.operands[1].constant = nullptr;  // run-time weights
  EXPECT_FALSE(gemm_ops::make_gemm_op(e));
  EXPECT_FALSE(gemm_ops::input_scale_pays(e));
  e = d;
  e.out_dims = {1, 40, 5, 5};  // more weights per channel (40) than pixels (25)
  Tensor w40(DType::kFloat32, {40, 2, 1, 1});
  e.operands[1] = {true, DType::kFloat32, {40, 2, 1, 1}, &w40};
  EXPECT_TRUE(gemm_ops::make_gemm_op(e));
  EXPECT_FALSE(gemm_ops::input_scale_pays(e));
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
