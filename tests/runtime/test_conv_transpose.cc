// ConvTranspose (runtime/conv_transpose.h) in the compiled executor vs the interpreter: strides
// 1-3, kernel = stride (no overlap), dilations, asymmetric pads, output_padding, output_shape
// (also larger than the full result: negative pads), auto_pad SAME, groups, one output channel
// (the single-task path), batch 2, bias, fused Relu and residual Add, a run-time weight (packed
// per run), 1 and 2 threads. Plus the op made from a GemmDesc.
#include <gtest/gtest.h>

#include <random>
#include <sstream>

#include "runtime/conv_transpose.h"
#include "../common/engines_agree.h"
#include "../common/random_const.h"

namespace kiln {
namespace {

using test::dims_text;
using test::rand_const;

struct Case {
  std::vector<int64_t> x, w;  // X [N, C, H, W], W [C, M/group, kh, kw]
  std::string attrs;
  std::vector<int64_t> y;      // planned output
  bool bias = false;
  std::string after;           // "", "relu" or "residual"
  bool runtime_weight = false;
};

std::string model(const Case& c, std::mt19937_64& rng) {
  std::ostringstream os;
  os << "graph @g(%x: f32[" << dims_text(c.x) << "]";
  if (c.runtime_weight) os << ", %w: f32[" << dims_text(c.w) << "]";
  if (c.after == "residual") os << ", %r: f32[" << dims_text(c.y) << "]";
  os << ") -> (%y: f32[" << dims_text(c.y) << "]) {\n";
  if (!c.runtime_weight) os << "  %w = " << rand_const(c.w, rng) << "\n";
  if (c.bias) os << "  %b = " << rand_const({c.y[1]}, rng) << "\n";
  const std::string out = c.after.empty() ? "%y" : "%t";
  os << "  " << out << " = ConvTranspose(%x, %w" << (c.bias ? ", %b" : "") << ")"
     << (c.attrs.empty() ? "" : " {" + c.attrs + "}") << " : f32[" << dims_text(c.y) << "]\n";
  if (c.after == "relu") os << "  %y = Relu(%t) : f32[" << dims_text(c.y) << "]\n";
  if (c.after == "residual") os << "  %y = Add(%t, %r) : f32[" << dims_text(c.y) << "]\n";
  os << "  return %y\n}";
  return os.str();
}

TEST(ConvTranspose, CompiledMatchesInterpreter) {
  const std::vector<Case> cases = {
      {{1, 16, 7, 7}, {16, 8, 4, 4}, "strides=[2, 2], pads=[1, 1, 1, 1]", {1, 8, 14, 14}, true, "relu"},
      {{2, 6, 5, 6}, {6, 3, 3, 3}, "group=2, strides=[2, 2], pads=[1, 0, 1, 2], output_padding=[1, 1]",
       {2, 6, 10, 12}, false, ""},
      {{1, 4, 6, 6}, {4, 5, 3, 3}, "strides=[3, 3], dilations=[2, 2]", {1, 5, 20, 20}, true, ""},
      {{1, 3, 5, 5}, {3, 2, 3, 3}, "strides=[2, 2], auto_pad=\"SAME_UPPER\"", {1, 2, 10, 10}, true, ""},
      {{1, 3, 5, 5}, {3, 2, 3, 3}, "strides=[2, 2], auto_pad=\"SAME_LOWER\"", {1, 2, 10, 10}, false, ""},
      {{1, 3, 5, 5}, {3, 2, 3, 3}, "strides=[2, 2], output_shape=[10, 9]", {1, 2, 10, 9}, true, ""},
      {{1, 2, 3, 3}, {2, 2, 3, 3}, "output_shape=[7, 7]", {1, 2, 7, 7}, true, ""},
      {{1, 32, 9, 9}, {32, 16, 2, 2}, "strides=[2, 2]", {1, 16, 18, 18}, true, "residual"},
      {{1, 8, 10, 10}, {8, 1, 3, 3}, "pads=[1, 1, 1, 1]", {1, 1, 10, 10}, true, "relu"},
      {{1, 5, 3, 3}, {5, 7, 1, 1}, "", {1, 7, 3, 3}, false, ""},
      {{1, 40, 17, 13}, {40, 24, 3, 3}, "strides=[2, 1], pads=[0, 1, 1, 0]", {1, 24, 34, 14}, true, ""},
  };
  for (int threads : {1, 2}) {
    std::mt19937_64 rng(7);
    for (const Case& c : cases) {
      const std::string text = model(c, rng);
      SCOPED_TRACE(text);
      const CompileStats s = test::engines_agree(text, threads, 3);
      EXPECT_EQ(s.fallback_nodes, 0);
      EXPECT_EQ(s.gemm_nodes, c.after.empty() ? 1 : 2);  // the GEMM op, with the Relu / Add
    }
  }
}

TEST(ConvTranspose, RunTimeWeight) {
  // Packed on every run: one executor, two runs with other weights.
  std::mt19937_64 rng(1);
  Model m = parse_model(model({{1, 4, 5, 5}, {4, 3, 3, 3}, "strides=[2, 2]", {1, 3, 11, 11}, true, "", true}, rng));
  PassContext ctx;
  run_passes(m, {"shape-inference", "fusion", "fuse-epilogues"}, ctx);
  Interpreter interp(m);
  CompiledOptions opts;
  opts.threads = 2;
  CompiledExecutor exec(m, opts);
  for (uint64_t seed : {3, 4}) {
    const std::vector<RtValue> feeds = test::random_feeds(m, seed);
    const Tensor want = interp.run(feeds)[0].tensor, got = exec.run(feeds)[0].tensor;
    ASSERT_EQ(got.dims(), want.dims());
    for (int64_t i = 0; i < got.numel(); ++i) ASSERT_NEAR(got.data<float>()[i], want.data<float>()[i], 1e-4) << i;
  }
  EXPECT_EQ(exec.stats().gemm_nodes, 1);
  EXPECT_EQ(exec.stats().fallback_nodes, 0);
}

TEST(ConvTranspose, MadeFromDescriptor) {
  // 2 -> 1 channels, 2x2 kernel, stride 2: each input pixel spreads over its own 2x2 output block.
  Tensor wt(DType::kFloat32, {2, 1, 2, 2});
  for (int64_t i = 0; i < wt.numel(); ++i) wt.data<float>()[i] = static_cast<float>(i + 1);
  Tensor bias(DType::kFloat32, {1});
  bias.data<float>()[0] = 0.5f;
  gemm_ops::GemmDesc d;
  d.kind = gemm_ops::GemmKind::kConvTranspose;
  d.strides = {2, 2};
  d.out_dims = {1, 1, 4, 2};
  d.out_dtype = DType::kFloat32;
  d.operands.resize(3);
  d.operands[0] = {true, DType::kFloat32, {1, 2, 2, 1}, nullptr};
  d.operands[1] = {true, DType::kFloat32, {2, 1, 2, 2}, &wt};
  d.operands[2] = {true, DType::kFloat32, {1}, &bias};
  auto op = conv_ops::make_conv_transpose_op(d);
  ASSERT_TRUE(op);
  Tensor x(DType::kFloat32, {1, 2, 2, 1});
  const float xs[] = {1, 2, 10, 20};  // channel 0: 1, 2; channel 1: 10, 20
  std::copy(xs, xs + 4, x.data<float>());
  RtValue xv(x);
  Tensor y = op->run({&xv, nullptr, nullptr});
  // y[oy][ox] = 0.5 + x0[iy] * w0[i][j] + x1[iy] * w1[i][j], iy = oy / 2, (i, j) = (oy % 2, ox).
  for (int64_t oy = 0; oy < 4; ++oy)
    for (int64_t ox = 0; ox < 2; ++ox) {
      const int64_t iy = oy / 2, tap = (oy % 2) * 2 + ox;
      const float want = 0.5f + xs[iy] * wt.data<float>()[tap] + xs[2 + iy] * wt.data<float>()[4 + tap];
      EXPECT_FLOAT_EQ(y.data<float>()[oy * 2 + ox], want) << oy << "," << ox;
    }
  // The same weight at run time (input 1).
  d.operands[1].constant = nullptr;
  auto runtime_op = conv_ops::make_conv_transpose_op(d);
  ASSERT_TRUE(runtime_op);
  RtValue wv(wt);
  Tensor y2 = runtime_op->run({&xv, &wv, nullptr});
  for (int64_t i = 0; i < y.numel(); ++i) EXPECT_EQ(y2.data<float>()[i], y.data<float>()[i]);
  d.operands[1].constant = &wt;
  // Declined: a channel count that disagrees, a Conv descriptor.
  d.out_dims = {1, 2, 4, 2};
  EXPECT_FALSE(conv_ops::make_conv_transpose_op(d));
  d.out_dims = {1, 1, 4, 2};
  d.kind = gemm_ops::GemmKind::kConv;
  EXPECT_FALSE(conv_ops::make_conv_transpose_op(d));
}

}  // namespace
}  // namespace kiln
