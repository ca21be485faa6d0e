// Compiled executor vs the interpreter for the sliding-window lowerings of ops/lower/pool.cc:
// MaxPool (float and bytes), AveragePool and depthwise Conv on odd sizes, strides 1 and 2, pads, auto_pad,
// ceil_mode and dilations (allclose rtol 1e-4, atol 1e-5), plus the configurations that decline.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ir/text.h"
#include "pass/pass.h"
#include "driver/compiled_executor.h"
#include "runtime/interpreter.h"

namespace kiln {
namespace {

Model prepare_pool(const std::string& text) {
  Model m = parse_model(text);
  PassContext ctx;
  run_passes(m, {"shape-inference", "fusion", "fuse-epilogues"}, ctx);
  return m;
}

CompileStats check_pool(const std::string& text, uint64_t seed = 7) {
  Model m = prepare_pool(text);
  Interpreter interp(m);
  CompiledExecutor exec(m, CompiledOptions{});
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uni(-2.0, 2.0);
  std::vector<RtValue> feeds;
  for (const Value* v : m.graph->inputs) {
    Tensor t(v->type.dtype, v->type.shape->sizes());
    for (int64_t i = 0; i < t.numel(); ++i) t.set_double(i, uni(rng));
    feeds.emplace_back(std::move(t));
  }
  auto want = interp.run(feeds);
  auto got = exec.run(feeds);
  EXPECT_EQ(got.size(), want.size()) << text;
  for (size_t k = 0; k < got.size() && k < want.size(); ++k) {
    const Tensor& a = got[k].tensor;
    const Tensor& b = want[k].tensor;
    EXPECT_EQ(a.dims(), b.dims()) << text;
    if (a.dims() != b.dims()) continue;
    for (int64_t i = 0; i < a.numel(); ++i) {
      double x = a.get_double(i), y = b.get_double(i);
      if (std::fabs(x - y) > 1e-5 + 1e-4 * std::fabs(y)) {
        ADD_FAILURE() << text << "\noutput " << k << " [" << i << "]: " << x << " vs " << y;
        break;
      }
    }
  }
  return exec.stats();
}

// One single-node graph `y = op(x[, w, b]) {attrs}` with the output shape the interpreter infers.
std::string graph(const std::string& op, const std::string& x, const std::string& attrs,
                  const std::string& extra_inputs = "", const std::string& args = "") {
  return "model ir=8 opsets={\"\": 19}\ngraph @g(%x: f32" + x + extra_inputs + ") -> (%y: f32[...]) {\n  %y = " + op +
         "(%x" + args + ") {" + attrs + "} : f32[...]\n  return %y\n}";
}

TEST(CompiledPool, MaxPoolVariants) {
  const char* cases[] = {
      "kernel_shape=[3, 3]",
      "kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]",
      "kernel_shape=[2, 3], strides=[2, 1], pads=[0, 1, 1, 0]",
      "kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1",
      "kernel_shape=[2, 2], strides=[2, 2], pads=[1, 0, 0, 1], ceil_mode=1",
      "kernel_shape=[3, 2], dilations=[2, 2], pads=[2, 1, 2, 1]",
      "kernel_shape=[3, 3], strides=[2, 2], auto_pad=\"SAME_UPPER\"",
      "kernel_shape=[4, 4], strides=[2, 2], auto_pad=\"SAME_LOWER\"",
      "kernel_shape=[3, 3], strides=[2, 2], auto_pad=\"VALID\"",
  };
  for (const char* a : cases) {
    auto s = check_pool(graph("MaxPool", "[2,3,11,9]", a));
    EXPECT_EQ(s.fallback_nodes, 0) << a;
    EXPECT_EQ(s.generated_nodes, 1) << a;
  }
}

// MaxPool on uint8 / int8 (a quantized model's pool, qdq-to-integer) is a generated kernel too:
// exact over the whole byte range, pads never winning (the dtype's least value, not -inf).
TEST(CompiledPool, MaxPoolOnBytes) {
  for (const char* type : {"u8", "i8"})
    for (const char* a : {"kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]", "kernel_shape=[2, 3], pads=[1, 1, 0, 2]"}) {
      const std::string t = type;
      Model m = prepare_pool("model ir=8 opsets={\"\": 13}\ngraph @g(%x: " + t + "[2,3,11,9]) -> (%y: " + t +
                             "[...]) {\n  %y = MaxPool(%x) {" + a + "} : " + t + "[...]\n  return %y\n}");
      Tensor x(t == "u8" ? DType::kUInt8 : DType::kInt8, {2, 3, 11, 9});
      std::mt19937_64 rng(3);
      for (int64_t i = 0; i < x.numel(); ++i) x.set_double(i, t == "u8" ? double(rng() % 256) : double(int(rng() % 256) - 128));
      // int8: the first plane's top rows all negative, so that its border windows' max is below
      // 0 (a pad read as 0 would win there).
      if (t == "i8")
        for (int64_t i = 0; i < 3 * 9; ++i) x.set_double(i, -100.0 - double(i % 20));
      Interpreter interp(m);
      CompiledExecutor exec(m, CompiledOptions{});
      const Tensor want = interp.run({RtValue(x)})[0].tensor, got = exec.run({RtValue(x)})[0].tensor;
      ASSERT_EQ(got.dims(), want.dims()) << a;
      ASSERT_EQ(got.dtype(), want.dtype()) << a;
      for (int64_t i = 0; i < want.numel(); ++i) ASSERT_EQ(got.get_double(i), want.get_double(i)) << type << " " << a << " at " << i;
      EXPECT_EQ(exec.stats().fallback_nodes, 0) << a;
    }
}

TEST(CompiledPool, AveragePoolVariants) {
  const char* cases[] = {
      "kernel_shape=[3, 3]",
      "kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]",
      "kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1",
      "kernel_shape=[2, 3], strides=[2, 1], pads=[0, 1, 1, 0], count_include_pad=1",
      "kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1",
      "kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1",
      "kernel_shape=[3, 3], strides=[2, 2], auto_pad=\"SAME_UPPER\", count_include_pad=1",
      "kernel_shape=[3, 3], strides=[2, 2], auto_pad=\"SAME_LOWER\"",
      "kernel_shape=[3, 2], dilations=[2, 2], pads=[2, 1, 2, 1]",
  };
  for (const char* a : cases) {
    auto s = check_pool(graph("AveragePool", "[2,3,11,9]", a));
    EXPECT_EQ(s.fallback_nodes, 0) << a;
  }
}

TEST(CompiledPool, DepthwiseConvVariants) {
  const char* cases[] = {
      "group=5",
      "group=5, pads=[1, 1, 1, 1]",
      "group=5, strides=[2, 2], pads=[1, 1, 1, 1]",
      "group=5, strides=[2, 1], pads=[0, 1, 2, 0]",
      "group=5, dilations=[2, 2], pads=[2, 2, 2, 2]",
      "group=5, strides=[2, 2], auto_pad=\"SAME_UPPER\"",
      "group=5, strides=[2, 2], auto_pad=\"SAME_LOWER\"",
      "group=5, kernel_shape=[3, 3], strides=[2, 2], auto_pad=\"VALID\"",
  };
  for (const char* a : cases) {
    auto s = check_pool(graph("Conv", "[2,5,13,11]", a, ", %w: f32[5,1,3,3], %b: f32[5]", ", %w, %b"));
    EXPECT_EQ(s.fallback_nodes, 0) << a;
    // f32 depthwise convs run the hand-written kernel (runtime/conv_depthwise.h) as a GemmOp.
    EXPECT_EQ(s.gemm_nodes, 1) << a;
    auto s2 = check_pool(graph("Conv", "[1,5,9,10]", a, ", %w: f32[5,1,3,3]", ", %w"));
    EXPECT_EQ(s2.fallback_nodes, 0) << a;
  }
  auto s5 = check_pool(graph("Conv", "[1,6,17,12]", "group=6, strides=[2, 2], pads=[2, 1, 2, 3]",
                             ", %w: f32[6,1,5,4], %b: f32[6]", ", %w, %b"));
  EXPECT_EQ(s5.fallback_nodes, 0);
}

TEST(CompiledPool, DepthwiseConvWithEpilogue) {
  auto s = check_pool(R"(model ir=8 opsets={"": 13}
  graph @g(%x: f32[1,8,15,15]) -> (%y: f32[1,8,8,8]) {
    %w = const f32[8,1,3,3] [0.1, -0.2, 0.3, 0.4, 0.5, -0.6, 0.7, 0.8, 0.9, 0.1, -0.2, 0.3, 0.4, 0.5, -0.6, 0.7, 0.8, 0.9, 0.1, -0.2, 0.3, 0.4, 0.5, -0.6, 0.7, 0.8, 0.9, 0.1, -0.2, 0.3, 0.4, 0.5, -0.6, 0.7, 0.8, 0.9, 0.1, -0.2, 0.3, 0.4, 0.5, -0.6, 0.7, 0.8, 0.9, 0.1, -0.2, 0.3, 0.4, 0.5, -0.6, 0.7, 0.8, 0.9, 0.1, -0.2, 0.3, 0.4, 0.5, -0.6, 0.7, 0.8, 0.9, 0.1, -0.2, 0.3, 0.4, 0.5, -0.6, 0.7, 0.8, 0.9]
    %b = const f32[8] [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]
    %lo = const f32[] [0]
    %hi = const f32[] [6]
    %c = Conv(%x, %w, %b) {group=8, strides=[2, 2], pads=[1, 1, 1, 1]} : f32[1,8,8,8]
    %y = Clip(%c, %lo, %hi) : f32[1,8,8,8]
    return %y
  })");
  EXPECT_EQ(s.fallback_nodes, 0);
  EXPECT_EQ(s.gemm_nodes, 2);  // the Clip runs in the depthwise op's epilogue
}

TEST(CompiledPool, Declines) {
  // MaxPool with its Indices output, 1-D pooling and grouped (non-depthwise) Conv run their
  // reference kernels.
  auto s = check_pool(R"(model ir=8 opsets={"": 13}
  graph @g(%x: f32[1,2,7,7]) -> (%y: f32[1,2,3,3], %i: i64[1,2,3,3]) {
    %y, %i = MaxPool(%x) {kernel_shape=[3, 3], strides=[2, 2]} : f32[1,2,3,3], i64[1,2,3,3]
    return %y, %i
  })");
  EXPECT_EQ(s.fallback_nodes, 1);
  auto s1 = check_pool(graph("MaxPool", "[2,3,11]", "kernel_shape=[3], strides=[2]"));
  EXPECT_EQ(s1.fallback_nodes, 1);
  auto s2 = check_pool(graph("Conv", "[1,4,7,7]", "group=2", ", %w: f32[4,2,3,3]", ", %w"));
  EXPECT_EQ(s2.generated_nodes, 0);
}

}  // namespace
}  // namespace kiln
