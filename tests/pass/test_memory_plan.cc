// Memory planning: no two simultaneously live values overlap (checked exhaustively on random
// graphs), 64-byte alignment, in-place reuse only where legal, and the reported totals.
#include <gtest/gtest.h>

#include <random>

#include "ir/text.h"
#include "pass/memory_plan.h"

namespace kiln {
namespace {

int64_t bytes(const Value* v) { return static_bytes(v); }

// Checks every invariant of a plan against the graph it was made for.
void check_plan(const Graph& g, const MemoryPlan& plan) {
  int64_t sum = 0;
  for (const PlannedValue& p : plan.values) {
    sum += p.size;
    EXPECT_EQ(p.offset % kArenaAlignment, 0) << p.value->name;
    EXPECT_LE(p.offset + p.size, plan.arena_bytes) << p.value->name;
    EXPECT_LE(p.first_step, p.last_step);
    if (p.in_place_of) {
      const PlannedValue* q = plan.find(p.in_place_of);
      ASSERT_NE(q, nullptr);
      EXPECT_EQ(q->offset, p.offset);
      EXPECT_EQ(q->size, p.size);
      EXPECT_EQ(q->last_step, p.first_step) << "the reused input must die at this node";
      const Node& n = *g.nodes[p.first_step];
      EXPECT_NE(std::find(n.inputs.begin(), n.inputs.end(), p.in_place_of), n.inputs.end());
    }
  }
  EXPECT_EQ(sum, plan.intermediate_bytes);
  EXPECT_GE(plan.arena_bytes, plan.live_bytes_lower_bound);
  for (size_t i = 0; i < plan.values.size(); ++i)
    for (size_t j = i + 1; j < plan.values.size(); ++j) {
      const PlannedValue& a = plan.values[i];
      const PlannedValue& b = plan.values[j];
      bool live_together = a.first_step <= b.last_step && b.first_step <= a.last_step;
      bool disjoint = a.offset + a.size <= b.offset || b.offset + b.size <= a.offset;
      bool in_place = b.in_place_of == a.value || a.in_place_of == b.value;
      if (live_together && !in_place && a.size > 0 && b.size > 0) {
        EXPECT_TRUE(disjoint) << a.value->name << " [" << a.offset << ", +" << a.size << ") and "
                              << b.value->name << " [" << b.offset << ", +" << b.size << ")";
      }
    }
}

// A random DAG of unary/binary elementwise, broadcast, injective and opaque ops over tensors
// of a few sizes (some odd, to exercise alignment); some values become graph outputs.
std::unique_ptr<Graph> random_graph(std::mt19937& rng, int nodes) {
  auto g = std::make_unique<Graph>();
  const std::vector<int64_t> sizes = {1, 3, 16, 17, 100, 256, 1000};
  std::vector<Value*> pool;
  for (int i = 0; i < 2; ++i) {
    Value* in =
        g->add_value("in" + std::to_string(i), Type::tensor(DType::kFloat32, Shape::of({256})));
    in->is_graph_input = true;
    g->inputs.push_back(in);
    pool.push_back(in);
  }
  auto pick = [&] { return pool[std::uniform_int_distribution<size_t>(0, pool.size() - 1)(rng)]; };
  for (int i = 0; i < nodes; ++i) {
    int kind = std::uniform_int_distribution<int>(0, 4)(rng);
    Value* a = pick();
    std::vector<Value*> ins = {a};
    std::string op;
    Type t = a->type;
    switch (kind) {
      case 0:
        op = "Relu";
        break;  // elementwise, same size
      case 1:
        op = "Add";
        ins.push_back(pick());
        break;  // broadcast (shape of the first input)
      case 2:
        op = "Cast";
        t.dtype = DType::kUInt8;
        break;  // elementwise, smaller output
      case 3:
        op = "Concat";
        ins.push_back(pick());
        break;  // injective: never in place
      default:
        op = "TopK";
        break;  // opaque
    }
    if (kind == 3 || kind == 4) {
      int64_t n = sizes[std::uniform_int_distribution<size_t>(0, sizes.size() - 1)(rng)];
      t = Type::tensor(DType::kFloat32, Shape::of({n}));
    }
    Value* out = g->add_value("v" + std::to_string(i), t);
    g->add_node(op, ins, {out});
    pool.push_back(out);
  }
  for (size_t i = 2; i < pool.size(); ++i)
    if (std::uniform_int_distribution<int>(0, 9)(rng) == 0 || i + 1 == pool.size())
      g->outputs.push_back(pool[i]);
  return g;
}

TEST(MemoryPlan, RandomGraphsNeverOverlapLiveValues) {
  std::mt19937 rng(1234);
  int in_place = 0;
  for (int trial = 0; trial < 300; ++trial) {
    auto g = random_graph(rng, 5 + trial % 60);
    MemoryPlan plan = plan_memory(*g, bytes);
    check_plan(*g, plan);
    in_place += plan.in_place_count;
    if (HasFailure()) {
      ADD_FAILURE() << "trial " << trial;
      return;
    }
  }
  EXPECT_GT(in_place, 0) << "random graphs should exercise in-place reuse";
}

TEST(MemoryPlan, OffsetsAreAligned) {
  Model m = parse_model(R"(
graph @main(%x: u8[3]) -> (%y: u8[3]) {
  %a = Neg(%x) : u8[3]
  %b = Abs(%x) : u8[3]
  %c = Neg(%x) : u8[5]
  %y = Sum(%a, %b, %c) : u8[3]
  return %y
}
)");
  MemoryPlan plan = plan_memory(*m.graph, bytes);
  check_plan(*m.graph, plan);
  ASSERT_EQ(plan.values.size(), 3u);
  EXPECT_EQ(plan.intermediate_bytes, 11);
  EXPECT_EQ(plan.live_bytes_lower_bound, 11);
  EXPECT_EQ(plan.arena_bytes, 3 * kArenaAlignment);
}

TEST(MemoryPlan, ElementwiseChainRunsInPlace) {
  Model m = parse_model(R"(
graph @main(%x: f32[4,16]) -> (%y: f32[4,16]) {
  %a = Relu(%x) : f32[4,16]
  %b = Neg(%a) : f32[4,16]
  %c = Add(%b, %x) : f32[4,16]
  %y = Exp(%c) : f32[4,16]
  return %y
}
)");
  MemoryPlan plan = plan_memory(*m.graph, bytes);
  check_plan(*m.graph, plan);
  ASSERT_EQ(plan.values.size(), 3u);
  EXPECT_EQ(plan.find(m.graph->find("b"))->in_place_of, m.graph->find("a"));
  EXPECT_EQ(plan.find(m.graph->find("c"))->in_place_of, m.graph->find("b"));
  EXPECT_EQ(plan.in_place_count, 2);
  EXPECT_EQ(plan.arena_bytes, 256);
  EXPECT_EQ(plan.live_bytes_lower_bound, 256);
  EXPECT_EQ(plan.intermediate_bytes, 3 * 256);
}

TEST(MemoryPlan, NoInPlaceWhenTheInputLivesOnOrShapesDiffer) {
  Model m = parse_model(R"(
graph @main(%x: f32[4,16], %r: f32[16]) -> (%y: f32[4,16]) {
  %a = Relu(%x) : f32[4,16]
  %b = Neg(%a) : f32[4,16]
  %s = Relu(%r) : f32[16]
  %c = Add(%s, %b) : f32[4,16]
  %y = Add(%c, %a) : f32[4,16]
  return %y
}
)");
  MemoryPlan plan = plan_memory(*m.graph, bytes);
  check_plan(*m.graph, plan);
  // %a is used again by the last node, %s is broadcast (shape differs from the output); %c may
  // reuse %b, which dies at %c's node and has the output's shape.
  EXPECT_EQ(plan.find(m.graph->find("b"))->in_place_of, nullptr);
  EXPECT_EQ(plan.find(m.graph->find("c"))->in_place_of, m.graph->find("b"));
  EXPECT_NE(plan.find(m.graph->find("a"))->offset, plan.find(m.graph->find("b"))->offset);
}

TEST(MemoryPlan, DeadBuffersAreReused) {
  // Lifetimes a:[0,1] b:[1,2] c:[2,3]: a and c can share, through Transpose (not in place).
  Model m = parse_model(R"(
graph @main(%x: f32[64]) -> (%y: f32[64]) {
  %a = Transpose(%x) : f32[64]
  %b = Transpose(%a) : f32[64]
  %c = Transpose(%b) : f32[64]
  %y = Transpose(%c) : f32[64]
  return %y
}
)");
  MemoryPlan plan = plan_memory(*m.graph, bytes);
  check_plan(*m.graph, plan);
  EXPECT_EQ(plan.in_place_count, 0);
  EXPECT_EQ(plan.arena_bytes, 512);
  EXPECT_EQ(plan.live_bytes_lower_bound, 512);
  EXPECT_EQ(plan.find(m.graph->find("a"))->offset, plan.find(m.graph->find("c"))->offset);
}

TEST(MemoryPlan, UnknownSizesAreNotPlanned) {
  Model m = parse_model(R"(
graph @main(%x: f32[N,?]) -> (%y: f32[N,?]) {
  %a = Relu(%x) : f32[N,?]
  %b = Relu(%x) : f32[N,8]
  %y = Add(%a, %b) : f32[N,?]
  return %y
}
)");
  MemoryPlan plan = plan_memory(*m.graph, bytes);
  ASSERT_EQ(plan.unplanned.size(), 1u);
  EXPECT_EQ(plan.unplanned[0]->name, "a");
  ASSERT_EQ(plan.values.size(), 1u);
  EXPECT_EQ(plan.values[0].size, 32);  // N bound to 1
}

}  // namespace
}  // namespace kiln
