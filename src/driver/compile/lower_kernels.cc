// S2 of the compile steps (plan_builder.h), generated kernels: consecutive nodes of a fusion
// group that have TE lowerings (ops/lowering.h) form a segment; at the segment's end its TE
// tensors are composed (external inputs are placeholders, scalar constants immediates, values
// used outside the segment kernel outputs, the rest inlined) and lowered to one TIR PrimFunc.
#include <algorithm>
#include <cstdio>
#include <set>
#include <unordered_set>

#include "driver/compile/plan_builder.h"
#include "ir/text.h"
#include "ops/lowering.h"
#include "tir/rewrite.h"

namespace kiln::compile {
namespace {

// TIR buffers need at least one dim: rank-0 values are lowered as shape [1].
std::vector<int64_t> te_dims(const std::vector<int64_t>& d) { return d.empty() ? std::vector<int64_t>{1} : d; }

}  // namespace

std::vector<tir::Expr> PlanBuilder::lowering_dims(const Value* v) {
  const size_t s = static_cast<size_t>(slot_of.at(v));
  const std::vector<int64_t>& dims = ex.slots[s].dims;
  if (dims.empty()) return {tir::int_imm(1)};
  const std::vector<bool>* var = s < variable_dims.size() ? &variable_dims[s] : nullptr;
  std::vector<tir::Expr> out;
  for (size_t k = 0; k < dims.size(); ++k) {
    // Size 1 stays a constant: broadcasting decides on it (and kernels of batch 1 specialise).
    if (!var || k >= var->size() || !(*var)[k] || dims[k] <= 1) {
      out.push_back(tir::int_imm(dims[k]));
      continue;
    }
    auto it = std::find_if(seg.dim_vars.begin(), seg.dim_vars.end(), [&](const auto& p) { return p.first == dims[k]; });
    if (it == seg.dim_vars.end()) {
      seg.dim_vars.emplace_back(dims[k], tir::make_var("dim" + std::to_string(seg.dim_vars.size())));
      it = seg.dim_vars.end() - 1;
    }
    out.push_back(it->second);
  }
  return out;
}

// The values of f's dim variables in this segment. A dim variable the lowering used only inside
// expressions (not in any buffer's shape or loop extent) is added to f's params here.
std::vector<int64_t> PlanBuilder::kernel_scalars(tir::PrimFunc& f) {
  std::vector<int64_t> out;
  if (seg.dim_vars.empty()) return out;
  std::unordered_set<const tir::ExprNode*> params;
  for (const tir::Expr& p : f.scalar_params) params.insert(p.get());
  for (const auto& [size, var] : seg.dim_vars) {
    if (params.count(var.get())) continue;
    bool used = false;
    const tir::ExprNode* var_node = var.get();  // clang 14 cannot capture a structured binding
    tir::visit_exprs(f.body, [&](const tir::Expr& e) { used |= e.get() == var_node; });
    if (used) f.scalar_params.push_back(var);
  }
  for (const tir::Expr& p : f.scalar_params) {
    auto it = std::find_if(seg.dim_vars.begin(), seg.dim_vars.end(), [&](const auto& d) { return d.second->name == p->name; });
    KILN_CHECK(it != seg.dim_vars.end());
    out.push_back(it->first);
  }
  return out;
}

bool PlanBuilder::tensor_ok(const Value* v) {
  int s = slot_of.at(v);
  return ex.slots[static_cast<size_t>(s)].tensor && lower::supported_dtype(ex.slots[static_cast<size_t>(s)].dtype);
}

// Adds node i to the current segment when it lowers; else ends the segment and adds a fallback
// step (the node's reference kernel).
void PlanBuilder::lower_node(int i) {
  const Node& n = *g.nodes[static_cast<size_t>(i)];
  LowerFn fn = find_lowering(n.domain, n.op_type);
  bool ok = fn != nullptr;
  for (const Value* v : n.inputs) ok = ok && (!v || tensor_ok(v));
  for (const Value* v : n.outputs) ok = ok && (!v || tensor_ok(v));
  LowerResult res;
  std::vector<int> seg_reads;
  if (ok) {
    LowerContext ctx(n, model_.opset(n.domain), "n" + std::to_string(i));
    for (const Value* v : n.inputs) {
      if (!v) {
        ctx.inputs.push_back(nullptr);
        ctx.input_shapes.emplace_back();
        ctx.input_dims.emplace_back();
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
          t = te::compute("c" + std::to_string(seg.next_placeholder++), lowering_dims(v),
                          [&](const std::vector<tir::Expr>&) { return lower::constant(dt, c); });
          seg.tensors[v] = t;
        } else {
          t = te::placeholder("p" + std::to_string(seg.next_placeholder++), ex.slots[s].dtype, lowering_dims(v));
          seg.placeholders.emplace_back(v, t);
        }
      }
      ctx.inputs.push_back(t);
      ctx.input_dims.push_back(t->shape);
      ctx.input_shapes.push_back(te_dims(ex.slots[s].dims));
      ctx.input_dtypes.push_back(ex.slots[s].dtype);
      ctx.constants.push_back(constant_of(v));
    }
    for (const Value* v : n.outputs) {
      size_t s = v ? static_cast<size_t>(slot_of[v]) : 0;
      ctx.output_shapes.push_back(v ? te_dims(ex.slots[s].dims) : std::vector<int64_t>{});
      ctx.output_dims.push_back(v ? lowering_dims(v) : std::vector<tir::Expr>{});
      ctx.output_dtypes.push_back(v ? ex.slots[s].dtype : DType::kUndefined);
    }
    try {
      res = fn(ctx);
      seg_reads = ctx.constants_read();
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
    return;
  }
  for (size_t k = 0; k < n.outputs.size(); ++k)
    if (n.outputs[k]) seg.tensors[n.outputs[k]] = (*res)[k];
  seg.nodes.push_back(i);
  seg.constants_read.push_back(std::move(seg_reads));
}

// Turns the current segment into a kernel step (or fallback steps if lowering fails).
void PlanBuilder::flush() {
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
  if (outputs.empty()) {
    // Nothing leaves the segment: its nodes are dead.
    plan->stats.generated_nodes += static_cast<int>(seg.nodes.size());
    seg = Segment();
    return;
  }
  // Outputs with no elements need no code: a kEmpty step makes them, the kernel the others (a
  // Split with an empty piece). A segment of empty outputs only is that step alone.
  PlanStep empty_step = st;
  empty_step.kind = PlanStep::Kind::kEmpty;
  for (auto it = outputs.begin(); it != outputs.end();) {
    if (lower::numel_of(ex.slots[static_cast<size_t>(slot_of[it->first])].dims) != 0) {
      ++it;
      continue;
    }
    empty_step.args.push_back(make_out_arg(it->first));
    it = outputs.erase(it);
  }
  if (!empty_step.args.empty()) ex.steps.push_back(std::move(empty_step));
  if (outputs.empty()) {
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
    const std::string key = segment_key(outputs);
    if (std::optional<size_t> same = reusable_kernel(key)) {
      // The TIR of an earlier segment of the same structure (a repeated layer): its copy is
      // dropped by share_identical_kernels, this step calls the earlier kernel's code.
      plan->funcs.push_back(plan->funcs[*same]);
      func_identities.push_back(func_identities[*same]);
      ++plan->stats.reused_lowerings;
      st.scalars = kernel_scalars(plan->funcs.back());
    } else {
      DimHints hints;
      for (const auto& [size, var] : seg.dim_vars) hints[var.get()] = size;
      plan->funcs.push_back(lower_with_default_schedule(out_tensors, computes, args, name, opts_.schedule,
                                                        schedule_lanes(), hints));
      st.scalars = kernel_scalars(plan->funcs.back());  // (may add params: before the identity)
      func_identities.push_back(kernel_identity(plan->funcs.back()));
      remember_kernel(key, plan->funcs.size() - 1);
    }
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
}

// The segment's structure: per node its op, opset and attributes (kiln.* marks aside), where each
// input comes from (a node of the segment, a placeholder, a scalar immediate with its value) with
// its dtype and dims, its outputs' dtypes and dims; then which values leave the segment.
std::string PlanBuilder::segment_key(const std::vector<std::pair<const Value*, te::Tensor>>& outputs) {
  std::unordered_map<const Value*, std::string> local;
  auto type_of = [&](const Value* v) {
    const PlanSlot& ps = ex.slots[static_cast<size_t>(slot_of.at(v))];
    std::string t = std::string(dtype_name(ps.dtype)) + "[";
    for (int64_t d : ps.dims) t += std::to_string(d) + ",";
    return t + "]";
  };
  std::string key = opts_.schedule ? "scheduled" + std::to_string(schedule_lanes()) + "|" : "plain|";
  for (size_t ln = 0; ln < seg.nodes.size(); ++ln) {
    const Node& n = *g.nodes[static_cast<size_t>(seg.nodes[ln])];
    key += n.domain + "::" + n.op_type + "@" + std::to_string(model_.opset(n.domain)) + "{";
    for (const auto& [name, a] : n.attrs)
      if (name.rfind("kiln.", 0) != 0) key += name + "=" + print_attribute(a) + ";";
    key += "}(";
    for (const Value* v : n.inputs) {
      if (!v) {
        key += "-,";
        continue;
      }
      auto pit = std::find_if(seg.placeholders.begin(), seg.placeholders.end(),
                              [&](const auto& p) { return p.first == v; });
      if (auto it = local.find(v); it != local.end()) {
        key += it->second;
      } else if (pit != seg.placeholders.end()) {
        key += "p" + std::to_string(pit - seg.placeholders.begin());
      } else if (const Tensor* k = constant_of(v); k && k->numel() == 1) {
        char buf[64];
        std::snprintf(buf, sizeof(buf), "c%a", k->get_double(0));
        key += buf;
      } else {
        key += "?";
      }
      key += ":" + type_of(v) + ",";
    }
    key += ")->";
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      if (!n.outputs[k]) continue;
      local[n.outputs[k]] = "s" + std::to_string(ln) + "." + std::to_string(k);
      key += type_of(n.outputs[k]) + ",";
    }
    key += ";";
  }
  key += "|out:";
  for (const auto& [v, t] : outputs) key += local.count(v) ? local[v] + "," : "?,";
  return key;
}

// A kernel lowered for `key` whose lowerings read the same constants as the current segment's.
std::optional<size_t> PlanBuilder::reusable_kernel(const std::string& key) {
  auto it = lowered.find(key);
  if (it == lowered.end()) return std::nullopt;
  auto same = [](const Tensor* a, const Tensor* b) {
    if (!a || !b) return a == b;
    return a == b || a->same_as(*b);
  };
  for (const LoweredKernel& k : it->second) {
    bool ok = true;
    for (const LoweredKernel::Read& r : k.reads) {
      const Node& n = *g.nodes[static_cast<size_t>(seg.nodes[r.node])];
      ok = ok && r.input < n.inputs.size() && same(n.inputs[r.input] ? constant_of(n.inputs[r.input]) : nullptr, r.value);
    }
    if (ok) return k.func;
  }
  return std::nullopt;
}

void PlanBuilder::remember_kernel(const std::string& key, size_t func) {
  LoweredKernel k;
  k.func = func;
  for (size_t ln = 0; ln < seg.nodes.size(); ++ln) {
    const Node& n = *g.nodes[static_cast<size_t>(seg.nodes[ln])];
    for (int input : seg.constants_read[ln]) {
      const size_t in = static_cast<size_t>(input);
      k.reads.push_back({ln, in, in < n.inputs.size() && n.inputs[in] ? constant_of(n.inputs[in]) : nullptr});
    }
  }
  lowered[key].push_back(std::move(k));
}

}  // namespace kiln::compile
