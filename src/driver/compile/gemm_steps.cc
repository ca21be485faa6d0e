// S2 of the compile steps (plan_builder.h), microkernel steps: float32 MatMul/Gemm/Conv/RNN
// nodes that runtime/gemm_ops.h covers run through sgemm (constant weights packed once), with
//   - fused epilogues: the chain after the node ([bias Add] [residual Add] [Relu | Clip |
//     HardSwish | Sigmoid | SiLU, as Mul(v, Sigmoid(v)) or kiln::Silu/HardSwish]) runs in the
//     step's store when every intermediate has one consumer and is no graph output, dims and
//     dtypes match, and a residual is computed before the GEMM in the execution order;
//   - input scales: Conv(Mul(x, s)) with s one value per input channel (a squeeze-and-excitation
//     gate) scales the conv's packed weights per run where that costs less than the Mul;
//   - the stem's MaxPool (3x3, stride 2, pad 1) pooled in the conv's step.
// KILN_GEMM_EPILOGUES=0 turns the fusions off (A/B measurements).
#include <cstdlib>
#include <limits>

#include "driver/compile/plan_builder.h"
#include "kernels/x86/f32_conv_stem.h"
#include "kernels/x86/f32_gemm.h"

namespace kiln::compile {
namespace {

bool fuse_epilogues() {
  static const bool on = [] {
    const char* e = std::getenv("KILN_GEMM_EPILOGUES");
    return !(e && std::string(e) == "0");
  }();
  return on;
}

}  // namespace

// Muls deferred to the conv after them as its input scale (scaled_input, deferred_muls).
void PlanBuilder::find_input_scales() {
  if (!fuse_epilogues()) return;
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
  if (desc && fuse_epilogues() && !gemm_ops::recurrent(desc->kind)) {
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
  if (op && fuse_epilogues() && desc->kind == gemm_ops::GemmKind::kConv && desc->epilogue_residual < 0) {
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

// Extends `d` (operands, and `inputs`, the step's input slots parallel to them) with the chain
// after GEMM node i; appends the absorbed nodes to `chain` and returns the value the step then
// produces.
const Value* PlanBuilder::absorb_epilogue(int i, gemm_ops::GemmDesc& d, std::vector<int32_t>& inputs,
                                          std::vector<int>& chain) {
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
}

// The node that max-pools v with 3x3 windows, stride 2 and pad 1 (floor mode, no indices) as v's
// only consumer after node i, or -1.
int PlanBuilder::max_pool_after(const Value* v, int i) {
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
}

// The output a GEMM step produces: the only one (recurrent nodes: the only one in use), or -1.
int PlanBuilder::step_output(const Node& n) {
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
}

// The descriptor of GEMM-like node n as the plan knows it, or nullopt (not covered, or an
// operand or its output is no tensor).
std::optional<gemm_ops::GemmDesc> PlanBuilder::desc_of(const Node& n) {
  const int out = step_output(n);
  if (out < 0) return std::nullopt;
  std::vector<gemm_ops::Operand> ops;
  bool known = true;
  for (const Value* v : n.inputs) ops.push_back(operand_of(v, known));
  const PlanSlot& os = ex.slots[static_cast<size_t>(slot_of.at(n.outputs[static_cast<size_t>(out)]))];
  if (!known || !os.tensor) return std::nullopt;
  return gemm_ops::gemm_desc_from_node(n, ops, os.dims, os.dtype, out);
}

}  // namespace kiln::compile
