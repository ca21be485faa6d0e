// assign-layouts: runs chains of small-plane convs channels-last (NHWC), with layout transforms
// only where a chain begins and ends. In kiln's NCHW convs the pixels are the GEMM's 32-wide
// vector columns; a 7x7 plane fills 49 of 64 of them, and the depthwise kernel transposes blocks
// in registers. Channels-last, a 1x1 conv is a plain GEMM with the pixels as rows (a MatMul with
// the weight transposed once here, its bias an Add the executor fuses) and a depthwise conv has
// the channels in the vector lanes (kiln::NhwcConv).
// Measured per layer in MobileNetV2 (min of 200 alternating runs, 1 thread, channels-last / NCHW
// time): 7x7 1x1 convs 0.78-0.94 and depthwise 0.87-0.88; at 14x14 the 1x1 projections with a
// residual take 1.03-1.26 and the depthwise 0.93-1.16, and at 28x28 and above the 1x1 convs
// 1.2-1.9. Hence planes of at most kMaxPlane pixels only (196, with the depthwise kernel as it
// is now, measured level: whole MobileNetV2 and EfficientNet-B0 within +-2%). Whole models, time
// against KILN_LAYOUT=nchw (medians of 300 alternating runs, either order first; 1 / 2
// threads): MobileNetV2 0.96-0.99 / 0.97-0.98, MobileNetV3-Small 0.94-0.95 / 0.95-0.99,
// EfficientNet-B0 0.96-1.01 / 0.99-1.00. (The same A/B of one configuration against itself:
// 0.97-1.02.)
//
// A chain is a connected set of candidate nodes:
//   - a 2-D Conv with a constant weight (and bias, if any; also through Identity nodes), an
//     output of at most kMaxPlane pixels, no auto_pad, and either 1x1 (stride 1, no pads,
//     group 1) or depthwise (group = C = M);
//   - a layout-free elementwise op (Relu, Clip, Sigmoid, HardSwish, ...) on a chain value, its
//     other inputs one-element constants; or Add/Sub/Mul/Div of two values of the output's shape,
//     at least one from the chain, or of one such value and a per-channel [N, C, 1, 1] one (a
//     squeeze-and-excitation gate);
//   - a GlobalAveragePool (a ReduceMean over axes 1 and 2 channels-last).
// Where a Transpose would bring a value into a chain, its producers back to a 1x1 conv of at most
// kMaxEntryPlane pixels (through elementwise ops) join the chain when only the chain reads them
// and their own entering values are smaller: the expansion conv before a stride-2 depthwise conv.
// A chain is rewritten when it holds at least two convs and at least twice as many convs as
// boundary values that need a Transpose: entering values are transposed to [N, H, W, C] once,
// leaving values (and graph outputs) back to [N, C, H, W]; those with H = W = 1 or C = 1 are
// only reshaped (a squeeze-and-excitation branch's [N, C, 1, 1] values, a pooled output).
// Requires: shape inference (f32 4-D shapes with known C, H, W; N may be symbolic).
// Guarantees: the same values at the boundaries; the graph imports opset "kiln" 1 when it
// rewrote something.
// Tests: tests/pass/golden/assign-layouts/*.kir
#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>

#include "ir/rewrite.h"
#include "pass/passes.h"

namespace kiln {
namespace {

constexpr int64_t kMaxPlane = 64;  // output pixels (8x8)
// A 1x1 conv (with the activation after it) whose output enters a chain joins it up to this
// plane when its input is the narrower: the chain's first Transpose then moves fewer values
// (MobileNetV2: 96 instead of 576 channels at 14x14; NHWC/NCHW time of such a conv alone: 0.95).
constexpr int64_t kMaxEntryPlane = 4 * kMaxPlane;

// An f32 [N, C, H, W] value with known C, H and W (N may be symbolic): its dims, N as -1 when
// unknown.
std::optional<std::vector<int64_t>> f32_4d(const Value* v) {
  if (!v || v->type.kind != Type::Kind::kTensor || v->type.dtype != DType::kFloat32 || !v->type.shape ||
      v->type.shape->rank() != 4)
    return std::nullopt;
  std::vector<int64_t> d;
  for (const Dim& x : v->type.shape->dims) d.push_back(x.value);
  if (d[1] < 0 || d[2] < 0 || d[3] < 0) return std::nullopt;
  return d;
}
bool same_type(const Value* a, const Value* b) { return a && b && f32_4d(a) && a->type == b->type; }
// One value per image and channel of `like` ([N, C, 1, 1], or [1, C, 1, 1]): a squeeze-and-
// excitation gate.
bool per_channel_of(const Value* v, const Value* like) {
  auto d = f32_4d(v), l = f32_4d(like);
  if (!d || !l || (*d)[1] != (*l)[1] || (*d)[2] != 1 || (*d)[3] != 1) return false;
  return (*d)[0] == 1 || v->type.shape->dims[0] == like->type.shape->dims[0];
}
// Whether NCHW <-> NHWC moves data: not when H = W = 1 or C = 1 (then it is a Reshape).
bool layout_change_moves(const Value* v) {
  auto d = f32_4d(v);
  return (*d)[2] * (*d)[3] > 1 && (*d)[1] > 1;
}

bool default_domain(const Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

std::vector<int64_t> ints_attr(const Node& n, const char* key, std::vector<int64_t> dflt) {
  const Attribute* a = n.attr(key);
  return a && a->kind == Attribute::Kind::kInts ? a->ints : dflt;
}

// The constant `v` holds: itself, or through Identity nodes (exporters share a weight or bias
// that way); null when it is not a constant.
Value* constant_source(Value* v) {
  while (v && !v->is_constant() && v->producer && v->producer->op_type == "Identity" &&
         default_domain(*v->producer) && v->producer->inputs.size() == 1)
    v = v->producer->inputs[0];
  return v && v->is_constant() ? v : nullptr;
}

enum class ConvForm { kNone, kPointwise, kDepthwise };

ConvForm conv_form(const Node& n, int64_t max_plane = kMaxPlane) {
  if (n.op_type != "Conv" || !default_domain(n) || n.inputs.size() < 2 || n.outputs.size() != 1) return ConvForm::kNone;
  const Value *x = n.inputs[0], *w = constant_source(n.inputs[1]);
  auto xd = f32_4d(x), yd = f32_4d(n.outputs[0]);
  if (!xd || !yd || !w || w->initializer.dtype() != DType::kFloat32 || w->initializer.rank() != 4)
    return ConvForm::kNone;
  if (n.inputs.size() > 2 && n.inputs[2]) {  // (a malformed bias is left for Conv to report)
    const Value* b = constant_source(n.inputs[2]);
    if (!b || b->initializer.dtype() != DType::kFloat32 || b->initializer.dims() != std::vector<int64_t>{w->initializer.dim(0)})
      return ConvForm::kNone;
  }
  if (const Attribute* a = n.attr("auto_pad"); a && a->kind == Attribute::Kind::kString && a->s != "NOTSET")
    return ConvForm::kNone;
  if ((*yd)[2] * (*yd)[3] > max_plane) return ConvForm::kNone;
  const std::vector<int64_t>& wd = w->initializer.dims();
  const Attribute* ga = n.attr("group");
  const int64_t group = ga && ga->kind == Attribute::Kind::kInt ? ga->i : 1;
  const int64_t c = (*xd)[1], m = wd[0];
  const bool unit = ints_attr(n, "strides", {1, 1}) == std::vector<int64_t>{1, 1} &&
                    ints_attr(n, "pads", {0, 0, 0, 0}) == std::vector<int64_t>{0, 0, 0, 0};
  if (group == 1 && wd[1] == c && wd[2] == 1 && wd[3] == 1 && unit)
    return ConvForm::kPointwise;
  if (group == c && m == c && c > 1 && wd[1] == 1) return ConvForm::kDepthwise;
  return ConvForm::kNone;
}

// Elementwise ops whose result does not depend on where an element sits.
bool layout_free_unary(const Node& n) {
  static const std::set<std::string> onnx = {"Relu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "LeakyRelu",
                                             "Tanh", "Elu", "Selu", "Softplus", "Neg", "Abs", "Erf", "Identity"};
  static const std::set<std::string> own = {"Silu", "HardSwish", "Gelu"};
  return default_domain(n) ? onnx.count(n.op_type) > 0 : n.domain == "kiln" && own.count(n.op_type) > 0;
}
bool layout_free_binary(const Node& n) {
  return default_domain(n) && (n.op_type == "Add" || n.op_type == "Sub" || n.op_type == "Mul" || n.op_type == "Div");
}
bool global_average_pool(const Node& n) {
  return default_domain(n) && n.op_type == "GlobalAveragePool" && n.inputs.size() == 1 && n.outputs.size() == 1 &&
         f32_4d(n.inputs[0]) && per_channel_of(n.outputs[0], n.inputs[0]);
}

struct Chains {
  Graph& g;
  GraphEditor ed;
  std::vector<Node*> nodes;           // candidates, in graph order
  std::map<const Node*, int> parent;  // union-find over candidates
  std::set<const Node*> dropped;
  std::set<const Node*> taken;        // nodes of the chains rewritten so far (pulled ones too)

  int64_t opset;  // the default domain's

  Chains(Graph& graph, int64_t default_opset) : g(graph), ed(graph), opset(default_opset) {}

  int find(int i) {
    while (parent[nodes[static_cast<size_t>(i)]] != i) i = parent[nodes[static_cast<size_t>(i)]];
    return i;
  }
  bool candidate(const Node* n) const { return n && parent.count(n) && !dropped.count(n); }

  // The inputs of n that carry a chain value (the others are one-element constants).
  static std::vector<Value*> data_inputs(const Node& n) {
    if (conv_form(n, kMaxEntryPlane) != ConvForm::kNone) return {n.inputs[0]};
    if (layout_free_binary(n)) return {n.inputs[0], n.inputs[1]};
    return {n.inputs[0]};
  }

  // A candidate by its own attributes and input kinds (before its neighbours are known).
  static bool eligible(const Node& n) {
    if (conv_form(n) != ConvForm::kNone) return true;
    if (n.outputs.size() != 1 || n.inputs.empty() || !f32_4d(n.outputs[0])) return false;
    if (global_average_pool(n)) return true;
    if (layout_free_binary(n)) {
      if (n.inputs.size() != 2) return false;
      const Value *a = n.inputs[0], *b = n.inputs[1], *y = n.outputs[0];
      return (same_type(a, y) && (same_type(b, y) || per_channel_of(b, y))) ||
             (same_type(b, y) && per_channel_of(a, y));
    }
    if (!layout_free_unary(n) || !same_type(n.inputs[0], n.outputs[0])) return false;
    for (size_t k = 1; k < n.inputs.size(); ++k)
      if (n.inputs[k] && (!n.inputs[k]->is_constant() || n.inputs[k]->initializer.numel() != 1)) return false;
    return true;
  }

  bool run(Model& m) {
    for (auto& up : g.nodes)
      if (eligible(*up)) {
        parent[up.get()] = static_cast<int>(nodes.size());
        nodes.push_back(up.get());
      }
    // Elementwise ops join a chain through a chain value: drop those fed by none, until stable.
    // (A binary op's other input may enter from outside, transposed like a conv's input.)
    for (bool changed = true; changed;) {
      changed = false;
      for (Node* n : nodes) {
        if (dropped.count(n) || conv_form(*n) != ConvForm::kNone) continue;
        const std::vector<Value*> ins = data_inputs(*n);
        if (std::none_of(ins.begin(), ins.end(), [&](const Value* v) { return candidate(v->producer); })) {
          dropped.insert(n);
          changed = true;
        }
      }
    }
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (dropped.count(nodes[i])) continue;
      for (Value* v : data_inputs(*nodes[i]))
        if (candidate(v->producer)) {
          const int a = find(static_cast<int>(i)), b = find(parent[v->producer]);
          if (a != b) parent[nodes[static_cast<size_t>(a)]] = b;
        }
    }
    std::map<int, std::vector<Node*>> chains;
    for (size_t i = 0; i < nodes.size(); ++i)
      if (!dropped.count(nodes[i])) chains[find(static_cast<int>(i))].push_back(nodes[i]);
    const UseMap uses = compute_uses(g);
    for (auto& [root, members] : chains) {
      (void)root;
      pull_entries(members, uses);
      if (rewrite_pays(members, uses)) {
        rewrite(members, uses);
        taken.insert(members.begin(), members.end());
      }
    }
    if (taken.empty()) return false;
    ed.remove_nodes_if([&](const Node& n) { return taken.count(&n) > 0; });
    // Identity nodes that only passed a rewritten conv its weight or bias go too.
    for (bool removed = true; removed;) {
      const UseMap now = compute_uses(g);
      removed = ed.remove_nodes_if([&](const Node& n) {
                  return n.op_type == "Identity" && default_domain(n) && n.outputs.size() == 1 &&
                         now.count(n.outputs[0]) == 0 && !is_graph_output(g, n.outputs[0]) &&
                         constant_source(n.outputs[0]) != nullptr;
                }) > 0;
    }
    ed.erase_dead_values();
    ed.sort_topologically();
    m.opsets["kiln"] = 1;
    return true;
  }

  // Values that enter the chain (data inputs produced outside it) and leave it (used outside or
  // graph outputs).
  void boundaries(const std::vector<Node*>& members, const UseMap& uses, std::vector<Value*>& entering,
                  std::vector<Value*>& leaving) const {
    const std::set<const Node*> in(members.begin(), members.end());
    for (Node* n : members) {
      for (Value* v : data_inputs(*n))
        if (!in.count(v->producer) && std::find(entering.begin(), entering.end(), v) == entering.end())
          entering.push_back(v);
      Value* out = n->outputs[0];
      bool outside = is_graph_output(g, out);
      for (const Node* u : uses.of(out)) outside = outside || !in.count(u);
      if (outside) leaving.push_back(out);
    }
  }

  // Values per image of an [N, C, H, W] value.
  static int64_t image_size(const Value* v) {
    auto d = f32_4d(v);
    return (*d)[1] * (*d)[2] * (*d)[3];
  }

  // For each entering value that a Transpose would move: its producers back to a 1x1 conv
  // (conv_form up to kMaxEntryPlane) through layout-free elementwise ops join the chain when
  // only the chain reads what they make and their own entering values are smaller.
  void pull_entries(std::vector<Node*>& members, const UseMap& uses) {
    std::set<const Node*> in(members.begin(), members.end());
    std::vector<Value*> entering, leaving;
    boundaries(members, uses, entering, leaving);
    for (Value* v : entering) {
      if (!layout_change_moves(v)) continue;
      std::set<Node*> region;
      std::vector<Node*> todo = {v->producer};
      bool ok = true;
      while (ok && !todo.empty()) {
        Node* q = todo.back();
        todo.pop_back();
        if (in.count(q) || region.count(q)) continue;
        // (Not a node of another chain, nor one a chain rewritten before has pulled in.)
        const bool free = q && q->owner == &g && !candidate(q) && !taken.count(q);
        const ConvForm form = free ? conv_form(*q, kMaxEntryPlane) : ConvForm::kNone;
        ok = free && (form == ConvForm::kPointwise || (form == ConvForm::kNone && eligible(*q)));
        if (!ok) break;
        region.insert(q);
        if (form == ConvForm::kNone)
          for (Value* u : data_inputs(*q)) todo.push_back(u->producer);  // null for graph inputs: fails
      }
      if (!ok) continue;
      int64_t moved = 0;
      for (Node* q : region) {
        for (Node* u : uses.of(q->outputs[0])) ok = ok && (in.count(u) || region.count(u));
        ok = ok && !is_graph_output(g, q->outputs[0]);
        for (Value* u : data_inputs(*q))
          if (!region.count(u->producer) && !in.count(u->producer) && layout_change_moves(u)) moved += image_size(u);
      }
      if (!ok || moved >= image_size(v)) continue;
      members.insert(members.end(), region.begin(), region.end());
      in.insert(region.begin(), region.end());
    }
    // Graph order again: producers before consumers.
    std::map<const Node*, size_t> position;
    for (size_t i = 0; i < g.nodes.size(); ++i) position[g.nodes[i].get()] = i;
    std::sort(members.begin(), members.end(), [&](const Node* a, const Node* b) { return position[a] < position[b]; });
  }

  // Boundaries that move data (a Transpose each; the others are Reshapes) against the convs.
  bool rewrite_pays(const std::vector<Node*>& members, const UseMap& uses) const {
    const int64_t convs = std::count_if(members.begin(), members.end(),
                                        [](const Node* n) { return conv_form(*n, kMaxEntryPlane) != ConvForm::kNone; });
    std::vector<Value*> entering, leaving;
    boundaries(members, uses, entering, leaving);
    int64_t transposes = 0;
    for (const auto* list : {&entering, &leaving})
      transposes += std::count_if(list->begin(), list->end(), layout_change_moves);
    return convs >= 2 && convs >= 2 * transposes;
  }

  static Type channels_last(const Value* v) {
    const std::vector<Dim>& d = v->type.shape->dims;
    return Type::tensor(v->type.dtype, Shape(std::vector<Dim>{d[0], d[2], d[3], d[1]}));
  }

  // `v` in the other layout (`type`; perm: the Transpose's): a Transpose, or where `moves` is
  // false (only unit axes move) a Reshape that copies the batch dim.
  Value* relaid(Value* v, Type type, const std::vector<int64_t>& perm, bool moves, const std::string& base) {
    const std::vector<Dim>& d = type.shape->dims;
    if (!moves) {
      Node* r = ed.add_node("Reshape", {v}, type, base);
      r->inputs.push_back(ed.add_ints({0, d[1].value, d[2].value, d[3].value}, base + "_shape"));
      return r->outputs[0];
    }
    Node* t = ed.add_node("Transpose", {v}, std::move(type), base);
    t->attrs["perm"] = Attribute::make_ints(perm);
    return t->outputs[0];
  }

  void rewrite(const std::vector<Node*>& members, const UseMap& uses) {
    std::vector<Value*> entering, leaving;
    boundaries(members, uses, entering, leaving);
    std::map<const Value*, Value*> nhwc;  // chain value -> its channels-last twin
    for (Value* v : entering)
      nhwc[v] = relaid(v, channels_last(v), {0, 2, 3, 1}, layout_change_moves(v), v->name + "_nhwc");
    for (Node* n : members) {  // graph order: producers first
      Value* y = n->outputs[0];
      const ConvForm form = conv_form(*n, kMaxEntryPlane);
      Node* made = nullptr;
      if (form == ConvForm::kPointwise) {
        // y = x W^T (+ b): the [M, C, 1, 1] weight as a [C, M] constant.
        const Tensor& w = constant_source(n->inputs[1])->initializer;
        const int64_t mo = w.dim(0), c = w.dim(1);
        Tensor wt = Tensor::uninitialized(DType::kFloat32, {c, mo});
        const float* src = w.data<float>();
        float* dst = wt.data<float>();
        for (int64_t i = 0; i < mo; ++i)
          for (int64_t k = 0; k < c; ++k) dst[k * mo + i] = src[i * c + k];
        Value* wv = ed.add_constant(std::move(wt), n->inputs[1]->name + "_cm");
        made = ed.add_node("MatMul", {nhwc.at(n->inputs[0]), wv}, channels_last(y), y->name + "_nhwc");
        made->name = n->name;
        if (n->inputs.size() > 2 && n->inputs[2]) {
          made = ed.add_node("Add", {made->outputs[0], constant_source(n->inputs[2])}, channels_last(y),
                             y->name + "_nhwc");
          made->name = n->name.empty() ? "" : n->name + "_bias";
        }
      } else if (form == ConvForm::kDepthwise) {
        made = ed.add_node("NhwcConv", {nhwc.at(n->inputs[0]), constant_source(n->inputs[1])}, channels_last(y),
                           y->name + "_nhwc");
        made->domain = "kiln";
        if (n->inputs.size() > 2 && n->inputs[2]) made->inputs.push_back(constant_source(n->inputs[2]));
        made->attrs = n->attrs;
      } else if (global_average_pool(*n)) {
        // The mean over H and W, which channels-last are axes 1 and 2: [N, 1, 1, C].
        made = ed.add_node("ReduceMean", {nhwc.at(n->inputs[0])}, channels_last(y), y->name + "_nhwc");
        if (opset >= 18) made->inputs.push_back(ed.add_ints({1, 2}, y->name + "_axes"));
        else made->attrs["axes"] = Attribute::make_ints({1, 2});
        made->attrs["keepdims"] = Attribute::make_int(1);
      } else {
        std::vector<Value*> ins = n->inputs;
        for (Value* v : data_inputs(*n)) std::replace(ins.begin(), ins.end(), v, nhwc.at(v));
        made = ed.add_node(n->op_type, ins, channels_last(y), y->name + "_nhwc");
        made->domain = n->domain;
        made->attrs = n->attrs;
      }
      if (form != ConvForm::kPointwise) made->name = n->name;
      nhwc[y] = made->outputs[0];
    }
    for (Value* v : leaving)
      ed.replace_all_uses(v, relaid(nhwc.at(v), v->type, {0, 3, 1, 2}, layout_change_moves(v), v->name + "_nchw"));
  }
};

// KILN_LAYOUT=nchw (read per run) keeps every conv channels-first, for A/B runs.
bool run(Model& m, PassContext&) {
  const char* env = std::getenv("KILN_LAYOUT");
  if (env && std::string(env) == "nchw") return false;
  return Chains(*m.graph, m.opset("")).run(m);
}

}  // namespace

PassInfo assign_layouts_pass() {
  return {"assign-layouts", "run chains of small-plane 1x1 and depthwise convs channels-last (NHWC)", run};
}

}  // namespace kiln
