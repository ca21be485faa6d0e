// The reference interpreter: runs a Model node by node through the registry's reference
// kernels, with shapes resolved at run time (dynamic dims work), control flow through nested
// graphs, and intermediates freed after their last use.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/value.h"
#include "ir/graph.h"
#include "ops/registry.h"

namespace kiln {

struct InterpreterOptions {
  uint64_t seed = 0;       // for random ops without a `seed` attribute
  bool profile = false;    // collect per-node timings
  // Memory budget (kiln_options.max_memory_bytes): weights plus the live values a run computed; a node
  // whose outputs pass it stops the run with kResourceLimit. 0: none.
  int64_t max_memory_bytes = 0;
};

struct NodeTiming {
  std::string node;
  std::string op;
  double ms = 0;
};

class Interpreter {
 public:
  // Resolves every node (recursively into subgraphs) against the registry; throws kUnsupported
  // naming the node and op when an op or opset is not implemented.
  Interpreter(const Model& model, InterpreterOptions opts = {});
  ~Interpreter();

  // All graph inputs in order; those with an initializer default may be fed a None value.
  const std::vector<Value*>& inputs() const { return model_.graph->inputs; }
  const std::vector<Value*>& outputs() const { return model_.graph->outputs; }

  // Runs the main graph. `feeds` is parallel to inputs(); a None entry uses the initializer
  // default (error if there is none). Checks dtypes and static dims of the feeds (kBadInput).
  std::vector<RtValue> run(const std::vector<RtValue>& feeds);
  // Same, calling `observe` with every value of the main graph that a node computes, before it
  // may be freed (the compiled executor learns shapes this way).
  using ValueObserver = std::function<void(const Value& value, const RtValue& computed)>;
  std::vector<RtValue> run(const std::vector<RtValue>& feeds, const ValueObserver& observe);
  const std::vector<NodeTiming>& timings() const { return timings_; }
  // Runs `body`, a subgraph of this model, with its inputs and the values it reads from
  // enclosing graphs (captured_values of its node); `observe` (if any) sees the body's values.
  std::vector<RtValue> run_body(const Graph& body, const std::vector<RtValue>& inputs,
                                const std::unordered_map<const Value*, RtValue>& captured,
                                const ValueObserver* observe = nullptr);

 private:
  struct Env;
  struct GraphPlan;
  const GraphPlan& plan_for(const Graph& g);
  void prepare(const Graph& g);
  std::vector<RtValue> run_graph(const Graph& g, const std::vector<RtValue>& inputs, const Env* parent);
  void run_node(const Node& node, const OpSchema& schema, Env& env);
  // Memory budget: counts node's outputs as live (kResourceLimit past the budget) / uncounts v.
  void hold_outputs(const Node& node, Env& env);
  void release(const Value* v, Env& env);

  const Model& model_;
  InterpreterOptions opts_;
  std::mt19937_64 rng_;
  std::unordered_map<const Graph*, std::unique_ptr<GraphPlan>> plans_;
  std::vector<NodeTiming> timings_;
  int64_t weight_bytes_ = 0;  // the model's initializers (memory budget)
  int64_t live_bytes_ = 0;    // values the running graphs computed and hold (memory budget)
  const ValueObserver* observe_ = nullptr;  // during run(feeds, observe) and run_body
  const Env* observe_parent_ = nullptr;     // observed: values of graphs run with this parent
};

// Checks that a fed value matches the declared type of a graph input (kBadInput otherwise).
void check_feed(const Value& input, const RtValue& v);
// `feeds` parallel to g's inputs, a None one replaced by the input's initializer (kBadInput when
// there is none, or when the count differs), each checked by check_feed.
std::vector<RtValue> bind_feeds(const Graph& g, const std::vector<RtValue>& feeds);

}  // namespace kiln
