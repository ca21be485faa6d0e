// Compiled executor (MatMul/Gemm/Conv through sgemm, runtime/gemm_ops.h) vs the interpreter:
// 1x1 and strided/padded 3x3 convs with bias, 2-D and batched MatMul, Gemm with transposes,
// alpha/beta and broadcast C; constant (pre-packed) and run-time weights; odd sizes.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <sstream>

#include "ir/text.h"
#include "kernels/x86/s8_gemm.h"
#include "pass/pass.h"
#include "driver/compiled_executor.h"
#include "runtime/interpreter.h"
#include "../common/random_const.h"
#include "../common/engines_agree.h"

namespace kiln {
namespace {

// "const f32[dims] [random values]" text.
using test::rand_const;

CompileStats check_gemm(const std::string& text, int threads = 4) { return test::engines_agree(text, threads, 7); }

TEST(CompiledExecutorGemm, Conv1x1WithBias) {
  std::mt19937_64 rng(1);
  auto s = check_gemm("graph @g(%x: f32[2,13,7,9]) -> (%y: f32[2,17,7,9]) {\n  %w = " + rand_const({17, 13, 1, 1}, rng) +
                      "\n  %b = " + rand_const({17}, rng) + "\n  %y = Conv(%x, %w, %b) : f32[2,17,7,9]\n  return %y\n}");
  EXPECT_EQ(s.gemm_nodes, 1);
  EXPECT_EQ(s.fallback_nodes, 0);
}

TEST(CompiledExecutorGemm, Conv3x3Stride2Pad1WithBias) {
  std::mt19937_64 rng(2);
  auto s = check_gemm("graph @g(%x: f32[1,5,11,13]) -> (%y: f32[1,19,6,7]) {\n  %w = " +
                      rand_const({19, 5, 3, 3}, rng) + "\n  %b = " + rand_const({19}, rng) +
                      "\n  %y = Conv(%x, %w, %b) {pads=[1, 1, 1, 1], strides=[2, 2]} : f32[1,19,6,7]\n  return %y\n}");
  EXPECT_EQ(s.gemm_nodes, 1);
}

TEST(CompiledExecutorGemm, ConvRuntimeWeightsDilatedAsymmetricPad) {
  auto s = check_gemm(R"(graph @g(%x: f32[2,3,10,9], %w: f32[7,3,3,2]) -> (%y: f32[2,7,9,9]) {
    %y = Conv(%x, %w) {dilations=[2, 1], pads=[1, 0, 2, 1]} : f32[2,7,9,9]
    return %y
  })");
  EXPECT_EQ(s.gemm_nodes, 1);
}

TEST(CompiledExecutorGemm, ConvThenEpilogue) {
  std::mt19937_64 rng(3);
  auto s = check_gemm("graph @g(%x: f32[1,6,9,9]) -> (%y: f32[1,10,9,9]) {\n  %w = " + rand_const({10, 6, 3, 3}, rng) +
                      "\n  %c = Conv(%x, %w) {pads=[1, 1, 1, 1]} : f32[1,10,9,9]\n  %y = Relu(%c) : f32[1,10,9,9]\n"
                      "  return %y\n}");
  EXPECT_EQ(s.gemm_nodes, 2);  // the Relu runs in the Conv's epilogue (gemm_epilogue.h)
  EXPECT_EQ(s.fallback_nodes, 0);
}

TEST(CompiledExecutorGemm, MatMul2D) {
  std::mt19937_64 rng(4);
  auto s = check_gemm("graph @g(%a: f32[37,53]) -> (%y: f32[37,29]) {\n  %b = " + rand_const({53, 29}, rng) +
                      "\n  %y = MatMul(%a, %b) : f32[37,29]\n  return %y\n}");
  EXPECT_EQ(s.gemm_nodes, 1);
}

TEST(CompiledExecutorGemm, MatMulBatched3Dx2D) {
  std::mt19937_64 rng(5);
  auto s = check_gemm("graph @g(%a: f32[3,17,41]) -> (%y: f32[3,17,23]) {\n  %b = " + rand_const({41, 23}, rng) +
                      "\n  %y = MatMul(%a, %b) : f32[3,17,23]\n  return %y\n}");
  EXPECT_EQ(s.gemm_nodes, 1);
}

TEST(CompiledExecutorGemm, MatMulRuntimeB) {
  auto s = check_gemm(R"(graph @g(%a: f32[2,5,33], %b: f32[33,19]) -> (%y: f32[2,5,19]) {
    %y = MatMul(%a, %b) : f32[2,5,19]
    return %y
  })");
  EXPECT_EQ(s.gemm_nodes, 1);
}

TEST(CompiledExecutorGemm, GemmTransposesAlphaBetaBiasC) {
  std::mt19937_64 rng(6);
  auto s = check_gemm("graph @g(%a: f32[31,13]) -> (%y: f32[13,21]) {\n  %b = " + rand_const({21, 31}, rng) +
                      "\n  %c = " + rand_const({21}, rng) +
                      "\n  %y = Gemm(%a, %b, %c) {alpha=0.5, beta=2.0, transA=1, transB=1} : f32[13,21]\n"
                      "  return %y\n}");
  EXPECT_EQ(s.gemm_nodes, 1);
}

TEST(CompiledExecutorGemm, GemmFullCAndColumnC) {
  auto s = check_gemm(R"(graph @g(%a: f32[9,14], %b: f32[14,11], %c: f32[9,11], %d: f32[9,1]) -> (%y: f32[9,11], %z: f32[9,11]) {
    %y = Gemm(%a, %b, %c) {alpha=1.5, beta=-0.5} : f32[9,11]
    %z = Gemm(%a, %b, %d) {beta=1.0} : f32[9,11]
    return %y, %z
  })");
  EXPECT_EQ(s.gemm_nodes, 2);
}

TEST(CompiledExecutorGemm, GemmNoC) {
  auto s = check_gemm(R"(graph @g(%a: f32[6,70], %b: f32[8,70]) -> (%y: f32[6,8]) {
    %y = Gemm(%a, %b) {transB=1} : f32[6,8]
    return %y
  })", 1);
  EXPECT_EQ(s.gemm_nodes, 1);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// "const <type>[dims] [ints in lo..hi]" text.
std::string int_const(const char* type, const std::vector<int64_t>& dims, int lo, int hi, std::mt19937_64& rng) {
  std::ostringstream s;
  int64_t n = 1;
  s << "const " << type << "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    s << (i ? "," : "") << dims[i];
    n *= dims[i];
  }
  s << "] [";
  for (int64_t i = 0; i < n; ++i) s << (i ? ", " : "") << lo + static_cast<int>(rng() % static_cast<uint64_t>(hi - lo + 1));
  s << "]";
  return s.str();
}

// "[v0, v1, ...]": n values in [lo, hi) on a grid of a thousandth of the range.
std::string float_values(int64_t n, float lo, float hi, std::mt19937_64& rng) {
  std::ostringstream s;
  s << "[";
  for (int64_t i = 0; i < n; ++i) s << (i ? ", " : "") << lo + (hi - lo) * static_cast<float>(rng() % 1000) / 1000.0f;
  s << "]";
  return s.str();
}

// The model of `text` run by the interpreter (want) and by the compiled engine (got, 2 threads).
struct BothEngines {
  std::vector<RtValue> want, got;
  CompileStats stats;
};
BothEngines run_both_engines(const std::string& text, const std::vector<RtValue>& feeds) {
  Model m = parse_model(text);
  Interpreter interp(m);
  CompiledOptions opts;
  opts.threads = 2;
  CompiledExecutor exec(m, opts);
  BothEngines r{interp.run(feeds), exec.run(feeds), {}};
  r.stats = exec.stats();
  return r;
}

// One integer GEMM node (`text`, int32 output) on the compiled engine against the interpreter:
// the same int32 values, and a GEMM step (without AVX2 the reference kernel runs it: the
// portable loop is no faster).
void expect_integer_op_exact(const std::string& text, const std::vector<RtValue>& feeds) {
  const BothEngines runs = run_both_engines(text, feeds);
  const Tensor &want = runs.want[0].tensor, &got = runs.got[0].tensor;
  ASSERT_EQ(got.dims(), want.dims());
  for (int64_t i = 0; i < want.numel(); ++i)
    ASSERT_EQ(got.data<int32_t>()[i], want.data<int32_t>()[i]) << "element " << i << "\n" << text.substr(0, 200);
  EXPECT_EQ(runs.stats.gemm_nodes, kernels::s8_gemm_kernel_name() == std::string("portable") ? 0 : 1)
      << text.substr(0, 200);
}

// MatMulInteger (uint8 A computed, int8 B constant) on the int8 GEMM (runtime/matmul_integer.h)
// against the reference kernel, exactly: shapes around the 14x32 tile and the 4-deep K groups, a
// 3-D A, A's zero point computed at run time (as DynamicQuantizeLinear gives it), B's absent,
// scalar or per column, full-range values (255 x -128).
TEST(CompiledExecutorGemm, MatMulIntegerMatchesTheReferenceExactly) {
  std::mt19937_64 rng(11);
  struct Case {
    std::vector<int64_t> a;
    int64_t n;
    int b_zero;  // 0: none, 1: scalar, 2: per column
  };
  for (const Case& c : {Case{{1, 1}, 1, 0}, Case{{13, 5}, 31, 1}, Case{{14, 4}, 32, 2}, Case{{15, 3}, 33, 2},
                        Case{{2, 29, 70}, 8, 1}, Case{{3, 1029}, 17, 2}}) {
    const int64_t k = c.a.back();
    std::vector<int64_t> out = c.a;
    out.back() = c.n;
    auto dims = [](const std::vector<int64_t>& d) {
      std::string s;
      for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
      return s;
    };
    std::string text = "graph @g(%a: u8[" + dims(c.a) + "], %za: u8[]) -> (%y: i32[" + dims(out) + "]) {\n  %b = " +
                       int_const("i8", {k, c.n}, -128, 127, rng) + "\n";
    std::string zb = "";
    if (c.b_zero == 1) text += "  %zb = " + int_const("i8", {}, -5, 5, rng) + "\n";
    if (c.b_zero == 2) text += "  %zb = " + int_const("i8", {c.n}, -5, 5, rng) + "\n";
    text += std::string("  %y = MatMulInteger(%a, %b, %za") + (c.b_zero ? ", %zb" : "") + ") : i32[" + dims(out) +
            "]\n  return %y\n}";
    Tensor a(DType::kUInt8, c.a);
    for (int64_t i = 0; i < a.numel(); ++i) a.data<uint8_t>()[i] = static_cast<uint8_t>(i % 5 == 0 ? 255 : rng() % 256);
    const std::vector<RtValue> feeds = {RtValue(a), RtValue(Tensor::scalar(DType::kUInt8, 131))};
    expect_integer_op_exact(text, feeds);
  }
}

// MatMulInteger followed by the dequantization dynamic quantization writes (Cast, Mul by the
// activation's run-time scale times the weights' constant one, bias Add): one GEMM step with a
// float output, equal to the interpreter's nodes bit for bit; the scale's Mul placed after the
// MatMulInteger (as ONNX Runtime's quantizer writes it) or a constant scale (static), per column
// or scalar, with and without bias and B zero points, columns off the 8-lane and 32-column grids.
// A Mul by a run-time scale of the output's dims is no dequantization: those nodes run on their own.
TEST(CompiledExecutorGemm, MatMulIntegerDequantizeEpilogueMatchesTheNodes) {
  std::mt19937_64 rng(15);
  struct Case {
    int64_t m, k, n;
    bool run_time_scale, per_column, bias, b_zero;
  };
  auto floats = [&](int64_t n, float lo, float hi) { return float_values(n, lo, hi, rng); };
  for (const Case& c : {Case{128, 64, 77, true, true, true, false}, Case{5, 36, 32, true, false, false, true},
                        Case{30, 1032, 9, false, true, true, true}, Case{14, 8, 40, false, false, true, false}}) {
    const std::string mn = std::to_string(c.m) + "," + std::to_string(c.n), f = "f32[" + mn + "]";
    const std::string ws = c.per_column ? std::to_string(c.n) : "";
    std::string text = "graph @g(%a: u8[" + std::to_string(c.m) + "," + std::to_string(c.k) +
                       "], %za: u8[], %as: f32[], %rs: " + f + ") -> (%y: " + f + ", %r: " + f + ") {\n  %b = " +
                       int_const("i8", {c.k, c.n}, -128, 127, rng) + "\n  %ws = const f32[" + ws + "] " +
                       floats(c.per_column ? c.n : 1, 0.001f, 0.004f) + "\n  %bias = const f32[" +
                       std::to_string(c.n) + "] " + floats(c.n, -3.0f, 3.0f) + "\n";
    if (c.b_zero) text += "  %zb = " + int_const("i8", {c.n}, -3, 3, rng) + "\n";
    const std::string mm = "MatMulInteger(%a, %b, %za" + std::string(c.b_zero ? ", %zb" : "") + ") : i32[" + mn + "]\n";
    text += "  %acc = " + mm + "  %c = Cast(%acc) {to=1} : " + f + "\n";
    std::string scale = "ws";
    if (c.run_time_scale) text += "  %s = Mul(%as, %ws) : f32[" + ws + "]\n", scale = "s";
    text += "  %mul = Mul(%c, %" + scale + ") : " + f + "\n";
    text += c.bias ? "  %y = Add(%bias, %mul) : " + f + "\n" : "  %y = Identity(%mul) : " + f + "\n";
    text += "  %acc2 = " + mm + "  %c2 = Cast(%acc2) {to=1} : " + f + "\n  %r = Mul(%c2, %rs) : " + f +
            "\n  return %y, %r\n}";
    Tensor a(DType::kUInt8, {c.m, c.k}), rs(DType::kFloat32, {c.m, c.n});
    for (int64_t i = 0; i < a.numel(); ++i) a.data<uint8_t>()[i] = static_cast<uint8_t>(i % 5 == 0 ? 255 : rng() % 256);
    for (int64_t i = 0; i < rs.numel(); ++i) rs.data<float>()[i] = 0.001f * static_cast<float>(rng() % 100);
    const std::vector<RtValue> feeds = {RtValue(a), RtValue(Tensor::scalar(DType::kUInt8, 119)),
                                        RtValue(Tensor::scalar(DType::kFloat32, 0.0173f)), RtValue(rs)};
    const BothEngines runs = run_both_engines(text, feeds);
    for (size_t o = 0; o < 2; ++o) {
      const Tensor &w = runs.want[o].tensor, &g = runs.got[o].tensor;
      ASSERT_EQ(g.dtype(), DType::kFloat32);
      ASSERT_EQ(g.dims(), w.dims());
      for (int64_t i = 0; i < w.numel(); ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(g.data<float>()[i]), std::bit_cast<uint32_t>(w.data<float>()[i]))
            << "output " << o << " element " << i << "\n" << text.substr(0, 300);
    }
    // y: MatMulInteger, Cast, [the scale's Mul], Mul, [Add] in one step; r: only its MatMulInteger.
    const bool portable = kernels::s8_gemm_kernel_name() == std::string("portable");
    EXPECT_EQ(runs.stats.gemm_nodes, portable ? 0 : 3 + c.run_time_scale + c.bias + 1) << text.substr(0, 300);
  }
}

// ConvInteger (uint8 NCHW input, constant int8 weight) on the int8 GEMM
// (runtime/conv_integer.h) against the reference kernel, exactly: 1x1 read in place, padded
// (the padding is the input's zero point), strided and dilated windows, the implicit
// convolution, batch 2, channel counts around the 32-column panels and 4-deep K groups,
// full-range values.
TEST(CompiledExecutorGemm, ConvIntegerMatchesTheReferenceExactly) {
  std::mt19937_64 rng(12);
  struct Case {
    std::vector<int64_t> x;  // N, C, H, W
    int64_t m, kh, kw;
    std::string attrs;
    std::vector<int64_t> y;
  };
  for (const Case& c : {Case{{1, 5, 7, 9}, 33, 1, 1, "", {1, 33, 7, 9}}, Case{{1, 8, 5, 6}, 40, 1, 1, "", {1, 40, 5, 6}},
                        Case{{2, 3, 6, 5}, 16, 3, 3, "{pads=[1, 1, 1, 1]}", {2, 16, 6, 5}},
                        Case{{1, 7, 9, 8}, 31, 3, 3, "{pads=[1, 0, 1, 2], strides=[2, 2]}", {1, 31, 5, 4}},
                        Case{{1, 4, 8, 8}, 8, 3, 2, "{dilations=[2, 1]}", {1, 8, 4, 7}},
                        Case{{1, 64, 3, 3}, 65, 1, 1, "{strides=[2, 2]}", {1, 65, 2, 2}},
                        // Implicit convolution (stride 1, channels a multiple of 4): padded rows
                        // wider than the output, asymmetric pads, a 1x3 and a 5x5 window, batch 2.
                        Case{{2, 8, 6, 7}, 20, 3, 3, "{pads=[1, 1, 1, 1]}", {2, 20, 6, 7}},
                        Case{{1, 12, 5, 9}, 15, 1, 3, "{pads=[0, 1, 0, 1]}", {1, 15, 5, 9}},
                        Case{{1, 16, 10, 10}, 33, 3, 3, "{pads=[0, 2, 1, 0]}", {1, 33, 9, 10}},
                        Case{{1, 4, 7, 7}, 9, 5, 5, "{pads=[2, 2, 2, 2]}", {1, 9, 7, 7}},
                        // ... with stride phases: 3x3 / 2, 1x1 / 2, 3x3 / (2, 1), 3x3 / 3 with one pad.
                        Case{{2, 8, 9, 8}, 17, 3, 3, "{pads=[1, 1, 1, 1], strides=[2, 2]}", {2, 17, 5, 4}},
                        Case{{1, 12, 7, 6}, 30, 1, 1, "{strides=[2, 2]}", {1, 30, 4, 3}},
                        Case{{1, 8, 6, 5}, 14, 3, 3, "{pads=[1, 0, 1, 1], strides=[2, 1]}", {1, 14, 3, 4}},
                        Case{{1, 4, 10, 11}, 6, 3, 3, "{pads=[0, 1, 0, 0], strides=[3, 3]}", {1, 6, 3, 4}},
                        // ... an RGB stem (channels padded to a quad with zero weights), and
                        // dilation with stride (taps of one phase, rows apart by dh / sh).
                        Case{{1, 3, 20, 18}, 10, 7, 7, "{pads=[3, 3, 3, 3], strides=[2, 2]}", {1, 10, 10, 9}},
                        Case{{1, 8, 11, 10}, 9, 3, 3, "{dilations=[2, 3], pads=[2, 2, 2, 2], strides=[2, 2]}",
                             {1, 9, 6, 4}}}) {
    auto dims = [](const std::vector<int64_t>& d) {
      std::string s;
      for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
      return s;
    };
    const std::string text = "graph @g(%x: u8[" + dims(c.x) + "], %zx: u8[]) -> (%y: i32[" + dims(c.y) +
                             "]) {\n  %w = " + int_const("i8", {c.m, c.x[1], c.kh, c.kw}, -128, 127, rng) +
                             "\n  %y = ConvInteger(%x, %w, %zx) " + c.attrs + " : i32[" + dims(c.y) +
                             "]\n  return %y\n}";
    Tensor x(DType::kUInt8, c.x);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<uint8_t>()[i] = static_cast<uint8_t>(i % 7 == 0 ? 255 : rng() % 256);
    const std::vector<RtValue> feeds = {RtValue(x), RtValue(Tensor::scalar(DType::kUInt8, 121))};
    expect_integer_op_exact(text, feeds);
  }
}

// ConvInteger followed by the requantization qdq-to-integer leaves (Cast, Mul by the scales, bias
// Add, Relu, QuantizeLinear): with VNNI one GEMM step computes it all (uint8 out, no int32 tensor)
// and equals the interpreter's nodes bit for bit; shapes around the 14-row and 32-column tiles, a
// scalar or per-channel scale, with and without bias / Relu / zero point, outputs saturating at
// both ends. A Mul by a run-time value is no requantization: those nodes run on their own.
TEST(CompiledExecutorGemm, ConvIntegerRequantizeEpilogueMatchesTheNodes) {
  std::mt19937_64 rng(13);
  struct Case {
    std::vector<int64_t> x;  // N, C, H, W
    int64_t m;
    std::string attrs;
    std::vector<int64_t> y;
    bool per_channel, bias, relu, zero_point;
  };
  auto dims = [](const std::vector<int64_t>& d) {
    std::string s;
    for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
    return s;
  };
  auto floats = [&](int64_t n, float lo, float hi) { return float_values(n, lo, hi, rng); };
  for (const Case& c : {Case{{1, 8, 7, 9}, 33, "", {1, 33, 7, 9}, true, true, true, true},
                        Case{{2, 12, 6, 5}, 14, "{pads=[1, 1, 1, 1]}", {2, 14, 6, 5}, false, true, false, true},
                        Case{{1, 16, 9, 8}, 29, "{pads=[1, 1, 1, 1], strides=[2, 2]}", {1, 29, 5, 4}, true, false, true, false},
                        Case{{1, 64, 12, 12}, 40, "", {1, 40, 12, 12}, true, true, false, true}}) {
    const int64_t kh = c.attrs.find("pads") != std::string::npos ? 3 : 1;
    const std::string ch = c.per_channel ? std::to_string(c.m) : "1";
    std::string text = "graph @g(%x: u8[" + dims(c.x) + "], %run: f32[]) -> (%y: u8[" + dims(c.y) + "], %r: u8[" +
                       dims(c.y) + "]) {\n  %w = " + int_const("i8", {c.m, c.x[1], kh, kh}, -128, 127, rng) +
                       "\n  %zx = const u8[] [117]\n  %s = const f32[" + ch + ",1,1] " +
                       floats(c.per_channel ? c.m : 1, 0.0005f, 0.003f) + "\n  %b = const f32[" +
                       std::to_string(c.m) + ",1,1] " + floats(c.m, -40.0f, 40.0f) +
                       "\n  %ys = const f32[] [0.11]\n  %yz = const u8[] [" + (c.zero_point ? "131" : "0") + "]\n";
    // The chain after `acc` into `out`: Cast, Mul by `scale`, [Add], [Relu], QuantizeLinear.
    auto chain = [&](const std::string& acc, const std::string& scale, const std::string& out) {
      const std::string f = "f32[" + dims(c.y) + "]";
      std::string t = "  %" + out + "c = Cast(%" + acc + ") {to=1} : " + f + "\n  %" + out + "m = Mul(%" + out +
                      "c, %" + scale + ") : " + f + "\n";
      std::string last = out + "m";
      if (c.bias) t += "  %" + out + "a = Add(%" + last + ", %b) : " + f + "\n", last = out + "a";
      if (c.relu) t += "  %" + out + "r = Relu(%" + last + ") : " + f + "\n", last = out + "r";
      return t + "  %" + out + " = QuantizeLinear(%" + last + ", %ys" + (c.zero_point ? ", %yz" : "") + ") : u8[" +
             dims(c.y) + "]\n";
    };
    const std::string conv = "ConvInteger(%x, %w, %zx) " + c.attrs + " : i32[" + dims(c.y) + "]\n";
    text += "  %acc = " + conv + chain("acc", "s", "y") + "  %acc2 = " + conv + chain("acc2", "run", "r") +
            "  return %y, %r\n}";
    Tensor x(DType::kUInt8, c.x);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<uint8_t>()[i] = static_cast<uint8_t>(i % 7 == 0 ? 255 : rng() % 256);
    const std::vector<RtValue> feeds = {RtValue(x), RtValue(Tensor::scalar(DType::kFloat32, 0.002f))};
    const BothEngines runs = run_both_engines(text, feeds);
    for (size_t o = 0; o < 2; ++o) {
      const Tensor &w = runs.want[o].tensor, &g = runs.got[o].tensor;
      ASSERT_EQ(g.dtype(), DType::kUInt8);
      ASSERT_EQ(g.dims(), w.dims());
      int low = 0, high = 0;
      for (int64_t i = 0; i < w.numel(); ++i) {
        ASSERT_EQ(g.data<uint8_t>()[i], w.data<uint8_t>()[i]) << "output " << o << " element " << i << "\n" << text.substr(0, 300);
        low += w.data<uint8_t>()[i] == 0;
        high += w.data<uint8_t>()[i] == 255;
      }
      if (!(c.relu && c.zero_point)) {  // (with Relu, y >= zero point)
        EXPECT_GT(low, 0) << "no output saturates at 0";
      }
      EXPECT_GT(high, 0) << "no output saturates at 255";
    }
    // Output y: ConvInteger + its chain in one step with VNNI; r (Mul by a run-time value) never.
    const int chain_nodes = 3 + c.bias + c.relu;
    const int want_gemm = kernels::s8_gemm_kernel_name() == std::string("portable") ? 0
                          : kernels::s8_gemm_has_vnni()                             ? 2 + chain_nodes
                                                                                    : 2;
    EXPECT_EQ(runs.stats.gemm_nodes, want_gemm) << text.substr(0, 300);
  }
}

// A quantized residual block's tail: the requantized ConvInteger, then DequantizeLinear of its
// output and of the shortcut (a node earlier than the conv), Add, Relu, QuantizeLinear. Fusion
// puts the shortcut's DequantizeLinear in the conv's group; the plan runs the group's GEMM step
// first, so that it joins the kernel of the Add instead of making a kernel of its own before the
// step. One kernel, the same bytes as the interpreter.
TEST(CompiledExecutorGemm, QuantizedResidualIsOneKernelAfterTheGemmStep) {
  std::mt19937_64 rng(14);
  const std::string text = "graph @g(%x: u8[1,8,6,6], %r: u8[1,16,6,6]) -> (%y: u8[1,16,6,6]) {\n"
                           "  %rs = const f32[] [0.05]\n  %rz = const u8[] [120]\n"
                           "  %rd = DequantizeLinear(%r, %rs, %rz) : f32[1,16,6,6]\n"
                           "  %w = " + int_const("i8", {16, 8, 1, 1}, -128, 127, rng) + "\n"
                           "  %zx = const u8[] [100]\n  %s = const f32[16,1,1] [" +
                           [] {
                             std::string v;
                             for (int i = 0; i < 16; ++i) v += (i ? ", " : "") + std::to_string(0.0004 + 0.00003 * i);
                             return v;
                           }() + "]\n"
                           "  %ys = const f32[] [0.07]\n  %yz = const u8[] [128]\n"
                           "  %acc = ConvInteger(%x, %w, %zx) : i32[1,16,6,6]\n"
                           "  %c = Cast(%acc) {to=1} : f32[1,16,6,6]\n"
                           "  %m = Mul(%c, %s) : f32[1,16,6,6]\n"
                           "  %q1 = QuantizeLinear(%m, %ys, %yz) : u8[1,16,6,6]\n"
                           "  %d1 = DequantizeLinear(%q1, %ys, %yz) : f32[1,16,6,6]\n"
                           "  %a = Add(%d1, %rd) : f32[1,16,6,6]\n"
                           "  %rl = Relu(%a) : f32[1,16,6,6]\n"
                           "  %y = QuantizeLinear(%rl, %ys, %yz) : u8[1,16,6,6]\n"
                           "  return %y\n}";
  Model m = parse_model(text), passed = parse_model(text);
  PassContext ctx;
  run_passes(passed, default_pipeline(), ctx);  // fusion groups, as every entry point runs it
  Tensor x(DType::kUInt8, {1, 8, 6, 6}), r(DType::kUInt8, {1, 16, 6, 6});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<uint8_t>()[i] = static_cast<uint8_t>(rng() % 256);
  for (int64_t i = 0; i < r.numel(); ++i) r.data<uint8_t>()[i] = static_cast<uint8_t>(rng() % 256);
  const std::vector<RtValue> feeds = {RtValue(x), RtValue(r)};
  Interpreter interp(m);
  CompiledOptions opts;
  opts.threads = 2;
  CompiledExecutor exec(passed, opts);
  const Tensor want = interp.run(feeds)[0].tensor, got = exec.run(feeds)[0].tensor;
  ASSERT_EQ(got.dims(), want.dims());
  for (int64_t i = 0; i < want.numel(); ++i) ASSERT_EQ(got.data<uint8_t>()[i], want.data<uint8_t>()[i]) << i;
  if (!kernels::s8_gemm_has_vnni()) GTEST_SKIP() << "the requantizing GEMM step needs AVX-512 VNNI";
  EXPECT_EQ(exec.stats().gemm_nodes, 4);  // ConvInteger, Cast, Mul, QuantizeLinear
  EXPECT_EQ(exec.stats().kernels, 1);     // both DequantizeLinear, Add, Relu, QuantizeLinear
}

}  // namespace
}  // namespace kiln
