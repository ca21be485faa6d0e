// Tuned kernel choices (GemmDesc::choice, runtime/tuning_space.h's candidates): every candidate
// the tuner may pick computes the conv (against a double-precision naive conv) or the MatMul /
// Gemm (against the default kernel) on 1 and 2 threads; the choice text round-trips; which
// descriptors are tasks; the task key.
#include <gtest/gtest.h>

#include <random>

#include "runtime/tuning_space.h"
#include "conv_test_util.h"

namespace kiln {
namespace {

gemm_ops::GemmDesc desc_for(const conv_test::Case& cs, const Tensor* w) {
  gemm_ops::GemmDesc d;
  d.kind = gemm_ops::GemmKind::kConv;
  d.strides = cs.strides, d.dilations = cs.dilations, d.pads = cs.pads;
  const int64_t eh = (cs.kh - 1) * cs.dilations[0] + 1, ew = (cs.kw - 1) * cs.dilations[1] + 1;
  d.out_dims = {cs.n, cs.co, (cs.h + cs.pads[0] + cs.pads[2] - eh) / cs.strides[0] + 1,
                (cs.w + cs.pads[1] + cs.pads[3] - ew) / cs.strides[1] + 1};
  d.out_dtype = DType::kFloat32;
  d.operands.push_back({true, DType::kFloat32, {cs.n, cs.c, cs.h, cs.w}, nullptr});
  d.operands.push_back({true, DType::kFloat32, {cs.co, cs.c, cs.kh, cs.kw}, w});
  return d;
}

TEST(ConvTuning, EveryCandidateComputesTheConv) {
  const std::vector<conv_test::Case> cases = {
      {1, 24, 14, 13, 40, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, "NOTSET", true, false},   // Winograd-able
      {2, 16, 9, 9, 20, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, "NOTSET", false, false},    // batch 2, F(2x2) size
      {1, 32, 15, 16, 48, 3, 3, {2, 2}, {1, 1}, {1, 1, 1, 1}, "NOTSET", true, false},   // stride 2
      {1, 160, 7, 7, 36, 1, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, "NOTSET", true, false},    // 1x1 at 7x7
      {1, 40, 12, 11, 24, 1, 1, {2, 2}, {1, 1}, {0, 0, 0, 0}, "NOTSET", false, false},  // 1x1 stride 2
      {1, 8, 13, 12, 16, 5, 3, {1, 2}, {2, 1}, {2, 1, 3, 0}, "NOTSET", true, false},    // dilated, uneven pads
  };
  for (const auto& cs : cases)
    for (int threads : {1, 2}) {
      Tensor w(DType::kFloat32, {cs.co, cs.c, cs.kh, cs.kw});
      const std::vector<gemm_ops::KernelChoice> space = tune_space::candidates(desc_for(cs, &w), threads);
      ASSERT_GT(space.size(), 5u);
      EXPECT_TRUE(space[0].is_default());
      for (const gemm_ops::KernelChoice& choice : space) {
        SCOPED_TRACE(gemm_ops::to_string(choice) + ", " + std::to_string(threads) + " thread(s), c=" +
                     std::to_string(cs.c) + " k=" + std::to_string(cs.kh));
        const bool winograd = choice.algo == gemm_ops::ConvAlgo::kWinograd2 || choice.algo == gemm_ops::ConvAlgo::kWinograd4;
        conv_test::check_conv(
            cs, threads,
            [&](const gemm_ops::GemmDesc& d, bool) {
              gemm_ops::GemmDesc tuned = d;
              tuned.choice = choice;
              return gemm_ops::make_gemm_op(tuned);
            },
            winograd ? 1e-3 : 1e-4, winograd ? 1e-5 : 0);
      }
    }
}

TEST(GemmTuning, EveryCandidateComputesTheProduct) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uni(-1, 1);
  struct Shape {
    gemm_ops::GemmKind kind;
    std::vector<int64_t> a, b, y;
    bool trans_b;
  };
  for (const Shape& s : {Shape{gemm_ops::GemmKind::kMatMul, {2, 37, 70}, {70, 100}, {2, 37, 100}, false},
                         Shape{gemm_ops::GemmKind::kGemm, {29, 64}, {48, 64}, {29, 48}, true}}) {
    Tensor a(DType::kFloat32, s.a), b(DType::kFloat32, s.b);
    for (Tensor* t : {&a, &b})
      for (int64_t i = 0; i < t->numel(); ++i) t->data<float>()[i] = uni(rng);
    gemm_ops::GemmDesc d;
    d.kind = s.kind;
    d.trans_b = s.trans_b;
    d.out_dims = s.y;
    d.out_dtype = DType::kFloat32;
    d.operands.push_back({true, DType::kFloat32, s.a, nullptr});
    d.operands.push_back({true, DType::kFloat32, s.b, &b});
    if (s.kind == gemm_ops::GemmKind::kGemm) d.operands.push_back({});
    ASSERT_TRUE(tune_space::tunable(d));
    RtValue av(a), bv(b);
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      ScopedThreadPool scoped(&pool);
      const Tensor want = gemm_ops::make_gemm_op(d)->run({&av, &bv, nullptr}).clone();
      const std::vector<gemm_ops::KernelChoice> space = tune_space::candidates(d, threads);
      ASSERT_GT(space.size(), 5u);
      for (const gemm_ops::KernelChoice& choice : space) {
        gemm_ops::GemmDesc tuned = d;
        tuned.choice = choice;
        const Tensor got = gemm_ops::make_gemm_op(tuned)->run({&av, &bv, nullptr});
        ASSERT_EQ(got.dims(), want.dims());
        for (int64_t i = 0; i < got.numel(); ++i)
          ASSERT_NEAR(got.data<float>()[i], want.data<float>()[i], 1e-5) << gemm_ops::to_string(choice) << " at " << i;
      }
    }
  }
}

TEST(ConvTuning, ChoiceTextRoundTrips) {
  Tensor w(DType::kFloat32, {40, 24, 3, 3});
  const conv_test::Case cs{1, 24, 14, 13, 40, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, "NOTSET", false, false};
  for (const auto& c : tune_space::candidates(desc_for(cs, &w), 2)) {
    gemm_ops::KernelChoice back;
    ASSERT_TRUE(gemm_ops::parse_kernel_choice(gemm_ops::to_string(c), &back)) << gemm_ops::to_string(c);
    EXPECT_EQ(back, c) << gemm_ops::to_string(c);
  }
  gemm_ops::KernelChoice c;
  EXPECT_EQ(gemm_ops::to_string(c), "default");
  EXPECT_TRUE(gemm_ops::parse_kernel_choice("mr=12 split=2x1", &c));
  EXPECT_EQ(c.mr, 12);
  for (const char* bad : {"", "algo=fft", "algo=default", "mr=0", "algo=gemm mr=x", "algo=gemm split=2", "algo=gemm split=0x1",
                          "algo=gemm extra=1", "algo=gemm mr=123456"})
    EXPECT_FALSE(gemm_ops::parse_kernel_choice(bad, &c)) << bad;
}

TEST(ConvTuning, WhichConvsAreTasks) {
  Tensor w3(DType::kFloat32, {40, 24, 3, 3}), dw(DType::kFloat32, {24, 1, 3, 3}), stem(DType::kFloat32, {32, 3, 3, 3});
  const conv_test::Case cs{1, 24, 14, 13, 40, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, "NOTSET", false, false};
  gemm_ops::GemmDesc d = desc_for(cs, &w3);
  EXPECT_TRUE(tune_space::tunable(d));
  EXPECT_EQ(gemm_ops::tuning_key(d), "Conv f32 x1x24x14x13 w40x24x3x3 s1x1 d1x1 p1x1x1x1 g1");
  // The epilogue and the choice do not change the key.
  gemm_ops::GemmDesc fused = d;
  fused.clamp_lo = 0;
  fused.choice.algo = gemm_ops::ConvAlgo::kGemm;
  EXPECT_EQ(gemm_ops::tuning_key(fused), gemm_ops::tuning_key(d));
  // Depthwise (group = channels), a stem (3 channels, stride 2): their own kernels, no task.
  gemm_ops::GemmDesc depthwise = desc_for({1, 24, 14, 13, 24, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, "NOTSET", false, false}, &dw);
  depthwise.group = 24;
  depthwise.operands[1].dims = {24, 1, 3, 3};
  EXPECT_FALSE(tune_space::tunable(depthwise));
  EXPECT_TRUE(tune_space::candidates(depthwise, 1).empty());
  EXPECT_FALSE(tune_space::tunable(desc_for({1, 3, 32, 32, 32, 3, 3, {2, 2}, {1, 1}, {1, 1, 1, 1}, "NOTSET", false, false}, &stem)));
  gemm_ops::GemmDesc empty;
  EXPECT_EQ(gemm_ops::tuning_key(empty), "");
  // A single-row MatMul is a GEMV (its own op): no task; a batched one (3-D B): none either.
  gemm_ops::GemmDesc gemv;
  gemv.operands = {{true, DType::kFloat32, {1, 64}, nullptr}, {true, DType::kFloat32, {64, 32}, &w3}};
  EXPECT_FALSE(tune_space::tunable(gemv));
  gemv.operands[0].dims = {8, 64};
  EXPECT_TRUE(tune_space::tunable(gemv));
  EXPECT_EQ(gemm_ops::tuning_key(gemv), "MatMul f32 a8x64 b64x32");
  gemv.operands[1].dims = {4, 64, 32};
  EXPECT_FALSE(tune_space::tunable(gemv));
}

}  // namespace
}  // namespace kiln
