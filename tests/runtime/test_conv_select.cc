// Conv op selection (runtime/conv_select.h): which descriptors get the depthwise, Winograd and
// GEMM conv ops and which are left to gemm_ops' ConvOp; and a Winograd-sized conv + Relu through
// the compiled executor against the interpreter (Winograd on AVX-512 machines).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

#include "ir/text.h"
#include "pass/pass.h"
#include "driver/compiled_executor.h"
#include "runtime/conv_select.h"
#include "runtime/conv_winograd.h"
#include "runtime/interpreter.h"
#include "../common/random_const.h"

namespace kiln {
namespace {

gemm_ops::GemmDesc conv_desc(std::vector<int64_t> x, std::vector<int64_t> w, std::vector<int64_t> y, int64_t group,
                             const Tensor* weight) {
  gemm_ops::GemmDesc d;
  d.kind = gemm_ops::GemmKind::kConv;
  d.group = group;
  const int64_t p = w[2] / 2;
  d.pads = {p, p, p, p};
  d.out_dims = y;
  d.out_dtype = DType::kFloat32;
  d.operands.push_back({true, DType::kFloat32, x, nullptr});
  d.operands.push_back({true, DType::kFloat32, w, weight});
  return d;
}

TEST(ConvSelect, ChoosesByShape) {
  Tensor w3(DType::kFloat32, {64, 64, 3, 3}), w3s(DType::kFloat32, {16, 16, 3, 3}), wd(DType::kFloat32, {64, 1, 3, 3});
  // 56x56, 14x14 or 7x7, 64 or 16 channels: Winograd (F(2x2) at 7x7); 5x5 and 4x4: GEMM.
  EXPECT_TRUE(conv_ops::winograd_preferred(conv_desc({1, 64, 56, 56}, {64, 64, 3, 3}, {1, 64, 56, 56}, 1, &w3)));
  EXPECT_TRUE(conv_ops::winograd_preferred(conv_desc({1, 64, 14, 14}, {64, 64, 3, 3}, {1, 64, 14, 14}, 1, &w3)));
  EXPECT_TRUE(conv_ops::winograd_preferred(conv_desc({1, 16, 56, 56}, {16, 16, 3, 3}, {1, 16, 56, 56}, 1, &w3s)));
  EXPECT_TRUE(conv_ops::winograd_preferred(conv_desc({1, 64, 7, 7}, {64, 64, 3, 3}, {1, 64, 7, 7}, 1, &w3)));
  EXPECT_EQ(conv_ops::winograd_tile(conv_desc({1, 64, 7, 7}, {64, 64, 3, 3}, {1, 64, 7, 7}, 1, &w3)), 2);
  EXPECT_EQ(conv_ops::winograd_tile(conv_desc({1, 64, 14, 14}, {64, 64, 3, 3}, {1, 64, 14, 14}, 1, &w3)), 4);
  EXPECT_FALSE(conv_ops::winograd_preferred(conv_desc({1, 64, 5, 5}, {64, 64, 3, 3}, {1, 64, 5, 5}, 1, &w3)));
  EXPECT_TRUE(conv_ops::make_conv_op(conv_desc({1, 64, 56, 56}, {64, 64, 3, 3}, {1, 64, 56, 56}, 1, &w3)));
  EXPECT_TRUE(conv_ops::make_conv_op(conv_desc({1, 64, 14, 14}, {64, 64, 3, 3}, {1, 64, 14, 14}, 1, &w3)));
  EXPECT_TRUE(conv_ops::make_conv_op(conv_desc({1, 64, 14, 14}, {64, 1, 3, 3}, {1, 64, 14, 14}, 64, &wd)));
  // Run-time weights of a group-1 conv and grouped (non-depthwise) convs: not covered here.
  EXPECT_FALSE(conv_ops::make_conv_op(conv_desc({1, 64, 14, 14}, {64, 64, 3, 3}, {1, 64, 14, 14}, 1, nullptr)));
  Tensor wg(DType::kFloat32, {64, 32, 3, 3});
  EXPECT_FALSE(conv_ops::make_conv_op(conv_desc({1, 64, 14, 14}, {64, 32, 3, 3}, {1, 64, 14, 14}, 2, &wg)));
}

std::string rand_const(const std::vector<int64_t>& dims, std::mt19937_64& rng) {
  return test::rand_const(dims, rng, 0.2);
}

TEST(ConvSelect, LargeConvInExecutorMatchesInterpreter) {
  std::mt19937_64 rng(3);
  const std::string text = "graph @g(%x: f32[1,32,29,27]) -> (%y: f32[1,40,29,27]) {\n  %w = " +
                           rand_const({40, 32, 3, 3}, rng) + "\n  %b = " + rand_const({40}, rng) +
                           "\n  %c = Conv(%x, %w, %b) {pads=[1, 1, 1, 1]} : f32[1,40,29,27]\n"
                           "  %y = Relu(%c) : f32[1,40,29,27]\n  return %y\n}";
  Model m = parse_model(text);
  PassContext ctx;
  run_passes(m, {"shape-inference", "fusion", "fuse-epilogues"}, ctx);
  Tensor x(DType::kFloat32, {1, 32, 29, 27});
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  for (int64_t i = 0; i < x.numel(); ++i) x.set_double(i, uni(rng));
  std::vector<RtValue> feeds{RtValue(x)};
  auto want = Interpreter(m).run(feeds);
  for (int threads : {1, 2}) {
    CompiledOptions opts;
    opts.threads = threads;
    CompiledExecutor exec(m, opts);
    auto got = exec.run(feeds);
    EXPECT_EQ(exec.stats().gemm_nodes, 2);  // the Conv and its Relu (fused epilogue)
    ASSERT_EQ(got[0].tensor.dims(), want[0].tensor.dims());
    double max_err = 0, max_ref = 0;
    for (int64_t i = 0; i < got[0].tensor.numel(); ++i) {
      max_err = std::max(max_err, std::fabs(got[0].tensor.get_double(i) - want[0].tensor.get_double(i)));
      max_ref = std::max(max_ref, std::fabs(want[0].tensor.get_double(i)));
    }
    // F(4x4, 3x3) rounds differently from the direct sum: up to ~1e-4 of the output's range
    // (the direct GEMM path stays within 1e-5).
    EXPECT_LT(max_err, 1e-4 * std::max(1.0, max_ref)) << threads << " thread(s)";
  }
}

}  // namespace
}  // namespace kiln
