// Fused GEMM/conv epilogues in the compiled executor (bias Add, residual Add, Relu/Clip or
// HardSwish/Sigmoid/SiLU absorbed into the MatMul/Gemm/Conv step, runtime/gemm_epilogue.h): the compiled engine matches the
// interpreter, absorbed nodes count as microkernel nodes, and chains that are not safe to fuse
// (shared intermediates, graph outputs, non-channel broadcasts) are left alone. Likewise the
// input scale before a conv (a squeeze-and-excitation Mul, GemmDesc::input_scale) and the max
// pool after a stem conv (GemmDesc::epilogue_max_pool).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "../common/engines_agree.h"
#include "kernels/x86/f32_gemm.h"
#include "runtime/plan_io.h"

namespace kiln {
namespace {

std::string dims_text(const std::vector<int64_t>& d) {
  std::string s;
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s;
}

// "const f32[dims] [values]" with seeded values in [-scale, scale].
std::string rand_const(const std::vector<int64_t>& d, uint64_t seed, double scale = 1.0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uni(-scale, scale);
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  std::ostringstream os;
  os << "const f32[" << dims_text(d) << "] [";
  for (int64_t i = 0; i < n; ++i) os << (i ? ", " : "") << uni(rng);
  os << "]";
  return os.str();
}

CompileStats check(const std::string& text, int threads = 1) { return test::engines_agree(text, threads, 3); }

// The engines agree and every node ran in GEMM steps: `gemm_nodes` of them (the GEMMs and the
// nodes absorbed into their epilogues), none in generated kernels.
void expect_fused(const std::string& text, int gemm_nodes, int threads = 1) {
  CompileStats s = check(text, threads);
  EXPECT_EQ(s.gemm_nodes, gemm_nodes);
  EXPECT_EQ(s.generated_nodes, 0);
}

const char* kHeader13 = "model ir=8 opsets={\"\": 13}\n";

TEST(GemmEpilogue, ConvBiasRelu) {
  for (int threads : {1, 2}) {
    auto s = check(std::string(kHeader13) + R"(graph @g(%x: f32[1,5,9,11]) -> (%y: f32[1,7,9,11]) {
    %w = )" + rand_const({7, 5, 3, 3}, 1) + R"(
    %b = )" + rand_const({7}, 2) + R"(
    %c = Conv(%x, %w, %b) {pads=[1, 1, 1, 1]} : f32[1,7,9,11]
    %y = Relu(%c) : f32[1,7,9,11]
    return %y
  })", threads);
    EXPECT_EQ(s.gemm_nodes, 2);
    EXPECT_EQ(s.generated_nodes, 0);
    EXPECT_EQ(s.fallback_nodes, 0);
  }
}

TEST(GemmEpilogue, ConvAddBiasClip6) {
  // Bias as a separate Add of a [1,Co,1,1] constant, then Clip(0, 6) with constant inputs.
  expect_fused(std::string(kHeader13) + R"(graph @g(%x: f32[2,4,6,5]) -> (%y: f32[2,6,6,5]) {
    %w = )" + rand_const({6, 4, 1, 1}, 3) + R"(
    %b = )" + rand_const({1, 6, 1, 1}, 4) + R"(
    %lo = const f32[] [0]
    %hi = const f32[] [0.3]
    %c = Conv(%x, %w) : f32[2,6,6,5]
    %d = Add(%b, %c) : f32[2,6,6,5]
    %y = Clip(%d, %lo, %hi) : f32[2,6,6,5]
    return %y
  })", 3);
}

// SiLU as exported (Mul(v, Sigmoid(v)), either input order), HardSwish and Sigmoid end the
// chain after a conv GEMM (in the microkernel store, large enough for full and tail tiles), a
// depthwise conv (its post-pass) and a MatMul with a bias Add; values beyond the exp clamp too.
TEST(GemmEpilogue, ActivationsSiluHardSwishSigmoid) {
  for (int threads : {1, 2}) {
    auto s = check(R"(model ir=8 opsets={"": 14}
  graph @g(%x: f32[1,5,9,37]) -> (%y: f32[1,40,9,37], %z: f32[1,40,9,37], %u: f32[1,40,9,37]) {
    %w = )" + rand_const({40, 5, 3, 3}, 31) + R"(
    %b = )" + rand_const({40}, 32) + R"(
    %w2 = )" + rand_const({40, 5, 1, 1}, 33) + R"(
    %c = Conv(%x, %w, %b) {pads=[1, 1, 1, 1]} : f32[1,40,9,37]
    %s = Sigmoid(%c) : f32[1,40,9,37]
    %y = Mul(%s, %c) : f32[1,40,9,37]
    %c2 = Conv(%x, %w2) : f32[1,40,9,37]
    %z = HardSwish(%c2) : f32[1,40,9,37]
    %c3 = Conv(%x, %w2, %b) : f32[1,40,9,37]
    %u = Sigmoid(%c3) : f32[1,40,9,37]
    return %y, %z, %u
  })", threads);
    EXPECT_EQ(s.gemm_nodes, 7);
    EXPECT_EQ(s.generated_nodes, 0);
  }
  auto s = check(R"(model ir=8 opsets={"": 14}
  graph @g(%x: f32[1,8,9,9], %a: f32[3,33]) -> (%y: f32[1,8,9,9], %m: f32[3,20]) {
    %w = )" + rand_const({8, 1, 3, 3}, 34) + R"(
    %k = const f32[] [60]
    %xs = Mul(%x, %k) : f32[1,8,9,9]
    %c = Conv(%xs, %w) {group=8, pads=[1, 1, 1, 1]} : f32[1,8,9,9]
    %s = Sigmoid(%c) : f32[1,8,9,9]
    %y = Mul(%c, %s) : f32[1,8,9,9]
    %bw = )" + rand_const({33, 20}, 35) + R"(
    %bb = )" + rand_const({20}, 36) + R"(
    %p = MatMul(%a, %bw) : f32[3,20]
    %q = Add(%p, %bb) : f32[3,20]
    %r = Sigmoid(%q) : f32[3,20]
    %m = Mul(%q, %r) : f32[3,20]
    return %y, %m
  })");
  EXPECT_EQ(s.gemm_nodes, 7);
}

// The Sigmoid's output used elsewhere too: no SiLU fusion (the Sigmoid alone is not fused either,
// the conv output having two consumers).
TEST(GemmEpilogue, SiluWithSharedSigmoidIsNotFused) {
  auto s = check(R"(model ir=8 opsets={"": 14}
  graph @g(%x: f32[1,3,6,6]) -> (%y: f32[1,4,6,6], %s: f32[1,4,6,6]) {
    %w = )" + rand_const({4, 3, 1, 1}, 37) + R"(
    %c = Conv(%x, %w) : f32[1,4,6,6]
    %s = Sigmoid(%c) : f32[1,4,6,6]
    %y = Mul(%c, %s) : f32[1,4,6,6]
    return %y, %s
  })");
  EXPECT_EQ(s.gemm_nodes, 1);
}

TEST(GemmEpilogue, ClipOpset6Attributes) {
  expect_fused(R"(model ir=3 opsets={"": 6}
  graph @g(%x: f32[1,3,7,7]) -> (%y: f32[1,4,4,4]) {
    %w = )" + rand_const({4, 3, 3, 3}, 5) + R"(
    %c = Conv(%x, %w) {strides=[2, 2], pads=[1, 1, 1, 1]} : f32[1,4,4,4]
    %y = Clip(%c) {min=-0.2, max=0.4} : f32[1,4,4,4]
    return %y
  })", 2);
}

TEST(GemmEpilogue, ConvResidualRelu) {
  // ResNet's block end: the residual is a graph input, or a conv computed before (either input
  // order of the Add); a residual computed after the GEMM is taken from the other side.
  for (int threads : {1, 2}) {
    auto s = check(std::string(kHeader13) + R"(graph @g(%x: f32[1,8,7,9], %r: f32[1,8,7,9]) -> (%y: f32[1,8,7,9]) {
    %w = )" + rand_const({8, 8, 3, 3}, 6) + R"(
    %b = )" + rand_const({8}, 7) + R"(
    %c = Conv(%x, %w, %b) {pads=[1, 1, 1, 1]} : f32[1,8,7,9]
    %s = Add(%r, %c) : f32[1,8,7,9]
    %y = Relu(%s) : f32[1,8,7,9]
    return %y
  })", threads);
    EXPECT_EQ(s.gemm_nodes, 3);
    EXPECT_EQ(s.generated_nodes, 0);
  }
  expect_fused(std::string(kHeader13) + R"(graph @g(%x: f32[1,6,8,8]) -> (%y: f32[1,16,8,8]) {
    %w1 = )" + rand_const({16, 6, 1, 1}, 8) + R"(
    %w2 = )" + rand_const({16, 6, 3, 3}, 9) + R"(
    %b2 = )" + rand_const({16}, 10) + R"(
    %a = Conv(%x, %w1) : f32[1,16,8,8]
    %d = Conv(%x, %w2, %b2) {pads=[1, 1, 1, 1]} : f32[1,16,8,8]
    %s = Add(%a, %d) : f32[1,16,8,8]
    %y = Relu(%s) : f32[1,16,8,8]
    return %y
  })", 4);
}

// Winograd-sized 3x3 convs (29x27 outputs, 32 channels: Winograd on AVX-512): the output
// transform applies the bias, residual, clamp and activations itself. Weights in [-0.1, 0.1] keep
// the conv outputs near 1, where F(4x4, 3x3)'s rounding (~5e-6 of the output scale) is within the
// engines' tolerance.
TEST(GemmEpilogue, WinogradSizedConvEpilogues) {
  for (int threads : {1, 2}) {
    expect_fused(R"(model ir=8 opsets={"": 14}
  graph @g(%x: f32[1,32,29,27], %r: f32[1,40,29,27]) -> (%y: f32[1,40,29,27], %z: f32[1,40,29,27]) {
    %w = )" + rand_const({40, 32, 3, 3}, 41, 0.1) + R"(
    %b = )" + rand_const({40}, 42) + R"(
    %c = Conv(%x, %w, %b) {pads=[1, 1, 1, 1]} : f32[1,40,29,27]
    %a = Add(%c, %r) : f32[1,40,29,27]
    %s = Sigmoid(%a) : f32[1,40,29,27]
    %y = Mul(%a, %s) : f32[1,40,29,27]
    %c2 = Conv(%x, %w) {pads=[1, 1, 1, 1]} : f32[1,40,29,27]
    %lo = const f32[] [-0.5]
    %hi = const f32[] [0.75]
    %z = Clip(%c2, %lo, %hi) : f32[1,40,29,27]
    return %y, %z
  })", 6, threads);
  }
}

// A 7x7 1x1 conv (49 pixels: a partial last column panel) with bias + residual + Relu and with
// bias + Relu.
TEST(GemmEpilogue, SmallImageConvEpilogues) {
  for (int threads : {1, 2}) {
    expect_fused(std::string(kHeader13) + R"(graph @g(%x: f32[1,24,7,7], %r: f32[1,64,7,7]) -> (%y: f32[1,64,7,7], %z: f32[1,64,7,7]) {
    %w = )" + rand_const({64, 24, 1, 1}, 51) + R"(
    %b = )" + rand_const({64}, 52) + R"(
    %c = Conv(%x, %w, %b) : f32[1,64,7,7]
    %a = Add(%r, %c) : f32[1,64,7,7]
    %y = Relu(%a) : f32[1,64,7,7]
    %c2 = Conv(%x, %w, %b) : f32[1,64,7,7]
    %z = Relu(%c2) : f32[1,64,7,7]
    return %y, %z
  })", 5, threads);
  }
}

TEST(GemmEpilogue, DepthwiseClipAndResidual) {
  auto s = check(std::string(kHeader13) + R"(graph @g(%x: f32[1,8,9,9]) -> (%y: f32[1,8,5,5]) {
    %w = )" + rand_const({8, 1, 3, 3}, 11) + R"(
    %b = )" + rand_const({8}, 12) + R"(
    %lo = const f32[] [0]
    %hi = const f32[] [0.25]
    %c = Conv(%x, %w, %b) {group=8, strides=[2, 2], pads=[1, 1, 1, 1]} : f32[1,8,5,5]
    %y = Clip(%c, %lo, %hi) : f32[1,8,5,5]
    return %y
  })");
  EXPECT_EQ(s.gemm_nodes, 2);
  EXPECT_EQ(s.generated_nodes, 0);
  // Depthwise + bias Add + residual + Relu (the residual goes in a pass after the kernel).
  expect_fused(std::string(kHeader13) + R"(graph @g(%x: f32[2,8,6,7]) -> (%y: f32[2,8,6,7]) {
    %w = )" + rand_const({8, 1, 3, 3}, 13) + R"(
    %b = )" + rand_const({8, 1, 1}, 14) + R"(
    %c = Conv(%x, %w) {group=8, pads=[1, 1, 1, 1]} : f32[2,8,6,7]
    %d = Add(%c, %b) : f32[2,8,6,7]
    %s = Add(%d, %x) : f32[2,8,6,7]
    %y = Relu(%s) : f32[2,8,6,7]
    return %y
  })", 4);
}

TEST(GemmEpilogue, RuntimeWeightConv) {
  // Run-time weights and bias: the im2col ConvOp takes the epilogue bias, then a pass.
  expect_fused(std::string(kHeader13) + R"(graph @g(%x: f32[1,3,6,6], %w: f32[5,3,3,3], %b: f32[5]) -> (%y: f32[1,5,4,4]) {
    %e = )" + rand_const({5, 1, 1}, 15) + R"(
    %c = Conv(%x, %w, %b) : f32[1,5,4,4]
    %d = Add(%c, %e) : f32[1,5,4,4]
    %y = Relu(%d) : f32[1,5,4,4]
    return %y
  })", 3);
}

TEST(GemmEpilogue, MatMulBiasRelu) {
  for (int threads : {1, 2}) {
    expect_fused(std::string(kHeader13) + R"(graph @g(%x: f32[2,5,12]) -> (%y: f32[2,5,7]) {
    %w = )" + rand_const({12, 7}, 16) + R"(
    %b = )" + rand_const({7}, 17) + R"(
    %m = MatMul(%x, %w) : f32[2,5,7]
    %a = Add(%m, %b) : f32[2,5,7]
    %y = Relu(%a) : f32[2,5,7]
    return %y
  })", 3, threads);
  }
}

TEST(GemmEpilogue, BiasSharedThroughIdentity) {
  // ViT exports share a bias constant through Identity; the Identity still runs for its other
  // consumer.
  auto s = check(std::string(kHeader13) + R"(graph @g(%x: f32[7,12]) -> (%y: f32[7,10], %z: f32[10]) {
    %w = )" + rand_const({12, 10}, 34) + R"(
    %b = )" + rand_const({10}, 35) + R"(
    %i = Identity(%b) : f32[10]
    %m = MatMul(%x, %w) : f32[7,10]
    %a = Add(%m, %i) : f32[7,10]
    %y = Relu(%a) : f32[7,10]
    %z = Neg(%i) : f32[10]
    return %y, %z
  })");
  EXPECT_EQ(s.gemm_nodes, 3);
}

TEST(GemmEpilogue, MatMulBiasResidualAndClip) {
  // BERT's projection: MatMul + bias + residual; then a Clip with one bound.
  expect_fused(std::string(kHeader13) + R"(graph @g(%x: f32[9,16], %r: f32[9,24]) -> (%y: f32[9,24]) {
    %w = )" + rand_const({16, 24}, 18) + R"(
    %b = )" + rand_const({1, 24}, 19) + R"(
    %hi = const f32[] [0.5]
    %m = MatMul(%x, %w) : f32[9,24]
    %a = Add(%b, %m) : f32[9,24]
    %s = Add(%a, %r) : f32[9,24]
    %y = Clip(%s, _, %hi) : f32[9,24]
    return %y
  })", 4);
}

TEST(GemmEpilogue, MatMulOtherShapes) {
  // M = 1 (GEMV: bias in the kernel, the rest over its output) and batched MatMuls (a pass after
  // the op).
  auto s = check(std::string(kHeader13) + R"(graph @g(%x: f32[1,20], %p: f32[2,3,4], %q: f32[2,4,5]) -> (%y: f32[1,10], %z: f32[2,3,5]) {
    %w = )" + rand_const({20, 10}, 20) + R"(
    %b = )" + rand_const({10}, 21) + R"(
    %c = )" + rand_const({5}, 22) + R"(
    %m = MatMul(%x, %w) : f32[1,10]
    %a = Add(%m, %b) : f32[1,10]
    %y = Relu(%a) : f32[1,10]
    %n = MatMul(%p, %q) : f32[2,3,5]
    %t = Add(%n, %c) : f32[2,3,5]
    %z = Relu(%t) : f32[2,3,5]
    return %y, %z
  })");
  EXPECT_EQ(s.fallback_nodes, 0);
  EXPECT_EQ(s.generated_nodes + s.gemm_nodes, 6);
  // A GEMV Gemm with a run-time C (transB, beta 0.5), an epilogue bias, a residual and SiLU, all
  // in its step; and one without C whose bias comes only from the epilogue, then a Clip.
  expect_fused(R"(model ir=8 opsets={"": 14}
  graph @g(%x: f32[1,40], %c: f32[24], %r: f32[1,24]) -> (%y: f32[1,24], %z: f32[1,24]) {
    %w = )" + rand_const({24, 40}, 26) + R"(
    %b = )" + rand_const({24}, 27) + R"(
    %lo = const f32[] [-0.2]
    %hi = const f32[] [0.3]
    %g = Gemm(%x, %w, %c) {transB=1, beta=0.5} : f32[1,24]
    %a = Add(%g, %b) : f32[1,24]
    %s = Add(%a, %r) : f32[1,24]
    %sg = Sigmoid(%s) : f32[1,24]
    %y = Mul(%s, %sg) : f32[1,24]
    %g2 = Gemm(%x, %w) {transB=1} : f32[1,24]
    %a2 = Add(%g2, %b) : f32[1,24]
    %z = Clip(%a2, %lo, %hi) : f32[1,24]
    return %y, %z
  })", 8);
}

TEST(GemmEpilogue, GemmRelu) {
  expect_fused(std::string(kHeader13) + R"(graph @g(%x: f32[6,10]) -> (%y: f32[6,9], %z: f32[6,9]) {
    %w = )" + rand_const({9, 10}, 23) + R"(
    %c = )" + rand_const({9}, 24) + R"(
    %e = )" + rand_const({9}, 25) + R"(
    %g = Gemm(%x, %w, %c) {transB=1, alpha=0.5, beta=2.0} : f32[6,9]
    %y = Relu(%g) : f32[6,9]
    %h = Gemm(%x, %w) {transB=1} : f32[6,9]
    %a = Add(%h, %e) : f32[6,9]
    %z = Relu(%a) : f32[6,9]
    return %y, %z
  })", 5);
}

TEST(GemmEpilogue, UnsafeChainsAreNotFused) {
  // %c has two consumers; %c4 is a graph output; the [W]-shaped constant broadcasts along W,
  // not along the channels. (%d, the end of a chain, may be a graph output.)
  auto s = check(std::string(kHeader13) + R"(graph @g(%x: f32[1,4,5,6]) -> (%y: f32[1,4,5,6], %d: f32[1,4,5,6], %z: f32[1,4,5,6], %c4: f32[1,4,5,6], %r4: f32[1,4,5,6]) {
    %w = )" + rand_const({4, 4, 1, 1}, 26) + R"(
    %v = )" + rand_const({6}, 27) + R"(
    %c = Conv(%x, %w) : f32[1,4,5,6]
    %y = Relu(%c) : f32[1,4,5,6]
    %e = Sigmoid(%c) : f32[1,4,5,6]
    %c2 = Conv(%e, %w) : f32[1,4,5,6]
    %d = Relu(%c2) : f32[1,4,5,6]
    %c3 = Conv(%d, %w) : f32[1,4,5,6]
    %z = Add(%c3, %v) : f32[1,4,5,6]
    %c4 = Conv(%x, %w) : f32[1,4,5,6]
    %r4 = Relu(%c4) : f32[1,4,5,6]
    return %y, %d, %z, %c4, %r4
  })");
  EXPECT_EQ(s.gemm_nodes, 5);  // the four convs and %d's Relu
  EXPECT_EQ(s.generated_nodes, 4);
}

// A squeeze-and-excitation block as exported: GlobalAveragePool, two 1x1 convs (Relu, Sigmoid),
// then Mul(x, gate) into a 1x1 projection conv with a residual. The Mul runs in the projection's
// step (weights scaled per run); also with the gate first, per image (batch 2) and before a 3x3
// conv; 1 and 2 threads.
TEST(GemmEpilogue, InputScaleSqueezeExcitation) {
  for (int threads : {1, 2}) {
    auto s = check(R"(model ir=8 opsets={"": 14}
  graph @g(%x: f32[2,16,8,8], %r: f32[2,6,8,8]) -> (%y: f32[2,6,8,8], %z: f32[2,4,8,8]) {
    %w1 = )" + rand_const({4, 16, 1, 1}, 40) + R"(
    %b1 = )" + rand_const({4}, 41) + R"(
    %w2 = )" + rand_const({16, 4, 1, 1}, 42) + R"(
    %b2 = )" + rand_const({16}, 43) + R"(
    %w3 = )" + rand_const({6, 16, 1, 1}, 44) + R"(
    %b3 = )" + rand_const({6}, 45) + R"(
    %w4 = )" + rand_const({4, 16, 3, 3}, 46) + R"(
    %p = GlobalAveragePool(%x) : f32[2,16,1,1]
    %f1 = Conv(%p, %w1, %b1) : f32[2,4,1,1]
    %a1 = Relu(%f1) : f32[2,4,1,1]
    %f2 = Conv(%a1, %w2, %b2) : f32[2,16,1,1]
    %g = Sigmoid(%f2) : f32[2,16,1,1]
    %m = Mul(%x, %g) : f32[2,16,8,8]
    %c = Conv(%m, %w3, %b3) : f32[2,6,8,8]
    %y = Add(%c, %r) : f32[2,6,8,8]
    %m2 = Mul(%g, %x) : f32[2,16,8,8]
    %z = Conv(%m2, %w4) {pads=[1, 1, 1, 1]} : f32[2,4,8,8]
    return %y, %z
  })", threads);
    // Conv+Relu, Conv+Sigmoid, Mul+Conv+Add, Mul+Conv; the pool is a generated kernel.
    EXPECT_EQ(s.gemm_nodes, 9);
    EXPECT_EQ(s.generated_nodes, 1);
    EXPECT_EQ(s.fallback_nodes, 0);
  }
}

// The Mul stays a step of its own when its output is also used elsewhere or is a graph output,
// when scaling the weights would cost more than the Mul (more weights per input channel than
// pixels), when it broadcasts along another axis than the channels, and when it is a SiLU's
// (Mul(v, Sigmoid(v)), fused into the conv before it instead).
TEST(GemmEpilogue, InputScaleNotFused) {
  auto s = check(R"(model ir=8 opsets={"": 14}
  graph @g(%x: f32[1,8,5,5], %s: f32[1,8,1,1], %t: f32[1,1,1,5]) -> (%y: f32[1,4,5,5], %m: f32[1,8,5,5], %z: f32[1,40,5,5], %u: f32[1,4,5,5], %v: f32[1,4,5,5], %q: f32[1,4,5,5]) {
    %w = )" + rand_const({4, 8, 1, 1}, 50) + R"(
    %w40 = )" + rand_const({40, 8, 1, 1}, 51) + R"(
    %w8 = )" + rand_const({8, 8, 1, 1}, 52) + R"(
    %m = Mul(%x, %s) : f32[1,8,5,5]
    %y = Conv(%m, %w) : f32[1,4,5,5]
    %m2 = Mul(%x, %s) : f32[1,8,5,5]
    %z = Conv(%m2, %w40) : f32[1,40,5,5]
    %m3 = Mul(%x, %t) : f32[1,8,5,5]
    %u = Conv(%m3, %w) : f32[1,4,5,5]
    %m4 = Mul(%s, %x) : f32[1,8,5,5]
    %v = Conv(%m4, %w) : f32[1,4,5,5]
    %c5 = Conv(%x, %w8) : f32[1,8,5,5]
    %g5 = Sigmoid(%c5) : f32[1,8,5,5]
    %m5 = Mul(%c5, %g5) : f32[1,8,5,5]
    %q = Conv(%m5, %w) : f32[1,4,5,5]
    return %y, %m, %z, %u, %v, %q
  })");
  EXPECT_EQ(s.gemm_nodes, 9);  // the six convs, %m4 and the SiLU
  EXPECT_EQ(s.generated_nodes, 3);
}

// Float64 convs have no GEMM op: their Mul stays where it is.
TEST(GemmEpilogue, InputScaleFloat64NotFused) {
  auto s = check(R"(model ir=8 opsets={"": 14}
  graph @g(%x: f64[1,8,5,5], %s: f64[1,8,1,1]) -> (%y: f64[1,4,5,5]) {
    %w = const f64[4,8,1,1] [)" + [] {
    std::string v;
    for (int i = 0; i < 32; ++i) v += (i ? ", " : "") + std::to_string((i % 7 - 3) * 0.25);
    return v;
  }() + R"(]
    %m = Mul(%x, %s) : f64[1,8,5,5]
    %y = Conv(%m, %w) : f64[1,4,5,5]
    return %y
  })");
  EXPECT_EQ(s.gemm_nodes, 0);
  EXPECT_EQ(s.generated_nodes + s.fallback_nodes, 2);
}

// The stem conv kernels (and with them the fused max pool) exist for AVX-512 and AVX2.
bool have_stem_kernel() {
  const kernels::Isa isa = kernels::f32_gemm_default().isa;
  return isa == kernels::Isa::kAvx512 || isa == kernels::Isa::kAvx2;
}

// A stem conv's Relu and 3x3 / stride 2 / pad 1 MaxPool run in its step (AVX-512 and AVX2: the stem
// kernel pools from cache); 1 and 2 threads, odd and even plane sizes.
TEST(GemmEpilogue, StemMaxPool) {
  for (int threads : {1, 2})
    for (const char* dims : {"1,3,30,30:1,8,15,15:1,8,8,8", "2,3,25,26:2,8,13,13:2,8,7,7"}) {
      const std::string d = dims;
      const std::string x = d.substr(0, d.find(':')), c = d.substr(d.find(':') + 1, d.rfind(':') - d.find(':') - 1),
                        y = d.substr(d.rfind(':') + 1);
      auto s = check(std::string(kHeader13) + "graph @g(%x: f32[" + x + "]) -> (%y: f32[" + y + "]) {\n    %w = " +
                         rand_const({8, 3, 3, 3}, 60) + "\n    %b = " + rand_const({8}, 61) +
                         "\n    %c = Conv(%x, %w, %b) {strides=[2, 2], pads=[1, 1, 1, 1]} : f32[" + c +
                         "]\n    %r = Relu(%c) : f32[" + c + "]\n    %y = MaxPool(%r) {kernel_shape=[3, 3], strides=[2, 2], "
                         "pads=[1, 1, 1, 1]} : f32[" + y + "]\n    return %y\n  }",
                     threads);
      EXPECT_EQ(s.gemm_nodes, have_stem_kernel() ? 3 : 2) << dims;
      EXPECT_EQ(s.generated_nodes, have_stem_kernel() ? 0 : 1) << dims;
    }
}

// The MaxPool stays a kernel of its own after a conv that is no stem (16 input channels), with
// other windows (ceil mode, no pad), when the conv's output is used elsewhere too, and with the
// indices output.
TEST(GemmEpilogue, MaxPoolNotFused) {
  auto s = check(R"(model ir=8 opsets={"": 13}
  graph @g(%x: f32[1,16,20,20], %v: f32[1,3,20,20]) -> (%y: f32[1,8,5,5], %z: f32[1,8,6,6], %u: f32[1,8,5,5], %c4: f32[1,8,10,10], %q: f32[1,8,5,5], %i: i64[1,8,5,5]) {
    %w = )" + rand_const({8, 16, 3, 3}, 62) + R"(
    %w3 = )" + rand_const({8, 3, 3, 3}, 63) + R"(
    %c = Conv(%x, %w) {strides=[2, 2], pads=[1, 1, 1, 1]} : f32[1,8,10,10]
    %y = MaxPool(%c) {kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]} : f32[1,8,5,5]
    %c2 = Conv(%v, %w3) {strides=[2, 2], pads=[1, 1, 1, 1]} : f32[1,8,10,10]
    %z = MaxPool(%c2) {kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1} : f32[1,8,6,6]
    %c3 = Conv(%v, %w3) {strides=[2, 2], pads=[1, 1, 1, 1]} : f32[1,8,10,10]
    %u = MaxPool(%c3) {kernel_shape=[2, 2], strides=[2, 2]} : f32[1,8,5,5]
    %c4 = Conv(%v, %w3) {strides=[2, 2], pads=[1, 1, 1, 1]} : f32[1,8,10,10]
    %q = MaxPool(%c4) {kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]} : f32[1,8,5,5]
    %c5 = Conv(%v, %w3) {strides=[2, 2], pads=[1, 1, 1, 1]} : f32[1,8,10,10]
    %p5, %i = MaxPool(%c5) {kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]} : f32[1,8,5,5], i64[1,8,5,5]
    return %y, %z, %u, %c4, %q, %i
  })");
  EXPECT_EQ(s.gemm_nodes, 5);  // the convs alone
}

// Writes the plan the compiled executor made for `text` to an ahead-of-time plan blob, reads it
// back, rebuilds its ops from the serialized descriptors and expects what the JIT plan computed,
// bit for bit. Returns the plan read back.
ExecPlan expect_blob_round_trip(const std::string& text, int gemm_nodes) {
  Model m = parse_model(text);
  PassContext ctx;
  run_passes(m, {"shape-inference", "fusion", "fuse-epilogues"}, ctx);
  const std::vector<RtValue> feeds = test::random_feeds(m, 9);
  CompiledExecutor exec(m, CompiledOptions());
  auto want = exec.run(feeds);
  EXPECT_EQ(exec.stats().gemm_nodes, gemm_nodes);
  const ExecPlan* plan = exec.last_exec_plan();
  EXPECT_NE(plan, nullptr);
  if (!plan) return ExecPlan();
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("kiln_epilogue_blob_" + std::to_string(::getpid()) + ".bin")).string();
  const uint64_t bytes = write_plan_blob(*plan, path);
  std::vector<char> data(bytes + 64);
  char* base = data.data() + (64 - reinterpret_cast<uintptr_t>(data.data()) % 64) % 64;
  std::ifstream(path, std::ios::binary).read(base, static_cast<std::streamsize>(bytes));
  std::filesystem::remove(path);
  ExecPlan back = read_plan_blob(base, bytes);
  back.allocate_arena();
  auto got = execute_plan(back, feeds, {}, nullptr, nullptr);
  EXPECT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size() && k < want.size(); ++k) {
    EXPECT_EQ(got[k].tensor.dims(), want[k].tensor.dims());
    for (int64_t i = 0; i < got[k].tensor.numel() && i < want[k].tensor.numel(); ++i)
      if (got[k].tensor.data<float>()[i] != want[k].tensor.data<float>()[i]) {
        ADD_FAILURE() << "output " << k << " [" << i << "]";
        break;
      }
  }
  return back;
}

TEST(GemmEpilogue, PlanBlobRoundTrip) {
  // The fused descriptors survive the ahead-of-time plan blob.
  ExecPlan back = expect_blob_round_trip(std::string(kHeader13) + R"(graph @g(%x: f32[1,6,5,7], %r: f32[1,8,5,7], %a: f32[5,12]) -> (%y: f32[1,8,5,7], %z: f32[5,9]) {
    %w = )" + rand_const({8, 6, 3, 3}, 30) + R"(
    %b = )" + rand_const({1, 8, 1, 1}, 31) + R"(
    %v = )" + rand_const({12, 9}, 32) + R"(
    %e = )" + rand_const({9}, 33) + R"(
    %lo = const f32[] [-0.1]
    %hi = const f32[] [0.2]
    %c = Conv(%x, %w) {pads=[1, 1, 1, 1]} : f32[1,8,5,7]
    %d = Add(%c, %b) : f32[1,8,5,7]
    %s = Add(%d, %r) : f32[1,8,5,7]
    %y = Relu(%s) : f32[1,8,5,7]
    %m = MatMul(%a, %v) : f32[5,9]
    %n = Add(%m, %e) : f32[5,9]
    %z = Clip(%n, %lo, %hi) : f32[5,9]
    return %y, %z
  })", 7);
  int fused = 0;
  for (const auto& st : back.steps) {
    EXPECT_EQ(st.kind, PlanStep::Kind::kGemm);  // every node runs in the two GEMM steps
    fused += st.gemm.epilogue_bias >= 0;
  }
  EXPECT_EQ(fused, 2);
}

TEST(GemmEpilogue, StemMaxPoolPlanBlobRoundTrip) {
  if (!have_stem_kernel()) GTEST_SKIP() << "no AVX-512 or AVX2";
  ExecPlan back = expect_blob_round_trip(std::string(kHeader13) + R"(graph @g(%x: f32[1,3,20,20]) -> (%y: f32[1,8,5,5]) {
    %w = )" + rand_const({8, 3, 3, 3}, 64) + R"(
    %c = Conv(%x, %w) {strides=[2, 2], pads=[1, 1, 1, 1]} : f32[1,8,10,10]
    %r = Relu(%c) : f32[1,8,10,10]
    %y = MaxPool(%r) {kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]} : f32[1,8,5,5]
    return %y
  })", 3);
  ASSERT_EQ(back.steps.size(), 1u);
  EXPECT_EQ(back.steps[0].gemm.epilogue_max_pool, 1);
}

TEST(GemmEpilogue, InputScalePlanBlobRoundTrip) {
  ExecPlan back = expect_blob_round_trip(std::string(kHeader13) + R"(graph @g(%x: f32[1,8,6,6], %s: f32[1,8,1,1]) -> (%y: f32[1,5,6,6]) {
    %w = )" + rand_const({5, 8, 1, 1}, 34) + R"(
    %m = Mul(%x, %s) : f32[1,8,6,6]
    %y = Conv(%m, %w) : f32[1,5,6,6]
    return %y
  })", 2);
  ASSERT_EQ(back.steps.size(), 1u);
  EXPECT_EQ(back.steps[0].gemm.input_scale, 3);
}

TEST(GemmEpilogue, ConvTransposePlanBlobRoundTrip) {
  // The descriptor carries the resolved pads (here from output_shape): the op rebuilt from the
  // blob needs no node attributes.
  ExecPlan back = expect_blob_round_trip(std::string(kHeader13) + R"(graph @g(%x: f32[1,6,5,5]) -> (%y: f32[1,4,10,9]) {
    %w = )" + rand_const({6, 2, 3, 3}, 35) + R"(
    %b = )" + rand_const({4}, 36) + R"(
    %c = ConvTranspose(%x, %w, %b) {group=2, strides=[2, 2], output_shape=[10, 9]} : f32[1,4,10,9]
    %y = Relu(%c) : f32[1,4,10,9]
    return %y
  })", 2);
  ASSERT_EQ(back.steps.size(), 1u);
  EXPECT_EQ(back.steps[0].gemm.kind, gemm_ops::GemmKind::kConvTranspose);
}

TEST(GemmEpilogue, ChannelsLastPlanBlobRoundTrip) {
  // A channels-last depthwise conv (what the assign-layouts pass makes) with its fused ReLU: the
  // kind travels in the descriptor.
  ExecPlan back = expect_blob_round_trip(std::string("model ir=8 opsets={\"\": 13, \"kiln\": 1}\n") +
                                             R"(graph @g(%x: f32[1,7,7,20]) -> (%y: f32[1,7,7,20]) {
    %w = )" + rand_const({20, 1, 3, 3}, 40) + R"(
    %b = )" + rand_const({20}, 41) + R"(
    %c = kiln::NhwcConv(%x, %w, %b) {group=20, pads=[1, 1, 1, 1]} : f32[1,7,7,20]
    %y = Relu(%c) : f32[1,7,7,20]
    return %y
  })", 2);
  ASSERT_EQ(back.steps.size(), 1u);
  EXPECT_EQ(back.steps[0].gemm.kind, gemm_ops::GemmKind::kConvNhwc);
}

TEST(GemmEpilogue, RecurrentPlanBlobRoundTrip) {
  // The recurrent attributes (direction, layout, the output in use) travel in the descriptor.
  ExecPlan back = expect_blob_round_trip(std::string(kHeader13) + R"(graph @g(%x: f32[2,5,6], %h0: f32[2,2,8]) -> (%yh: f32[2,2,8]) {
    %w = )" + rand_const({2, 24, 6}, 37, 0.4) + R"(
    %r = )" + rand_const({2, 24, 8}, 38, 0.4) + R"(
    %b = )" + rand_const({2, 48}, 39, 0.4) + R"(
    %y, %yh = GRU(%x, %w, %r, %b, _, %h0) {hidden_size=8, direction="bidirectional", layout=1, linear_before_reset=1} : f32[2,5,2,8], f32[2,2,8]
    return %yh
  })", 1);
  ASSERT_EQ(back.steps.size(), 1u);
  EXPECT_EQ(back.steps[0].gemm.kind, gemm_ops::GemmKind::kGru);
  EXPECT_EQ(back.steps[0].gemm.rnn.output, 1);
  EXPECT_EQ(back.steps[0].gemm.rnn.direction, 2);
  EXPECT_EQ(back.steps[0].gemm.rnn.layout, 1);
}

}  // namespace
}  // namespace kiln
