// Compiled executor vs the interpreter: hand-written graphs (elementwise chains, broadcasting,
// reductions, softmax, a Conv fallback with a fused epilogue, concats in place) and ~50 seeded random graphs of
// elementwise/broadcast/reduction/injective ops with odd and size-1 dims.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <sstream>

#include "../common/random_const.h"
#include "driver/compiled_executor.h"
#include "ir/text.h"
#include "kernels/x86/f32_gemm.h"
#include "pass/pass.h"
#include "runtime/interpreter.h"
#include "runtime/pack_cache.h"

namespace kiln {
namespace {

Model prepare(const std::string& text) {
  Model m = parse_model(text);
  PassContext ctx;
  run_passes(m, {"shape-inference", "fusion", "fuse-epilogues"}, ctx);
  return m;
}

std::vector<RtValue> random_feeds(const Model& m, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uni(-2.0, 2.0);
  std::vector<RtValue> feeds;
  for (const Value* v : m.graph->inputs) {
    Tensor t(v->type.dtype, v->type.shape->sizes());
    for (int64_t i = 0; i < t.numel(); ++i) t.set_double(i, is_float(t.dtype()) ? uni(rng) : std::floor(uni(rng) * 3));
    feeds.emplace_back(std::move(t));
  }
  return feeds;
}

void expect_close(const std::vector<RtValue>& got, const std::vector<RtValue>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t k = 0; k < got.size(); ++k) {
    ASSERT_TRUE(got[k].is_tensor() && want[k].is_tensor()) << what;
    const Tensor& a = got[k].tensor;
    const Tensor& b = want[k].tensor;
    ASSERT_EQ(a.dtype(), b.dtype()) << what;
    ASSERT_EQ(a.dims(), b.dims()) << what << " output " << k;
    for (int64_t i = 0; i < a.numel(); ++i) {
      double x = a.get_double(i), y = b.get_double(i);
      if (std::isnan(y)) {
        ASSERT_TRUE(std::isnan(x)) << what << " output " << k << " [" << i << "]";
        continue;
      }
      ASSERT_NEAR(x, y, 1e-4 + 1e-4 * std::fabs(y)) << what << " output " << k << " [" << i << "]";
    }
  }
}

// Runs `text` through both engines (twice compiled: the plan is cached) and compares.
CompileStats check(const std::string& text, uint64_t seed = 1, int threads = 1) {
  Model m = prepare(text);
  Interpreter interp(m);
  CompiledOptions opts;
  opts.threads = threads;
  CompiledExecutor exec(m, opts);
  auto feeds = random_feeds(m, seed);
  auto want = interp.run(feeds);
  expect_close(exec.run(feeds), want, text);
  expect_close(exec.run(feeds), want, text);
  EXPECT_EQ(exec.cached_plans(), 1u);
  return exec.stats();
}

TEST(CompiledExecutor, ElementwiseChain) {
  auto s = check(R"(graph @g(%x: f32[3,37]) -> (%y: f32[3,37]) {
    %a = Relu(%x) : f32[3,37]
    %b = Exp(%a) : f32[3,37]
    %c = Neg(%b) : f32[3,37]
    %d = Tanh(%c) : f32[3,37]
    %y = Sigmoid(%d) : f32[3,37]
    return %y
  })");
  EXPECT_EQ(s.generated_nodes, 5);
  EXPECT_EQ(s.fallback_nodes, 0);
  EXPECT_EQ(s.kernels, 1);
}

// The default pipeline turns x*Sigmoid(x) and the HardSwish pattern into kiln::Silu /
// kiln::HardSwish; a GEMM step still takes them into its epilogue (no separate kernel).
TEST(CompiledExecutor, CompositeActivationsJoinTheGemmEpilogue) {
  const char* text = R"(graph @g(%x: f32[4,64], %w: f32[64,32], %w2: f32[32,32]) -> (%y: f32[4,32]) {
    %three = const f32[] [3]
    %zero = const f32[] [0]
    %six = const f32[] [6]
    %m = MatMul(%x, %w) : f32[4,32]
    %s = Sigmoid(%m) : f32[4,32]
    %a = Mul(%m, %s) : f32[4,32]
    %m2 = MatMul(%a, %w2) : f32[4,32]
    %p = Add(%m2, %three) : f32[4,32]
    %c = Clip(%p, %zero, %six) : f32[4,32]
    %h = Mul(%m2, %c) : f32[4,32]
    %y = Div(%h, %six) : f32[4,32]
    return %y
  })";
  Model m = parse_model(text);
  PassContext ctx;
  run_passes(m, default_pipeline(), ctx);
  EXPECT_EQ(op_histogram(*m.graph)["kiln::Silu"], 1);
  EXPECT_EQ(op_histogram(*m.graph)["kiln::HardSwish"], 1);
  Model ref = parse_model(text);
  Interpreter interp(ref);
  CompiledExecutor exec(m);
  auto feeds = random_feeds(ref, 7);
  expect_close(exec.run(feeds), interp.run(feeds), text);
  EXPECT_EQ(exec.stats().gemm_nodes, 4);  // two MatMuls, each with its activation
  EXPECT_EQ(exec.stats().kernels, 0);
}

// Kernels equal up to their names (repeated layers) are compiled once and share code.
TEST(CompiledExecutor, IdenticalKernelsShareCode) {
  auto s = check(R"(graph @g(%x: f32[4,8], %w: f32[8,8]) -> (%y: f32[4,8]) {
    %a = Exp(%x) : f32[4,8]
    %b = Neg(%a) : f32[4,8]
    %m = MatMul(%b, %w) : f32[4,8]
    %c = Exp(%m) : f32[4,8]
    %y = Neg(%c) : f32[4,8]
    return %y
  })");
  EXPECT_EQ(s.kernels, 2);
  EXPECT_EQ(s.compiled_kernels, 1);
  EXPECT_EQ(s.gemm_nodes, 1);
}

// Plans of two input signatures share the packed constant weight (runtime/pack_cache.h), and
// freeing the executor frees it.
TEST(CompiledExecutor, SignaturesSharePackedWeights) {
  std::mt19937_64 rng(5);
  Model m = prepare("graph @g(%x: f32[N,64]) -> (%y: f32[N,48]) {\n  %w = " + test::rand_const({64, 48}, rng) +
                    "\n  %y = MatMul(%x, %w) : f32[N,48]\n  return %y\n}");
  Interpreter interp(m);
  const size_t before = PackCache<kernels::PackedB>::global().live();
  {
    CompiledExecutor exec(m);
    for (int64_t n : {1, 3, 7}) {
      Tensor x(DType::kFloat32, {n, 64});
      for (int64_t i = 0; i < x.numel(); ++i) x.set_double(i, std::sin(0.3 * static_cast<double>(i)));
      expect_close(exec.run({RtValue(x)}), interp.run({RtValue(x)}), "n=" + std::to_string(n));
    }
    EXPECT_EQ(exec.cached_plans(), 3u);
    EXPECT_EQ(PackCache<kernels::PackedB>::global().live(), before + 1);
  }
  EXPECT_EQ(PackCache<kernels::PackedB>::global().live(), before);
}

// Symbolic-shape kernels: the dims that vary with the input sizes (B, S) are kernel params, so
// every signature after the first runs kernels an earlier plan compiled (no LLVM), and each
// matches the interpreter. Covers attention-like chains: a head split (Reshape + Transpose), a
// batched MatMul, a mask broadcast over heads and queries, Softmax over the symbolic axis, a
// mean over it, a Concat along it, and size-1 dims (B = 1) that stay constants.
TEST(CompiledExecutor, SymbolicDimsShareKernelsAcrossSignatures) {
  Model m = prepare(R"(model ir=8 opsets={"": 13}
graph @g(%x: f32[B,S,64], %mask: f32[B,S]) -> (%y: f32[B,4,S,16], %z: f32[B,S,64], %w: f32[B,S2,64]) {
    %shape = const i64[4] [0, 0, 4, 16]
    %r = Reshape(%x, %shape) : f32[B,S,4,16]
    %t = Transpose(%r) {perm=[0, 2, 1, 3]} : f32[B,4,S,16]
    %tt = Transpose(%r) {perm=[0, 2, 3, 1]} : f32[B,4,16,S]
    %s = MatMul(%t, %tt) : f32[B,4,S,S]
    %ax = const i64[2] [1, 2]
    %mu = Unsqueeze(%mask, %ax) : f32[B,1,1,S]
    %a = Add(%s, %mu) : f32[B,4,S,S]
    %p = Softmax(%a) {axis=-1} : f32[B,4,S,S]
    %y = MatMul(%p, %t) : f32[B,4,S,16]
    %mean = ReduceMean(%x) {axes=[1]} : f32[B,1,64]
    %e = Exp(%x) : f32[B,S,64]
    %z = Sub(%e, %mean) : f32[B,S,64]
    %w = Concat(%z, %x) {axis=1} : f32[B,S2,64]
    return %y, %z, %w
  })");
  Interpreter interp(m);
  CompiledExecutor exec(m);
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  auto feeds_of = [&](int64_t b, int64_t sq) {
    Tensor x(DType::kFloat32, {b, sq, 64}), mask(DType::kFloat32, {b, sq});
    for (int64_t i = 0; i < x.numel(); ++i) x.set_double(i, uni(rng));
    for (int64_t i = 0; i < mask.numel(); ++i) mask.set_double(i, uni(rng) < 0 ? -100.0 : 0.0);
    return std::vector<RtValue>{RtValue(x), RtValue(mask)};
  };
  // Sizes below every parallel-work threshold of the schedule rules (whose decisions specialise a
  // kernel), then a large one: the first of each kind compiles, the rest take every kernel
  // from the library (B = 1 is a kind of its own: its dims of size 1 stay constants).
  struct Case {
    int64_t b, s;
    bool from_library;
  };
  for (Case c : std::vector<Case>{{2, 40, false}, {3, 17, true}, {2, 33, true}, {4, 45, true}, {3, 29, true},
                                  {1, 20, false}, {1, 31, true}, {4, 129, false}, {3, 23, true}}) {
    auto feeds = feeds_of(c.b, c.s);
    const std::string what = "B=" + std::to_string(c.b) + " S=" + std::to_string(c.s);
    expect_close(exec.run(feeds), interp.run(feeds), what);
    const CompileStats& st = exec.stats();
    EXPECT_GT(st.generated_nodes, 0) << what;
    if (c.from_library) {
      EXPECT_EQ(st.library_kernels, st.compiled_kernels) << what;
    }
  }
  // The kernels take their dims as params.
  bool scalars = false;
  for (const PlanStep& st : exec.last_exec_plan()->steps) scalars |= !st.scalars.empty();
  EXPECT_TRUE(scalars);
}

// Pad's edge, reflect and wrap modes lower to generated kernels (the reference's index rules).
TEST(CompiledExecutor, PadModes) {
  for (const char* mode : {"edge", "reflect", "wrap", "constant"}) {
    auto s = check(std::string(R"(graph @g(%x: f32[3,5]) -> (%y: f32[6,10]) {
    %p = const i64[4] [1, 2, 2, 3]
    %y = Pad(%x, %p) {mode=")") + mode + R"("} : f32[6,10]
    return %y
  })");
    EXPECT_EQ(s.generated_nodes, 1) << mode;
    EXPECT_EQ(s.fallback_nodes, 0) << mode;
  }
}

TEST(CompiledExecutor, LargeParallelVectorized) {
  auto s = check(R"(graph @g(%x: f32[64,1024], %b: f32[1024]) -> (%y: f32[64,1024]) {
    %a = Add(%x, %b) : f32[64,1024]
    %y = Relu(%a) : f32[64,1024]
    return %y
  })", 3, 4);
  EXPECT_EQ(s.kernels, 1);
}

TEST(CompiledExecutor, BroadcastAdd) {
  auto s = check(R"(graph @g(%x: f32[2,1,5], %z: f32[3,1]) -> (%y: f32[2,3,5]) {
    %c = const f32[] [0.5]
    %a = Add(%x, %z) : f32[2,3,5]
    %y = Mul(%a, %c) : f32[2,3,5]
    return %y
  })");
  EXPECT_EQ(s.fallback_nodes, 0);
}

TEST(CompiledExecutor, Reduction) {
  auto s = check(R"(model ir=8 opsets={"": 13}
  graph @g(%x: f32[4,7,5]) -> (%y: f32[4,1,5], %z: f32[4]) {
    %y = ReduceMean(%x) {axes=[1]} : f32[4,1,5]
    %z = ReduceMax(%x) {axes=[1, 2], keepdims=0} : f32[4]
    return %y, %z
  })");
  EXPECT_EQ(s.fallback_nodes, 0);
}

// NonZero's output shape depends on the values: a second input of the same shape with another
// number of non-zeros cannot use the learned plan, and runs on the interpreter instead.
TEST(CompiledExecutor, ValueDependentShapesFallBackToTheInterpreter) {
  Model m = prepare(R"(model ir=8 opsets={"": 13}
  graph @g(%x: f32[6]) -> (%y: f32[?]) {
    %shape = const i64[1] [-1]
    %nz = NonZero(%x) : i64[1,?]
    %flat = Reshape(%nz, %shape) : i64[?]
    %f = Cast(%flat) {to=1} : f32[?]
    %y = Add(%f, %f) : f32[?]
    return %y
  })");
  Interpreter interp(m);
  CompiledExecutor exec(m);
  auto feed = [](std::vector<float> v) {
    Tensor t(DType::kFloat32, {6});
    for (size_t i = 0; i < v.size(); ++i) t.set_double(static_cast<int64_t>(i), v[i]);
    return std::vector<RtValue>{RtValue(t)};
  };
  auto a = feed({1, 0, 2, 0, 0, 3}), b = feed({0, 0, 0, 0, 5, 0});
  expect_close(exec.run(a), interp.run(a), "three non-zeros");
  expect_close(exec.run(b), interp.run(b), "one non-zero");
  expect_close(exec.run(a), interp.run(a), "three non-zeros again");
  EXPECT_EQ(exec.cached_plans(), 1u);
  EXPECT_EQ(exec.stats().generated_nodes, 0);  // that signature now runs on the interpreter
}

TEST(CompiledExecutor, Softmax) {
  auto s = check(R"(model ir=8 opsets={"": 13}
  graph @g(%x: f32[3,9]) -> (%y: f32[3,9], %z: f32[3,9]) {
    %y = Softmax(%x) {axis=1} : f32[3,9]
    %z = LogSoftmax(%x) {axis=-1} : f32[3,9]
    return %y, %z
  })");
  EXPECT_EQ(s.fallback_nodes, 0);
}

TEST(CompiledExecutor, ConvFallbackWithEpilogue) {
  auto s = check(R"(graph @g(%x: f32[1,2,5,5]) -> (%y: f32[1,3,5,5]) {
    %w = const f32[3,2,1,1] [0.5, -1, 2, 0.25, 1, 1]
    %b = const f32[3,1,1] [0.1, 0.2, 0.3]
    %c = Conv(%x, %w) : f32[1,3,5,5]
    %d = Add(%c, %b) : f32[1,3,5,5]
    %y = Relu(%d) : f32[1,3,5,5]
    return %y
  })");
  EXPECT_EQ(s.fallback_nodes, 0);  // the Conv runs through sgemm (gemm_ops.h)
  EXPECT_EQ(s.gemm_nodes, 3);      // with the Add and Relu in its epilogue (gemm_epilogue.h)
  EXPECT_EQ(s.generated_nodes, 0);
}

TEST(CompiledExecutor, InjectiveOps) {
  check(R"(model ir=8 opsets={"": 13}
  graph @g(%x: f32[2,3,4], %u: f32[4,3]) -> (%y: f32[3,8,2], %s: f32[2,2,4], %k: f32[4,3,3]) {
    %t = Transpose(%x) {perm=[1, 2, 0]} : f32[3,4,2]
    %y = Concat(%t, %t) {axis=1} : f32[3,8,2]
    %st = const i64[1] [1]
    %en = const i64[1] [3]
    %ax = const i64[1] [1]
    %s = Slice(%x, %st, %en, %ax) : f32[2,2,4]
    %sh = const i64[3] [4, 3, 1]
    %r = Reshape(%u, %sh) : f32[4,3,1]
    %sh2 = const i64[3] [1, 1, 3]
    %k = Expand(%r, %sh2) : f32[4,3,3]
    return %y, %s, %k
  })");
}

TEST(CompiledExecutor, ShapeCacheIsBounded) {
  Model m = prepare(R"(graph @g(%x: f32[N,3]) -> (%y: f32[N,3]) {
    %y = Relu(%x) : f32[N,3]
    return %y
  })");
  CompiledOptions opts;
  opts.cache_entries = 2;
  CompiledExecutor exec(m, opts);
  Interpreter interp(m);
  for (int64_t n : {1, 2, 3, 2, 5}) {
    Tensor t(DType::kFloat32, {n, 3});
    for (int64_t i = 0; i < t.numel(); ++i) t.set_double(i, static_cast<double>(i) - 4);
    std::vector<RtValue> feeds{RtValue(t)};
    expect_close(exec.run(feeds), interp.run(feeds), "n=" + std::to_string(n));
    EXPECT_LE(exec.cached_plans(), 2u);
  }
}

// ---- differential: random graphs -------------------------------------------------------------

struct Gen {
  std::mt19937_64 rng;
  std::ostringstream body;
  std::vector<std::pair<std::string, std::vector<int64_t>>> vals;
  int next = 0;

  explicit Gen(uint64_t seed) : rng(seed) {}
  int64_t pick(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); }
  static std::string dims(const std::vector<int64_t>& d) {
    std::string s = "[";
    for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
    return s + "]";
  }
  static std::string list(const std::vector<int64_t>& d) {
    std::string s = "[";
    for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
    return s + "]";
  }
  std::string fresh() { return "v" + std::to_string(next++); }
  std::string add(const std::string& op, const std::vector<std::string>& ins, const std::vector<int64_t>& shape,
                  const std::string& attrs = "") {
    std::string name = fresh();
    body << "  %" << name << " = " << op << "(";
    for (size_t i = 0; i < ins.size(); ++i) body << (i ? ", " : "") << "%" << ins[i];
    body << ")" << (attrs.empty() ? "" : " {" + attrs + "}") << " : f32" << dims(shape) << "\n";
    vals.emplace_back(name, shape);
    return name;
  }
  std::string const_i64(const std::vector<int64_t>& v) {
    std::string name = fresh();
    body << "  %" << name << " = const i64[" << v.size() << "] " << list(v) << "\n";
    return name;
  }
};

std::string random_graph(uint64_t seed) {
  Gen g(seed);
  int rank = static_cast<int>(g.pick(1, 4));
  std::vector<int64_t> shape;
  for (int i = 0; i < rank; ++i) shape.push_back(std::vector<int64_t>{1, 2, 3, 5, 7, 16, 17}[static_cast<size_t>(g.pick(0, 6))]);
  std::string header = "model ir=8 opsets={\"\": 13}\ngraph @g(%x: f32" + Gen::dims(shape) + ", %w: f32[" +
                       std::to_string(shape.back()) + "]) -> (%out: f32";
  g.vals.emplace_back("x", shape);
  g.vals.emplace_back("w", std::vector<int64_t>{shape.back()});
  int steps = static_cast<int>(g.pick(2, 8));
  for (int s = 0; s < steps; ++s) {
    auto [a, as] = g.vals[static_cast<size_t>(g.pick(0, static_cast<int64_t>(g.vals.size()) - 1))];
    int r = static_cast<int>(as.size());
    switch (g.pick(0, 9)) {
      case 0: {
        const char* ops[] = {"Relu", "Tanh", "Sigmoid", "Neg", "Abs", "Exp", "Floor", "Softplus"};
        std::string op = ops[g.pick(0, 7)];
        if (op == "Exp") a = g.add("Tanh", {a}, as);
        g.add(op, {a}, as);
        break;
      }
      case 1: case 2: {  // broadcasting binary with a compatible value
        std::vector<std::string> cands;
        for (auto& [n, sh] : g.vals) {
          bool ok = true;
          for (size_t k = 0; k < std::min(sh.size(), as.size()); ++k) {
            int64_t x = sh[sh.size() - 1 - k], y = as[as.size() - 1 - k];
            ok &= x == y || x == 1 || y == 1;
          }
          if (ok) cands.push_back(n);
        }
        std::string b = cands[static_cast<size_t>(g.pick(0, static_cast<int64_t>(cands.size()) - 1))];
        std::vector<int64_t> bs;
        for (auto& [n, sh] : g.vals)
          if (n == b) bs = sh;
        std::vector<int64_t> os(std::max(as.size(), bs.size()));
        for (size_t k = 0; k < os.size(); ++k) {
          int64_t x = k < as.size() ? as[as.size() - 1 - k] : 1, y = k < bs.size() ? bs[bs.size() - 1 - k] : 1;
          os[os.size() - 1 - k] = std::max(x, y);
        }
        const char* ops[] = {"Add", "Sub", "Mul", "Max", "Min"};
        g.add(ops[g.pick(0, 4)], {a, b}, os);
        break;
      }
      case 3: {  // reduction over one axis
        int64_t ax = g.pick(0, r - 1);
        bool keep = g.pick(0, 1) == 1;
        if (!keep && r == 1) keep = true;
        std::vector<int64_t> os;
        for (int k = 0; k < r; ++k)
          if (k != ax) os.push_back(as[static_cast<size_t>(k)]);
          else if (keep) os.push_back(1);
        const char* ops[] = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"};
        std::string op = ops[g.pick(0, 3)];
        std::string attrs = "keepdims=" + std::to_string(keep ? 1 : 0);
        if (op == "ReduceSum") g.add(op, {a, g.const_i64({ax})}, os, attrs);
        else g.add(op, {a}, os, "axes=[" + std::to_string(ax) + "], " + attrs);
        break;
      }
      case 4: {  // transpose
        std::vector<int64_t> perm(static_cast<size_t>(r));
        for (int k = 0; k < r; ++k) perm[static_cast<size_t>(k)] = k;
        std::shuffle(perm.begin(), perm.end(), g.rng);
        std::vector<int64_t> os;
        for (int64_t p : perm) os.push_back(as[static_cast<size_t>(p)]);
        g.add("Transpose", {a}, os, "perm=" + Gen::list(perm));
        break;
      }
      case 5: {  // reshape to flat or split off a 1
        std::vector<int64_t> os{1};
        for (int64_t d : as) os[0] *= d;
        if (g.pick(0, 1)) os.insert(os.begin(), 1);
        g.add("Reshape", {a, g.const_i64(os)}, os);
        break;
      }
      case 6: {  // slice the last axis
        int64_t d = as.back();
        int64_t b = g.pick(0, d - 1), e = g.pick(b + 1, d);
        std::vector<int64_t> os = as;
        os.back() = e - b;
        g.add("Slice", {a, g.const_i64({b}), g.const_i64({e}), g.const_i64({r - 1})}, os);
        break;
      }
      case 7: {  // concat with itself
        int64_t ax = g.pick(0, r - 1);
        std::vector<int64_t> os = as;
        os[static_cast<size_t>(ax)] *= 2;
        g.add("Concat", {a, a}, os, "axis=" + std::to_string(ax));
        break;
      }
      case 8: {
        g.add("Softmax", {a}, as, "axis=" + std::to_string(g.pick(-r, r - 1)));
        break;
      }
      default: {  // unsqueeze + expand
        std::vector<int64_t> os = as;
        os.insert(os.begin(), 3);
        g.add("Expand", {a, g.const_i64(os)}, os);
        break;
      }
    }
  }
  // Combine the last value with an earlier one so that intermediates are used twice.
  std::string last = g.vals.back().first;
  std::string out = "  %out = Identity(%" + last + ") : f32" + Gen::dims(g.vals.back().second) + "\n";
  return header + Gen::dims(g.vals.back().second) + ") {\n" + g.body.str() + out + "  return %out\n}\n";
}

TEST(CompiledExecutor, DifferentialRandomGraphs) {
  int generated = 0, total = 0;
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    std::string text = random_graph(seed);
    SCOPED_TRACE("seed " + std::to_string(seed) + "\n" + text);
    auto s = check(text, seed, seed % 3 == 0 ? 4 : 1);
    generated += s.generated_nodes;
    total += s.generated_nodes + s.fallback_nodes;
    if (HasFatalFailure()) return;
  }
  EXPECT_EQ(generated, total) << "every op in the random graphs has a lowering";
}

// Concats in place: a channel Concat of two conv outputs made only for it becomes an empty step
// (the convs write into its output); not when a piece has another consumer, on an axis with a
// non-1 dim before it, or at an offset that is not 64-byte aligned.
int empty_concats(const std::string& text, int threads) {
  Model m = prepare(text);
  Interpreter interp(m);
  CompiledOptions opts;
  opts.threads = threads;
  CompiledExecutor exec(m, opts);
  auto feeds = random_feeds(m, 5);
  auto want = interp.run(feeds);
  expect_close(exec.run(feeds), want, text);
  expect_close(exec.run(feeds), want, text);
  int n = 0;
  for (const auto& st : exec.last_exec_plan()->steps) n += st.kind == PlanStep::Kind::kEmpty && st.op == "Concat";
  return n;
}

TEST(CompiledExecutor, ConcatsInPlace) {
  // "%name = Conv(%in, W)" with a random [co, ci, 1, 1] weight, output [1, co, h, w].
  auto conv = [](const char* name, const char* in, int co, int ci, int h, int w, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> uni(-1.0, 1.0);
    std::ostringstream os;
    os << "  %" << name << "_w = const f32[" << co << "," << ci << ",1,1] [";
    for (int i = 0; i < co * ci; ++i) os << (i ? ", " : "") << uni(rng);
    os << "]\n  %" << name << " = Conv(%" << in << ", %" << name << "_w) : f32[1," << co << "," << h << "," << w
       << "]\n";
    return os.str();
  };
  const std::string head = "model ir=8 opsets={\"\": 13}\ngraph @g(%x: f32[1,4,6,8]) -> ";
  for (int threads : {1, 2}) {
    // 8 and 12 channels of 6x8 floats (pieces at 0 and 1536 bytes), read by the next conv.
    EXPECT_EQ(empty_concats(head + "(%y: f32[1,5,6,8]) {\n" + conv("a", "x", 8, 4, 6, 8, 1) +
                                conv("b", "x", 12, 4, 6, 8, 2) + "  %c = Concat(%a, %b) {axis=1} : f32[1,20,6,8]\n" +
                                conv("y", "c", 5, 20, 6, 8, 3) + "  return %y\n}",
                            threads),
              1);
    // %a also feeds the Add: not in place.
    EXPECT_EQ(empty_concats(head + "(%y: f32[1,5,6,8], %z: f32[1,8,6,8]) {\n" + conv("a", "x", 8, 4, 6, 8, 1) +
                                conv("b", "x", 12, 4, 6, 8, 2) + "  %c = Concat(%a, %b) {axis=1} : f32[1,20,6,8]\n" +
                                conv("y", "c", 5, 20, 6, 8, 3) + "  %z = Add(%a, %a) : f32[1,8,6,8]\n  return %y, %z\n}",
                            threads),
              0);
    // Along the last axis the pieces interleave: not in place.
    EXPECT_EQ(empty_concats(head + "(%y: f32[1,5,6,16]) {\n" + conv("a", "x", 8, 4, 6, 8, 1) +
                                conv("b", "x", 8, 4, 6, 8, 2) + "  %c = Concat(%a, %b) {axis=3} : f32[1,8,6,16]\n" +
                                conv("y", "c", 5, 8, 6, 16, 3) + "  return %y\n}",
                            threads),
              0);
    // 3 channels of 5x5 floats: the second piece would start at 300 bytes, not 64-aligned.
    EXPECT_EQ(empty_concats("model ir=8 opsets={\"\": 13}\ngraph @g(%x: f32[1,4,5,5]) -> (%y: f32[1,5,5,5]) {\n" +
                                conv("a", "x", 3, 4, 5, 5, 1) + conv("b", "x", 12, 4, 5, 5, 2) +
                                "  %c = Concat(%a, %b) {axis=1} : f32[1,15,5,5]\n" + conv("y", "c", 5, 15, 5, 5, 3) +
                                "  return %y\n}",
                            threads),
              0);
  }
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// QuantizeLinear/DequantizeLinear lowerings (ops/lower/quantize.cc) against the reference
// kernels, exactly: ties round to even (x / s lands on .5 steps), values beyond the int8 range
// saturate, per-axis parameters index the axis, int32 dequantizes.
TEST(CompiledExecutor, QuantizeDequantizeMatchTheReferenceExactly) {
  Model m = prepare(R"(model ir=8 opsets={"": 13}
graph @g(%x: f32[2,3,40], %b: i32[3]) -> (%y: f32[2,3,40], %z: f32[2,3,40], %d: f32[3]) {
  %s = const f32[] [0.1]
  %zu = const u8[] [3]
  %sa = const f32[3] [0.25, 0.5, 4]
  %za = const i8[3] [-3, 0, 5]
  %bs = const f32[3] [0.5, 0.25, 2]
  %q = QuantizeLinear(%x, %s, %zu) : u8[2,3,40]
  %y = DequantizeLinear(%q, %s, %zu) : f32[2,3,40]
  %qa = QuantizeLinear(%x, %sa, %za) {axis=1} : i8[2,3,40]
  %z = DequantizeLinear(%qa, %sa, %za) {axis=1} : f32[2,3,40]
  %d = DequantizeLinear(%b, %bs) {axis=0} : f32[3]
  return %y, %z, %d
}
)");
  Tensor x(DType::kFloat32, {2, 3, 40});
  // Multiples of 0.05 and 0.25: x / 0.1 and x / 0.5 land on ties, where a reciprocal multiply
  // instead of the division would round the other way.
  for (int64_t i = 0; i < x.numel(); ++i)
    x.data<float>()[i] = (i % 2 ? 0.05f : 0.25f) * static_cast<float>(i % 40 - 20) * (i % 7 == 0 ? 40 : 1);
  Tensor b(DType::kInt32, {3});
  b.data<int32_t>()[0] = -7, b.data<int32_t>()[1] = 1 << 20, b.data<int32_t>()[2] = 5;
  const std::vector<RtValue> feeds = {RtValue(x), RtValue(b)};
  Interpreter interp(m);
  CompiledExecutor exec(m, {});
  const auto want = interp.run(feeds), got = exec.run(feeds);
  for (size_t k = 0; k < want.size(); ++k)
    for (int64_t i = 0; i < want[k].tensor.numel(); ++i)
      ASSERT_EQ(got[k].tensor.get_double(i), want[k].tensor.get_double(i)) << "output " << k << " [" << i << "]";
  EXPECT_EQ(exec.stats().fallback_nodes, 0);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// DynamicQuantizeLinear's lowering (min/max reductions, then the elementwise quantization)
// against the reference kernel, exactly, on inputs of both signs, all positive, and constant.
TEST(CompiledExecutor, DynamicQuantizeLinearMatchesTheReferenceExactly) {
  Model m = prepare(R"(model ir=8 opsets={"": 13}
graph @g(%x: f32[3,70]) -> (%y: u8[3,70], %s: f32[], %z: u8[]) {
  %y, %s, %z = DynamicQuantizeLinear(%x) : u8[3,70], f32[], u8[]
  return %y, %s, %z
}
)");
  Interpreter interp(m);
  CompiledExecutor exec(m, {});
  for (int variant = 0; variant < 3; ++variant) {
    Tensor x(DType::kFloat32, {3, 70});
    for (int64_t i = 0; i < x.numel(); ++i)
      x.data<float>()[i] = variant == 2 ? 1.5f : 0.37f * static_cast<float>(i % 23) - (variant == 0 ? 3.1f : -0.2f);
    const std::vector<RtValue> feeds = {RtValue(x)};
    const auto want = interp.run(feeds), got = exec.run(feeds);
    for (size_t k = 0; k < want.size(); ++k)
      for (int64_t i = 0; i < want[k].tensor.numel(); ++i)
        ASSERT_EQ(got[k].tensor.get_double(i), want[k].tensor.get_double(i))
            << "variant " << variant << " output " << k << " [" << i << "]";
  }
  EXPECT_EQ(exec.stats().fallback_nodes, 0);
}

}  // namespace
}  // namespace kiln
