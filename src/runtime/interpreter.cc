// Interpreter: per-graph plans (resolved schemas, last uses), environments chained through
// nested graphs for captured values, and f16/bf16 handling for float-only kernels.
#include "runtime/interpreter.h"

#include <new>
#include <unordered_set>

#include "core/run_control.h"
#include "ops/evaluate.h"
#include "ops/op_util.h"

namespace kiln {

struct Interpreter::GraphPlan {
  std::vector<const OpSchema*> schemas;           // per node
  std::vector<std::vector<const Value*>> frees;   // per node: values dead after it
};

struct Interpreter::Env {
  const Env* parent = nullptr;
  std::unordered_map<const Value*, RtValue> values;
  // Values whose dtype and shape (and, for constants, contents) the model itself fixes: constants,
  // main-graph float inputs with fully static declared types, and float results computed only
  // from such values. A kernel rejecting only fixed inputs means the model contradicts itself.
  std::unordered_set<const Value*> fixed;
  // Memory budget: bytes of each value this env computed and still holds.
  std::unordered_map<const Value*, int64_t> held;

  bool is_fixed(const Value* v) const {
    if (v->initializer.defined() && !v->is_graph_input) return true;
    for (const Env* e = this; e; e = e->parent)
      if (e->fixed.count(v)) return true;
    return false;
  }

  const RtValue* lookup(const Value* v) const {
    for (const Env* e = this; e; e = e->parent) {
      auto it = e->values.find(v);
      if (it != e->values.end()) return &it->second;
    }
    return nullptr;
  }
};

namespace {

ErrorLocation node_location(const Node& n) {
  ErrorLocation loc;
  loc.node = n.display_name();
  loc.op = n.qualified_op();
  return loc;
}

// Values used by `g`'s nodes that live outside `g` (captures of nested graphs, recursively).
void collect_outer_uses(const Graph& g, const Graph& boundary, std::vector<const Value*>& out) {
  for (const auto& n : g.nodes) {
    for (const Value* v : n->inputs)
      if (v && v->owner != &g) out.push_back(v);
    for (const auto& [k, a] : n->attrs) {
      if (a.g) collect_outer_uses(*a.g, boundary, out);
      for (const auto& sg : a.graphs) collect_outer_uses(*sg, boundary, out);
    }
  }
  for (const Value* v : g.outputs)
    if (v->owner != &g) out.push_back(v);
}

bool static_float_type(const Type& t) {
  return t.kind == Type::Kind::kTensor && is_float(t.dtype) && t.shape && t.shape->is_static();
}

// Ops whose float results depend on input values in their shape or that are not deterministic.
bool may_fix_outputs(const Node& n) {
  if (n.inputs.empty() || n.op_type == "Unique" || OpRegistry::global().is_random(n)) return false;
  for (const auto& [k, a] : n.attrs)
    if (a.g || !a.graphs.empty()) return false;
  return true;
}

std::string arity(int lo, int hi) {
  if (hi < 0) return std::to_string(lo) + " or more";
  if (hi == lo) return std::to_string(lo);
  return std::to_string(lo) + " to " + std::to_string(hi);
}

std::string type_mismatch(const Value& input, const std::string& got) {
  return "input '" + input.name + "' expects " + to_string(input.type) + ", got " + got;
}

}  // namespace

void check_feed(const Value& input, const RtValue& v) {
  const Type& t = input.type;
  auto fail = [&](const std::string& got) { throw Error(ErrorKind::kBadInput, type_mismatch(input, got)); };
  if (t.kind == Type::Kind::kSequence && !v.is_sequence()) fail(v.is_tensor() ? "a tensor" : "no value");
  if (t.kind == Type::Kind::kOptional) return;
  if (t.kind != Type::Kind::kTensor) return;
  if (!v.is_tensor()) fail(v.is_sequence() ? "a sequence" : "no value");
  const Tensor& x = v.tensor;
  std::string got = std::string(dtype_name(x.dtype())) + dims_to_string(x.dims());
  if (t.dtype != DType::kUndefined && t.dtype != x.dtype()) fail(got);
  if (!t.shape) return;
  if (t.shape->rank() != static_cast<size_t>(x.rank())) fail(got);
  for (size_t i = 0; i < t.shape->rank(); ++i) {
    const Dim& d = t.shape->dims[i];
    if (d.known() && d.value != x.dims()[i]) fail(got);
  }
}

Interpreter::Interpreter(const Model& model, InterpreterOptions opts)
    : model_(model), opts_(opts), rng_(opts.seed) {
  KILN_CHECK(model.graph != nullptr);
  weight_bytes_ = initializer_bytes(*model.graph);
  if (opts.max_memory_bytes > 0 && weight_bytes_ > opts.max_memory_bytes)
    throw Error(ErrorKind::kResourceLimit, "the model's weights need " + format_bytes(weight_bytes_) +
                                               ", more than the memory limit of " +
                                               format_bytes(opts.max_memory_bytes) + " (max_memory)");
  prepare(*model.graph);
}

Interpreter::~Interpreter() = default;

void Interpreter::prepare(const Graph& g) {
  auto plan = std::make_unique<GraphPlan>();
  const auto& reg = OpRegistry::global();
  std::unordered_map<const Value*, size_t> last_use;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = *g.nodes[i];
    int64_t opset = model_.opset(n.domain);
    const OpSchema* s = reg.find(n.domain, n.op_type, opset);
    if (!s) {
      std::string msg;
      if (!reg.knows(n.domain, n.op_type))
        msg = "operator " + n.qualified_op() + " is not supported by kiln";
      else
        msg = "operator " + n.qualified_op() + " is supported from opset " +
              std::to_string(reg.first_version(n.domain, n.op_type)) + ", the model imports opset " +
              std::to_string(opset);
      throw Error(ErrorKind::kUnsupported, msg, node_location(n));
    }
    if (!s->kernel)
      throw Error(ErrorKind::kUnsupported, "operator " + n.qualified_op() + " has no reference kernel",
                  node_location(n));
    int nin = static_cast<int>(n.inputs.size());
    int nout = static_cast<int>(n.outputs.size());
    if (nin < s->min_inputs || (s->max_inputs >= 0 && nin > s->max_inputs))
      throw Error(ErrorKind::kInvalidModel,
                  "has " + std::to_string(nin) + " inputs, expected " + arity(s->min_inputs, s->max_inputs),
                  node_location(n));
    if (nout < s->min_outputs || (s->max_outputs >= 0 && nout > s->max_outputs))
      throw Error(ErrorKind::kInvalidModel,
                  "has " + std::to_string(nout) + " outputs, expected " + arity(s->min_outputs, s->max_outputs),
                  node_location(n));
    plan->schemas.push_back(s);
    for (const Value* v : n.inputs)
      if (v && v->owner == &g && !v->initializer.defined()) last_use[v] = i;
    std::vector<const Value*> captured;
    for (const auto& [k, a] : n.attrs) {
      if (a.g) {
        prepare(*a.g);
        collect_outer_uses(*a.g, g, captured);
      }
      for (const auto& sg : a.graphs) {
        prepare(*sg);
        collect_outer_uses(*sg, g, captured);
      }
    }
    for (const Value* v : captured)
      if (v->owner == &g && !v->initializer.defined()) last_use[v] = i;
    // Outputs nobody reads die right after their node.
    for (const Value* v : n.outputs)
      if (v && !last_use.count(v)) last_use[v] = i;
  }
  for (const Value* v : g.outputs) last_use.erase(v);
  plan->frees.resize(g.nodes.size());
  for (const auto& [v, i] : last_use) plan->frees[i].push_back(v);
  plans_[&g] = std::move(plan);
}

const Interpreter::GraphPlan& Interpreter::plan_for(const Graph& g) {
  auto it = plans_.find(&g);
  KILN_CHECK(it != plans_.end());
  return *it->second;
}

std::vector<RtValue> Interpreter::run(const std::vector<RtValue>& feeds, const ValueObserver& observe) {
  struct Reset {
    const ValueObserver*& slot;
    ~Reset() { slot = nullptr; }
  } reset{observe_};
  observe_ = &observe;
  return run(feeds);
}

std::vector<RtValue> Interpreter::run_body(const Graph& body, const std::vector<RtValue>& inputs,
                                          const std::unordered_map<const Value*, RtValue>& captured,
                                          const ValueObserver* observe) {
  Env outer;
  outer.values = captured;
  struct Reset {
    Interpreter& i;
    ~Reset() {
      i.observe_ = nullptr;
      i.observe_parent_ = nullptr;
    }
  } reset{*this};
  observe_ = observe;
  observe_parent_ = &outer;
  return run_graph(body, inputs, &outer);
}

std::vector<RtValue> bind_feeds(const Graph& g, const std::vector<RtValue>& feeds) {
  if (feeds.size() != g.inputs.size())
    throw Error(ErrorKind::kBadInput, "the model has " + std::to_string(g.inputs.size()) + " inputs, got " +
                                          std::to_string(feeds.size()));
  std::vector<RtValue> bound = feeds;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const Value& in = *g.inputs[i];
    if (bound[i].is_none() && !bound[i].optional) {
      if (!in.initializer.defined()) throw Error(ErrorKind::kBadInput, "input '" + in.name + "' was not given");
      bound[i] = RtValue(in.initializer);
    }
    check_feed(in, bound[i]);
  }
  return bound;
}

std::vector<RtValue> Interpreter::run(const std::vector<RtValue>& feeds) {
  std::vector<RtValue> bound = bind_feeds(*model_.graph, feeds);
  timings_.clear();
  return run_graph(*model_.graph, bound, nullptr);
}

std::vector<RtValue> Interpreter::run_graph(const Graph& g, const std::vector<RtValue>& inputs,
                                            const Env* parent) {
  const GraphPlan& plan = plan_for(g);
  Env env;
  env.parent = parent;
  if (inputs.size() > g.inputs.size())
    throw Error(ErrorKind::kInvalidModel, "subgraph '" + g.name + "' takes " + std::to_string(g.inputs.size()) +
                                              " inputs, got " + std::to_string(inputs.size()));
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    if (i < inputs.size()) env.values[g.inputs[i]] = inputs[i];
    else if (g.inputs[i]->initializer.defined()) env.values[g.inputs[i]] = RtValue(g.inputs[i]->initializer);
    // run() checked the feeds against the declared types.
    if (!parent && &g == model_.graph.get() && static_float_type(g.inputs[i]->type)) env.fixed.insert(g.inputs[i]);
  }
  struct ReleaseAll {  // values still held when the graph returns or throws
    Interpreter& in;
    Env& env;
    ~ReleaseAll() {
      for (const auto& [v, bytes] : env.held) in.live_bytes_ -= bytes;
    }
  } release_all{*this, env};
  const bool budget = opts_.max_memory_bytes > 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    check_run();  // cancellation and deadlines (core/run_control.h)
    run_node(*g.nodes[i], *plan.schemas[i], env);
    if (budget) hold_outputs(*g.nodes[i], env);
    for (const Value* v : plan.frees[i]) {
      if (budget) release(v, env);
      env.values.erase(v);
    }
  }
  std::vector<RtValue> out;
  out.reserve(g.outputs.size());
  for (const Value* v : g.outputs) {
    if (v->initializer.defined() && !env.values.count(v)) {
      out.emplace_back(v->initializer);
      continue;
    }
    const RtValue* r = env.lookup(v);
    if (!r) throw Error(ErrorKind::kInternal, "graph output '" + v->name + "' was not computed");
    out.push_back(*r);
  }
  return out;
}

void Interpreter::hold_outputs(const Node& node, Env& env) {
  for (const Value* v : node.outputs) {
    auto it = v ? env.values.find(v) : env.values.end();
    if (it == env.values.end()) continue;
    int64_t bytes = it->second.is_tensor() ? static_cast<int64_t>(it->second.tensor.nbytes()) : 0;
    for (const Tensor& t : it->second.sequence) bytes += static_cast<int64_t>(t.nbytes());
    env.held[v] += bytes;
    live_bytes_ += bytes;
  }
  if (weight_bytes_ + live_bytes_ > opts_.max_memory_bytes)
    throw Error(ErrorKind::kResourceLimit,
                "the run holds " + format_bytes(live_bytes_) + " of values besides " + format_bytes(weight_bytes_) +
                    " of weights, more than the memory limit of " + format_bytes(opts_.max_memory_bytes) +
                    " (max_memory)",
                node_location(node));
}

void Interpreter::release(const Value* v, Env& env) {
  auto it = env.held.find(v);
  if (it == env.held.end()) return;
  live_bytes_ -= it->second;
  env.held.erase(it);
}

void Interpreter::run_node(const Node& node, const OpSchema& schema, Env& env) {
  std::vector<const RtValue*> ins;
  ins.reserve(node.inputs.size());
  bool all_fixed = !node.inputs.empty();
  std::vector<RtValue> const_inputs;  // reserved so pointers into it stay valid
  const_inputs.reserve(node.inputs.size());
  for (const Value* v : node.inputs) {
    if (!v) {
      ins.push_back(nullptr);
      continue;
    }
    if (!env.is_fixed(v)) all_fixed = false;
    const RtValue* r = nullptr;
    if (v->initializer.defined() && !v->is_graph_input) {
      const_inputs.emplace_back(v->initializer);
      r = &const_inputs.back();
    } else {
      r = env.lookup(v);
    }
    if (!r) throw Error(ErrorKind::kInternal, "value '" + v->name + "' used before it was computed",
                        node_location(node));
    ins.push_back(r);
  }
  KernelContext::SubgraphRunner runner = [this, &env](const Graph& g, const std::vector<RtValue>& in) {
    return run_graph(g, in, &env);
  };
  std::vector<RtValue> outs;
  auto start = std::chrono::steady_clock::now();
  try {
    outs = evaluate_node(node, schema, model_.opset(node.domain), ins, runner, &rng_);
  } catch (const Error& e) {
    // Only errors about this node itself (not from nodes inside its subgraphs).
    if (e.kind() == ErrorKind::kBadInput && all_fixed &&
        (e.where().node.empty() || e.where().node == node.display_name()))
      throw Error(ErrorKind::kInvalidModel,
                  e.message() + " (every input of this node is fixed by the model's constants and declared types)",
                  node_location(node));
    throw e.with_context(node_location(node));
  } catch (const std::bad_alloc&) {
    throw Error(ErrorKind::kBadInput, "out of memory while computing the outputs", node_location(node));
  } catch (const std::exception& e) {
    throw Error(ErrorKind::kInternal, e.what(), node_location(node));
  }
  if (opts_.profile) {
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    timings_.push_back({node.display_name(), node.qualified_op(), ms});
  }
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    const Value* v = node.outputs[i];
    if (!v) continue;
    RtValue& r = outs[i];
    if (r.is_none() && !r.optional)
      throw Error(ErrorKind::kInternal, "kernel did not produce output #" + std::to_string(i),
                  node_location(node));
    if (all_fixed && r.is_tensor() && is_float(r.tensor.dtype()) && may_fix_outputs(node)) env.fixed.insert(v);
    if (observe_ && env.parent == observe_parent_) (*observe_)(*v, r);
    env.values[v] = std::move(r);
  }
}

}  // namespace kiln
