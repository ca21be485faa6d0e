// The compile steps in order (plan_builder.h): slots, shapes, steps, codegen, arena.
#include "driver/compile/plan_builder.h"

#include "ops/external.h"
#include "target/target.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "tir/printer.h"

namespace kiln::compile {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

const std::string kGroupAttr = "kiln.group";

}  // namespace

namespace {

std::vector<Value*> without_constants(std::vector<Value*> vs) {
  vs.erase(std::remove_if(vs.begin(), vs.end(), [](const Value* v) { return v->is_constant(); }), vs.end());
  return vs;
}

}  // namespace

std::vector<Value*> step_captures(const Node& n) { return without_constants(captured_values(n)); }
std::vector<Value*> body_captures(const Graph& body) { return without_constants(captured_values(body)); }

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

PlanBuilder::PlanBuilder(const Model& model, const CompiledOptions& opts, const std::vector<Value*>& captures,
                         ShapeRun shape_run, KernelLibrary& library, BuiltPlan& built)
    : model_(model),
      g(*model.graph),
      opts_(opts),
      captures_(captures),
      shape_run_(std::move(shape_run)),
      library_(library),
      plan(&built),
      ex(built.exec) {}

void PlanBuilder::build(const std::vector<RtValue>& feeds) {
  const auto t_total = Clock::now();
  plan_slots();
  plan_shapes(feeds);
  fold_shape_values();
  index_graph();
  const auto t1 = Clock::now();
  plan_steps();
  plan->stats.lowering_ms = ms_since(t1);
  plan_codegen();
  plan_arena();
  plan->stats.total_ms = ms_since(t_total);
}

// ---- S0: a slot per value of the main graph -------------------------------------------------

void PlanBuilder::add_slot(const Value* v) {
  if (!v || slot_of.count(v)) return;
  slot_of[v] = static_cast<int>(values.size());
  values.push_back(v);
}

std::vector<int32_t> PlanBuilder::slot_list(const std::vector<Value*>& vs) {
  std::vector<int32_t> out;
  for (const Value* v : vs) out.push_back(v ? slot_of.at(v) : -1);
  return out;
}

void PlanBuilder::plan_slots() {
  for (const Value* v : g.inputs) add_slot(v);
  for (const Value* v : captures_) add_slot(v);
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
  for (const Value* v : captures_) {
    ex.inputs.push_back(slot_of[v]);
    ex.input_names.push_back(v->name);
  }
  for (const Value* v : g.outputs) {
    ex.outputs.push_back(slot_of[v]);
    ex.output_names.push_back(v->name);
  }
}

// ---- consumers, producers and the execution order ------------------------------------------

int64_t PlanBuilder::group_of(int i) {
  const Attribute* a = g.nodes[static_cast<size_t>(i)]->attr(kGroupAttr);
  return a && a->kind == Attribute::Kind::kInt ? a->i : -1;
}

void PlanBuilder::index_graph() {
  nnodes = static_cast<int>(g.nodes.size());
  for (int i = 0; i < nnodes; ++i) {
    const Node& n = *g.nodes[static_cast<size_t>(i)];
    for (const Value* v : n.inputs)
      if (v) consumers[v].push_back(i);
    // A value read inside an If/Loop/Scan body is consumed by that node's step.
    if (n.has_subgraphs())
      for (const Value* v : captured_values(n)) consumers[v].push_back(i);
    for (const Value* v : g.nodes[static_cast<size_t>(i)]->outputs)
      if (v) producer[v] = i;
  }
  graph_outputs.insert(g.outputs.begin(), g.outputs.end());
  // Groups in id order, nodes of a group in node order.
  order.resize(static_cast<size_t>(nnodes));
  for (int i = 0; i < nnodes; ++i) order[static_cast<size_t>(i)] = i;
  grouped = true;
  for (int i = 0; i < nnodes; ++i) grouped &= group_of(i) >= 0;
  if (grouped) {
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return group_of(a) < group_of(b); });
    anchors_first();
  }
  pos_in_order.resize(static_cast<size_t>(nnodes));
  for (size_t k = 0; k < order.size(); ++k) pos_in_order[static_cast<size_t>(order[k])] = k;
}

// A group's one GEMM-like node (its anchor) goes first among the group's nodes when no node of
// the group feeds it (then the order stays topological): the epilogue's other producers (a
// quantized residual's DequantizeLinear, earlier in node order) then join the kernel after the
// GEMM step instead of making a kernel of their own before it.
void PlanBuilder::anchors_first() {
  for (size_t begin = 0; begin < order.size();) {
    size_t end = begin;
    while (end < order.size() && group_of(order[end]) == group_of(order[begin])) ++end;
    const auto first = order.begin() + static_cast<std::ptrdiff_t>(begin);
    const auto last = order.begin() + static_cast<std::ptrdiff_t>(end);
    const auto anchor = [&](int i) { return gemm_ops::gemm_like(*g.nodes[static_cast<size_t>(i)]); };
    const auto it = std::find_if(first, last, anchor);
    bool fed_inside = false;
    if (it != last)
      for (const Value* v : g.nodes[static_cast<size_t>(*it)]->inputs) {
        auto p = v ? producer.find(v) : producer.end();
        fed_inside |= p != producer.end() && group_of(p->second) == group_of(*it);
      }
    if (it != last && !fed_inside && std::count_if(first, last, anchor) == 1) std::stable_partition(first, last, anchor);
    begin = end;
  }
}

// ---- S2: steps --------------------------------------------------------------------------------

PlanStep PlanBuilder::node_step(int i, PlanStep::Kind kind) {
  const Node& n = *g.nodes[static_cast<size_t>(i)];
  PlanStep st;
  st.kind = kind;
  st.node = i;
  st.name = n.display_name();
  st.op = n.qualified_op();
  st.inputs = slot_list(n.inputs);
  st.outputs = slot_list(n.outputs);
  return st;
}

// A step running node i's reference kernel. If/Loop/Scan steps also take the values their
// bodies capture (so that those stay alive and reach the bodies' executors) and count apart.
void PlanBuilder::add_fallback(int i) {
  const Node& n = *g.nodes[static_cast<size_t>(i)];
  PlanStep st = node_step(i, PlanStep::Kind::kFallback);
  if (n.has_subgraphs()) {
    for (const Value* v : step_captures(n)) st.inputs.push_back(slot_of.at(v));
    plan->stats.control_flow_nodes++;
  } else {
    plan->stats.fallback_nodes++;
    plan->stats.fallback_ops[n.qualified_op()]++;
  }
  ex.steps.push_back(std::move(st));
}

// A step's output argument: written into the arena unless it is a graph output.
PlanArg PlanBuilder::make_out_arg(const Value* v) {
  PlanArg a;
  a.slot = slot_of[v];
  a.output = true;
  a.graph_output = graph_outputs.count(v) > 0;
  a.dtype = ex.slots[static_cast<size_t>(a.slot)].dtype;
  a.dims = ex.slots[static_cast<size_t>(a.slot)].dims;
  return a;
}

// In execution order: folded nodes and nodes fused into a GEMM step run no step of their own;
// GEMM-like nodes become microkernel steps where covered; the rest join generated kernels or
// fall back to their reference kernels. A kernel never spans two fusion groups.
void PlanBuilder::plan_steps() {
  find_input_scales();
  for (int i : order) {
    if (absorbed.count(i)) continue;  // runs in an earlier GEMM step's epilogue
    if (folded_nodes.count(i)) continue;  // its outputs are plan constants
    if (deferred_muls.count(i)) continue;  // an input scale of a later conv step
    int64_t grp = grouped ? group_of(i) : -3 - i;
    if (grp != seg_group) {
      flush();
      seg_group = grp;
    }
    if (is_external(*g.nodes[static_cast<size_t>(i)])) {
      flush();
      add_external_step(i);
      continue;
    }
    if (add_gemm_step(i)) continue;
    lower_node(i);
  }
  flush();
}

// ---- S3: one LLVM module for all kernels ----------------------------------------------------

codegen::TargetOptions codegen_target(const codegen::TargetOptions& o) {
  if (!o.cpu.empty() && o.cpu != "native") return o;
  codegen::TargetOptions t = o;
  const std::string limit = target::Target::host().llvm_features();
  if (!limit.empty()) t.features = t.features.empty() ? limit : limit + "," + t.features;
  return t;
}

void PlanBuilder::plan_codegen() {
  const auto t2 = Clock::now();
  share_identical_kernels();
  std::unordered_map<std::string, codegen::KernelFn> fn_of;  // kernel name -> code
  std::vector<tir::PrimFunc> missing;
  std::vector<std::string> missing_ids;
  for (size_t k = 0; k < plan->funcs.size(); ++k) {
    if (std::optional<KernelLibrary::Kernel> known = library_.find(func_identities[k])) {
      fn_of[plan->funcs[k].name] = known->fn;
      if (std::find(plan->modules.begin(), plan->modules.end(), known->module) == plan->modules.end())
        plan->modules.push_back(known->module);
      ++plan->stats.library_kernels;
      continue;
    }
    missing.push_back(plan->funcs[k]);
    missing_ids.push_back(func_identities[k]);
  }
  if (!missing.empty()) {
    codegen::SymbolMap symbols{{"kiln_parallel_for", reinterpret_cast<void*>(&kiln_parallel_for)}};
    std::shared_ptr<codegen::JitModule> module = codegen::JitModule::compile(missing, codegen_target(opts_.target), symbols);
    const std::string& dir = module->cache_dir();
    plan->stats.llvm_cache = dir.empty() ? "off" : (module->from_cache() ? "hit (" : "miss (") + dir + ")";
    for (size_t k = 0; k < missing.size(); ++k) {
      codegen::KernelFn fn = module->lookup(missing[k].name);
      fn_of[missing[k].name] = fn;
      library_.add(missing_ids[k], fn, module);
    }
    plan->modules.push_back(std::move(module));
  } else if (!plan->funcs.empty()) {
    plan->stats.llvm_cache = "not needed (every kernel compiled by an earlier plan)";
  }
  for (const auto& name : ex.kernel_names) ex.kernels.push_back(fn_of.at(name));
  plan->stats.llvm_ms = ms_since(t2);
  plan->stats.kernels = kernel_count;
  plan->stats.compiled_kernels = static_cast<int>(plan->funcs.size());
  for (const tir::PrimFunc& f : plan->funcs) plan->stats.symbolic_kernels += !f.scalar_params.empty();
}

std::optional<KernelLibrary::Kernel> KernelLibrary::find(const std::string& identity) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = entries_.find(identity);
  if (it == entries_.end()) return std::nullopt;
  std::shared_ptr<codegen::JitModule> module = it->second.module.lock();
  if (!module) {  // no plan holds its code any more
    entries_.erase(it);
    return std::nullopt;
  }
  keep(module);
  return Kernel{it->second.fn, std::move(module)};
}

void KernelLibrary::keep(const std::shared_ptr<codegen::JitModule>& module) {
  auto at = std::find(kept_.begin(), kept_.end(), module);
  if (at != kept_.end()) kept_.erase(at);
  kept_.push_back(module);
  if (kept_.size() > kKeptModules) kept_.erase(kept_.begin());
}

void KernelLibrary::add(const std::string& identity, codegen::KernelFn fn,
                        const std::shared_ptr<codegen::JitModule>& module) {
  std::lock_guard<std::mutex> lk(mu_);
  for (auto it = entries_.begin(); it != entries_.end();) it = it->second.module.expired() ? entries_.erase(it) : std::next(it);
  entries_[identity] = Entry{fn, module};
  keep(module);
}

// A kernel's TIR with its own name and the node numbers in its identifiers ("n123_out") replaced
// by their order of appearance: equal for the kernels of repeated layers.
std::string kernel_identity(const tir::PrimFunc& f) {
  const std::string text = tir::print(f);
  std::string out;
  out.reserve(text.size());
  std::unordered_map<std::string, std::string> renamed;
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t i = 0; i < text.size();) {
    if (text[i] == 'n' && (i == 0 || !ident(text[i - 1]))) {
      size_t j = i + 1;
      while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
      if (j > i + 1 && j < text.size() && text[j] == '_') {
        auto [it, fresh] = renamed.emplace(text.substr(i + 1, j - i - 1), "");
        if (fresh) it->second = "n#" + std::to_string(renamed.size() - 1);
        out += it->second;
        i = j;
        continue;
      }
    }
    out += text[i++];
  }
  const size_t name_at = out.find("func " + f.name + "(");
  if (name_at != std::string::npos) out.erase(name_at + 5, f.name.size());
  return out;
}

// Kernels equal up to names (a transformer's layers repeat theirs) are compiled once: each later
// one's steps call the first one's code.
void PlanBuilder::share_identical_kernels() {
  std::unordered_map<std::string, std::string> first_of;  // identity -> kernel name
  std::vector<tir::PrimFunc> unique;
  std::vector<std::string> unique_ids;
  for (size_t k = 0; k < plan->funcs.size(); ++k) {
    auto [it, fresh] = first_of.emplace(func_identities[k], ex.kernel_names[k]);
    if (fresh) {
      unique.push_back(std::move(plan->funcs[k]));
      unique_ids.push_back(func_identities[k]);
    } else {
      ex.kernel_names[k] = it->second;
    }
  }
  plan->funcs = std::move(unique);
  func_identities = std::move(unique_ids);  // parallel to plan->funcs from here on
}

}  // namespace kiln::compile
