// Compiled executor: plan building (shapes, grouping into kernels, lowering, JIT, arena) and
// plan execution. See compiled_executor.h for the steps.
#include "driver/compiled_executor.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <new>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "kernels/x86/f32_conv_stem.h"
#include "kernels/x86/f32_gemm.h"
#include "ops/evaluate.h"
#include "ops/lowering.h"
#include "ops/op_util.h"
#include "pass/bind_shapes.h"
#include "runtime/gemm_ops.h"
#include "te/te.h"
#include "tir/printer.h"
#include "tir/rewrite.h"

namespace kiln {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

bool has_subgraphs(const Graph& g) {
  for (const auto& n : g.nodes)
    if (n->has_subgraphs()) return true;
  return false;
}

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

const std::string kGroupAttr = "kiln.group";

// KILN_LOG_COMPILED=1: why nodes fall back (lowering declined or failed, kernel build errors).
bool log_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("KILN_LOG_COMPILED");
    return e && *e && std::string(e) != "0";
  }();
  return on;
}
void log(const std::string& msg) {
  if (log_enabled()) std::fprintf(stderr, "kiln compiled: %s\n", msg.c_str());
}
// Vector loads whose index is not a ramp or a broadcast (gathers: one load per lane).
int count_gathers(const tir::PrimFunc& f) {
  int n = 0;
  tir::visit_exprs(f.body, [&](const tir::Expr& e) {
    if (e->kind != tir::ExprKind::kLoad || e->type.lanes == 1 || e->operands.empty()) return;
    tir::ExprKind k = e->operands.back()->kind;
    if (k != tir::ExprKind::kRamp && k != tir::ExprKind::kBroadcast) ++n;
  });
  return n;
}

// The product of the constant extents es[from, to) (a non-constant extent counts as 1).
int64_t const_product(const std::vector<tir::Expr>& es, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t n = 1;
  for (size_t k = from; k < std::min(to, es.size()); ++k) {
    int64_t d = 1;
    tir::is_const_int(es[k], &d);
    n *= d;
  }
  return n;
}

// Spatial elements times reduce iterations of compute t: the work its loop nest does.
int64_t compute_work(const te::Tensor& t) {
  std::vector<tir::Expr> extents;
  for (const auto& ax : t->reduce_axes) extents.push_back(ax->extent);
  return const_product(t->shape) * const_product(extents);
}

// Fuses the loops <prefix><from> .. <prefix><to - 1> of `stage` (adjacent, in order) into one and
// returns its name ("i0.i1.fused.i2.fused", ...; the loop itself when to == from + 1).
std::string fuse_axes(te::Schedule& s, const std::string& stage, const std::string& prefix, size_t from, size_t to) {
  std::string loop = prefix + std::to_string(from);
  for (size_t k = from + 1; k < to; ++k) {
    s.fuse(stage, loop, prefix + std::to_string(k));
    loop += "." + prefix + std::to_string(k) + ".fused";
  }
  return loop;
}

// Integer divisions and modulos in f's indices (a fused loop whose index does not recombine).
int count_divmods(const tir::PrimFunc& f) {
  int n = 0;
  tir::visit_exprs(f.body, [&](const tir::Expr& e) {
    n += e->kind == tir::ExprKind::kFloorDiv || e->kind == tir::ExprKind::kFloorMod;
  });
  return n;
}

constexpr int64_t kArenaAlign = 64;

std::atomic<int64_t> g_reference_runs{0};

// KILN_VERIFY_PLAN_SHAPES=1: every plan whose shapes came from inference also runs the reference
// interpreter and compares (tests run the conformance suites and models this way).
bool verify_plan_shapes() {
  static const bool on = [] {
    const char* e = std::getenv("KILN_VERIFY_PLAN_SHAPES");
    return e && *e && std::string(e) != "0";
  }();
  return on;
}

void check_against_run(Interpreter& reference, const std::vector<RtValue>& feeds, const BoundShapes& bound) {
  reference.run(feeds, [&](const Value& v, const RtValue& r) {
    auto it = bound.values.find(&v);
    if (it == bound.values.end() || !r.is_tensor()) return;
    const BoundValue& b = it->second;
    if (b.dtype != r.tensor.dtype() || b.dims != r.tensor.dims())
      throw Error(ErrorKind::kInternal, "shape inference gave '" + v.name + "' " + std::string(dtype_name(b.dtype)) +
                                            dims_to_string(b.dims) + ", a run gives " +
                                            std::string(dtype_name(r.tensor.dtype())) + dims_to_string(r.tensor.dims()));
  });
}

// TIR buffers need at least one dim: rank-0 values are lowered as shape [1].
std::vector<int64_t> te_dims(const std::vector<int64_t>& d) { return d.empty() ? std::vector<int64_t>{1} : d; }

}  // namespace

// ---- the plan --------------------------------------------------------------------------------

struct CompiledExecutor::Plan {
  ExecPlan exec;
  std::vector<const OpSchema*> schemas;  // node index -> schema (fallback steps)
  std::vector<tir::PrimFunc> funcs;
  std::unique_ptr<codegen::JitModule> module;
  CompileStats stats;
  // Shapes in this plan's signature depend on input values (a fallback step disagreed with the
  // learned shapes once): runs with this signature go to the reference interpreter.
  bool value_dependent = false;
};

CompiledExecutor::CompiledExecutor(const Model& model, CompiledOptions opts) : model_(model), opts_(opts) {
  KILN_CHECK(model.graph != nullptr);
  pool_ = std::make_unique<ThreadPool>(opts.threads);
  // Resolves every op up front (same errors as the interpreter); nested graphs run there.
  InterpreterOptions io;
  io.seed = opts.seed;
  io.profile = opts.profile;
  auto interp = std::make_unique<Interpreter>(model, io);
  if (has_subgraphs(*model.graph)) interp_ = std::move(interp);
  else reference_ = std::move(interp);
}

CompiledExecutor::~CompiledExecutor() = default;

int64_t CompiledExecutor::reference_runs_while_compiling() { return g_reference_runs.load(); }

std::string CompiledExecutor::kernels_text() const {
  std::string out;
  if (!last_plan_) return out;
  for (const auto& f : last_plan_->funcs) out += tir::print(f) + "\n";
  return out;
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
  if (interp_) {
    stats_ = CompileStats();
    stats_.fallback_nodes = static_cast<int>(g.nodes.size());
    return run_reference(*interp_, feeds_in, outputs);
  }
  if (feeds_in.size() != g.inputs.size())
    throw Error(ErrorKind::kBadInput, "the model has " + std::to_string(g.inputs.size()) + " inputs, got " +
                                          std::to_string(feeds_in.size()));
  std::vector<RtValue> feeds = feeds_in;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const Value& in = *g.inputs[i];
    if (feeds[i].is_none() && !feeds[i].optional) {
      if (!in.initializer.defined()) throw Error(ErrorKind::kBadInput, "input '" + in.name + "' was not given");
      feeds[i] = RtValue(in.initializer);
    }
    check_feed(in, feeds[i]);
  }
  std::string key = signature(feeds);
  auto it = std::find_if(cache_.begin(), cache_.end(), [&](const auto& e) { return e.first == key; });
  if (it == cache_.end()) {
    cache_.emplace_front(key, build_plan(feeds));
    while (cache_.size() > std::max<size_t>(opts_.cache_entries, 1)) cache_.pop_back();
  } else if (it != cache_.begin()) {
    cache_.splice(cache_.begin(), cache_, it);
  }
  Plan& plan = *cache_.front().second;
  last_plan_ = &plan;
  stats_ = plan.stats;
  if (!plan.value_dependent) {
    try {
      ScopedThreadPool scope(pool_.get());
      return execute(plan, feeds, outputs);
    } catch (const PlanShapeMismatch& e) {
      // NonZero, Unique, ... with the same input shapes but other values: the learned shapes do
      // not hold, so this signature runs on the reference interpreter from now on.
      log(std::string("value-dependent shapes, running on the interpreter: ") + e.what());
      plan.value_dependent = true;
    }
  }
  stats_.fallback_nodes += stats_.generated_nodes + stats_.gemm_nodes;
  stats_.generated_nodes = stats_.gemm_nodes = 0;
  return run_reference(*reference_, feeds, outputs);
}

std::vector<RtValue> CompiledExecutor::run_reference(Interpreter& interp, const std::vector<RtValue>& feeds,
                                                     const std::vector<OutputBuffer>& outputs) {
  const Graph& g = *model_.graph;
  auto out = interp.run(feeds);
  timings_ = interp.timings();
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

// ---- plan building ---------------------------------------------------------------------------

namespace {

// A run of consecutive lowerable nodes being composed into one kernel.
struct Segment {
  std::vector<int> nodes;
  std::unordered_map<const Value*, te::Tensor> tensors;  // values computed in the segment
  std::vector<std::pair<const Value*, te::Tensor>> placeholders;
  int next_placeholder = 0;
};

}  // namespace

std::unique_ptr<CompiledExecutor::Plan> CompiledExecutor::build_plan(const std::vector<RtValue>& feeds) {
  const Graph& g = *model_.graph;
  const auto& reg = OpRegistry::global();
  auto plan = std::make_unique<Plan>();
  ExecPlan& ex = plan->exec;
  auto t_total = Clock::now();
  std::vector<const Value*> values;            // slot -> value
  std::unordered_map<const Value*, int> slot_of;  // value -> slot

  // Slots for every value of the main graph.
  auto add_slot = [&](const Value* v) {
    if (!v || slot_of.count(v)) return;
    slot_of[v] = static_cast<int>(values.size());
    values.push_back(v);
  };
  for (const Value* v : g.inputs) add_slot(v);
  for (const Value* v : g.constants) add_slot(v);
  for (const auto& n : g.nodes) {
    for (const Value* v : n->inputs) add_slot(v);
    for (const Value* v : n->outputs) add_slot(v);
  }
  for (const Value* v : g.outputs) add_slot(v);
  const size_t nslots = values.size();
  ex.slots.resize(nslots);
  for (size_t s = 0; s < nslots; ++s)
    if (values[s]->is_constant()) {
      ex.slots[s].constant = static_cast<int32_t>(ex.constants.size());
      ex.constants.push_back(values[s]->initializer);
    }
  for (const Value* v : g.inputs) {
    ex.inputs.push_back(slot_of[v]);
    ex.input_names.push_back(v->name);
  }
  for (const Value* v : g.outputs) {
    ex.outputs.push_back(slot_of[v]);
    ex.output_names.push_back(v->name);
  }
  auto slot_list = [&](const std::vector<Value*>& vs) {
    std::vector<int32_t> out;
    for (const Value* v : vs) out.push_back(v ? slot_of.at(v) : -1);
    return out;
  };

  // S1: every value's dtype and dims from shape inference with the input dims bound
  // (pass/bind_shapes.h); a reference run only where inference cannot know them.
  auto t0 = Clock::now();
  for (const auto& n : g.nodes) {
    const OpSchema* schema = reg.find(n->domain, n->op_type, model_.opset(n->domain));
    KILN_CHECK(schema != nullptr);
    plan->schemas.push_back(schema);
  }
  auto learn_type = [&](const Value* v, DType dtype, const std::vector<int64_t>& dims) {
    auto it = slot_of.find(v);
    if (it == slot_of.end()) return;
    PlanSlot& ps = ex.slots[static_cast<size_t>(it->second)];
    ps.tensor = true;
    ps.dims = dims;
    ps.dtype = dtype;
  };
  auto learn = [&](const Value* v, const RtValue& r) {
    if (r.is_tensor()) learn_type(v, r.tensor.dtype(), r.tensor.dims());
  };
  for (size_t i = 0; i < g.inputs.size(); ++i) learn(g.inputs[i], feeds[i]);
  for (size_t s = 0; s < nslots; ++s)
    if (values[s]->is_constant()) learn(values[s], RtValue(values[s]->initializer));
  // Small values that the input shapes and constants decide, kept for the folding below.
  constexpr int64_t kFoldMaxElements = 1 << 16;
  std::unordered_map<const Value*, Tensor> small_values;
  BoundShapes bound = bind_shapes(model_, feeds, kFoldMaxElements);
  if (bound.complete) {
    for (const auto& [v, b] : bound.values) {
      learn_type(v, b.dtype, b.dims);
      if (b.value.defined()) small_values[v] = b.value;
    }
    plan->stats.shapes = "inference";
    if (verify_plan_shapes()) check_against_run(*reference_, feeds, bound);
  } else {
    // Shape inference stopped (a value-dependent op, an op without inference, sequences): a
    // reference run learns the shapes (and reports input errors the way the interpreter does).
    log("shapes by a reference run: " + bound.stopped_at);
    plan->stats.shapes = "reference run (" + bound.stopped_at + ")";
    g_reference_runs.fetch_add(1);
    reference_->run(feeds, [&](const Value& v, const RtValue& r) {
      learn(&v, r);
      if (r.is_tensor() && r.tensor.numel() <= kFoldMaxElements) small_values[&v] = r.tensor;
    });
  }
  plan->stats.shapes_ms = ms_since(t0);

  // Values the input shapes alone decide (Shape/Size and what is computed from them and from
  // constants: the reshape targets exporters compute at run time) become plan constants, and
  // their nodes run no step. Not graph outputs, nodes with subgraphs, or random ops.
  std::unordered_map<const Value*, const Tensor*> folded;
  std::unordered_set<int> folded_nodes;
  {
    std::unordered_set<const Value*> outputs_set(g.outputs.begin(), g.outputs.end());
    for (int i = 0; i < static_cast<int>(g.nodes.size()); ++i) {
      const Node& n = *g.nodes[static_cast<size_t>(i)];
      if ((!n.domain.empty() && n.domain != "ai.onnx") || reg.is_random(n) || n.has_subgraphs() ||
          n.inputs.empty() || n.outputs.empty())
        continue;
      bool ok = true;
      if (n.op_type == "Shape" || n.op_type == "Size") {
        ok = n.inputs[0] != nullptr;
      } else {
        for (const Value* v : n.inputs) ok = ok && (!v || v->is_constant() || folded.count(v));
      }
      for (const Value* v : n.outputs) ok = ok && v && !outputs_set.count(v) && small_values.count(v);
      if (!ok) continue;
      for (const Value* v : n.outputs) folded[v] = &small_values[v];
      folded_nodes.insert(i);
    }
    for (auto& [v, t] : folded) {
      PlanSlot& ps = ex.slots[static_cast<size_t>(slot_of.at(v))];
      ps.constant = static_cast<int32_t>(ex.constants.size());
      ex.constants.push_back(t->clone());  // (the reference run owns *t)
    }
    plan->stats.folded_nodes = static_cast<int>(folded_nodes.size());
  }
  // A value's tensor when it is known at plan time: an initializer or a folded value.
  auto constant_of = [&](const Value* v) -> const Tensor* {
    if (v->is_constant()) return &v->initializer;
    auto it = folded.find(v);
    return it == folded.end() ? nullptr : it->second;
  };

  // Consumers of each value (node indices); graph outputs count as a consumer "after the end".
  const int nnodes = static_cast<int>(g.nodes.size());
  std::unordered_map<const Value*, std::vector<int>> consumers;
  std::unordered_map<const Node*, int> node_index;
  for (int i = 0; i < nnodes; ++i) {
    node_index[g.nodes[static_cast<size_t>(i)].get()] = i;
    for (const Value* v : g.nodes[static_cast<size_t>(i)]->inputs)
      if (v) consumers[v].push_back(i);
  }
  std::unordered_set<const Value*> graph_outputs(g.outputs.begin(), g.outputs.end());

  // Execution order: groups in id order, nodes of a group in node order.
  std::vector<int> order(static_cast<size_t>(nnodes));
  for (int i = 0; i < nnodes; ++i) order[static_cast<size_t>(i)] = i;
  auto group_of = [&](int i) -> int64_t {
    const Attribute* a = g.nodes[static_cast<size_t>(i)]->attr(kGroupAttr);
    return a && a->kind == Attribute::Kind::kInt ? a->i : -1;
  };
  bool grouped = true;
  for (int i = 0; i < nnodes; ++i) grouped &= group_of(i) >= 0;
  if (grouped)
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return group_of(a) < group_of(b); });

  // S2: segments of lowerable nodes within each group become kernels.
  auto t1 = Clock::now();
  auto tensor_ok = [&](const Value* v) {
    int s = slot_of.at(v);
    return ex.slots[static_cast<size_t>(s)].tensor && lower::supported_dtype(ex.slots[static_cast<size_t>(s)].dtype);
  };
  int kernel_count = 0;
  Segment seg;
  int64_t seg_group = -2;

  auto node_step = [&](int i, PlanStep::Kind kind) {
    const Node& n = *g.nodes[static_cast<size_t>(i)];
    PlanStep st;
    st.kind = kind;
    st.node = i;
    st.name = n.display_name();
    st.op = n.qualified_op();
    st.inputs = slot_list(n.inputs);
    st.outputs = slot_list(n.outputs);
    return st;
  };
  auto add_fallback = [&](int i) {
    ex.steps.push_back(node_step(i, PlanStep::Kind::kFallback));
    plan->stats.fallback_nodes++;
    plan->stats.fallback_ops[g.nodes[static_cast<size_t>(i)]->qualified_op()]++;
  };

  // Turns the current segment into a kernel step (or fallback steps if lowering fails).
  // A step's output argument: written into the arena unless it is a graph output.
  auto make_out_arg = [&](const Value* v) {
    PlanArg a;
    a.slot = slot_of[v];
    a.output = true;
    a.graph_output = graph_outputs.count(v) > 0;
    a.dtype = ex.slots[static_cast<size_t>(a.slot)].dtype;
    a.dims = ex.slots[static_cast<size_t>(a.slot)].dims;
    return a;
  };
  auto flush = [&]() {
    if (seg.nodes.empty()) return;
    std::set<int> in_seg(seg.nodes.begin(), seg.nodes.end());
    std::vector<std::pair<const Value*, te::Tensor>> outputs;
    for (int i : seg.nodes)
      for (const Value* v : g.nodes[static_cast<size_t>(i)]->outputs) {
        if (!v || !seg.tensors.count(v)) continue;
        bool outside = graph_outputs.count(v) > 0;
        for (int c : consumers[v]) outside |= !in_seg.count(c);
        if (outside) outputs.emplace_back(v, seg.tensors[v]);
      }
    PlanStep st;
    for (int i : seg.nodes) st.op += (st.op.empty() ? "" : "+") + g.nodes[static_cast<size_t>(i)]->op_type;
    bool empty = false;
    for (auto& [v, t] : outputs)
      empty |= lower::numel_of(ex.slots[static_cast<size_t>(slot_of[v])].dims) == 0;
    if (outputs.empty()) {
      // Nothing leaves the segment: its nodes are dead.
      plan->stats.generated_nodes += static_cast<int>(seg.nodes.size());
      seg = Segment();
      return;
    }
    if (empty) {
      st.kind = PlanStep::Kind::kEmpty;
      for (auto& [v, t] : outputs) st.args.push_back(make_out_arg(v));
      ex.steps.push_back(std::move(st));
      plan->stats.generated_nodes += static_cast<int>(seg.nodes.size());
      seg = Segment();
      return;
    }
    try {
      // Placeholders reached from the outputs, in creation order.
      std::unordered_set<const te::TensorNode*> reached;
      std::vector<te::Tensor> stack;
      std::vector<te::Tensor> out_tensors;
      for (auto& [v, t] : outputs) {
        stack.push_back(t);
        out_tensors.push_back(t);
      }
      std::vector<te::Tensor> computes;
      while (!stack.empty()) {
        te::Tensor t = stack.back();
        stack.pop_back();
        if (!reached.insert(t.get()).second) continue;
        if (t->kind == te::OpKind::kCompute) computes.push_back(t);
        for (const auto& in : t->inputs) stack.push_back(in);
      }
      std::vector<te::Tensor> args;
      for (auto& [v, t] : seg.placeholders) {
        if (!reached.count(t.get())) continue;
        args.push_back(t);
        PlanArg a;
        if (constant_of(v)) a.constant = ex.slots[static_cast<size_t>(slot_of[v])].constant;
        else a.slot = slot_of[v];
        st.args.push_back(std::move(a));
      }
      for (auto& [v, t] : outputs) {
        args.push_back(t);
        st.args.push_back(make_out_arg(v));
      }
      std::string name = "k" + std::to_string(kernel_count);
      // Default schedule rules. kFlat: fuse all loops of an elementwise/injective output,
      // vectorize by 16, parallel outer when large; reductions: fuse the spatial loops and run
      // them in parallel when there is work. kRows: fuse the outer loops into one parallel loop
      // and vectorize the trailing loops (at least 16 elements) with a tail; picked when the flat
      // vector loop would gather (Concat, Slice, Pad over small inner dims: per-lane index
      // division) and the rows form gathers less. Either way a small-window reduction (pooling)
      // vectorizes its last output axis with the reduce loops outside the vector loop, and
      // intermediate reductions (Softmax, LayerNorm) run their fused spatial loop in parallel.
      // fuse_reduce: a reduction over several axes runs them as one loop (GlobalAveragePool's
      // H x W: one vector accumulation over the plane instead of a reduction tree per row).
      enum class Rules { kNone, kFlat, kRows };
      // Intermediates with a transcendental call (exp, ...) read by two or more stages are computed
      // once into a buffer instead of inlined into each reader (Softmax's exp feeds both its sum
      // and its output): row-wise like the rows schedule, so that the per-row loops fuse.
      std::unordered_set<const te::TensorNode*> materialized;
      for (const auto& t : computes) {
        const bool is_out = std::any_of(out_tensors.begin(), out_tensors.end(),
                                        [&](const te::Tensor& o) { return o.get() == t.get(); });
        if (is_out || !t->reduce_axes.empty() || t->shape.size() < 2) continue;
        bool costly = false;
        tir::visit_exprs(t->body, [&](const tir::Expr& e) {
          costly |= e->kind == tir::ExprKind::kCall && (e->name == "exp" || e->name == "log" || e->name == "erf" ||
                                                        e->name == "tanh" || e->name == "pow");
        });
        int readers = 0;
        for (const auto& u : computes)
          for (const auto& in : u->inputs) readers += in.get() == t.get();
        if (costly && readers >= 2) materialized.insert(t.get());
      }
      auto build = [&](Rules rules, bool fuse_reduce = false) {
        te::Schedule s(out_tensors);
        std::unordered_set<const te::TensorNode*> outs;
        for (auto& t : out_tensors) outs.insert(t.get());
        for (const auto& t : computes)
          if (!outs.count(t.get()) && t->reduce_axes.empty() && !materialized.count(t.get())) s.compute_inline(t->name);
        if (rules != Rules::kNone)
          for (const auto& t : out_tensors) {
            size_t r = t->shape.size();
            if (r == 0) continue;
            std::vector<int64_t> dims;
            for (size_t k = 0; k < r; ++k) dims.push_back(const_product(t->shape, k, k + 1));
            const int64_t n = const_product(t->shape), work = compute_work(t);
            bool par = work >= (1 << 15) && n >= 2;
            auto fuse_range = [&](size_t from, size_t to) { return fuse_axes(s, t->name, "i", from, to); };
            if (rules == Rules::kRows && t->reduce_axes.empty()) {
              size_t split = r;
              int64_t inner = 1;
              while (split > 1 && inner < 16) inner *= dims[--split];
              if (split == 0 || inner < 16) continue;
              std::string outer = fuse_range(0, split), row = fuse_range(split, r);
              s.split(t->name, row, 16);
              s.vectorize(t->name, row + ".inner");
              if (par) s.parallel(t->name, outer);
              continue;
            }
            if (!t->reduce_axes.empty() && r >= 2 && dims[r - 1] >= 4 && work / n <= 64) {
              // A small-window reduction (pooling): the reduce loops go outside a vector loop
              // along the last output axis, so each tap is one vector op for up to 16 outputs.
              std::string outer = fuse_range(0, r - 1), last = "i" + std::to_string(r - 1);
              s.split(t->name, last, std::min<int64_t>(16, dims[r - 1]));
              std::vector<std::string> order{outer, last + ".outer"};
              for (size_t k = 0; k < t->reduce_axes.size(); ++k) order.push_back("r" + std::to_string(k));
              order.push_back(last + ".inner");
              s.reorder(t->name, order);
              s.vectorize(t->name, last + ".inner");
              if (par) s.parallel(t->name, outer);
              continue;
            }
            // (Not for the small windows above: their reduce loops stay apart.)
            if (fuse_reduce) fuse_axes(s, t->name, "r", 0, t->reduce_axes.size());
            std::string loop = fuse_range(0, r);
            if (t->reduce_axes.empty() && n >= 16) {
              // A size that 16 does not divide runs its last vector as a guarded tail.
              s.split(t->name, loop, 16);
              s.vectorize(t->name, loop + ".inner");
              if (par && n >= 32) s.parallel(t->name, loop + ".outer");
            } else if (par) {
              s.parallel(t->name, loop);
            }
          }
        if (rules != Rules::kNone)
          for (const auto& t : computes) {
            if (!materialized.count(t.get())) continue;
            const size_t r = t->shape.size();
            const int64_t last = const_product(t->shape, r - 1), rows = const_product(t->shape, 0, r - 1);
            const std::string loop = fuse_axes(s, t->name, "i", 0, r - 1), inner = "i" + std::to_string(r - 1);
            if (last >= 16) {
              s.split(t->name, inner, 16);
              s.vectorize(t->name, inner + ".inner");
            }
            if (rows * last >= (1 << 15) && rows >= 2) s.parallel(t->name, loop);
          }
        if (rules != Rules::kNone)
          for (const auto& t : computes) {
            // Intermediate reductions (Softmax's max and sum, LayerNorm's mean and variance):
            // their spatial loops fused and parallel when there is work.
            if (outs.count(t.get()) || t->reduce_axes.empty() || t->shape.size() < 2) continue;
            const int64_t n = const_product(t->shape);
            const std::string loop = fuse_axes(s, t->name, "i", 0, t->shape.size());
            if (fuse_reduce) fuse_axes(s, t->name, "r", 0, t->reduce_axes.size());
            if (compute_work(t) >= (1 << 15) && n >= 2) s.parallel(t->name, loop);
          }
        return te::lower(s, args, name);
      };
      tir::PrimFunc f;
      try {
        f = build(opts_.schedule ? Rules::kFlat : Rules::kNone);
        if (opts_.schedule && count_gathers(f) > 0) {
          tir::PrimFunc rows = build(Rules::kRows);
          if (count_gathers(rows) < count_gathers(f)) f = std::move(rows);
        }
        // Multi-axis output reductions over contiguous axes: their fused reduce loop indexes
        // without division (the simplifier recombines it); others keep their loop nest.
        const bool multi_axis = std::any_of(computes.begin(), computes.end(),
                                            [](const te::Tensor& t) { return t->reduce_axes.size() > 1; });
        if (opts_.schedule && multi_axis) {
          try {
            tir::PrimFunc fused = build(Rules::kFlat, true);
            if (count_divmods(fused) <= count_divmods(f) && count_gathers(fused) <= count_gathers(f)) f = std::move(fused);
          } catch (const Error& e) {  // keep the schedule above
            log("fused-reduce schedule failed for " + name + ": " + e.what());
          }
        }
      } catch (const Error& e) {
        if (!opts_.schedule) throw;
        log("schedule rules failed for " + name + ": " + e.what());
        f = build(Rules::kNone);
      }
      plan->funcs.push_back(std::move(f));
      st.kind = PlanStep::Kind::kKernel;
      st.name = name;
      st.kernel = static_cast<int32_t>(ex.kernel_names.size());
      ex.kernel_names.push_back(name);
      ++kernel_count;
      ex.steps.push_back(std::move(st));
      plan->stats.generated_nodes += static_cast<int>(seg.nodes.size());
    } catch (const Error& e) {
      log("kernel of nodes starting at " + g.nodes[static_cast<size_t>(seg.nodes[0])]->display_name() +
          " failed: " + e.what());
      for (int i : seg.nodes) add_fallback(i);
    }
    seg = Segment();
  };

  // Fused GEMM epilogues: the chain after a GEMM step's node ([bias Add] [residual Add]
  // [Relu | Clip | HardSwish | Sigmoid | SiLU as Mul(v, Sigmoid(v))]) runs in the step (gemm_ops.h GemmDesc::epilogue_*) when every intermediate
  // value has exactly one consumer and is no graph output, dims and dtypes match exactly, and
  // a residual is computed before the GEMM in the execution order. Absorbed nodes are skipped.
  std::vector<size_t> pos_in_order(static_cast<size_t>(nnodes));
  for (size_t k = 0; k < order.size(); ++k) pos_in_order[static_cast<size_t>(order[k])] = k;
  std::unordered_map<const Value*, int> producer;
  for (int k = 0; k < nnodes; ++k)
    for (const Value* v : g.nodes[static_cast<size_t>(k)]->outputs)
      if (v) producer[v] = k;
  std::unordered_set<int> absorbed;
  // KILN_GEMM_EPILOGUES=0 turns the fusion off (A/B measurements).
  static const bool fuse_epilogues = [] {
    const char* e = std::getenv("KILN_GEMM_EPILOGUES");
    return !(e && std::string(e) == "0");
  }();
  // Muls deferred to the conv after them as its input scale (see scaled_input below).
  struct ScaledInput {
    gemm_ops::GemmDesc desc;      // the conv's, reading x and the scale
    std::vector<int32_t> inputs;  // the step's input slots, parallel to desc.operands
    std::shared_ptr<gemm_ops::GemmOp> op;  // made from desc (without an epilogue)
  };
  std::unordered_map<int, ScaledInput> scaled_input;  // conv node -> its deferred Mul
  std::unordered_set<int> deferred_muls;
  // What the plan knows about value v as a GEMM operand (`known`: false when v is no tensor).
  auto operand_of = [&](const Value* v, bool& known) {
    gemm_ops::Operand o;
    if (!v) return o;
    const PlanSlot& ps = ex.slots[static_cast<size_t>(slot_of.at(v))];
    known &= ps.tensor;
    o.present = true;
    o.dtype = ps.dtype;
    o.dims = ps.dims;
    o.constant = constant_of(v);
    return o;
  };
  // Appends v as an extra operand of `d` (after the node's own, padded to its arity) and its slot
  // to `inputs`; returns the operand's index.
  auto add_operand = [&](gemm_ops::GemmDesc& d, std::vector<int32_t>& inputs, const Value* v) {
    while (d.operands.size() < gemm_ops::node_arity(d.kind)) {
      d.operands.emplace_back();
      inputs.push_back(-1);
    }
    bool known = true;
    d.operands.push_back(operand_of(v, known));
    inputs.push_back(slot_of.at(v));
    return static_cast<int32_t>(d.operands.size() - 1);
  };
  // Extends `d` (operands, and `inputs`, the step's input slots parallel to them) with the chain
  // after GEMM node i; appends the absorbed nodes to `chain` and returns the value the step
  // then produces.
  auto absorb_epilogue = [&](int i, gemm_ops::GemmDesc& d, std::vector<int32_t>& inputs,
                             std::vector<int>& chain) -> const Value* {
    const Value* cur = g.nodes[static_cast<size_t>(i)]->outputs[0];
    if (d.out_dtype != DType::kFloat32 || d.out_dims.empty()) return cur;
    const std::vector<int64_t>& dims = d.out_dims;
    const size_t channel_axis = gemm_ops::channels_first(d.kind) ? 1 : dims.size() - 1;
    if (channel_axis >= dims.size()) return cur;
    // A per-output-channel bias under numpy broadcasting: 1 everywhere but the channel axis.
    auto is_channel_bias = [&](const std::vector<int64_t>& b) {
      if (b.size() > dims.size() || b.size() < dims.size() - channel_axis) return false;
      const size_t off = dims.size() - b.size();
      for (size_t k = 0; k < b.size(); ++k)
        if (b[k] != (off + k == channel_axis ? dims[channel_axis] : 1)) return false;
      return true;
    };
    auto computed_before = [&](const Value* v) {
      if (v->is_graph_input || constant_of(v)) return true;
      auto it = producer.find(v);
      return it != producer.end() && pos_in_order[static_cast<size_t>(it->second)] < pos_in_order[static_cast<size_t>(i)];
    };
    auto scalar_f32 = [&](const Value* v, float& out) {
      if (!v) return true;  // absent bound
      const Tensor* c = constant_of(v);
      if (!c || c->dtype() != DType::kFloat32 || c->numel() != 1) return false;
      out = c->data<float>()[0];
      return true;
    };
    // A node that may join the chain: ai.onnx (or kiln's SiLU/HardSwish composites), one f32
    // output with the GEMM's dims, after the GEMM in the execution order and not taken yet.
    auto joinable = [&](int c) {
      const Node& cn = *g.nodes[static_cast<size_t>(c)];
      if ((!cn.domain.empty() && cn.domain != "ai.onnx" && cn.domain != "kiln") || cn.outputs.size() != 1 ||
          !cn.outputs[0])
        return false;
      if (pos_in_order[static_cast<size_t>(c)] < pos_in_order[static_cast<size_t>(i)] || absorbed.count(c) ||
          deferred_muls.count(c))
        return false;
      const PlanSlot& os = ex.slots[static_cast<size_t>(slot_of[cn.outputs[0]])];
      return os.tensor && os.dtype == DType::kFloat32 && os.dims == dims;
    };
    int stage = 0;  // 0: a bias may come next; 1: a residual; 2: a clamp or activation; 3: done
    while (stage < 3) {
      if (graph_outputs.count(cur)) break;
      auto cit = consumers.find(cur);
      if (cit != consumers.end() && cit->second.size() == 2) {
        // SiLU as exported: Mul(v, Sigmoid(v)), the Sigmoid's output used by that Mul only.
        int sig = -1, mul = -1;
        for (int c : cit->second) {
          const std::string& op = g.nodes[static_cast<size_t>(c)]->op_type;
          if (op == "Sigmoid") sig = c;
          else if (op == "Mul") mul = c;
        }
        if (sig < 0 || mul < 0 || !joinable(sig) || !joinable(mul)) break;
        const Node& sn = *g.nodes[static_cast<size_t>(sig)];
        const Node& mn = *g.nodes[static_cast<size_t>(mul)];
        const Value* s = sn.outputs[0];
        auto sc = consumers.find(s);
        if (graph_outputs.count(s) || sc == consumers.end() || sc->second.size() != 1 || sc->second[0] != mul ||
            mn.inputs.size() != 2 || !((mn.inputs[0] == cur && mn.inputs[1] == s) || (mn.inputs[0] == s && mn.inputs[1] == cur)))
          break;
        d.epilogue_activation = static_cast<int32_t>(kernels::Activation::kSilu);
        chain.push_back(sig);
        chain.push_back(mul);
        cur = mn.outputs[0];
        break;
      }
      if (cit == consumers.end() || cit->second.size() != 1) break;
      const int c = cit->second[0];
      if (!joinable(c)) break;
      const Node& cn = *g.nodes[static_cast<size_t>(c)];
      const Value* out = cn.outputs[0];
      const int opset = model_.opset(cn.domain);
      const bool composite = cn.domain == "kiln";  // fuse-composites' ops (ops/kiln_composites.cc)
      if (composite && cn.op_type == "Silu") {
        d.epilogue_activation = static_cast<int32_t>(kernels::Activation::kSilu);
        stage = 3;
      } else if (composite && cn.op_type == "HardSwish") {
        d.epilogue_activation = static_cast<int32_t>(kernels::Activation::kHardSwish);
        stage = 3;
      } else if (composite) {
        break;
      } else if (cn.op_type == "Add" && cn.inputs.size() == 2 && opset >= 7) {
        const Value* other = cn.inputs[0] == cur ? cn.inputs[1] : cn.inputs[0];
        if (!other) break;
        const PlanSlot& vs = ex.slots[static_cast<size_t>(slot_of[other])];
        if (!vs.tensor || vs.dtype != DType::kFloat32) break;
        // Exporters share a bias through Identity (ViT): the step reads the constant itself.
        const Value* bias = other;
        for (auto p = producer.find(bias); p != producer.end(); p = producer.find(bias)) {
          const Node& pn = *g.nodes[static_cast<size_t>(p->second)];
          if (pn.op_type != "Identity" || (!pn.domain.empty() && pn.domain != "ai.onnx") || pn.inputs.size() != 1 ||
              !pn.inputs[0])
            break;
          bias = pn.inputs[0];
        }
        if (stage == 0 && constant_of(bias) && is_channel_bias(vs.dims)) {
          d.epilogue_bias = add_operand(d, inputs, bias);
          stage = 1;
        } else if (stage <= 1 && vs.dims == dims && computed_before(other)) {
          d.epilogue_residual = add_operand(d, inputs, other);
          stage = 2;
        } else {
          break;
        }
      } else if (cn.op_type == "HardSwish" && opset >= 14) {
        d.epilogue_activation = static_cast<int32_t>(kernels::Activation::kHardSwish);
        stage = 3;
      } else if (cn.op_type == "Sigmoid") {
        d.epilogue_activation = static_cast<int32_t>(kernels::Activation::kSigmoid);
        stage = 3;
      } else if (cn.op_type == "Relu") {
        d.clamp_lo = 0.0f;
        stage = 3;
      } else if (cn.op_type == "Clip") {
        // The interpreter's bounds when absent: the float range.
        float lo = std::numeric_limits<float>::lowest(), hi = std::numeric_limits<float>::max();
        if (opset < 11) {
          const Attribute* a = cn.attr("min");
          if (a && a->kind == Attribute::Kind::kFloat) lo = a->f;
          a = cn.attr("max");
          if (a && a->kind == Attribute::Kind::kFloat) hi = a->f;
        } else if (!scalar_f32(cn.inputs.size() > 1 ? cn.inputs[1] : nullptr, lo) ||
                   !scalar_f32(cn.inputs.size() > 2 ? cn.inputs[2] : nullptr, hi)) {
          break;
        }
        d.clamp_lo = lo;
        d.clamp_hi = hi;
        stage = 3;
      } else {
        break;
      }
      chain.push_back(c);
      cur = out;
    }
    return cur;
  };

  // The node that max-pools v with 3x3 windows, stride 2 and pad 1 (floor mode, no indices) as v's
  // only consumer after node i, or -1.
  auto max_pool_after = [&](const Value* v, int i) -> int {
    auto cit = consumers.find(v);
    if (!v || graph_outputs.count(v) || cit == consumers.end() || cit->second.size() != 1) return -1;
    const int c = cit->second[0];
    const Node& pn = *g.nodes[static_cast<size_t>(c)];
    if (pn.op_type != "MaxPool" || (!pn.domain.empty() && pn.domain != "ai.onnx") || pn.inputs.size() != 1 ||
        pn.outputs.empty() || !pn.outputs[0] || (pn.outputs.size() > 1 && pn.outputs[1]) || absorbed.count(c) ||
        pos_in_order[static_cast<size_t>(c)] < pos_in_order[static_cast<size_t>(i)])
      return -1;
    auto ints = [&](const char* name, std::vector<int64_t> dflt) {
      const Attribute* a = pn.attr(name);
      return a && a->kind == Attribute::Kind::kInts ? a->ints : dflt;
    };
    const Attribute* ap = pn.attr("auto_pad");
    const Attribute* cm = pn.attr("ceil_mode");
    if ((ap && ap->kind == Attribute::Kind::kString && ap->s != "NOTSET") || (cm && cm->i != 0)) return -1;
    using Ints = std::vector<int64_t>;
    if (ints("kernel_shape", {}) != Ints{3, 3} || ints("strides", {1, 1}) != Ints{2, 2} ||
        ints("pads", {0, 0, 0, 0}) != Ints{1, 1, 1, 1} || ints("dilations", {1, 1}) != Ints{1, 1})
      return -1;
    const PlanSlot& in = ex.slots[static_cast<size_t>(slot_of.at(v))];
    const PlanSlot& out = ex.slots[static_cast<size_t>(slot_of.at(pn.outputs[0]))];
    if (!out.tensor || out.dtype != DType::kFloat32 || in.dims.size() != 4 || out.dims.size() != 4) return -1;
    return out.dims == std::vector<int64_t>{in.dims[0], in.dims[1], kernels::StemMaxPool::pooled(in.dims[2]),
                                            kernels::StemMaxPool::pooled(in.dims[3])}
               ? c
               : -1;
  };

  // The output a GEMM step produces: the only one (recurrent nodes: the only one in use), or -1.
  auto step_output = [&](const Node& n) {
    int live = -1;
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const Value* v = n.outputs[k];
      const auto uses = consumers.find(v);
      const bool used = v && (graph_outputs.count(v) || (uses != consumers.end() && !uses->second.empty()));
      if (!v || (!used && n.outputs.size() > 1)) continue;
      if (live >= 0) return -1;
      live = static_cast<int>(k);
    }
    return live;
  };
  // The descriptor of GEMM-like node n as the plan knows it, or nullopt (not covered, or an
  // operand or its output is no tensor).
  auto desc_of = [&](const Node& n) -> std::optional<gemm_ops::GemmDesc> {
    const int out = step_output(n);
    if (out < 0) return std::nullopt;
    std::vector<gemm_ops::Operand> ops;
    bool known = true;
    for (const Value* v : n.inputs) ops.push_back(operand_of(v, known));
    const PlanSlot& os = ex.slots[static_cast<size_t>(slot_of.at(n.outputs[static_cast<size_t>(out)]))];
    if (!known || !os.tensor) return std::nullopt;
    return gemm_ops::gemm_desc_from_node(n, ops, os.dims, os.dtype, out);
  };

  // Fused input scales: Conv(Mul(x, s)), s one value per input channel (the gate of a squeeze-
  // and-excitation block), runs as one step that scales the conv's packed weights per run
  // (GemmDesc::input_scale) where that costs less than the Mul's pass over x
  // (gemm_ops::input_scale_pays). The Mul's output feeds only the conv's input 0 and is no graph
  // output; the Mul is deferred to the conv's step.
  if (fuse_epilogues) {
    for (int i = 0; i < nnodes; ++i) {
      const Node& n = *g.nodes[static_cast<size_t>(i)];
      if (n.op_type != "Conv" || (!n.domain.empty() && n.domain != "ai.onnx") || n.inputs.size() < 2 ||
          !n.inputs[0] || folded_nodes.count(i))
        continue;
      auto p = producer.find(n.inputs[0]);
      if (p == producer.end()) continue;
      const int m = p->second;
      const Node& mn = *g.nodes[static_cast<size_t>(m)];
      const Value* y = n.inputs[0];
      if (mn.op_type != "Mul" || (!mn.domain.empty() && mn.domain != "ai.onnx") || mn.inputs.size() != 2 ||
          !mn.inputs[0] || !mn.inputs[1] || mn.outputs.size() != 1 || folded_nodes.count(m) || graph_outputs.count(y) ||
          consumers[y] != std::vector<int>{i} || n.inputs[1] == y || (n.inputs.size() > 2 && n.inputs[2] == y))
        continue;
      // x: the operand with the Mul's dims; the scale: one value per channel ([..., C, 1, 1]).
      const std::vector<int64_t>& ydims = ex.slots[static_cast<size_t>(slot_of.at(y))].dims;
      auto dims = [&](const Value* v) -> const std::vector<int64_t>& {
        return ex.slots[static_cast<size_t>(slot_of.at(v))].dims;
      };
      auto per_channel = [&](const std::vector<int64_t>& sd) {
        return ydims.size() == 4 && sd.size() >= 3 && sd.size() <= 4 && sd[sd.size() - 1] == 1 &&
               sd[sd.size() - 2] == 1 && sd[sd.size() - 3] == ydims[1];
      };
      const Value *x = mn.inputs[0], *scale = mn.inputs[1];
      if (dims(x) != ydims) std::swap(x, scale);
      if (dims(x) != ydims || !per_channel(dims(scale))) continue;
      std::optional<gemm_ops::GemmDesc> d = desc_of(n);
      if (!d) continue;
      ScaledInput si;
      si.inputs = slot_list(n.inputs);
      bool known = true;
      d->operands[0] = operand_of(x, known);
      si.inputs[0] = slot_of.at(x);
      d->input_scale = add_operand(*d, si.inputs, scale);
      if (!gemm_ops::input_scale_pays(*d)) continue;
      // Made here so that the Mul is deferred only when the conv's op takes the scale.
      si.op = gemm_ops::make_gemm_op(*d);
      if (!si.op) continue;
      si.desc = std::move(*d);
      scaled_input[i] = std::move(si);
      deferred_muls.insert(m);
    }
  }

  for (int i : order) {
    if (absorbed.count(i)) continue;  // runs in an earlier GEMM step's epilogue
    if (folded_nodes.count(i)) continue;  // its outputs are plan constants
    if (deferred_muls.count(i)) continue;  // an input scale of a later conv step
    const Node& n = *g.nodes[static_cast<size_t>(i)];
    int64_t grp = grouped ? group_of(i) : -3 - i;
    if (grp != seg_group) {
      flush();
      seg_group = grp;
    }
    if (gemm_ops::gemm_like(n)) {
      // Out-fusable GEMM-like ops: the sgemm path when it covers the node.
      auto si = scaled_input.find(i);
      const bool scaled = si != scaled_input.end();
      std::optional<gemm_ops::GemmDesc> desc = scaled ? std::optional(si->second.desc) : desc_of(n);
      std::vector<int32_t> step_inputs = scaled ? si->second.inputs : slot_list(n.inputs);
      std::shared_ptr<gemm_ops::GemmOp> op;
      std::vector<int> chain;  // nodes absorbed into the epilogue
      // The output the descriptor was made for (a recurrent node's one in use).
      const size_t out_index = desc && gemm_ops::recurrent(desc->kind) ? static_cast<size_t>(desc->rnn.output) : 0;
      const Value* produced = desc ? n.outputs[out_index] : nullptr;
      if (desc && fuse_epilogues && !gemm_ops::recurrent(desc->kind)) {
        gemm_ops::GemmDesc fused = *desc;
        std::vector<int32_t> fused_inputs = step_inputs;
        const Value* end = absorb_epilogue(i, fused, fused_inputs, chain);
        if (!chain.empty()) op = gemm_ops::make_gemm_op(fused);
        if (op) {
          desc = std::move(fused);
          step_inputs = std::move(fused_inputs);
          produced = end;
        } else {
          chain.clear();
        }
      }
      if (desc && !op) op = scaled ? si->second.op : gemm_ops::make_gemm_op(*desc);
      // A stem conv's MaxPool (3x3, stride 2, pad 1) runs in its step too: the conv's output, the
      // network's largest activation, is then never written out. Only the stem conv op takes it.
      if (op && fuse_epilogues && desc->kind == gemm_ops::GemmKind::kConv && desc->epilogue_residual < 0) {
        if (const int pool = max_pool_after(produced, i); pool >= 0) {
          gemm_ops::GemmDesc pooled = *desc;
          pooled.epilogue_max_pool = 1;
          if (std::unique_ptr<gemm_ops::GemmOp> pool_op = gemm_ops::make_gemm_op(pooled)) {
            op = std::move(pool_op);
            desc = std::move(pooled);
            chain.push_back(pool);
            produced = g.nodes[static_cast<size_t>(pool)]->outputs[0];
          }
        }
      }
      if (op) {
        flush();
        PlanStep st = node_step(i, PlanStep::Kind::kGemm);
        st.inputs = std::move(step_inputs);
        st.outputs = {slot_of[produced]};
        // The output's place in the arena (not for graph outputs), bound like a kernel's.
        if (PlanArg a = make_out_arg(produced); !a.graph_output) st.args.push_back(std::move(a));
        if (scaled) st.op = "Mul+" + st.op;
        for (int c : chain) {
          st.op += "+" + g.nodes[static_cast<size_t>(c)]->op_type;
          absorbed.insert(c);
        }
        st.gemm = std::move(*desc);
        for (auto& o : st.gemm.operands) o.constant = nullptr;  // the plan's constants hold them
        st.gemm_op = std::move(op);
        ex.steps.push_back(std::move(st));
        // Absorbed nodes run in it too.
        plan->stats.gemm_nodes += 1 + static_cast<int>(chain.size()) + (scaled ? 1 : 0);
        continue;
      }
    }
    LowerFn fn = find_lowering(n.domain, n.op_type);
    bool ok = fn != nullptr;
    for (const Value* v : n.inputs) ok = ok && (!v || tensor_ok(v));
    for (const Value* v : n.outputs) ok = ok && (!v || tensor_ok(v));
    LowerResult res;
    if (ok) {
      LowerContext ctx(n, model_.opset(n.domain), "n" + std::to_string(i));
      for (const Value* v : n.inputs) {
        if (!v) {
          ctx.inputs.push_back(nullptr);
          ctx.input_shapes.emplace_back();
          ctx.input_dtypes.push_back(DType::kUndefined);
          ctx.constants.push_back(nullptr);
          continue;
        }
        size_t s = static_cast<size_t>(slot_of[v]);
        auto it = seg.tensors.find(v);
        te::Tensor t;
        if (it != seg.tensors.end()) {
          t = it->second;
        } else {
          auto pit = std::find_if(seg.placeholders.begin(), seg.placeholders.end(),
                                  [&](const auto& p) { return p.first == v; });
          if (pit != seg.placeholders.end()) {
            t = pit->second;
          } else if (const Tensor* k = constant_of(v); k && k->numel() == 1 && k->dtype() != DType::kBool) {
            // Scalar constants fold into the kernel as immediates.
            double c = k->get_double(0);
            DType dt = ex.slots[s].dtype;
            t = te::compute("c" + std::to_string(seg.next_placeholder++), lower::to_exprs(te_dims(ex.slots[s].dims)),
                            [&](const std::vector<tir::Expr>&) { return lower::constant(dt, c); });
            seg.tensors[v] = t;
          } else {
            t = te::placeholder("p" + std::to_string(seg.next_placeholder++), ex.slots[s].dtype,
                                lower::to_exprs(te_dims(ex.slots[s].dims)));
            seg.placeholders.emplace_back(v, t);
          }
        }
        ctx.inputs.push_back(t);
        ctx.input_shapes.push_back(te_dims(ex.slots[s].dims));
        ctx.input_dtypes.push_back(ex.slots[s].dtype);
        ctx.constants.push_back(constant_of(v));
      }
      for (const Value* v : n.outputs) {
        size_t s = v ? static_cast<size_t>(slot_of[v]) : 0;
        ctx.output_shapes.push_back(v ? te_dims(ex.slots[s].dims) : std::vector<int64_t>{});
        ctx.output_dtypes.push_back(v ? ex.slots[s].dtype : DType::kUndefined);
      }
      try {
        res = fn(ctx);
        if (!res) log("lowering of " + n.display_name() + " (" + n.qualified_op() + ") declined");
      } catch (const Error& e) {
        log("lowering of " + n.display_name() + " failed: " + e.what());
        res = std::nullopt;
      }
      if (res) {
        for (size_t k = 0; k < n.outputs.size(); ++k)
          if (n.outputs[k] && (k >= res->size() || !(*res)[k])) res = std::nullopt;
      }
    }
    if (!res) {
      flush();
      add_fallback(i);
      continue;
    }
    for (size_t k = 0; k < n.outputs.size(); ++k)
      if (n.outputs[k]) seg.tensors[n.outputs[k]] = (*res)[k];
    seg.nodes.push_back(i);
  }
  flush();
  plan->stats.lowering_ms = ms_since(t1);

  // S3: one LLVM module for all kernels.
  auto t2 = Clock::now();
  if (!plan->funcs.empty()) {
    codegen::SymbolMap symbols{{"kiln_parallel_for", reinterpret_cast<void*>(&kiln_parallel_for)}};
    plan->module = codegen::JitModule::compile(plan->funcs, opts_.target, symbols);
    const std::string& dir = plan->module->cache_dir();
    plan->stats.llvm_cache = dir.empty() ? "off" : (plan->module->from_cache() ? "hit (" : "miss (") + dir + ")";
    for (const auto& name : ex.kernel_names) ex.kernels.push_back(plan->module->lookup(name));
  }
  plan->stats.llvm_ms = ms_since(t2);
  plan->stats.kernels = kernel_count;

  // S4: last uses and the arena for kernel outputs that are not graph outputs.
  const int nsteps = static_cast<int>(ex.steps.size());
  std::vector<int> first(nslots, -1), last(nslots, -1);
  auto step_inputs = [&](const PlanStep& st, const std::function<void(int)>& f) {
    if (st.kind == PlanStep::Kind::kKernel) {
      for (const auto& a : st.args)
        if (!a.output && a.slot >= 0) f(a.slot);
    } else if (st.kind == PlanStep::Kind::kFallback || st.kind == PlanStep::Kind::kGemm) {
      for (int32_t s : st.inputs)
        if (s >= 0) f(s);
    }
  };
  for (int k = 0; k < nsteps; ++k) {
    const auto& st = ex.steps[static_cast<size_t>(k)];
    step_inputs(st, [&](int s) { last[static_cast<size_t>(s)] = k; });
    for (const auto& a : st.args)
      if (a.output) first[static_cast<size_t>(a.slot)] = k;
    for (int32_t s : st.outputs)
      if (s >= 0) first[static_cast<size_t>(s)] = k;
  }
  for (size_t s = 0; s < nslots; ++s) {
    const Value* v = values[s];
    if (graph_outputs.count(v) || v->is_graph_input || constant_of(v)) continue;
    int at = last[s] >= 0 ? last[s] : first[s];
    if (at >= 0) ex.steps[static_cast<size_t>(at)].free_after.push_back(static_cast<int>(s));
  }
  // Concats in place: a Concat step whose inputs are contiguous pieces of its output (all dims
  // before the axis are 1) and are each made only for it, by an earlier step, at 64-byte-aligned
  // offsets, becomes an empty step; its producers write straight into its output's block.
  std::unordered_map<PlanArg*, std::pair<const PlanArg*, int64_t>> inside;  // piece -> (concat output, bytes in)
  std::unordered_map<const PlanArg*, int> piece_begin;  // concat output -> its first producer's step
  {
    std::unordered_map<int32_t, std::pair<int, PlanArg*>> made_by;  // slot -> (step, output arg)
    for (int k = 0; k < nsteps; ++k)
      for (auto& a : ex.steps[static_cast<size_t>(k)].args)
        if (a.output && !a.graph_output) made_by[a.slot] = {k, &a};
    for (int k = 0; k < nsteps; ++k) {
      PlanStep& st = ex.steps[static_cast<size_t>(k)];
      if (st.kind != PlanStep::Kind::kKernel || st.op != "Concat") continue;
      PlanArg* out = nullptr;
      for (auto& a : st.args)
        if (a.output) out = out ? nullptr : &a;
      if (!out || out->graph_output) continue;
      auto pit = producer.find(values[static_cast<size_t>(out->slot)]);
      if (pit == producer.end()) continue;
      const Node& cn = *g.nodes[static_cast<size_t>(pit->second)];
      const Attribute* ax = cn.attr("axis");
      const int64_t axis = lower::norm_axis(ax && ax->kind == Attribute::Kind::kInt ? ax->i : 0,
                                            static_cast<int64_t>(out->dims.size()));
      if (axis < 0) continue;
      bool ok = true;
      for (int64_t d = 0; d < axis; ++d) ok &= out->dims[static_cast<size_t>(d)] == 1;
      std::vector<std::pair<PlanArg*, int64_t>> pieces;
      std::unordered_set<const Value*> seen;
      int64_t bytes = 0, first_step = k;
      for (const Value* v : cn.inputs) {
        if (!ok) break;
        auto mit = v ? made_by.find(slot_of[v]) : made_by.end();
        auto cit = v ? consumers.find(v) : consumers.end();
        ok = v && !constant_of(v) && seen.insert(v).second && cit != consumers.end() && cit->second.size() == 1 &&
             mit != made_by.end() &&
             mit->second.first < k && !inside.count(mit->second.second) && !piece_begin.count(mit->second.second) &&
             bytes % kArenaAlign == 0 &&
             mit->second.second->dtype == out->dtype;
        if (!ok) break;
        pieces.emplace_back(mit->second.second, bytes);
        first_step = std::min<int64_t>(first_step, mit->second.first);
        bytes += lower::numel_of(mit->second.second->dims) * static_cast<int64_t>(dtype_size(out->dtype));
      }
      if (!ok || pieces.empty() || bytes != lower::numel_of(out->dims) * static_cast<int64_t>(dtype_size(out->dtype)))
        continue;
      for (auto& [a, off] : pieces) inside[a] = {out, off};
      piece_begin[out] = static_cast<int>(first_step);
      st.kind = PlanStep::Kind::kEmpty;  // the pieces are already in place
    }
  }
  struct Block {
    PlanArg* arg;
    int64_t size, begin, end, offset;
  };
  std::vector<Block> blocks;
  for (int k = 0; k < nsteps; ++k)
    for (auto& a : ex.steps[static_cast<size_t>(k)].args)
      if (a.output && !a.graph_output && !inside.count(&a)) {
        int64_t bytes = lower::numel_of(a.dims) * static_cast<int64_t>(dtype_size(a.dtype));
        bytes = (bytes + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
        int s = a.slot;
        auto pb = piece_begin.find(&a);
        const int begin = pb == piece_begin.end() ? k : pb->second;
        blocks.push_back({&a, std::max<int64_t>(bytes, kArenaAlign), begin, std::max(k, last[static_cast<size_t>(s)]), 0});
      }
  std::vector<size_t> by_size(blocks.size());
  for (size_t i = 0; i < blocks.size(); ++i) by_size[i] = i;
  std::stable_sort(by_size.begin(), by_size.end(), [&](size_t a, size_t b) { return blocks[a].size > blocks[b].size; });
  std::vector<size_t> placed;
  int64_t arena = 0;
  for (size_t bi : by_size) {
    Block& b = blocks[bi];
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (size_t pi : placed) {
      const Block& p = blocks[pi];
      if (p.begin <= b.end && b.begin <= p.end) busy.emplace_back(p.offset, p.offset + p.size);
    }
    std::sort(busy.begin(), busy.end());
    int64_t off = 0, best = -1, best_gap = INT64_MAX;
    for (auto [lo, hi] : busy) {
      if (lo - off >= b.size && lo - off < best_gap) {
        best = off;
        best_gap = lo - off;
      }
      off = std::max(off, hi);
    }
    b.offset = best >= 0 ? best : off;
    arena = std::max(arena, b.offset + b.size);
    placed.push_back(bi);
  }
  ex.arena_bytes = arena;
  for (auto& b : blocks) b.arg->arena_offset = b.offset;
  for (auto& [piece, where] : inside) piece->arena_offset = where.first->arena_offset + where.second;
  ex.allocate_arena();
  plan->stats.arena_bytes = arena;
  plan->stats.total_ms = ms_since(t_total);
  return plan;
}

// ---- execution -------------------------------------------------------------------------------

std::vector<RtValue> CompiledExecutor::execute(Plan& plan, const std::vector<RtValue>& feeds,
                                               const std::vector<OutputBuffer>& outputs) {
  const Graph& g = *model_.graph;
  timings_.clear();
  FallbackFn fallback = [&](const PlanStep& st, const std::vector<const RtValue*>& ins) {
    const Node& n = *g.nodes[static_cast<size_t>(st.node)];
    return evaluate_node(n, *plan.schemas[static_cast<size_t>(st.node)], model_.opset(n.domain), ins);
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
