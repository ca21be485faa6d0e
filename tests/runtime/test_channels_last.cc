// Channels-last conv chains end to end: kiln::NhwcConv's reference kernel against Conv between
// two Transposes; the assign-layouts pass plus the compiled executor (the NHWC depthwise op, the
// MatMul for 1x1 convs with its fused bias/residual/clamp, squeeze-and-excitation gates, the
// pooled exit) against the interpreter on the original model, at batch 1 and 2, 1 and 2 threads;
// and the chains the pass must leave alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "../common/engines_agree.h"
#include "../common/random_const.h"
#include "ir/text.h"
#include "pass/pass.h"
#include "driver/compiled_executor.h"
#include "runtime/interpreter.h"

namespace kiln {
namespace {

using test::dims_text;
using test::rand_const;

TEST(ChannelsLast, NhwcConvReferenceIsConvBetweenTransposes) {
  struct Case {
    int64_t c, m, group, k, stride, pad;
    bool bias;
  };
  const Case cases[] = {{8, 8, 8, 3, 1, 1, true}, {6, 6, 6, 5, 2, 2, false}, {4, 6, 2, 3, 1, 0, true},
                        {3, 5, 1, 1, 1, 0, true}};
  std::mt19937_64 rng(3);
  for (const Case& c : cases) {
    const int64_t h = 7, w = 6, ho = (h + 2 * c.pad - c.k) / c.stride + 1, wo = (w + 2 * c.pad - c.k) / c.stride + 1;
    std::ostringstream attrs;
    attrs << "group=" << c.group << ", strides=[" << c.stride << ", " << c.stride << "], pads=[" << c.pad << ", "
          << c.pad << ", " << c.pad << ", " << c.pad << "]";
    const std::string wconst = rand_const({c.m, c.c / c.group, c.k, c.k}, rng);
    const std::string bconst = rand_const({c.m}, rng);
    const std::string ins = c.bias ? "%x, %w, %b" : "%x, %w";
    std::ostringstream nhwc, nchw;
    nhwc << "model ir=8 opsets={\"\": 13, \"kiln\": 1}\n"
         << "graph @g(%x: f32[2," << h << "," << w << "," << c.c << "]) -> (%y: f32[2," << ho << "," << wo << "," << c.m
         << "]) {\n  %w = " << wconst << "\n  %b = " << bconst << "\n  %y = kiln::NhwcConv(" << ins << ") {" << attrs.str()
         << "} : f32[2," << ho << "," << wo << "," << c.m << "]\n  return %y\n}";
    nchw << "model ir=8 opsets={\"\": 13}\n"
         << "graph @g(%x: f32[2," << h << "," << w << "," << c.c << "]) -> (%y: f32[2," << ho << "," << wo << "," << c.m
         << "]) {\n  %w = " << wconst << "\n  %b = " << bconst << "\n  %t = Transpose(%x) {perm=[0, 3, 1, 2]} : f32[2,"
         << c.c << "," << h << "," << w << "]\n  %v = Conv(" << (c.bias ? "%t, %w, %b" : "%t, %w") << ") {" << attrs.str()
         << "} : f32[2," << c.m << "," << ho << "," << wo << "]\n  %y = Transpose(%v) {perm=[0, 2, 3, 1]} : f32[2," << ho
         << "," << wo << "," << c.m << "]\n  return %y\n}";
    Model a = parse_model(nhwc.str()), b = parse_model(nchw.str());
    PassContext ctx;
    run_passes(a, {"shape-inference"}, ctx);  // NhwcConv's inference must agree with the declared type
    EXPECT_EQ(to_string(a.graph->outputs[0]->type), "f32[2," + std::to_string(ho) + "," + std::to_string(wo) + "," +
                                                        std::to_string(c.m) + "]");
    const std::vector<RtValue> feeds = test::random_feeds(a, 4);
    SCOPED_TRACE(nhwc.str());
    test::outputs_agree(Interpreter(a).run(feeds), Interpreter(b).run(feeds), nhwc.str());
  }
}

// A MobileNetV2-like tail at a 7x7 plane (or smaller): depthwise 3x3 with stride 2 from twice
// the plane + ReLU6, projection 1x1 + ReLU (a graph output too); a block of expansion 1x1 +
// ReLU6, depthwise 3x3 + ReLU6, projection 1x1 and residual; a last 1x1 + ReLU6 and a global
// average pool.
// With `se`, a squeeze-and-excitation gate (pool, 1x1 + ReLU, 1x1 + HardSigmoid, Mul) before the
// second projection, its first bias shared through an Identity as exporters do.
std::string mobile_tail(int64_t n, int64_t plane, int64_t c, int64_t e, uint64_t seed, bool se = false) {
  std::mt19937_64 rng(seed);
  const int64_t in = 2 * plane;
  auto t = [&](int64_t ch, int64_t p) { return "f32[" + dims_text({n, ch, p, p}) + "]"; };
  std::ostringstream os;
  os << "model ir=8 opsets={\"\": 13}\n"
     << "graph @g(%x: " << t(e, in) << ") -> (%y: f32[" << n << "," << 4 * c
     << ",1,1], %mid: " << t(c, plane) << ") {\n"
     << "  %lo = const f32[] [0]\n  %hi = const f32[] [6]\n"
     << "  %w0 = " << rand_const({e, 1, 3, 3}, rng) << "\n  %b0 = " << rand_const({e}, rng) << "\n"
     << "  %w1 = " << rand_const({c, e, 1, 1}, rng, 0.3) << "\n  %b1 = " << rand_const({c}, rng) << "\n"
     << "  %w2 = " << rand_const({e, c, 1, 1}, rng, 0.3) << "\n  %b2 = " << rand_const({e}, rng) << "\n"
     << "  %w3 = " << rand_const({e, 1, 3, 3}, rng) << "\n  %b3 = " << rand_const({e}, rng) << "\n"
     << "  %w4 = " << rand_const({c, e, 1, 1}, rng, 0.3) << "\n"
     << "  %w5 = " << rand_const({4 * c, c, 1, 1}, rng, 0.3) << "\n  %b5 = " << rand_const({4 * c}, rng) << "\n"
     << "  %d0 = Conv(%x, %w0, %b0) {group=" << e << ", strides=[2, 2], pads=[1, 1, 1, 1]} : " << t(e, plane) << "\n"
     << "  %a0 = Clip(%d0, %lo, %hi) : " << t(e, plane) << "\n"
     << "  %p1 = Conv(%a0, %w1, %b1) : " << t(c, plane) << "\n"
     << "  %mid = Relu(%p1) : " << t(c, plane) << "\n"
     << "  %x2 = Conv(%mid, %w2, %b2) : " << t(e, plane) << "\n"
     << "  %a2 = Clip(%x2, %lo, %hi) : " << t(e, plane) << "\n"
     << "  %d3 = Conv(%a2, %w3, %b3) {group=" << e << ", pads=[1, 1, 1, 1]} : " << t(e, plane) << "\n"
     << "  %a3 = Clip(%d3, %lo, %hi) : " << t(e, plane) << "\n";
  if (se)
    os << "  %v1 = " << rand_const({8, e, 1, 1}, rng, 0.3) << "\n  %c1 = " << rand_const({8}, rng) << "\n"
       << "  %v2 = " << rand_const({e, 8, 1, 1}, rng, 0.3) << "\n  %c2 = " << rand_const({e}, rng) << "\n"
       << "  %c1s = Identity(%c1) : f32[8]\n"
       << "  %q = GlobalAveragePool(%a3) : " << t(e, 1) << "\n"
       << "  %f1 = Conv(%q, %v1, %c1s) : " << t(8, 1) << "\n"
       << "  %r1 = Relu(%f1) : " << t(8, 1) << "\n"
       << "  %f2 = Conv(%r1, %v2, %c2) : " << t(e, 1) << "\n"
       << "  %gate = HardSigmoid(%f2) : " << t(e, 1) << "\n"
       << "  %g3 = Mul(%a3, %gate) : " << t(e, plane) << "\n";
  os << "  %p4 = Conv(%" << (se ? "g3" : "a3") << ", %w4) : " << t(c, plane) << "\n"
     << "  %s4 = Add(%p4, %mid) : " << t(c, plane) << "\n"
     << "  %x5 = Conv(%s4, %w5, %b5) : " << t(4 * c, plane) << "\n"
     << "  %a5 = Clip(%x5, %lo, %hi) : " << t(4 * c, plane) << "\n"
     << "  %y = GlobalAveragePool(%a5) : f32[" << n << "," << 4 * c << ",1,1]\n"
     << "  return %y, %mid\n}";
  return os.str();
}

struct Rewritten {
  std::vector<gemm_ops::GemmKind> kinds;  // of the plan's GEMM steps
  int transposes = 0;                     // Transpose nodes the pass added
};

// Runs `text` through the pass and the compiled executor and the original through the
// interpreter.
Rewritten chain_agrees(const std::string& text, int threads) {
  Model original = parse_model(text), rewritten = parse_model(text);
  PassContext ctx;
  run_passes(original, {"shape-inference"}, ctx);
  run_passes(rewritten, {"shape-inference", "assign-layouts", "fusion", "fuse-epilogues"}, ctx);
  const std::vector<RtValue> feeds = test::random_feeds(original, 5);
  const std::vector<RtValue> want = Interpreter(original).run(feeds);
  CompiledOptions opts;
  opts.threads = threads;
  CompiledExecutor exec(rewritten, opts);
  Rewritten r;
  for (int rep = 0; rep < 2; ++rep) test::outputs_agree(exec.run(feeds), want, text);
  EXPECT_EQ(exec.stats().fallback_nodes, 0) << text;
  if (const ExecPlan* plan = exec.last_exec_plan())
    for (const PlanStep& st : plan->steps)
      if (st.kind == PlanStep::Kind::kGemm) r.kinds.push_back(st.gemm.kind);
  for (const auto& n : rewritten.graph->nodes) r.transposes += n->op_type == "Transpose";
  return r;
}

TEST(ChannelsLast, MobileTailMatchesInterpreter) {
  struct Case {
    int64_t n, plane, c, e;
  };
  // 16-lane channel blocks, and counts with partial blocks (24, 40).
  const Case cases[] = {{1, 7, 16, 96}, {2, 4, 24, 40}, {1, 5, 8, 20}};
  for (int threads : {1, 2})
    for (const Case& c : cases)
      for (bool se : {false, true}) {
        const std::string text = mobile_tail(c.n, c.plane, c.c, c.e, 7 + c.c, se);
        const Rewritten r = chain_agrees(text, threads);
        const auto nhwc = std::count(r.kinds.begin(), r.kinds.end(), gemm_ops::GemmKind::kConvNhwc);
        const auto matmuls = std::count(r.kinds.begin(), r.kinds.end(), gemm_ops::GemmKind::kMatMul);
        // Both depthwise convs channels-last, the four 1x1 convs (and the gate's two) as MatMuls;
        // transposes for %x in and %mid out only: the pool's output leaves reshaped.
        EXPECT_EQ(nhwc, 2) << text;
        EXPECT_EQ(matmuls, se ? 6 : 4) << text;
        EXPECT_EQ(r.transposes, 2) << text;
      }
}

// expansion 1x1 + ReLU, depthwise 3x3, and (with `long_chain`) two more 1x1 convs: four convs
// between one entering and one leaving value, or two.
std::string plain_chain(int64_t plane, bool long_chain) {
  std::mt19937_64 rng(8);
  const std::string t = "f32[" + dims_text({1, 32, plane, plane}) + "]", p = std::to_string(plane);
  std::string text = "model ir=8 opsets={\"\": 13}\ngraph @g(%x: f32[1,8," + p + "," + p + "]) -> (%y: " +
                     (long_chain ? "f32[1,8," + p + "," + p + "]" : t) + ") {\n  %w0 = " + rand_const({32, 8, 1, 1}, rng) +
                     "\n  %w1 = " + rand_const({32, 1, 3, 3}, rng) + "\n  %w2 = " + rand_const({16, 32, 1, 1}, rng) +
                     "\n  %w3 = " + rand_const({8, 16, 1, 1}, rng) + "\n  %a = Conv(%x, %w0) : " + t +
                     "\n  %r = Relu(%a) : " + t + "\n  %" + (long_chain ? "d" : "y") +
                     " = Conv(%r, %w1) {group=32, pads=[1, 1, 1, 1]} : " + t + "\n";
  if (long_chain)
    text += "  %e = Conv(%d, %w2) : f32[1,16," + p + "," + p + "]\n  %y = Conv(%e, %w3) : f32[1,8," + p + "," + p + "]\n";
  return text + "  return %y\n}";
}

TEST(ChannelsLast, PassLeavesLargePlanesAndShortChainsAlone) {
  auto count = [](const Rewritten& r, gemm_ops::GemmKind k) { return std::count(r.kinds.begin(), r.kinds.end(), k); };
  // Four convs between two boundaries: rewritten at 7x7 (49 pixels), not at 9x9 (81).
  Rewritten r = chain_agrees(plain_chain(7, true), 1);
  EXPECT_EQ(count(r, gemm_ops::GemmKind::kConvNhwc), 1);
  EXPECT_EQ(r.transposes, 2);
  r = chain_agrees(plain_chain(9, true), 1);
  EXPECT_EQ(count(r, gemm_ops::GemmKind::kConv), 4);
  EXPECT_EQ(r.transposes, 0);
  // Two convs between two boundaries: the transposes would cost what the chain saves.
  r = chain_agrees(plain_chain(7, false), 1);
  EXPECT_EQ(count(r, gemm_ops::GemmKind::kConv), 2);
}

}  // namespace
}  // namespace kiln
