// The oneDNN backend against the reference interpreter, op family by op family, over edge-case
// shapes and attributes, at 1 and 2 threads; each case must offload something.
#include <gtest/gtest.h>

#include "offload_test_util.h"
#include "kiln/extension.h"

namespace kiln {
namespace {

using test::const_line;

bool have_dnnl() {
  register_builtin_backends();
  return ext::find_backend("dnnl") != nullptr;
}

void expect_offloaded(const std::string& text, int threads = 1) {
  const CompileStats s = test::offload_agrees(text, {"dnnl"}, threads);
  EXPECT_GT(s.external_nodes, 0) << text;
}

std::string dims_text(const std::vector<int64_t>& d) {
  std::string s = "f32[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

struct ConvCase {
  int64_t c_in, c_out, group, k, stride, pad_lo, pad_hi, dilation;
  std::string extra;  // attributes (auto_pad)
};

TEST(DnnlBackend, ConvolutionsWithPostOps) {
  if (!have_dnnl()) GTEST_SKIP() << "built without oneDNN";
  const ConvCase cases[] = {
      {3, 8, 1, 3, 1, 1, 1, 1, ""},  {8, 8, 8, 3, 2, 1, 1, 1, ""},  // depthwise, stride 2
      {8, 6, 2, 3, 1, 0, 2, 2, ""},  // grouped, asymmetric pads, dilation 2
      {6, 16, 1, 1, 1, 0, 0, 1, ""},  {5, 7, 1, 5, 3, 0, 0, 1, ", auto_pad=\"SAME_UPPER\""},
      {4, 4, 1, 2, 2, 0, 0, 1, ", auto_pad=\"SAME_LOWER\""},
      {4, 6, 1, 3, 2, 0, 0, 1, ""},  // stride 2 over 9x11 without padding: the last row is dropped
  };
  int seed = 1;
  for (const ConvCase& c : cases) {
    for (int variant = 0; variant < 3; ++variant) {
      const std::vector<int64_t> x = {2, c.c_in, 9, 11};
      std::string pads = c.extra.empty() ? ", pads=[" + std::to_string(c.pad_lo) + ", " + std::to_string(c.pad_lo) + ", " +
                                               std::to_string(c.pad_hi) + ", " + std::to_string(c.pad_hi) + "]"
                                         : c.extra;
      std::string attrs = "{group=" + std::to_string(c.group) + ", strides=[" + std::to_string(c.stride) + ", " +
                          std::to_string(c.stride) + "], dilations=[" + std::to_string(c.dilation) + ", " +
                          std::to_string(c.dilation) + "]" + pads + "}";
      std::string body = const_line("w", {c.c_out, c.c_in / c.group, c.k, c.k}, seed);
      body += const_line("b", {c.c_out}, seed + 1) + "  %c = Conv(%x, %w, %b) " + attrs + "\n";
      seed += 2;
      std::string out = "%c";
      if (variant == 1) {  // relu post-op
        body += "  %y = Relu(%c)\n";
        out = "%y";
      } else if (variant == 2) {  // sigmoid, then a Mul by a constant scalar (a linear post-op)
        body += const_line("s", {}, seed++) + "  %t = Sigmoid(%c)\n  %y = Mul(%t, %s)\n";
        out = "%y";
      }
      const std::string text = "graph @main(%x: " + dims_text(x) + ") -> (" + out + ": ?[...]) {\n" + body + "  return " + out + "\n}\n";
      SCOPED_TRACE(text);
      expect_offloaded(text, variant == 0 ? 2 : 1);
    }
  }
}

TEST(DnnlBackend, ResidualAddInPlaceAndCopied) {
  if (!have_dnnl()) GTEST_SKIP() << "built without oneDNN";
  // %a feeds both convs: the second conv's residual (%a) is still read later, so it is copied;
  // %r's residual (%c1) dies there, so the conv accumulates into its buffer.
  const std::string text = "graph @main(%x: f32[1,16,7,7]) -> (%y: ?[...], %z: ?[...]) {\n" + const_line("w1", {16, 16, 3, 3}, 11) +
                           const_line("w2", {16, 16, 1, 1}, 12) +
                           "  %a = Relu(%x)\n"
                           "  %c1 = Conv(%a, %w1) {pads=[1, 1, 1, 1]}\n"
                           "  %c2 = Conv(%c1, %w2)\n"
                           "  %s = Add(%c2, %c1)\n"
                           "  %r = Relu(%s)\n"
                           "  %c3 = Conv(%r, %w2)\n"
                           "  %y = Add(%c3, %a)\n"
                           "  %z = Add(%a, %r)\n"
                           "  return %y, %z\n}\n";
  expect_offloaded(text);
  expect_offloaded(text, 2);
}

TEST(DnnlBackend, Pooling) {
  if (!have_dnnl()) GTEST_SKIP() << "built without oneDNN";
  const char* pools[] = {
      "MaxPool(%x) {kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]}",
      "MaxPool(%x) {kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1}",
      "AveragePool(%x) {kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]}",
      "AveragePool(%x) {kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1}",
      "AveragePool(%x) {kernel_shape=[2, 3], strides=[1, 2], auto_pad=\"SAME_UPPER\"}",
      "AveragePool(%x) {kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1}",
      "MaxPool(%x) {kernel_shape=[2, 2], strides=[3, 3]}",  // the last rows and columns are never read
      "GlobalAveragePool(%x)",
      "GlobalMaxPool(%x)",
  };
  for (const char* p : pools) {
    const std::string text = std::string("graph @main(%x: f32[2,5,10,9]) -> (%y: ?[...]) {\n  %y = ") + p + "\n  return %y\n}\n";
    SCOPED_TRACE(text);
    expect_offloaded(text);
  }
}

TEST(DnnlBackend, MatMulAndGemm) {
  if (!have_dnnl()) GTEST_SKIP() << "built without oneDNN";
  struct Case {
    std::vector<int64_t> a, b;
    bool b_const;
  };
  const Case cases[] = {{{3, 5, 7}, {7, 4}, true},          // a weight: rows folded
                        {{2, 3, 5, 7}, {2, 3, 7, 4}, false},  // batched, both computed
                        {{5, 7}, {2, 7, 4}, false},           // A broadcast over B's batch
                        {{2, 1, 5, 7}, {3, 7, 4}, false},     // batch dims broadcast both ways
                        {{1, 7}, {7, 1}, true}};
  int seed = 40;
  for (const Case& c : cases) {
    std::string text = "graph @main(%a: " + dims_text(c.a) + (c.b_const ? "" : ", %b: " + dims_text(c.b)) + ") -> (%y: ?[...]) {\n";
    if (c.b_const) text += const_line("b", c.b, seed++);
    text += const_line("bias", {c.b.back()}, seed++) +
            "  %m = MatMul(%a, %b)\n  %s = Add(%m, %bias)\n  %y = Tanh(%s)\n  return %y\n}\n";
    SCOPED_TRACE(text);
    expect_offloaded(text, 2);
  }
  for (int trans_b = 0; trans_b < 2; ++trans_b) {
    const std::string text = "graph @main(%a: f32[3,6]) -> (%y: ?[...]) {\n" +
                             const_line("w", trans_b ? std::vector<int64_t>{5, 6} : std::vector<int64_t>{6, 5}, 50) +
                             const_line("c", {5}, 51) + "  %g = Gemm(%a, %w, %c) {transB=" + std::to_string(trans_b) +
                             "}\n  %y = Relu(%g)\n  return %y\n}\n";
    SCOPED_TRACE(text);
    expect_offloaded(text);
  }
}

TEST(DnnlBackend, ElementwiseAndBinary) {
  if (!have_dnnl()) GTEST_SKIP() << "built without oneDNN";
  const char* unary[] = {"Relu(%x)", "Sigmoid(%x)", "Tanh(%x)", "Exp(%x)", "Abs(%x)", "Neg(%x)",
                         "Elu(%x) {alpha=0.7}", "LeakyRelu(%x) {alpha=0.2}", "Clip(%x, %lo, %hi)",
                         "HardSigmoid(%x) {alpha=0.3, beta=0.4}", "HardSwish(%x)"};
  for (const char* u : unary) {
    const std::string text = std::string("graph @main(%x: f32[2,3,4,5]) -> (%y: ?[...]) {\n") + const_line("lo", {}, 1, -0.5, -0.5) +
                             const_line("hi", {}, 2, 0.25, 0.25) + "  %y = " + u + "\n  return %y\n}\n";
    SCOPED_TRACE(text);
    expect_offloaded(text);
  }
  const char* binary[] = {"Add(%x, %z)", "Mul(%x, %v)", "Sub(%x, %v)", "Div(%x, %v)", "Max(%v, %x)", "Min(%x, %c)"};
  for (const char* b : binary) {
    const std::string text = std::string("graph @main(%x: f32[2,3,4,5], %z: f32[2,3,4,5], %v: f32[5]) -> (%y: ?[...]) {\n") +
                             const_line("c", {3, 1, 1}, 3) + "  %y = " + b + "\n  return %y\n}\n";
    SCOPED_TRACE(text);
    expect_offloaded(text);
  }
}

TEST(DnnlBackend, NormalizationSoftmaxAndReshapes) {
  if (!have_dnnl()) GTEST_SKIP() << "built without oneDNN";
  const std::string bn = "graph @main(%x: f32[2,4,5,3]) -> (%y: ?[...]) {\n" + const_line("s", {4}, 1) + const_line("b", {4}, 2) +
                         const_line("m", {4}, 3) + const_line("v", {4}, 4, 0.5, 2.0) +
                         "  %y = BatchNormalization(%x, %s, %b, %m, %v) {epsilon=0.001}\n  return %y\n}\n";
  expect_offloaded(bn);
  const std::string ln = "model ir=8 opsets={\"\": 17}\ngraph @main(%x: f32[2,6,8]) -> (%y: ?[...]) {\n" + const_line("g", {8}, 5) +
                         const_line("b", {8}, 6) +
                         "  %y = LayerNormalization(%x, %g, %b) {axis=-1, epsilon=0.00001}\n  return %y\n}\n";
  expect_offloaded(ln);
  const std::string sm = "graph @main(%x: f32[2,3,7]) -> (%y: ?[...]) {\n  %y = Softmax(%x) {axis=-1}\n  return %y\n}\n";
  expect_offloaded(sm);
  // A reshape and a flatten between ops that run on oneDNN, in a region with a blocked conv.
  const std::string rs = "graph @main(%x: f32[1,8,4,4]) -> (%y: ?[...]) {\n" + const_line("w", {8, 8, 3, 3}, 7) +
                         "  %shape = const i64[3] [1, 8, 16]\n"
                         "  %c = Conv(%x, %w) {pads=[1, 1, 1, 1]}\n"
                         "  %r = Reshape(%c, %shape)\n"
                         "  %s = Softmax(%r) {axis=-1}\n"
                         "  %f = Flatten(%s) {axis=1}\n"
                         "  %y = Relu(%f)\n"
                         "  return %y\n}\n";
  expect_offloaded(rs, 2);
  // Concat of a blocked conv output and a plain input, and along the last axis.
  const std::string cat = "graph @main(%x: f32[1,8,5,5], %z: f32[1,3,5,5]) -> (%y: ?[...], %t: ?[...]) {\n" +
                          const_line("w", {16, 8, 3, 3}, 8) +
                          "  %c = Conv(%x, %w) {pads=[1, 1, 1, 1]}\n"
                          "  %y = Concat(%c, %z, %c) {axis=1}\n"
                          "  %r = Relu(%z)\n"
                          "  %t = Concat(%r, %z) {axis=-1}\n"
                          "  return %y, %t\n}\n";
  expect_offloaded(cat, 2);
}

}  // namespace
}  // namespace kiln
