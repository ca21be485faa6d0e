// If/Loop on the compiled engine: the bodies run on nested compiled executors (no reference
// kernel for their nodes), read values they capture from the enclosing graph (including one that
// a GEMM epilogue or a generated kernel would otherwise keep internal), and match the
// interpreter.
#include <gtest/gtest.h>

#include <cmath>

#include "driver/compiled_executor.h"
#include "ir/text.h"
#include "pass/pass.h"
#include "runtime/interpreter.h"

namespace kiln {
namespace {

Model optimized(const char* text) {
  Model m = parse_model(text);
  PassContext ctx;
  run_passes(m, default_pipeline(), ctx);
  return m;
}

Tensor ramp(std::vector<int64_t> dims, double scale) {
  Tensor t(DType::kFloat32, std::move(dims));
  for (int64_t i = 0; i < t.numel(); ++i) t.set_double(i, scale * std::sin(0.7 * static_cast<double>(i)));
  return t;
}

void expect_same(const std::vector<RtValue>& got, const std::vector<RtValue>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    ASSERT_EQ(got[k].tensor.dims(), want[k].tensor.dims());
    for (int64_t i = 0; i < got[k].tensor.numel(); ++i)
      ASSERT_NEAR(got[k].tensor.get_double(i), want[k].tensor.get_double(i), 1e-4) << "output " << k << " [" << i << "]";
  }
}

// The then-branch reads %r (a MatMul's Relu'd output, otherwise fused into the GEMM's store) and
// %e (computed in a generated kernel) from the main graph.
const char* kIf = R"(
graph @main(%x: f32[4,8], %w: f32[8,8], %c: bool[]) -> (%y: f32[4,8]) {
  %m = MatMul(%x, %w) : f32[4,8]
  %r = Relu(%m) : f32[4,8]
  %e = Exp(%x) : f32[4,8]
  %y = If(%c) {else_branch=graph @e() -> (%o2: f32[4,8]) {
    %o2 = Neg(%e) : f32[4,8]
    return %o2
  }, then_branch=graph @t() -> (%o1: f32[4,8]) {
    %s = Add(%r, %e) : f32[4,8]
    %o1 = Tanh(%s) : f32[4,8]
    return %o1
  }} : f32[4,8]
  return %y
}
)";

TEST(ControlFlow, IfBranchesRunCompiled) {
  Model m = optimized(kIf);
  Interpreter interp(m);
  CompiledExecutor ex(m);
  for (bool c : {true, false, true}) {
    Tensor cond(DType::kBool, {});
    cond.set_double(0, c ? 1 : 0);
    std::vector<RtValue> feeds = {RtValue(ramp({4, 8}, 1.0)), RtValue(ramp({8, 8}, 0.5)), RtValue(cond)};
    expect_same(ex.run(feeds), interp.run(feeds));
    EXPECT_EQ(ex.stats().control_flow_nodes, 1);
    EXPECT_EQ(ex.stats().fallback_nodes, 0) << "branch " << c;
    EXPECT_GE(ex.stats().generated_nodes, 2);
  }
}

// A Loop whose body carries a value and reads a captured one; the trip count comes from an input.
const char* kLoop = R"(
graph @main(%n: i64[], %x: f32[2,3], %b: f32[2,3]) -> (%y: f32[2,3]) {
  %t = const bool[] [true]
  %bb = Sigmoid(%b) : f32[2,3]
  %y = Loop(%n, %t, %x) {body=graph @body(%i: i64[], %cond: bool[], %v: f32[2,3]) -> (%cond_out: bool[], %v_out: f32[2,3]) {
    %cond_out = Identity(%cond) : bool[]
    %p = Mul(%v, %bb) : f32[2,3]
    %v_out = Add(%p, %bb) : f32[2,3]
    return %cond_out, %v_out
  }} : f32[2,3]
  return %y
}
)";

TEST(ControlFlow, LoopBodyRunsCompiled) {
  Model m = optimized(kLoop);
  Interpreter interp(m);
  CompiledExecutor ex(m);
  for (int64_t trips : {0, 1, 5}) {
    std::vector<RtValue> feeds = {RtValue(Tensor::scalar(DType::kInt64, trips)), RtValue(ramp({2, 3}, 1.0)),
                                  RtValue(ramp({2, 3}, 2.0))};
    expect_same(ex.run(feeds), interp.run(feeds));
    EXPECT_EQ(ex.stats().control_flow_nodes, 1);
  }
  EXPECT_EQ(ex.stats().fallback_nodes, 0);
  EXPECT_GE(ex.stats().generated_nodes, 2);  // the body's Mul + Add (and the main Sigmoid)
}

}  // namespace
}  // namespace kiln
