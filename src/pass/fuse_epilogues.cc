// fuse-epilogues: decides which nodes around a Conv / ConvTranspose / MatMul / Gemm (and kiln's
// NhwcConv) run inside its microkernel step, and records the decisions as attributes that the
// compiled engine's GEMM steps follow (driver/compile/gemm_steps.cc):
//   - the epilogue chain after the node: [bias Add] [residual Add] [one of Relu | Clip |
//     HardSwish | Sigmoid | SiLU (Mul(v, Sigmoid(v)), or kiln::Silu / kiln::HardSwish)], each
//     absorbed node marked kiln.epilogue = "bias" | "residual" | "relu" | "clip" | "hardswish" |
//     "sigmoid" | "silu" | "silu_gate" (the Sigmoid of an exported SiLU) and kiln.fused_into =
//     the GEMM output's name; a Clip also gets kiln.clip = [lo, hi]. A node joins only when the
//     value before it has that one consumer and is no graph output, its output is f32 with the
//     GEMM output's rank and dims that may equal its dims (equal known sizes or names; a dim
//     the types leave unknown is checked by the engine with the bound shapes, and a chain stops
//     there when they differ), the bias is a constant with one value per output channel (through
//     Identity nodes), and a residual is computed before the GEMM in the engine's execution order
//     (groups by kiln.group id, then node order);
//   - a following 3x3 / stride 2 / pad 1 MaxPool (floor mode, no indices) of a Conv chain
//     without a residual: kiln.epilogue = "max_pool", taken where the conv's kernel can pool
//     (the stem kernel; runtime/gemm_ops.h decides with the bound shapes);
//   - a per-input-channel Mul before a Conv (a squeeze-and-excitation gate, x * s with s of
//     shape [..., C, 1, 1]) whose product only that Conv reads: kiln.input_scale_of = the Conv
//     output's name, taken where scaling the packed weights per run costs less than the Mul
//     (gemm_ops::input_scale_pays, with the bound shapes).
// Requires: shape-inference (types) and fusion (kiln.group) before it; nested graphs are
// handled on their own. Guarantees: only kiln.epilogue / kiln.fused_into / kiln.clip /
// kiln.input_scale_of attributes change (stale ones are removed); the graph computes the same.
// Tests: tests/pass/golden/fuse-epilogues/*.kir
#include <algorithm>
#include <limits>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "pass/fuse_epilogues.h"

#include "ir/rewrite.h"
#include "pass/passes.h"

namespace kiln {
namespace {

using epilogue_marks::kClip;
using epilogue_marks::kInto;
using epilogue_marks::kRole;
constexpr const char* kScaleOf = epilogue_marks::kInputScaleOf;

bool onnx(const Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

// The dims of a tensor value of known rank (sizes, named symbols or unknown).
bool dims_of(const Value* v, std::vector<Dim>& out) {
  if (!v || v->type.kind != Type::Kind::kTensor || !v->type.shape) return false;
  out = v->type.shape->dims;
  return true;
}

// Dims that may be equal at run time: the same rank and no position where both are known sizes
// that differ (names and unknown dims are checked by the engine with the bound shapes).
bool may_equal(const std::vector<Dim>& a, const std::vector<Dim>& b) {
  if (a.size() != b.size()) return false;
  for (size_t k = 0; k < a.size(); ++k)
    if (a[k].known() && b[k].known() && a[k].value != b[k].value) return false;
  return true;
}

bool is_f32(const Value* v) { return v && v->type.kind == Type::Kind::kTensor && v->type.dtype == DType::kFloat32; }

// A float32 scalar constant (absent: true, `out` unchanged).
bool scalar_f32(const Value* v, float& out) {
  if (!v) return true;
  v = through_identities(v);
  if (!v->is_constant() || v->initializer.dtype() != DType::kFloat32 || v->initializer.numel() != 1) return false;
  out = v->initializer.data<float>()[0];
  return true;
}

int64_t int_attr(const Node& n, const char* name, int64_t dflt) {
  const Attribute* a = n.attr(name);
  return a && a->kind == Attribute::Kind::kInt ? a->i : dflt;
}

class EpilogueFuser {
 public:
  EpilogueFuser(const Model& m, Graph& g) : m_(m), g_(g) {}

  bool run() {
    for (auto& n : g_.nodes) before_[n.get()] = roles_of(*n);
    clear_marks();
    index();
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      Node& n = *g_.nodes[i];
      if (onnx(n) && n.op_type == "Conv") mark_input_scale(static_cast<int>(i));
    }
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      if (gemm_like(*g_.nodes[i])) mark_chain(static_cast<int>(i));
    bool changed = false;
    for (auto& n : g_.nodes) changed |= roles_of(*n) != before_[n.get()];
    return changed;
  }

 private:
  // The node's marks as text, to tell whether the pass changed anything.
  static std::string roles_of(const Node& n) {
    std::string s;
    for (const char* k : {kRole, kInto, kClip, kScaleOf})
      if (const Attribute* a = n.attr(k)) s += std::string(k) + (a->kind == Attribute::Kind::kString ? a->s : "#") + ";";
    if (const Attribute* a = n.attr(kClip); a && a->kind == Attribute::Kind::kFloats)
      for (float f : a->floats) s += std::to_string(f) + ",";
    return s;
  }

  void clear_marks() {
    for (auto& n : g_.nodes)
      for (const char* k : {kRole, kInto, kClip, kScaleOf}) n->attrs.erase(k);
  }

  static bool gemm_like(const Node& n) {
    if (n.domain == "kiln") return n.op_type == "NhwcConv";
    return onnx(n) && (n.op_type == "MatMul" || n.op_type == "Gemm" || n.op_type == "Conv" || n.op_type == "ConvTranspose");
  }

  // Consumers (nested-graph reads count for the owning node), graph outputs and the engine's
  // execution order: groups in id order, nodes of a group in node order (as the plan builder).
  void index() {
    const int nn = static_cast<int>(g_.nodes.size());
    bool grouped = true;
    std::vector<int64_t> group(static_cast<size_t>(nn), -1);
    for (int i = 0; i < nn; ++i) {
      const Node& n = *g_.nodes[static_cast<size_t>(i)];
      node_index_[&n] = i;
      for (const Value* v : n.inputs)
        if (v) consumers_[v].push_back(i);
      if (n.has_subgraphs())
        for (const Value* v : captured_values(n)) consumers_[v].push_back(i);
      const Attribute* a = n.attr("kiln.group");
      group[static_cast<size_t>(i)] = a && a->kind == Attribute::Kind::kInt ? a->i : -1;
      grouped &= group[static_cast<size_t>(i)] >= 0;
    }
    outputs_.insert(g_.outputs.begin(), g_.outputs.end());
    std::vector<int> order(static_cast<size_t>(nn));
    for (int i = 0; i < nn; ++i) order[static_cast<size_t>(i)] = i;
    if (grouped)
      std::stable_sort(order.begin(), order.end(),
                       [&](int a, int b) { return group[static_cast<size_t>(a)] < group[static_cast<size_t>(b)]; });
    pos_.resize(static_cast<size_t>(nn));
    for (size_t k = 0; k < order.size(); ++k) pos_[static_cast<size_t>(order[k])] = k;
  }

  const std::vector<int>& consumers(const Value* v) const {
    static const std::vector<int> none;
    auto it = consumers_.find(v);
    return it == consumers_.end() ? none : it->second;
  }
  // v's only consumer, when v is no graph output; else -1.
  int sole_consumer(const Value* v) const {
    const std::vector<int>& c = consumers(v);
    return outputs_.count(v) || c.size() != 1 ? -1 : c[0];
  }
  Node& node(int i) const { return *g_.nodes[static_cast<size_t>(i)]; }
  int index_of(const Node* n) const {
    auto it = node_index_.find(n);
    return it == node_index_.end() ? -1 : it->second;
  }
  bool taken(int c) const { return node(c).attr(kInto) || node(c).attr(kScaleOf); }

  // Node c may join the chain of GEMM node i: an ai.onnx node (or kiln's Silu/HardSwish), one
  // f32 output with the GEMM output's dims, after the GEMM in the execution order, not taken.
  bool joinable(int c, int i, const std::vector<Dim>& dims) const {
    const Node& n = node(c);
    if ((!onnx(n) && n.domain != "kiln") || n.outputs.size() != 1 || !n.outputs[0] || taken(c) ||
        pos_[static_cast<size_t>(c)] < pos_[static_cast<size_t>(i)])
      return false;
    std::vector<Dim> od;
    return is_f32(n.outputs[0]) && dims_of(n.outputs[0], od) && may_equal(od, dims);
  }

  bool computed_before(const Value* v, int i) const {
    if (v->is_graph_input || v->is_constant() || !v->producer) return true;
    const int p = index_of(v->producer);
    return p >= 0 && pos_[static_cast<size_t>(p)] < pos_[static_cast<size_t>(i)];
  }

  static void mark(Node& n, const std::string& role, const std::string& into) {
    n.attrs[kRole] = Attribute::make_string(role);
    n.attrs[kInto] = Attribute::make_string(into);
  }

  void mark_chain(int i);
  bool mark_add(int c, int i, const Value* cur, const std::vector<Dim>& dims, size_t channel_axis, int& stage);
  bool mark_silu_pair(const Value* cur, int i, const std::vector<Dim>& dims, const std::string& into,
                      const Value*& next);
  void mark_max_pool(const Value* v, int i, const std::string& into);
  void mark_input_scale(int conv);

  const Model& m_;
  Graph& g_;
  std::unordered_map<const Node*, std::string> before_;
  std::unordered_map<const Node*, int> node_index_;
  std::unordered_map<const Value*, std::vector<int>> consumers_;
  std::unordered_set<const Value*> outputs_;
  std::vector<size_t> pos_;
};

// The epilogue chain after GEMM node i (see the file comment), then its max pool.
void EpilogueFuser::mark_chain(int i) {
  const Node& gemm = node(i);
  const Value* out = gemm.outputs.empty() ? nullptr : gemm.outputs[0];
  std::vector<Dim> dims;
  if (!is_f32(out) || !dims_of(out, dims) || dims.empty()) return;
  for (size_t k = 1; k < gemm.outputs.size(); ++k)
    if (gemm.outputs[k]) return;
  const bool channels_first = gemm.op_type == "Conv" || gemm.op_type == "ConvTranspose";
  const size_t channel_axis = channels_first ? 1 : dims.size() - 1;
  if (channel_axis >= dims.size()) return;
  const std::string into = out->name;
  const Value* cur = out;
  int stage = 0;  // 0: a bias may come next; 1: a residual; 2: a clamp or activation; 3: done
  bool residual = false;
  while (stage < 3 && !outputs_.count(cur)) {
    const Value* next = nullptr;
    if (consumers(cur).size() == 2) {
      if (mark_silu_pair(cur, i, dims, into, next)) cur = next;
      break;
    }
    const int c = sole_consumer(cur);
    if (c < 0 || !joinable(c, i, dims)) break;
    Node& cn = node(c);
    const int opset = m_.opset(cn.domain);
    std::string role;
    if (cn.domain == "kiln") {
      if (cn.op_type == "Silu") role = "silu";
      else if (cn.op_type == "HardSwish") role = "hardswish";
      else break;
    } else if (cn.op_type == "Add" && cn.inputs.size() == 2 && opset >= 7) {
      const int before = stage;
      if (!mark_add(c, i, cur, dims, channel_axis, stage)) break;
      residual |= before <= 1 && stage == 2;
      cur = cn.outputs[0];
      continue;
    } else if (cn.op_type == "HardSwish" && opset >= 14) {
      role = "hardswish";
    } else if (cn.op_type == "Sigmoid") {
      role = "sigmoid";
    } else if (cn.op_type == "Relu") {
      role = "relu";
    } else if (cn.op_type == "Clip") {
      float lo = std::numeric_limits<float>::lowest(), hi = std::numeric_limits<float>::max();
      if (opset < 11) {
        if (const Attribute* a = cn.attr("min"); a && a->kind == Attribute::Kind::kFloat) lo = a->f;
        if (const Attribute* a = cn.attr("max"); a && a->kind == Attribute::Kind::kFloat) hi = a->f;
      } else if (!scalar_f32(cn.inputs.size() > 1 ? cn.inputs[1] : nullptr, lo) ||
                 !scalar_f32(cn.inputs.size() > 2 ? cn.inputs[2] : nullptr, hi)) {
        break;
      }
      role = "clip";
      cn.attrs[kClip] = Attribute::make_floats({lo, hi});
    } else {
      break;
    }
    mark(cn, role, into);
    cur = cn.outputs[0];
    stage = 3;
  }
  if (gemm.op_type == "Conv" && !residual) mark_max_pool(cur, i, into);
}

// Add node c after `cur` as the chain's bias (stage 0: a constant per output channel) or its
// residual (stages 0-1: the GEMM output's dims, computed before the GEMM); advances `stage`.
bool EpilogueFuser::mark_add(int c, int i, const Value* cur, const std::vector<Dim>& dims, size_t channel_axis,
                             int& stage) {
  Node& cn = node(c);
  const Value* other = cn.inputs[0] == cur ? cn.inputs[1] : cn.inputs[0];
  if (!other || !is_f32(other) || (cn.inputs[0] == cur && cn.inputs[1] == cur)) return false;
  std::vector<Dim> od;
  if (!dims_of(other, od)) return false;
  const Value* bias = through_identities(other);
  // One value per output channel under numpy broadcasting: 1 everywhere but the channel axis.
  auto channel_bias = [&] {
    if (od.size() > dims.size() || od.size() < dims.size() - channel_axis || !dims[channel_axis].known()) return false;
    const size_t off = dims.size() - od.size();
    for (size_t k = 0; k < od.size(); ++k)
      if (!od[k].known() || od[k].value != (off + k == channel_axis ? dims[channel_axis].value : 1)) return false;
    return true;
  };
  if (stage == 0 && bias->is_constant() && channel_bias()) {
    mark(cn, "bias", node(i).outputs[0]->name);
    stage = 1;
    return true;
  }
  if (stage <= 1 && may_equal(od, dims) && computed_before(other, i)) {
    mark(cn, "residual", node(i).outputs[0]->name);
    stage = 2;
    return true;
  }
  return false;
}

// SiLU as exported, Mul(v, Sigmoid(v)) with the Sigmoid's output read by that Mul only: both
// nodes join (`next`: the Mul's output).
bool EpilogueFuser::mark_silu_pair(const Value* cur, int i, const std::vector<Dim>& dims, const std::string& into,
                                   const Value*& next) {
  int sig = -1, mul = -1;
  for (int c : consumers(cur)) {
    const Node& n = node(c);
    if (!onnx(n)) return false;
    if (n.op_type == "Sigmoid") sig = c;
    else if (n.op_type == "Mul") mul = c;
  }
  if (sig < 0 || mul < 0 || !joinable(sig, i, dims) || !joinable(mul, i, dims)) return false;
  Node& sn = node(sig);
  Node& mn = node(mul);
  const Value* s = sn.outputs[0];
  if (sole_consumer(s) != mul || mn.inputs.size() != 2 ||
      !((mn.inputs[0] == cur && mn.inputs[1] == s) || (mn.inputs[0] == s && mn.inputs[1] == cur)))
    return false;
  mark(sn, "silu_gate", into);
  mark(mn, "silu", into);
  next = mn.outputs[0];
  return true;
}

// The 3x3 / stride 2 / pad 1 MaxPool (floor mode, no indices, f32 NCHW) that is v's only consumer.
void EpilogueFuser::mark_max_pool(const Value* v, int i, const std::string& into) {
  const int c = sole_consumer(v);
  if (c < 0 || taken(c) || pos_[static_cast<size_t>(c)] < pos_[static_cast<size_t>(i)]) return;
  Node& pn = node(c);
  if (pn.op_type != "MaxPool" || !onnx(pn) || pn.inputs.size() != 1 || pn.outputs.empty() || !pn.outputs[0] ||
      (pn.outputs.size() > 1 && pn.outputs[1]) || !is_f32(pn.outputs[0]))
    return;
  auto ints = [&](const char* name, std::vector<int64_t> dflt) {
    const Attribute* a = pn.attr(name);
    return a && a->kind == Attribute::Kind::kInts ? a->ints : dflt;
  };
  const Attribute* ap = pn.attr("auto_pad");
  if ((ap && ap->kind == Attribute::Kind::kString && ap->s != "NOTSET") || int_attr(pn, "ceil_mode", 0) != 0 ||
      int_attr(pn, "storage_order", 0) != 0)
    return;
  using Ints = std::vector<int64_t>;
  if (ints("kernel_shape", {}) != Ints{3, 3} || ints("strides", {1, 1}) != Ints{2, 2} ||
      ints("pads", {0, 0, 0, 0}) != Ints{1, 1, 1, 1} || ints("dilations", {1, 1}) != Ints{1, 1})
    return;
  std::vector<Dim> in;
  if (!dims_of(v, in) || in.size() != 4) return;
  mark(pn, "max_pool", into);
}

// Conv(Mul(x, s)) with s one value per input channel, the product read by the Conv only.
void EpilogueFuser::mark_input_scale(int conv) {
  const Node& n = node(conv);
  if (n.inputs.size() < 2 || !n.inputs[0] || n.outputs.empty() || !n.outputs[0]) return;
  const Value* y = n.inputs[0];
  if (!y->producer || n.inputs[1] == y || (n.inputs.size() > 2 && n.inputs[2] == y)) return;
  const int m = index_of(y->producer);
  if (m < 0 || sole_consumer(y) != conv) return;
  Node& mn = node(m);
  if (mn.op_type != "Mul" || !onnx(mn) || mn.inputs.size() != 2 || !mn.inputs[0] || !mn.inputs[1] ||
      mn.outputs.size() != 1 || !is_f32(y))
    return;
  std::vector<Dim> yd, xd, sd;
  const Value *x = mn.inputs[0], *scale = mn.inputs[1];
  if (!dims_of(y, yd) || yd.size() != 4 || !yd[1].known()) return;
  if (!dims_of(x, xd) || !may_equal(xd, yd)) std::swap(x, scale);
  if (!dims_of(x, xd) || !may_equal(xd, yd) || !dims_of(scale, sd)) return;
  // [..., C, 1, 1]
  const size_t r = sd.size();
  if (r < 3 || r > 4 || !sd[r - 1].known() || sd[r - 1].value != 1 || !sd[r - 2].known() || sd[r - 2].value != 1 ||
      !sd[r - 3].known() || sd[r - 3].value != yd[1].value)
    return;
  mn.attrs[kScaleOf] = Attribute::make_string(n.outputs[0]->name);
}

bool run(Model& m, PassContext&) {
  return rewrite_graphs(*m.graph, [&](Graph& g) { return EpilogueFuser(m, g).run(); });
}

}  // namespace

const Value* through_identities(const Value* v) {
  while (v && v->producer && v->producer->op_type == "Identity" && onnx(*v->producer) && v->producer->inputs.size() == 1)
    v = v->producer->inputs[0];
  return v;
}

PassInfo fuse_epilogues_pass() {
  return {"fuse-epilogues",
          "mark the nodes a Conv/MatMul/Gemm step absorbs (bias, residual, activation, stem max pool, input scale)",
          run};
}

}  // namespace kiln
