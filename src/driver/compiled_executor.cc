// Compiled executor: the plan cache (per input-shape signature), runs and their fallbacks to the
// interpreter. Plans are built by the compile steps of driver/compile/plan_builder.h.
#include "driver/compiled_executor.h"

#include <algorithm>
#include <cstring>

#include "driver/compile/plan_builder.h"
#include "ops/evaluate.h"
#include "tir/printer.h"

namespace kiln {
namespace {

std::string signature(const std::vector<RtValue>& feeds) {
  std::string key;
  for (const RtValue& v : feeds) {
    if (v.is_tensor()) {
      key += std::string(dtype_name(v.tensor.dtype())) + dims_to_string(v.tensor.dims());
    } else if (v.is_sequence()) {
      key += "seq" + std::to_string(v.sequence.size()) + "[";
      for (const Tensor& t : v.sequence) key += std::string(dtype_name(t.dtype())) + dims_to_string(t.dims());
      key += "]";
    } else {
      key += v.optional ? "opt" : "none";
    }
    key += ";";
  }
  return key;
}

}  // namespace

// ---- the plan --------------------------------------------------------------------------------

struct CompiledExecutor::Plan : compile::BuiltPlan {
  // Shapes in this plan's signature depend on input values (a fallback step disagreed with the
  // learned shapes once): runs with this signature go to the reference interpreter.
  bool value_dependent = false;
};

CompiledExecutor::CompiledExecutor(const Model& model, CompiledOptions opts)
    : model_(model), opts_(opts), rng_(opts.seed) {
  KILN_CHECK(model.graph != nullptr);
  own_pool_ = std::make_unique<ThreadPool>(opts.threads);
  pool_ = own_pool_.get();
  // Resolves every op up front, bodies included (same errors as the interpreter).
  InterpreterOptions io;
  io.seed = opts.seed;
  io.profile = opts.profile;
  io.max_memory_bytes = opts.max_memory_bytes;
  reference_ = std::make_unique<Interpreter>(model, io);
  library_ = std::make_shared<compile::KernelLibrary>();
  weight_bytes_ = initializer_bytes(*model.graph);  // (the interpreter checked them against the budget)
}

namespace {

std::unique_ptr<Model> body_as_model(const Model& outer, const Graph& body) {
  auto m = std::make_unique<Model>();
  m->opsets = outer.opsets;
  m->path = outer.path;
  m->graph = std::shared_ptr<Graph>(std::shared_ptr<void>(), const_cast<Graph*>(&body));  // not owned
  return m;
}

}  // namespace

CompiledExecutor::CompiledExecutor(CompiledExecutor& parent, const Graph& body)
    : body_model_(body_as_model(parent.model_, body)),
      model_(*body_model_),
      opts_(parent.opts_),
      parent_(&parent),
      captures_(compile::body_captures(body)),
      pool_(parent.pool_),
      rng_(parent.opts_.seed),
      library_(parent.library_) {}

CompiledExecutor::~CompiledExecutor() = default;

int64_t CompiledExecutor::reference_runs_while_compiling() { return compile::reference_runs(); }

std::string CompiledExecutor::kernels_text() const {
  std::string out;
  if (!last_plan_) return out;
  for (const auto& f : last_plan_->funcs) out += tir::print(f) + "\n";
  return out;
}

int CompiledExecutor::retune(std::shared_ptr<const gemm_ops::TuningTable> tuning) {
  std::lock_guard<std::mutex> lock(mu_);
  opts_.tuning = std::move(tuning);
  int remade = 0;
  for (auto& entry : cache_)
    for (PlanStep& st : entry.second->exec.steps) {
      if (st.kind != PlanStep::Kind::kGemm) continue;
      const gemm_ops::KernelChoice choice = gemm_ops::tuned_choice(opts_.tuning.get(), st.gemm);
      if (choice == st.gemm.choice && st.gemm_op) continue;
      st.gemm.choice = choice;
      entry.second->exec.make_gemm_op(st);
      ++remade;
    }
  return remade;
}

const ExecPlan* CompiledExecutor::last_exec_plan() const { return last_plan_ ? &last_plan_->exec : nullptr; }
const std::vector<tir::PrimFunc>* CompiledExecutor::last_kernels() const {
  return last_plan_ ? &last_plan_->funcs : nullptr;
}

std::vector<RtValue> CompiledExecutor::run(const std::vector<RtValue>& feeds) { return run(feeds, {}); }

std::vector<RtValue> CompiledExecutor::run(const std::vector<RtValue>& feeds_in,
                                           const std::vector<OutputBuffer>& outputs) {
  std::lock_guard<std::mutex> lk(mu_);
  const Graph& g = *model_.graph;
  if (!outputs.empty() && outputs.size() != g.outputs.size())
    throw Error(ErrorKind::kUsage, "the model has " + std::to_string(g.outputs.size()) + " outputs, got " +
                                       std::to_string(outputs.size()) + " output buffers");
  return run_checked(bind_feeds(g, feeds_in), outputs);
}

std::vector<RtValue> CompiledExecutor::run_checked(std::vector<RtValue> feeds, const std::vector<OutputBuffer>& outputs) {
  std::string key = signature(feeds);
  auto it = std::find_if(cache_.begin(), cache_.end(), [&](const auto& e) { return e.first == key; });
  last_run_planned_ = it == cache_.end();
  if (it == cache_.end()) {
    ScopedThreadPool scope(pool_);  // (weights are packed on the executor's threads)
    cache_.emplace_front(key, build_plan(feeds));
    while (cache_.size() > std::max<size_t>(opts_.cache_entries, 1)) cache_.pop_back();
  } else if (it != cache_.begin()) {
    cache_.splice(cache_.begin(), cache_, it);
  }
  Plan& plan = *cache_.front().second;
  bind_arena(plan);
  last_plan_ = &plan;
  stats_ = plan.stats;
  if (!plan.value_dependent) {
    try {
      ScopedThreadPool scope(pool_);
      std::vector<RtValue> out = execute(plan, feeds, outputs);
      for (const auto& [body, ex] : bodies_) {  // what the bodies' last plans ran
        const CompileStats& b = ex->stats_;
        stats_.generated_nodes += b.generated_nodes;
        stats_.gemm_nodes += b.gemm_nodes;
        stats_.fallback_nodes += b.fallback_nodes;
        stats_.control_flow_nodes += b.control_flow_nodes;
        stats_.kernels += b.kernels;
        stats_.compiled_kernels += b.compiled_kernels;
        stats_.library_kernels += b.library_kernels;
        stats_.symbolic_kernels += b.symbolic_kernels;
        for (const auto& [op, n] : b.fallback_ops) stats_.fallback_ops[op] += n;
      }
      return out;
    } catch (const PlanShapeMismatch& e) {
      // NonZero, Unique, ... with the same input shapes but other values: the learned shapes do
      // not hold, so this signature runs on the reference interpreter from now on.
      compile::log(std::string("value-dependent shapes, running on the interpreter: ") + e.what());
      plan.value_dependent = true;
    }
  }
  stats_.fallback_nodes += stats_.generated_nodes + stats_.gemm_nodes + stats_.control_flow_nodes;
  stats_.generated_nodes = stats_.gemm_nodes = stats_.control_flow_nodes = 0;
  return run_reference(feeds, outputs);
}

Interpreter& CompiledExecutor::root_interpreter() { return parent_ ? parent_->root_interpreter() : *reference_; }

CompiledExecutor& CompiledExecutor::body_executor(const Graph& body) {
  auto& slot = bodies_[&body];
  if (!slot) slot.reset(new CompiledExecutor(*this, body));
  return *slot;
}

std::vector<RtValue> CompiledExecutor::run_control_flow(const Node& n, const OpSchema& schema,
                                                        const std::vector<const RtValue*>& ins) {
  // The step's inputs: the node's, then compile::step_captures(n) (PlanBuilder::add_fallback).
  const size_t arity = n.inputs.size();
  auto [cached, fresh] = step_captures_.try_emplace(&n);
  if (fresh) cached->second = compile::step_captures(n);
  const std::vector<Value*>& captured = cached->second;
  KILN_CHECK(ins.size() == arity + captured.size());
  std::unordered_map<const Value*, const RtValue*> outer;
  for (size_t k = 0; k < captured.size(); ++k) outer[captured[k]] = ins[arity + k];
  auto run_body = [&](const Graph& body, const std::vector<RtValue>& inputs) {
    CompiledExecutor& ex = body_executor(body);
    std::vector<RtValue> feeds = inputs;
    feeds.resize(body.inputs.size());
    for (Value* c : ex.captures_) {
      auto it = outer.find(c);
      KILN_CHECK(it != outer.end() && it->second != nullptr);
      feeds.push_back(*it->second);
    }
    std::lock_guard<std::mutex> lk(ex.mu_);
    return ex.run_checked(std::move(feeds), {});
  };
  std::vector<const RtValue*> node_ins(ins.begin(), ins.begin() + static_cast<std::ptrdiff_t>(arity));
  std::vector<RtValue> out = evaluate_node(n, schema, model_.opset(n.domain), node_ins, run_body, &rng_);
  if (opts_.plan_untaken_branches && n.op_type == "If" && n.domain.empty() && ins[0] && ins[0]->is_tensor() &&
      ins[0]->tensor.numel() == 1) {
    const char* untaken = ins[0]->tensor.get_double(0) != 0.0 ? "else_branch" : "then_branch";
    const Attribute* a = n.attr(untaken);
    try {
      if (a && a->g) run_body(*a->g, {});
    } catch (const Error& e) {
      compile::log("If " + n.display_name() + ": the " + untaken + " fails on these values, not planned: " + e.what());
    }
  }
  return out;
}

CompiledExecutor::BranchPlan CompiledExecutor::branch_plan(int32_t node, int branch) const {
  BranchPlan out;
  const Node& n = *model_.graph->nodes.at(static_cast<size_t>(node));
  const Attribute* a = n.attr(branch == 0 ? "then_branch" : "else_branch");
  auto it = a && a->g ? bodies_.find(a->g.get()) : bodies_.end();
  if (it == bodies_.end()) return out;
  const CompiledExecutor& ex = *it->second;
  if (!ex.last_plan_ || ex.last_plan_->value_dependent) return out;
  out.executor = &ex;
  out.plan = &ex.last_plan_->exec;
  out.kernels = &ex.last_plan_->funcs;
  // An If branch has no inputs of its own: it is fed the values it captures, which are among
  // the step's inputs after the node's (compile::step_captures).
  const std::vector<Value*> captured = compile::step_captures(n);
  for (Value* c : ex.captures_) {
    auto pos = std::find(captured.begin(), captured.end(), c);
    KILN_CHECK(pos != captured.end());
    out.feeds.push_back(static_cast<int32_t>(n.inputs.size() + static_cast<size_t>(pos - captured.begin())));
  }
  return out;
}

std::vector<RtValue> CompiledExecutor::run_reference(const std::vector<RtValue>& feeds,
                                                     const std::vector<OutputBuffer>& outputs,
                                                     const Interpreter::ValueObserver* observe) {
  const Graph& g = *model_.graph;
  std::vector<RtValue> out;
  if (!parent_) {
    out = observe ? reference_->run(feeds, *observe) : reference_->run(feeds);
    timings_ = reference_->timings();
  } else {
    const size_t n = g.inputs.size();
    std::unordered_map<const Value*, RtValue> outer;
    for (size_t k = 0; k < captures_.size(); ++k) outer[captures_[k]] = feeds[n + k];
    out = root_interpreter().run_body(g, std::vector<RtValue>(feeds.begin(), feeds.begin() + static_cast<std::ptrdiff_t>(n)),
                                      outer, observe);
  }
  for (size_t i = 0; i < outputs.size() && i < out.size(); ++i) {
    if (!outputs[i].data) continue;
    if (!out[i].is_tensor()) throw Error(ErrorKind::kBadInput, "output '" + g.outputs[i]->name + "' is not a tensor");
    const Tensor& t = out[i].tensor;
    if (t.nbytes() > outputs[i].bytes)
      throw Error(ErrorKind::kBadInput, "output '" + g.outputs[i]->name + "' needs " + std::to_string(t.nbytes()) +
                                            " bytes, the buffer has " + std::to_string(outputs[i].bytes));
    if (t.nbytes() > 0) std::memcpy(outputs[i].data, t.raw(), t.nbytes());
    out[i].tensor = Tensor::view(t.dtype(), t.dims(), outputs[i].data);
  }
  return out;
}

std::unique_ptr<CompiledExecutor::Plan> CompiledExecutor::build_plan(const std::vector<RtValue>& feeds) {
  auto plan = std::make_unique<Plan>();
  auto shape_run = [this](const std::vector<RtValue>& feeds, const Interpreter::ValueObserver& observe) {
    run_reference(feeds, {}, &observe);
  };
  compile::PlanBuilder(model_, opts_, captures_, shape_run, *library_, *plan).build(feeds);
  use_backend_thread_teams(plan->exec, *pool_);
  admit(*plan);
  return plan;
}

void CompiledExecutor::bind_arena(Plan& plan) {
  const int64_t need = plan.exec.arena_bytes;
  if (need > arena_capacity_) {
    arena_.reset();  // (every plan's views are rebound before its next run)
    arena_capacity_ = 0;
    arena_ = allocate_arena_memory(need);
    arena_capacity_ = need;
  }
  if (plan.exec.arena_data != arena_.get() || arena_.get() == nullptr) plan.exec.bind_arena(arena_.get());
}

void CompiledExecutor::admit(const Plan& plan) {
  if (opts_.max_memory_bytes <= 0) return;
  const int64_t outputs = plan.exec.output_bytes();
  int64_t packed = plan.exec.packed_weight_bytes();
  for (const auto& [key, p] : cache_) packed = std::max(packed, p->exec.packed_weight_bytes());
  // The shared arena is as large as the largest signature's; when keeping it would exceed the
  // budget, it is freed and reallocated at this plan's size.
  int64_t arena = std::max(arena_capacity_, plan.exec.arena_bytes);
  if (weight_bytes_ + packed + arena + outputs > opts_.max_memory_bytes && arena_capacity_ > plan.exec.arena_bytes) {
    arena_.reset();
    arena_capacity_ = 0;
    arena = plan.exec.arena_bytes;
  }
  const int64_t need = weight_bytes_ + packed + arena + outputs;
  if (need > opts_.max_memory_bytes)
    throw Error(ErrorKind::kResourceLimit,
                "these input shapes need " + format_bytes(need) + " (weights " + format_bytes(weight_bytes_) +
                    ", packed GEMM weights " + format_bytes(packed) + ", activations " + format_bytes(arena) +
                    ", outputs " + format_bytes(outputs) + "), more than the memory limit of " +
                    format_bytes(opts_.max_memory_bytes) + " (max_memory)");
}

// ---- execution -------------------------------------------------------------------------------

std::vector<RtValue> CompiledExecutor::execute(Plan& plan, const std::vector<RtValue>& feeds,
                                               const std::vector<OutputBuffer>& outputs) {
  const Graph& g = *model_.graph;
  timings_.clear();
  FallbackFn fallback = [&](const PlanStep& st, const std::vector<const RtValue*>& ins) {
    const Node& n = *g.nodes[static_cast<size_t>(st.node)];
    const OpSchema& schema = *plan.schemas[static_cast<size_t>(st.node)];
    if (n.has_subgraphs()) return run_control_flow(n, schema, ins);
    return evaluate_node(n, schema, model_.opset(n.domain), ins);
  };
  std::vector<double> step_ms;
  std::vector<RtValue> out = execute_plan(plan.exec, feeds, outputs, fallback, opts_.profile ? &step_ms : nullptr);
  for (size_t k = 0; k < step_ms.size() && k < plan.exec.steps.size(); ++k) {
    const PlanStep& st = plan.exec.steps[k];
    NodeTiming t;
    t.node = st.name;
    t.op = st.op;
    t.ms = step_ms[k];
    timings_.push_back(std::move(t));
  }
  return out;
}

}  // namespace kiln
