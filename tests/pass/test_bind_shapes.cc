// bind-shapes (pass/bind_shapes.h): shapes from inference with the input dims bound, values the
// shapes decide evaluated, stops at value-dependent ops and inconsistent bindings; and the
// compiled executor plans without a reference run whenever bind-shapes is complete.
#include <gtest/gtest.h>

#include "ir/text.h"
#include "pass/bind_shapes.h"
#include "pass/pass.h"
#include "driver/compiled_executor.h"
#include "runtime/interpreter.h"

namespace kiln {
namespace {

// Symbolic batch and sequence; the Reshape target is computed from Shape at run time, as
// exporters write attention heads.
const char* kHeads = R"(
graph @main(%x: f32[N,S,8]) -> (%y: f32[N,S,2,4]) {
  %zero = const i64[] [0]
  %one = const i64[] [1]
  %axes = const i64[1] [0]
  %tail = const i64[2] [2, 4]
  %s = Shape(%x) : i64[3]
  %b = Gather(%s, %zero) {axis=0} : i64[]
  %t = Gather(%s, %one) {axis=0} : i64[]
  %bu = Unsqueeze(%b, %axes) : i64[1]
  %tu = Unsqueeze(%t, %axes) : i64[1]
  %c = Concat(%bu, %tu, %tail) {axis=0} : i64[4]
  %r = Reshape(%x, %c) : f32[?,?,2,4]
  %y = Relu(%r) : f32[N,S,2,4]
  return %y
}
)";

RtValue zeros(std::vector<int64_t> dims) { return RtValue(Tensor(DType::kFloat32, std::move(dims))); }

const Value* named(const Model& m, const std::string& name) { return m.graph->find_local(name); }

TEST(BindShapes, ReshapeTargetFromShapeChain) {
  Model m = parse_model(kHeads);
  BoundShapes b = bind_shapes(m, {zeros({3, 5, 8})}, 1 << 16);
  ASSERT_TRUE(b.complete) << b.stopped_at;
  EXPECT_EQ(b.values.at(named(m, "r")).dims, (std::vector<int64_t>{3, 5, 2, 4}));
  EXPECT_EQ(b.values.at(named(m, "y")).dims, (std::vector<int64_t>{3, 5, 2, 4}));
  const Tensor& target = b.values.at(named(m, "c")).value;
  ASSERT_TRUE(target.defined());
  EXPECT_EQ(target.get_int(0), 3);
  EXPECT_EQ(target.get_int(1), 5);
  // The input's data is the caller's: never a compile-time value.
  EXPECT_FALSE(b.values.at(named(m, "x")).value.defined());
}

TEST(BindShapes, StopsAtValueDependentOp) {
  Model m = parse_model(R"(
graph @main(%x: f32[4]) -> (%y: i64[1,?]) {
  %y = NonZero(%x) : i64[1,?]
  return %y
}
)");
  BoundShapes b = bind_shapes(m, {zeros({4})}, 1 << 16);
  EXPECT_FALSE(b.complete);
  EXPECT_NE(b.stopped_at.find("NonZero"), std::string::npos) << b.stopped_at;
  EXPECT_NE(b.stopped_at.find("depends on input values"), std::string::npos) << b.stopped_at;
}

TEST(BindShapes, StopsWhenASymbolIsBoundTwice) {
  Model m = parse_model(R"(
graph @main(%a: f32[S,4], %b: f32[S,4]) -> (%y: f32[S,4]) {
  %y = Add(%a, %b) : f32[S,4]
  return %y
}
)");
  BoundShapes b = bind_shapes(m, {zeros({2, 4}), zeros({3, 4})}, 1 << 16);
  EXPECT_FALSE(b.complete);
  EXPECT_NE(b.stopped_at.find("'S' is 2 in one input and 3"), std::string::npos) << b.stopped_at;
}

TEST(BindShapes, StopsAtMismatchedMatMul) {
  Model m = parse_model(R"(
graph @main(%a: f32[2,K], %b: f32[3,5]) -> (%y: f32[2,5]) {
  %y = MatMul(%a, %b) : f32[2,5]
  return %y
}
)");
  BoundShapes b = bind_shapes(m, {zeros({2, 4}), zeros({3, 5})}, 1 << 16);
  EXPECT_FALSE(b.complete);
  EXPECT_NE(b.stopped_at.find("inner dimensions differ"), std::string::npos) << b.stopped_at;
}

Model fused(const char* text) {
  Model m = parse_model(text);
  PassContext ctx;
  run_passes(m, default_pipeline(), ctx);
  return m;
}

TEST(BindShapes, CompiledExecutorPlansWithoutAReferenceRun) {
  Model m = fused(kHeads);
  CompiledExecutor ex(m);
  const int64_t before = CompiledExecutor::reference_runs_while_compiling();
  for (std::vector<int64_t> dims : {std::vector<int64_t>{1, 7, 8}, {2, 3, 8}, {4, 16, 8}}) {
    Tensor x(DType::kFloat32, dims);
    for (int64_t i = 0; i < x.numel(); ++i) x.set_double(i, static_cast<double>(i % 5) - 2.0);
    std::vector<RtValue> out = ex.run({RtValue(x)});
    EXPECT_EQ(ex.stats().shapes, "inference");
    ASSERT_EQ(out[0].tensor.dims(), (std::vector<int64_t>{dims[0], dims[1], 2, 4}));
    for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(out[0].tensor.get_double(i), std::max(0.0, x.get_double(i)));
  }
  EXPECT_EQ(CompiledExecutor::reference_runs_while_compiling(), before);
  EXPECT_EQ(ex.cached_plans(), 3u);
}

TEST(BindShapes, ValueDependentModelsStillPlanByARun) {
  Model m = fused(R"(
graph @main(%x: f32[6]) -> (%y: f32[?]) {
  %minus1 = const i64[1] [-1]
  %i = NonZero(%x) : i64[1,?]
  %f = Reshape(%i, %minus1) : i64[?]
  %y = Gather(%x, %f) {axis=0} : f32[?]
  return %y
}
)");
  CompiledExecutor ex(m);
  const int64_t before = CompiledExecutor::reference_runs_while_compiling();
  Tensor x(DType::kFloat32, {6});
  for (int64_t i = 0; i < 6; ++i) x.set_double(i, i % 2 ? 1.5 : 0.0);
  std::vector<RtValue> out = ex.run({RtValue(x)});
  EXPECT_EQ(CompiledExecutor::reference_runs_while_compiling(), before + 1);
  EXPECT_NE(ex.stats().shapes.find("NonZero"), std::string::npos) << ex.stats().shapes;
  ASSERT_EQ(out[0].tensor.dims(), (std::vector<int64_t>{3}));
  EXPECT_EQ(out[0].tensor.get_double(0), 1.5);
}

// If: a condition that is a tiny input picks this call's branch (its shapes differ from the other
// branch's); a later call whose condition picks the other branch is replanned, not run wrong.
const char* kIfByFlag = R"(
graph @main(%x: f32[4,6], %flag: bool[]) -> (%y: f32[?,?]) {
  %y = If(%flag) {else_branch=graph @e() -> (%o2: f32[6,4]) {
    %o2 = Transpose(%x) {perm=[1, 0]} : f32[6,4]
    return %o2
  }, then_branch=graph @t() -> (%o1: f32[4,6]) {
    %o1 = Relu(%x) : f32[4,6]
    return %o1
  }} : f32[?,?]
  return %y
}
)";

RtValue flag(bool v) {
  Tensor t(DType::kBool, {});
  t.set_double(0, v ? 1.0 : 0.0);
  return RtValue(t);
}

TEST(BindShapes, IfTakesTheBranchATinyInputPicks) {
  Model m = parse_model(kIfByFlag);
  BoundShapes t = bind_shapes(m, {zeros({4, 6}), flag(true)}, 1 << 16);
  ASSERT_TRUE(t.complete) << t.stopped_at;
  EXPECT_EQ(t.values.at(named(m, "y")).dims, (std::vector<int64_t>{4, 6}));
  BoundShapes e = bind_shapes(m, {zeros({4, 6}), flag(false)}, 1 << 16);
  ASSERT_TRUE(e.complete) << e.stopped_at;
  EXPECT_EQ(e.values.at(named(m, "y")).dims, (std::vector<int64_t>{6, 4}));
}

TEST(BindShapes, IfBranchesMustAgreeWhenTheConditionIsUnknown) {
  // The condition comes from a 32-element input: both branches are bound.
  const char* text = R"(
graph @main(%x: f32[4,6], %v: f32[32]) -> (%y: f32[?,?]) {
  %m = ReduceMax(%v) {keepdims=0} : f32[]
  %zero = const f32[] [0]
  %c = Greater(%m, %zero) : bool[]
  %y = If(%c) {else_branch=graph @e() -> (%o2: f32[BRANCH]) {
    %o2 = SHAPE_OP
    return %o2
  }, then_branch=graph @t() -> (%o1: f32[4,6]) {
    %o1 = Relu(%x) : f32[4,6]
    return %o1
  }} : f32[?,?]
  return %y
}
)";
  auto with = [&](const std::string& branch, const std::string& op) {
    std::string t = text;
    t.replace(t.find("BRANCH"), 6, branch);
    t.replace(t.find("SHAPE_OP"), 8, op);
    return parse_model(t);
  };
  Model agree = with("4,6", "Neg(%x) : f32[4,6]");
  BoundShapes a = bind_shapes(agree, {zeros({4, 6}), zeros({32})}, 1 << 16);
  ASSERT_TRUE(a.complete) << a.stopped_at;
  EXPECT_EQ(a.values.at(named(agree, "y")).dims, (std::vector<int64_t>{4, 6}));
  Model differ = with("6,4", "Transpose(%x) {perm=[1, 0]} : f32[6,4]");
  BoundShapes d = bind_shapes(differ, {zeros({4, 6}), zeros({32})}, 1 << 16);
  EXPECT_FALSE(d.complete);
  EXPECT_NE(d.stopped_at.find("different shapes"), std::string::npos) << d.stopped_at;
}

TEST(BindShapes, ScanStatesAndScanOutputs) {
  Model m = parse_model(R"(
graph @main(%h: f32[3], %xs: f32[5,3]) -> (%hn: f32[3], %ys: f32[5,3]) {
  %hn, %ys = Scan(%h, %xs) {body=graph @b(%hi: f32[3], %xi: f32[3]) -> (%ho: f32[3], %yo: f32[3]) {
    %ho = Add(%hi, %xi) : f32[3]
    %yo = Tanh(%ho) : f32[3]
    return %ho, %yo
  }, num_scan_inputs=1} : f32[3], f32[5,3]
  return %hn, %ys
}
)");
  BoundShapes b = bind_shapes(m, {zeros({3}), zeros({7, 3})}, 1 << 16);
  ASSERT_TRUE(b.complete) << b.stopped_at;
  EXPECT_EQ(b.values.at(named(m, "hn")).dims, (std::vector<int64_t>{3}));
  EXPECT_EQ(b.values.at(named(m, "ys")).dims, (std::vector<int64_t>{7, 3}));
}

// A Loop without scan outputs binds whatever its trip count (the carried values keep their dims);
// one with scan outputs needs a constant trip count and a body that passes its condition on.
const char* kLoop = R"(
graph @main(%n: i64[], %c: bool[], %a: f32[2]) -> (%r: f32[2]SCAN_OUT) {
  %r SCAN_VAL= Loop(%n, %c, %a) {body=graph @b(%i: i64[], %ci: bool[], %ai: f32[2]) -> (%co: bool[], %ao: f32[2]SCAN_BODY) {
    %co = COND : bool[]
    %ao = Neg(%ai) : f32[2]
    %so = Relu(%ai) : f32[2]
    return %co, %ao SCAN_RET
  }} : f32[2]SCAN_TYPE
  return %r SCAN_RET2
}
)";

Model loop_model(bool scan_out, const std::string& cond) {
  std::string t = kLoop;
  auto put = [&](const std::string& key, const std::string& v) { t.replace(t.find(key), key.size(), v); };
  put("SCAN_OUT", scan_out ? ", %ys: f32[?,2]" : "");
  put("SCAN_VAL", scan_out ? ", %ys " : "");
  put("SCAN_BODY", scan_out ? ", %so: f32[2]" : "");
  put("COND", cond);
  put("SCAN_RET", scan_out ? ", %so" : "");
  put("SCAN_TYPE", scan_out ? ", f32[?,2]" : "");
  put("SCAN_RET2", scan_out ? ", %ys" : "");
  return parse_model(t);
}

RtValue trips(int64_t v) {
  Tensor n(DType::kInt64, {});
  n.set_double(0, static_cast<double>(v));
  return RtValue(n);
}

TEST(BindShapes, LoopCarriedValuesBindWithoutScanOutputs) {
  Model m = loop_model(false, "Greater(%i, %i)");  // a computed condition: it may stop early
  BoundShapes b = bind_shapes(m, {trips(3), flag(true), zeros({2})}, 1 << 16);
  ASSERT_TRUE(b.complete) << b.stopped_at;
  EXPECT_EQ(b.values.at(named(m, "r")).dims, (std::vector<int64_t>{2}));
}

TEST(BindShapes, LoopScanOutputsNeedAKnownTripCount) {
  // The trip count and condition are the caller's values: not plan constants.
  Model m = loop_model(true, "Identity(%ci)");
  BoundShapes b = bind_shapes(m, {trips(3), flag(true), zeros({2})}, 1 << 16);
  EXPECT_FALSE(b.complete);
  EXPECT_NE(b.stopped_at.find("trip count"), std::string::npos) << b.stopped_at;
  // Constants (as in the conformance Loop cases): bound, [trips, 2].
  std::string text = print_model(m);
  text.replace(text.find("graph @main(%n: i64[], %c: bool[], %a: f32[2])"), 46, "graph @main(%a: f32[2])");
  text.replace(text.find("{\n") + 2, 0, "  %n = const i64[] [4]\n  %c = const bool[] [true]\n");
  Model k = parse_model(text);
  BoundShapes kb = bind_shapes(k, {zeros({2})}, 1 << 16);
  ASSERT_TRUE(kb.complete) << kb.stopped_at << "\n" << text;
  EXPECT_EQ(kb.values.at(named(k, "ys")).dims, (std::vector<int64_t>{4, 2}));
  // A body that computes its condition may stop early: not bound.
  std::string early = text;
  early.replace(early.find("Identity(%ci)"), 13, "Greater(%i, %i)");
  BoundShapes eb = bind_shapes(parse_model(early), {zeros({2})}, 1 << 16);
  EXPECT_FALSE(eb.complete);
  EXPECT_NE(eb.stopped_at.find("stop early"), std::string::npos) << eb.stopped_at;
}

// The compiled executor plans the If model by inference; a call whose flag picks the other
// branch (other output shapes) under the same input shapes still gets the right result.
TEST(BindShapes, CompiledIfPlansWithoutAReferenceRun) {
  Model m = fused(kIfByFlag);
  CompiledExecutor ex(m);
  const int64_t before = CompiledExecutor::reference_runs_while_compiling();
  Tensor x(DType::kFloat32, {4, 6});
  for (int64_t i = 0; i < x.numel(); ++i) x.set_double(i, static_cast<double>(i % 7) - 3.0);
  std::vector<RtValue> out = ex.run({RtValue(x), flag(true)});
  EXPECT_EQ(ex.stats().shapes, "inference");
  EXPECT_EQ(CompiledExecutor::reference_runs_while_compiling(), before);
  ASSERT_EQ(out[0].tensor.dims(), (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(out[0].tensor.get_double(1), 0.0);
  EXPECT_EQ(out[0].tensor.get_double(4), 1.0);
  out = ex.run({RtValue(x), flag(false)});
  ASSERT_EQ(out[0].tensor.dims(), (std::vector<int64_t>{6, 4}));
  EXPECT_EQ(out[0].tensor.get_double(1), x.get_double(6));  // y[0][1] = x[1][0]
}

}  // namespace
}  // namespace kiln
