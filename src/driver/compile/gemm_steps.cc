// S2 of the compile steps (plan_builder.h), microkernel steps: float32 MatMul/Gemm/Conv/RNN
// nodes that runtime/gemm_ops.h covers run through sgemm (constant weights packed once), with
// what the fuse-epilogues pass (pass/fuse_epilogues.cc) marked for them:
//   - the epilogue chain after the node (kiln.epilogue / kiln.fused_into): bias and residual
//     Adds become operands of the step, Relu / Clip / HardSwish / Sigmoid / SiLU its clamp and
//     activation, all applied in the microkernel's store;
//   - the input scale (kiln.input_scale_of): Conv(Mul(x, s)) scales the conv's packed weights per
//     run, where gemm_ops::input_scale_pays says that costs less than the Mul (bound dims);
//   - the stem's MaxPool (kiln.epilogue = "max_pool"), pooled in the conv's step where its op can;
//   - after integer GEMMs (MatMulInteger, ConvInteger), the requantization chain qdq-to-integer
//     leaves (Cast, Mul by the scales, bias Add, Relu, QuantizeLinear), matched here by structure.
// A mark is followed only when the op the step makes takes it; otherwise the marked nodes run as
// usual. KILN_DISABLE_PASSES=fuse-epilogues turns the fusions off (A/B measurements).
#include "driver/compile/plan_builder.h"
#include "core/shape.h"
#include "kernels/x86/f32_conv_stem.h"
#include "kernels/x86/f32_gemm.h"
#include "pass/fuse_epilogues.h"

namespace kiln::compile {

using epilogue_marks::kInto;
using epilogue_marks::kRole;

// The Muls fuse-epilogues marked as input scales, deferred into the conv after them where its op
// takes the scale and that pays (scaled_input, deferred_muls).
void PlanBuilder::find_input_scales() {
  for (int m = 0; m < nnodes; ++m) {
    const Node& mn = *g.nodes[static_cast<size_t>(m)];
    const Attribute* of = mn.attr(epilogue_marks::kInputScaleOf);
    if (!of || of->kind != Attribute::Kind::kString || folded_nodes.count(m) || mn.outputs.size() != 1 ||
        mn.inputs.size() != 2)
      continue;
    const Value* y = mn.outputs[0];
    auto cit = consumers.find(y);
    if (!y || graph_outputs.count(y) || cit == consumers.end() || cit->second.size() != 1) continue;
    const int i = cit->second[0];
    const Node& n = *g.nodes[static_cast<size_t>(i)];
    if (folded_nodes.count(i) || n.outputs.empty() || !n.outputs[0] || n.outputs[0]->name != of->s) continue;
    // x: the operand with the Mul's (bound) dims; the other is the scale.
    auto dims = [&](const Value* v) -> const std::vector<int64_t>& {
      return ex.slots[static_cast<size_t>(slot_of.at(v))].dims;
    };
    const Value *x = mn.inputs[0], *scale = mn.inputs[1];
    if (dims(x) != dims(y)) std::swap(x, scale);
    if (dims(x) != dims(y)) continue;
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

// Node i as a microkernel step, when the sgemm path covers it; false otherwise.
bool PlanBuilder::add_gemm_step(int i) {
  const Node& n = *g.nodes[static_cast<size_t>(i)];
  if (!gemm_ops::gemm_like(n)) return false;
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
  if (desc && !gemm_ops::recurrent(desc->kind)) {
    gemm_ops::GemmDesc fused = *desc;
    std::vector<int32_t> fused_inputs = step_inputs;
    const Value* end = gemm_ops::integer_kind(fused.kind) ? absorb_requantize(i, fused, fused_inputs, chain)
                                                         : absorb_epilogue(i, fused, fused_inputs, chain);
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
  if (op && desc->kind == gemm_ops::GemmKind::kConv && desc->epilogue_residual < 0) {
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
    for (int k : {1, 2})  // a recurrent step's final states after its output 0
      if (desc->rnn.also_states & k) st.outputs.push_back(slot_of[n.outputs[static_cast<size_t>(k)]]);
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
    plan->stats.tuned_gemms += st.gemm.choice.is_default() ? 0 : 1;
    return true;
  }
  return false;
}

// What the plan knows about value v as a GEMM operand (`known`: false when v is no tensor).
gemm_ops::Operand PlanBuilder::operand_of(const Value* v, bool& known) {
  gemm_ops::Operand o;
  if (!v) return o;
  const PlanSlot& ps = ex.slots[static_cast<size_t>(slot_of.at(v))];
  known &= ps.tensor;
  o.present = true;
  o.dtype = ps.dtype;
  o.dims = ps.dims;
  o.constant = constant_of(v);
  return o;
}

// Appends v as an extra operand of `d` (after the node's own, padded to its arity) and its slot
// to `inputs`; returns the operand's index.
int32_t PlanBuilder::add_operand(gemm_ops::GemmDesc& d, std::vector<int32_t>& inputs, const Value* v) {
  while (d.operands.size() < gemm_ops::node_arity(d.kind)) {
    d.operands.emplace_back();
    inputs.push_back(-1);
  }
  bool known = true;
  d.operands.push_back(operand_of(v, known));
  inputs.push_back(slot_of.at(v));
  return static_cast<int32_t>(d.operands.size() - 1);
}

// The fuse-epilogues role of node c in the step of the GEMM whose output is named `into`, or "".
std::string PlanBuilder::epilogue_role(int c, const std::string& into) {
  const Node& n = *g.nodes[static_cast<size_t>(c)];
  const Attribute* role = n.attr(kRole);
  const Attribute* of = n.attr(kInto);
  if (!role || !of || role->kind != Attribute::Kind::kString || of->kind != Attribute::Kind::kString ||
      of->s != into || absorbed.count(c) || deferred_muls.count(c))
    return "";
  return role->s;
}

// Extends `d` (operands, and `inputs`, the step's input slots parallel to them) with the chain
// fuse-epilogues marked after GEMM node i; appends the absorbed nodes to `chain` and returns the
// value the step then produces.
const Value* PlanBuilder::absorb_epilogue(int i, gemm_ops::GemmDesc& d, std::vector<int32_t>& inputs,
                                          std::vector<int>& chain) {
  const Value* cur = g.nodes[static_cast<size_t>(i)]->outputs[0];
  if (d.out_dtype != DType::kFloat32 || d.out_dims.empty() || !cur) return cur;
  const std::string into = cur->name;
  for (;;) {
    auto cit = consumers.find(cur);
    if (cit == consumers.end()) break;
    int c = -1, gate = -1;
    std::string role;
    for (int k : cit->second) {
      const std::string r = epilogue_role(k, into);
      if (r == "silu_gate") gate = k;
      else if (!r.empty() && r != "max_pool") c = k, role = r;
    }
    if (c < 0) break;
    const Node& cn = *g.nodes[static_cast<size_t>(c)];
    const PlanSlot& os = ex.slots[static_cast<size_t>(slot_of.at(cn.outputs[0]))];
    // The pass checked the types; dims they leave unknown are checked here, with the bound shapes.
    if (!os.tensor || os.dtype != DType::kFloat32 || os.dims != d.out_dims) break;
    const Value* other = cn.inputs.size() == 2 ? (cn.inputs[0] == cur ? cn.inputs[1] : cn.inputs[0]) : nullptr;
    if (role == "bias" && other) {
      d.epilogue_bias = add_operand(d, inputs, through_identities(other));
    } else if (role == "residual" && other && ex.slots[static_cast<size_t>(slot_of.at(other))].dims == d.out_dims) {
      d.epilogue_residual = add_operand(d, inputs, other);
    } else if (role == "relu") {
      d.clamp_lo = 0.0f;
    } else if (const Attribute* b = cn.attr(epilogue_marks::kClip); role == "clip" && b && b->floats.size() == 2) {
      d.clamp_lo = b->floats[0];
      d.clamp_hi = b->floats[1];
    } else if (role == "hardswish") {
      d.epilogue_activation = static_cast<int32_t>(kernels::Activation::kHardSwish);
    } else if (role == "sigmoid") {
      d.epilogue_activation = static_cast<int32_t>(kernels::Activation::kSigmoid);
    } else if (role == "silu") {
      d.epilogue_activation = static_cast<int32_t>(kernels::Activation::kSilu);
      if (gate >= 0) chain.push_back(gate);
    } else {
      break;
    }
    chain.push_back(c);
    cur = cn.outputs[0];
  }
  return cur;
}

// The Cast -> Mul -> [Add] -> [Relu] -> QuantizeLinear (uint8) after integer GEMM node i, each
// node the only consumer of the one before and its other operand a constant: `d` gets the
// requantizing epilogue (GemmDesc::requant_*), `chain` the nodes, and the QuantizeLinear's output
// is returned. After a MatMulInteger the chain is the dequantization, Cast -> Mul -> [Add] with a
// float output, and the Mul's scale may be a Mul of a run-time scalar by a constant (dynamic
// quantization: the activation's scale times the weights'), which is absorbed too. Anything else
// leaves both as they were and returns the node's output. Whether the constants fit (per channel,
// scalar scale and zero point) is make_gemm_op's check.
const Value* PlanBuilder::absorb_requantize(int i, gemm_ops::GemmDesc& d, std::vector<int32_t>& inputs,
                                            std::vector<int>& chain) {
  const Value* const start = g.nodes[static_cast<size_t>(i)]->outputs[0];
  const Value* cur = start;
  // cur's one consumer when it is a `op` node not yet placed and cur no graph output, else -1.
  auto next = [&](const char* op) -> int {
    auto cit = consumers.find(cur);
    if (!cur || graph_outputs.count(cur) || cit == consumers.end() || cit->second.size() != 1) return -1;
    const int c = cit->second[0];
    const Node& cn = *g.nodes[static_cast<size_t>(c)];
    if (cn.op_type != op || !cn.domain.empty() || absorbed.count(c) || folded_nodes.count(c) || cn.outputs.size() != 1 ||
        !cn.outputs[0])
      return -1;
    return c;
  };
  // The input of binary node c that is not cur, when it is a constant.
  auto constant_other = [&](int c) -> const Value* {
    const Node& cn = *g.nodes[static_cast<size_t>(c)];
    if (cn.inputs.size() != 2 || !cn.inputs[0] || !cn.inputs[1]) return nullptr;
    const Value* other = cn.inputs[0] == cur ? cn.inputs[1] : cn.inputs[0];
    return constant_of(other) ? other : nullptr;
  };
  const bool dequantizes = d.kind == gemm_ops::GemmKind::kMatMulInteger;
  gemm_ops::GemmDesc fused = d;
  std::vector<int32_t> fused_inputs = inputs;
  std::vector<int> nodes;
  auto take = [&](int c) {
    nodes.push_back(c);
    cur = g.nodes[static_cast<size_t>(c)]->outputs[0];
  };
  int c = next("Cast");
  const Attribute* to = c >= 0 ? g.nodes[static_cast<size_t>(c)]->attr("to") : nullptr;
  if (!to || to->i != static_cast<int64_t>(DType::kFloat32)) return start;
  take(c);
  c = next("Mul");
  if (c < 0) return start;
  const Value* scale = constant_other(c);
  if (!scale && dequantizes) {
    const Node& mul = *g.nodes[static_cast<size_t>(c)];
    const Value* made = mul.inputs.size() == 2 ? (mul.inputs[0] == cur ? mul.inputs[1] : mul.inputs[0]) : nullptr;
    if (const auto [m, factor, constant] = scale_product(made, i); m >= 0) {
      fused.requant_scale_factor = add_operand(fused, fused_inputs, factor);
      scale = constant;
      nodes.push_back(m);
    }
  }
  if (!scale) return start;
  fused.requant_scale = add_operand(fused, fused_inputs, scale);
  take(c);
  if (c = next("Add"); c >= 0) {
    if (const Value* bias = constant_other(c)) {
      fused.epilogue_bias = add_operand(fused, fused_inputs, bias);
      take(c);
    } else if (!dequantizes) {
      return start;  // (a dequantization ends at the Mul; the Add runs on its own)
    }
  }
  if (dequantizes) {
    const PlanSlot& os = ex.slots[static_cast<size_t>(slot_of.at(cur))];
    if (!os.tensor || os.dtype != DType::kFloat32 || os.dims != d.out_dims) return start;
    fused.out_dtype = DType::kFloat32;
  } else {
    if (c = next("Relu"); c >= 0) {
      fused.clamp_lo = 0.0f;
      take(c);
    }
    c = next("QuantizeLinear");
    if (c < 0) return start;
    const Node& q = *g.nodes[static_cast<size_t>(c)];
    if (q.inputs.size() < 2 || q.inputs[0] != cur || !q.inputs[1] || !constant_of(q.inputs[1]) ||
        (q.inputs.size() > 2 && q.inputs[2] && !constant_of(q.inputs[2])) || q.attr("precision"))
      return start;
    fused.requant_y_scale = add_operand(fused, fused_inputs, q.inputs[1]);
    if (q.inputs.size() > 2 && q.inputs[2]) fused.requant_y_zero_point = add_operand(fused, fused_inputs, q.inputs[2]);
    take(c);
    const PlanSlot& os = ex.slots[static_cast<size_t>(slot_of.at(cur))];
    if (!os.tensor || os.dtype != DType::kUInt8 || os.dims != d.out_dims) return start;
    fused.out_dtype = DType::kUInt8;
  }
  d = std::move(fused);
  inputs = std::move(fused_inputs);
  chain.insert(chain.end(), nodes.begin(), nodes.end());
  return cur;
}

// When v is made by a Mul of a scalar by a constant that only the dequantization reads, and that
// scalar is ready when GEMM node i's step runs (a graph input, or made by a node placed before
// it): the Mul, the scalar and the constant. Else m = -1.
PlanBuilder::ScaleProduct PlanBuilder::scale_product(const Value* v, int i) {
  auto p = v ? producer.find(v) : producer.end();
  auto cit = v ? consumers.find(v) : consumers.end();
  if (p == producer.end() || graph_outputs.count(v) || cit == consumers.end() || cit->second.size() != 1) return {};
  const int m = p->second;
  const Node& mul = *g.nodes[static_cast<size_t>(m)];
  if (mul.op_type != "Mul" || !mul.domain.empty() || mul.inputs.size() != 2 || !mul.inputs[0] || !mul.inputs[1] ||
      absorbed.count(m) || folded_nodes.count(m) || deferred_muls.count(m) ||
      pos_in_order[static_cast<size_t>(m)] < pos_in_order[static_cast<size_t>(i)])  // placed already
    return {};
  const bool first_constant = constant_of(mul.inputs[0]) != nullptr;
  const Value* factor = mul.inputs[first_constant ? 1 : 0];
  const Value* constant = mul.inputs[first_constant ? 0 : 1];
  if (!constant_of(constant) || constant_of(factor)) return {};
  const PlanSlot& fs = ex.slots[static_cast<size_t>(slot_of.at(factor))];
  if (!fs.tensor || fs.dtype != DType::kFloat32 || checked_numel(fs.dims) != 1) return {};
  if (auto fp = producer.find(factor); fp != producer.end()) {
    const int f = fp->second;
    if (pos_in_order[static_cast<size_t>(f)] >= pos_in_order[static_cast<size_t>(i)] || deferred_muls.count(f))
      return {};
  }
  return {m, factor, constant};
}

// The MaxPool fuse-epilogues marked for GEMM node i's step as v's only consumer, when its output
// has the pooled dims (3x3, stride 2, pad 1, floor mode), or -1.
int PlanBuilder::max_pool_after(const Value* v, int i) {
  auto cit = consumers.find(v);
  const Value* gemm_out = g.nodes[static_cast<size_t>(i)]->outputs[0];
  if (!v || !gemm_out || graph_outputs.count(v) || cit == consumers.end() || cit->second.size() != 1) return -1;
  const int c = cit->second[0];
  if (epilogue_role(c, gemm_out->name) != "max_pool") return -1;
  const Node& pn = *g.nodes[static_cast<size_t>(c)];
  const PlanSlot& in = ex.slots[static_cast<size_t>(slot_of.at(v))];
  const PlanSlot& out = ex.slots[static_cast<size_t>(slot_of.at(pn.outputs[0]))];
  if (!out.tensor || out.dtype != DType::kFloat32 || in.dims.size() != 4 || out.dims.size() != 4) return -1;
  return out.dims == std::vector<int64_t>{in.dims[0], in.dims[1], kernels::StemMaxPool::pooled(in.dims[2]),
                                          kernels::StemMaxPool::pooled(in.dims[3])}
             ? c
             : -1;
}

// The output a GEMM step produces: the only one (recurrent nodes: the only one in use), or -1.
std::vector<int> PlanBuilder::step_outputs(const Node& n) {
  std::vector<int> live;
  for (size_t k = 0; k < n.outputs.size(); ++k) {
    const Value* v = n.outputs[k];
    const auto uses = consumers.find(v);
    const bool used = v && (graph_outputs.count(v) || (uses != consumers.end() && !uses->second.empty()));
    if (v && (used || n.outputs.size() == 1)) live.push_back(static_cast<int>(k));
  }
  return live;
}

// The descriptor of GEMM-like node n as the plan knows it, or nullopt (not covered, or an
// operand or its output is no tensor).
std::optional<gemm_ops::GemmDesc> PlanBuilder::desc_of(const Node& n) {
  const std::vector<int> live = step_outputs(n);
  if (live.empty()) return std::nullopt;
  // One output, or a recurrent node's: output 0 of the step is the first used one, its final
  // states after it (RNN/GRU/LSTM with Y and Y_h, or Y_h and Y_c, used: silero-VAD's LSTM).
  int32_t also_states = 0;
  for (size_t k = 1; k < live.size(); ++k) {
    if (!n.domain.empty() || (n.op_type != "LSTM" && n.op_type != "GRU" && n.op_type != "RNN") || live[k] == 0)
      return std::nullopt;
    also_states |= live[k] == 1 ? 1 : 2;
  }
  const int out = live[0];
  std::vector<gemm_ops::Operand> ops;
  bool known = true;
  for (const Value* v : n.inputs) ops.push_back(operand_of(v, known));
  const PlanSlot& os = ex.slots[static_cast<size_t>(slot_of.at(n.outputs[static_cast<size_t>(out)]))];
  if (!known || !os.tensor) return std::nullopt;
  std::optional<gemm_ops::GemmDesc> d = gemm_ops::gemm_desc_from_node(n, ops, os.dims, os.dtype, out);
  if (d) d->rnn.also_states = also_states;
  if (d && also_states && !gemm_ops::recurrent(d->kind)) return std::nullopt;
  if (d) d->choice = gemm_ops::tuned_choice(opts_.tuning.get(), *d);
  return d;
}

}  // namespace kiln::compile
