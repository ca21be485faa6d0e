// Model -> ONNX ModelProto: opset imports, metadata, typed inputs/outputs/value_info (symbolic
// dims, sequences, optionals), initializers (raw_data, or external data past ~1.8 GB), nodes with
// every attribute kind incl. subgraphs (captured outer values referenced by name) and types.
//
// kiln-specific content is removed on the way out:
// - node attributes named `kiln.*` (pass annotations) are dropped;
// - composite ops of the "kiln" domain become the standard ONNX op when the model's default
//   opset has it (LayerNormalization >= 17, Gelu >= 20, HardSwish >= 14), otherwise they are
//   expanded back into primitive ops (one expansion function per composite, kCompositeTable;
//   NhwcConv: Conv between two Transposes);
//   the "kiln" opset import is not written.
#include <onnx/onnx_pb.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <numbers>
#include <set>

#include "core/error.h"
#include "frontend/onnx/onnx_io.h"
#include "frontend/onnx/tensor_proto.h"

namespace kiln {
namespace {

constexpr const char* kKilnDomain = "kiln";
constexpr const char* kProducerVersion = "0.1.0";
// In external-data mode, tensors smaller than this stay inline.
constexpr size_t kExternalMinBytes = 1024;
constexpr size_t kExternalAlign = 4096;

void type_to_proto(const Type& t, onnx::TypeProto* p) {
  switch (t.kind) {
    case Type::Kind::kSequence:
      if (t.elem) type_to_proto(*t.elem, p->mutable_sequence_type()->mutable_elem_type());
      else p->mutable_sequence_type();
      return;
    case Type::Kind::kOptional:
      if (t.elem) type_to_proto(*t.elem, p->mutable_optional_type()->mutable_elem_type());
      else p->mutable_optional_type();
      return;
    case Type::Kind::kTensor: {
      auto* tt = p->mutable_tensor_type();
      if (t.dtype != DType::kUndefined) tt->set_elem_type(static_cast<int32_t>(t.dtype));
      if (t.shape) {
        auto* sp = tt->mutable_shape();
        for (const Dim& d : t.shape->dims) {
          auto* dp = sp->add_dim();
          if (d.known()) dp->set_dim_value(d.value);
          else if (!d.symbol.empty()) dp->set_dim_param(d.symbol);
        }
      }
      return;
    }
  }
}

bool type_is_known(const Type& t) {
  return t.kind != Type::Kind::kTensor || t.dtype != DType::kUndefined || t.shape.has_value();
}

// Emits ONNX nodes into one GraphProto; used by the composite expansions.
class Emitter {
 public:
  Emitter(onnx::GraphProto* gp, std::function<std::string(const std::string&)> fresh, int64_t opset)
      : gp_(gp), fresh_(std::move(fresh)), opset_(opset) {}

  int64_t opset() const { return opset_; }
  std::string fresh(const std::string& hint) { return fresh_(hint); }

  onnx::NodeProto* node(const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs) {
    auto* n = gp_->add_node();
    n->set_op_type(op);
    for (auto& s : ins) n->add_input(s);
    for (auto& s : outs) n->add_output(s);
    return n;
  }
  // One-output node with a fresh output name; returns that name.
  std::string op(const std::string& op, std::vector<std::string> ins, const std::string& hint) {
    std::string out = fresh(hint);
    node(op, std::move(ins), {out});
    return out;
  }
  std::string constant(const Tensor& t, const std::string& hint) {
    std::string out = fresh(hint);
    auto* n = node("Constant", {}, {out});
    auto* a = n->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    tensor_to_proto(t, "", a->mutable_t());
    return out;
  }
  std::string scalar(DType dt, double v, const std::string& hint) {
    return constant(Tensor::scalar(dt, v), hint);
  }
  std::string ints(const std::vector<int64_t>& v, const std::string& hint) {
    Tensor t(DType::kInt64, {static_cast<int64_t>(v.size())});
    for (size_t i = 0; i < v.size(); ++i) t.data<int64_t>()[i] = v[i];
    return constant(t, hint);
  }

  static void set_int(onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void set_float(onnx::NodeProto* n, const std::string& name, float v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void set_ints(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }

 private:
  onnx::GraphProto* gp_;
  std::function<std::string(const std::string&)> fresh_;
  int64_t opset_;
};

// A composite node's operands by exported name (empty = omitted), and its values for types.
struct CompositeCall {
  const Node& node;
  std::vector<std::string> ins, outs;
  DType dtype(size_t input) const {
    const Value* v = input < node.inputs.size() ? node.inputs[input] : nullptr;
    DType dt = v && v->type.kind == Type::Kind::kTensor ? v->type.dtype : DType::kUndefined;
    return dt == DType::kUndefined ? DType::kFloat32 : dt;
  }
  int rank(size_t input) const {
    const Value* v = input < node.inputs.size() ? node.inputs[input] : nullptr;
    return v && v->type.kind == Type::Kind::kTensor && v->type.shape ? static_cast<int>(v->type.shape->rank()) : -1;
  }
  const Attribute* attr(const std::string& k) const { return node.attr(k); }
  int64_t attr_int(const std::string& k, int64_t d) const {
    const Attribute* a = attr(k);
    return a && a->kind == Attribute::Kind::kInt ? a->i : d;
  }
  float attr_float(const std::string& k, float d) const {
    const Attribute* a = attr(k);
    return a && a->kind == Attribute::Kind::kFloat ? a->f : d;
  }
  std::string attr_string(const std::string& k, const std::string& d) const {
    const Attribute* a = attr(k);
    return a && a->kind == Attribute::Kind::kString ? a->s : d;
  }
  std::string out(size_t i) const { return i < outs.size() ? outs[i] : ""; }
  std::string in(size_t i) const { return i < ins.size() ? ins[i] : ""; }
  [[noreturn]] void fail(const std::string& msg) const {
    ErrorLocation loc;
    loc.node = node.display_name();
    loc.op = node.qualified_op();
    throw Error(ErrorKind::kUnsupported, "cannot export: " + msg, loc);
  }
};

// Writes the composite as standard ONNX nodes (its outputs keep their names).
using Expansion = void (*)(const CompositeCall& c, Emitter& e);

// Copies the composite's attributes (minus kiln.*) onto a standard node of the same name.
void copy_plain_attrs(const CompositeCall& c, onnx::NodeProto* n, const std::set<std::string>& keep);

// Gelu: standard op from opset 20; else 0.5*x*(1+erf(x/sqrt2)) or the tanh form.
void expand_gelu(const CompositeCall& c, Emitter& e) {
  const std::string approx = c.attr_string("approximate", "none");
  if (e.opset() >= 20) {
    auto* n = e.node("Gelu", {c.in(0)}, {c.out(0)});
    if (approx != "none") {
      auto* a = n->add_attribute();
      a->set_name("approximate");
      a->set_type(onnx::AttributeProto::STRING);
      a->set_s(approx);
    }
    return;
  }
  const DType dt = c.dtype(0);
  const std::string x = c.in(0);
  std::string inner;
  if (approx == "tanh") {
    std::string x3 = e.op("Mul", {x, e.op("Mul", {x, x}, "gelu_x2")}, "gelu_x3");
    std::string t = e.op("Add", {x, e.op("Mul", {x3, e.scalar(dt, 0.044715, "gelu_c")}, "gelu_cx3")}, "gelu_sum");
    t = e.op("Mul", {t, e.scalar(dt, std::sqrt(2.0 / std::numbers::pi), "gelu_k")}, "gelu_scaled");
    inner = e.op("Tanh", {t}, "gelu_tanh");
  } else if (approx == "none") {
    inner = e.op("Erf", {e.op("Div", {x, e.scalar(dt, std::sqrt(2.0), "gelu_sqrt2")}, "gelu_xs")}, "gelu_erf");
  } else {
    c.fail("Gelu approximate='" + approx + "'");
  }
  std::string one_plus = e.op("Add", {inner, e.scalar(dt, 1.0, "gelu_one")}, "gelu_1p");
  std::string half_x = e.op("Mul", {x, e.scalar(dt, 0.5, "gelu_half")}, "gelu_hx");
  e.node("Mul", {half_x, one_plus}, {c.out(0)});
}

// Silu (no ONNX op): x * Sigmoid(x).
void expand_silu(const CompositeCall& c, Emitter& e) {
  e.node("Mul", {c.in(0), e.op("Sigmoid", {c.in(0)}, "silu_sig")}, {c.out(0)});
}

// HardSwish: standard op from opset 14; else x * HardSigmoid(x, 1/6, 0.5).
void expand_hardswish(const CompositeCall& c, Emitter& e) {
  if (e.opset() >= 14) {
    e.node("HardSwish", {c.in(0)}, {c.out(0)});
    return;
  }
  std::string hs = e.fresh("hswish_hsig");
  auto* n = e.node("HardSigmoid", {c.in(0)}, {hs});
  Emitter::set_float(n, "alpha", 1.0f / 6.0f);
  Emitter::set_float(n, "beta", 0.5f);
  e.node("Mul", {c.in(0), hs}, {c.out(0)});
}

// LayerNorm(X, Scale?, B?) {axis=-1, epsilon=1e-5}: ONNX LayerNormalization from opset 17 (when
// it has a scale, which ONNX requires); else mean and variance over axes [axis, rank) with
// ReduceMean (axes as an attribute before opset 18, as an input from 18).
void expand_layer_norm(const CompositeCall& c, Emitter& e) {
  if (e.opset() >= 17 && !c.in(1).empty()) {
    std::vector<std::string> ins = c.ins;
    while (!ins.empty() && ins.back().empty()) ins.pop_back();
    auto* n = e.node("LayerNormalization", ins, {c.out(0)});
    copy_plain_attrs(c, n, {"axis", "epsilon"});
    return;
  }
  const int64_t axis = c.attr_int("axis", -1);
  const float eps = c.attr_float("epsilon", 1e-5f);
  const int rank = c.rank(0);
  std::vector<int64_t> axes;
  if (axis < 0) {
    if (rank < 0 && e.opset() < 11) c.fail("LayerNorm over an input of unknown rank before opset 11");
    for (int64_t a = axis; a < 0; ++a) axes.push_back(e.opset() < 11 ? rank + a : a);
  } else {
    if (rank < 0) c.fail("LayerNorm with a positive axis over an input of unknown rank");
    for (int64_t a = axis; a < rank; ++a) axes.push_back(a);
  }
  const DType dt = c.dtype(0);
  const std::string x = c.in(0);
  std::string axes_input = e.opset() >= 18 ? e.ints(axes, "ln_axes") : "";
  auto reduce_mean = [&](const std::string& in, const std::string& hint) {
    std::string o = e.fresh(hint);
    auto* n = e.node("ReduceMean", axes_input.empty() ? std::vector<std::string>{in} : std::vector<std::string>{in, axes_input}, {o});
    if (axes_input.empty()) Emitter::set_ints(n, "axes", axes);
    Emitter::set_int(n, "keepdims", 1);
    return o;
  };
  std::string mean = reduce_mean(x, "ln_mean");
  std::string d = e.op("Sub", {x, mean}, "ln_centered");
  std::string var = reduce_mean(e.op("Mul", {d, d}, "ln_sq"), "ln_var");
  std::string stddev = e.op("Sqrt", {e.op("Add", {var, e.scalar(dt, eps, "ln_eps")}, "ln_var_eps")}, "ln_std");
  const bool has_scale = !c.in(1).empty(), has_bias = !c.in(2).empty();
  if (!has_scale && !has_bias) {
    e.node("Div", {d, stddev}, {c.out(0)});
    return;
  }
  std::string y = e.op("Div", {d, stddev}, "ln_normed");
  if (has_scale) {
    if (!has_bias) {
      e.node("Mul", {y, c.in(1)}, {c.out(0)});
      return;
    }
    y = e.op("Mul", {y, c.in(1)}, "ln_scaled");
  }
  e.node("Add", {y, c.in(2)}, {c.out(0)});
}

// Attention(Q, K, V, mask?) {scale=1, has_mask=0}: softmax(Q K^T * scale + mask) V, K^T over its
// last two axes (leading dims broadcast as in MatMul, the additive mask as in Add).
void expand_attention(const CompositeCall& c, Emitter& e) {
  const int krank = c.rank(1);
  if (krank < 2) c.fail("Attention whose K has unknown rank or rank < 2");
  const DType dt = c.dtype(0);
  std::vector<int64_t> perm;
  for (int i = 0; i < krank - 2; ++i) perm.push_back(i);
  perm.push_back(krank - 1);
  perm.push_back(krank - 2);
  std::string kt = e.fresh("attn_kt");
  Emitter::set_ints(e.node("Transpose", {c.in(1)}, {kt}), "perm", perm);
  std::string scores = e.op("MatMul", {c.in(0), kt}, "attn_scores");
  const float scale = c.attr_float("scale", 1.f);
  if (scale != 1.f) scores = e.op("Mul", {scores, e.scalar(dt, scale, "attn_scale")}, "attn_scaled");
  const bool masked = c.attr_int("has_mask", 0) != 0 && !c.in(3).empty();
  if (masked) scores = e.op("Add", {scores, c.in(3)}, "attn_masked");
  int srank = std::max(c.rank(0), krank);
  if (masked) srank = c.rank(3) < 0 ? -1 : std::max(srank, c.rank(3));
  if (c.rank(0) < 0) srank = -1;
  // Softmax before opset 13 flattens at `axis`; at the last axis that is the same softmax.
  if (e.opset() < 13 && srank < 0) c.fail("Attention with scores of unknown rank before opset 13");
  std::string probs = e.fresh("attn_probs");
  Emitter::set_int(e.node("Softmax", {scores}, {probs}), "axis", e.opset() >= 13 ? -1 : srank - 1);
  e.node("MatMul", {probs, c.in(2)}, {c.out(0)});
}

// NhwcConv (channels-last Conv, made by the assign-layouts pass): Conv between two Transposes.
void expand_nhwc_conv(const CompositeCall& c, Emitter& e) {
  std::string x = e.fresh("nhwc_conv_in");
  Emitter::set_ints(e.node("Transpose", {c.in(0)}, {x}), "perm", {0, 3, 1, 2});
  std::vector<std::string> ins = {x, c.in(1)};
  if (!c.in(2).empty()) ins.push_back(c.in(2));
  std::string y = e.fresh("nhwc_conv_out");
  copy_plain_attrs(c, e.node("Conv", ins, {y}), {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"});
  Emitter::set_ints(e.node("Transpose", {y}, {c.out(0)}), "perm", {0, 2, 3, 1});
}

// Composite op name (domain "kiln") -> expansion.
const std::map<std::string, Expansion>& composite_table() {
  static const std::map<std::string, Expansion> table = {
      {"Gelu", expand_gelu},
      {"Silu", expand_silu},
      {"HardSwish", expand_hardswish},
      {"LayerNormalization", expand_layer_norm},
      {"LayerNorm", expand_layer_norm},
      {"Attention", expand_attention},
      {"NhwcConv", expand_nhwc_conv},
  };
  return table;
}

void attribute_to_proto(const std::string& name, const Attribute& a, onnx::AttributeProto* p,
                        const std::function<void(const Graph&, onnx::GraphProto*)>& graph_fn) {
  using K = onnx::AttributeProto;
  p->set_name(name);
  switch (a.kind) {
    case Attribute::Kind::kInt: p->set_type(K::INT); p->set_i(a.i); break;
    case Attribute::Kind::kFloat: p->set_type(K::FLOAT); p->set_f(a.f); break;
    case Attribute::Kind::kString: p->set_type(K::STRING); p->set_s(a.s); break;
    case Attribute::Kind::kTensor: p->set_type(K::TENSOR); tensor_to_proto(a.t, "", p->mutable_t()); break;
    case Attribute::Kind::kGraph: p->set_type(K::GRAPH); graph_fn(*a.g, p->mutable_g()); break;
    case Attribute::Kind::kInts:
      p->set_type(K::INTS);
      for (int64_t v : a.ints) p->add_ints(v);
      break;
    case Attribute::Kind::kFloats:
      p->set_type(K::FLOATS);
      for (float v : a.floats) p->add_floats(v);
      break;
    case Attribute::Kind::kStrings:
      p->set_type(K::STRINGS);
      for (const auto& v : a.strings) p->add_strings(v);
      break;
    case Attribute::Kind::kTensors:
      p->set_type(K::TENSORS);
      for (const auto& t : a.tensors) tensor_to_proto(t, "", p->add_tensors());
      break;
    case Attribute::Kind::kGraphs:
      p->set_type(K::GRAPHS);
      for (const auto& g : a.graphs) graph_fn(*g, p->add_graphs());
      break;
    case Attribute::Kind::kType: p->set_type(K::TYPE_PROTO); type_to_proto(a.tp, p->mutable_tp()); break;
  }
}

bool is_kiln_annotation(const std::string& name) { return name.rfind("kiln.", 0) == 0; }

void copy_plain_attrs(const CompositeCall& c, onnx::NodeProto* n, const std::set<std::string>& keep) {
  for (const auto& [k, a] : c.node.attrs)
    if (!is_kiln_annotation(k) && keep.count(k))
      attribute_to_proto(k, a, n->add_attribute(), [](const Graph&, onnx::GraphProto*) {});
}

class Exporter {
 public:
  explicit Exporter(const Model& m) : m_(m) {}

  onnx::ModelProto run() {
    onnx::ModelProto p;
    p.set_ir_version(m_.ir_version);
    p.set_producer_name("kiln");
    p.set_producer_version(kProducerVersion);
    for (const auto& [k, v] : m_.metadata) {
      auto* kv = p.add_metadata_props();
      kv->set_key(k);
      kv->set_value(v);
    }
    default_opset_ = m_.opset("");
    for (const auto& [domain, version] : m_.opsets) {
      if (domain == kKilnDomain) continue;
      auto* os = p.add_opset_import();
      os->set_domain(domain);
      os->set_version(version);
    }
    if (!m_.graph) throw Error(ErrorKind::kInvalidModel, "cannot export a model without a graph");
    collect_names(*m_.graph);
    std::set<std::string> scope;
    assign_names(*m_.graph, scope);
    export_graph(*m_.graph, p.mutable_graph(), /*top=*/true);
    return p;
  }

 private:
  void collect_names(const Graph& g) {
    for (const auto& v : g.values()) used_.insert(v->name);
    for (const auto& n : g.nodes)
      for (const auto& [k, a] : n->attrs) {
        if (a.g) collect_names(*a.g);
        for (const auto& sg : a.graphs) collect_names(*sg);
      }
  }

  std::string fresh(const std::string& hint) {
    std::string base = hint.empty() ? "kiln_v" : hint;
    for (;;) {
      std::string cand = base + "__" + std::to_string(counter_++);
      if (used_.insert(cand).second) return cand;
    }
  }

  // Names every value defined in `g` (inputs, constants, node outputs): its own name unless it is
  // empty or already taken in the enclosing scopes or by another value of this graph.
  void assign_names(const Graph& g, std::set<std::string>& scope) {
    std::vector<std::string> added;
    auto define = [&](const Value* v) {
      if (!v || names_.count(v)) return;
      std::string name = v->name;
      if (name.empty() || scope.count(name)) name = fresh(name.empty() ? "kiln_v" : name);
      names_[v] = name;
      scope.insert(name);
      added.push_back(name);
    };
    for (const Value* v : g.inputs) define(v);
    for (const Value* v : g.constants) define(v);
    for (const auto& n : g.nodes)
      for (const Value* v : n->outputs) define(v);
    for (const auto& n : g.nodes)
      for (const auto& [k, a] : n->attrs) {
        if (a.g) assign_names(*a.g, scope);
        for (const auto& sg : a.graphs) assign_names(*sg, scope);
      }
    for (const auto& s : added) scope.erase(s);
  }

  std::string name_of(const Value* v) {
    if (!v) return "";
    auto it = names_.find(v);
    if (it != names_.end()) return it->second;
    // A value no graph defines (should not happen in a verified graph): keep its name.
    return names_[v] = v->name.empty() ? fresh("kiln_undef") : v->name;
  }

  void value_info(const Value* v, onnx::ValueInfoProto* vi) {
    vi->set_name(name_of(v));
    if (type_is_known(v->type)) type_to_proto(v->type, vi->mutable_type());
  }

  void constant_node(const Value* v, onnx::GraphProto* gp) {
    auto* n = gp->add_node();
    n->set_op_type("Constant");
    n->add_output(name_of(v));
    auto* a = n->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    tensor_to_proto(v->initializer, "", a->mutable_t());
  }

  void export_graph(const Graph& g, onnx::GraphProto* gp, bool top) {
    gp->set_name(g.name.empty() ? "main" : g.name);
    std::set<const Value*> io;
    for (const Value* v : g.inputs) {
      value_info(v, gp->add_input());
      if (v->initializer.defined()) tensor_to_proto(v->initializer, name_of(v), gp->add_initializer());
    }
    // Constants: initializers in the main graph (IR >= 4 allows initializers that are not
    // inputs); Constant nodes in subgraphs and in older IR versions.
    const bool as_initializers = top && m_.ir_version >= 4;
    for (const Value* v : g.constants) {
      if (as_initializers) tensor_to_proto(v->initializer, name_of(v), gp->add_initializer());
      else constant_node(v, gp);
    }
    for (const Value* v : g.outputs) {
      value_info(v, gp->add_output());
      io.insert(v);
    }
    for (const auto& n : g.nodes) export_node(*n, gp);
    for (const auto& n : g.nodes)
      for (const Value* v : n->outputs)
        if (v && !io.count(v) && type_is_known(v->type)) value_info(v, gp->add_value_info());
  }

  void export_node(const Node& n, onnx::GraphProto* gp) {
    std::vector<std::string> ins, outs;
    for (const Value* v : n.inputs) ins.push_back(name_of(v));
    for (const Value* v : n.outputs) outs.push_back(name_of(v));
    if (n.domain == kKilnDomain) {
      auto it = composite_table().find(n.op_type);
      if (it == composite_table().end()) {
        ErrorLocation loc;
        loc.node = n.display_name();
        loc.op = n.qualified_op();
        throw Error(ErrorKind::kUnsupported,
                    "cannot export kiln-internal op '" + n.qualified_op() + "': it has no ONNX form", loc);
      }
      Emitter e(gp, [this](const std::string& h) { return fresh(h); }, default_opset_);
      CompositeCall call{n, ins, outs};
      const int first = gp->node_size();
      it->second(call, e);
      // Name the emitted nodes after the composite so that they stay traceable.
      for (int i = first; i < gp->node_size(); ++i)
        if (!n.name.empty())
          gp->mutable_node(i)->set_name(gp->node_size() - first == 1 ? n.name : n.name + "/" + std::to_string(i - first));
      return;
    }
    auto* np = gp->add_node();
    np->set_op_type(n.op_type);
    if (!n.domain.empty()) np->set_domain(n.domain);
    if (!n.name.empty()) np->set_name(n.name);
    for (auto& s : ins) np->add_input(s);
    for (auto& s : outs) np->add_output(s);
    for (const auto& [k, a] : n.attrs) {
      if (is_kiln_annotation(k)) continue;
      attribute_to_proto(k, a, np->add_attribute(),
                         [this](const Graph& sg, onnx::GraphProto* sgp) { export_graph(sg, sgp, false); });
    }
  }

  const Model& m_;
  int64_t default_opset_ = 0;
  std::set<std::string> used_;
  std::map<const Value*, std::string> names_;
  int64_t counter_ = 0;
};

size_t initializer_bytes(const onnx::GraphProto& g) {
  size_t total = 0;
  for (const auto& t : g.initializer()) total += t.raw_data().size();
  return total;
}

// Moves large initializers of the main graph into `data_path` (file name `location`).
void externalize(onnx::ModelProto& p, const std::string& data_path, const std::string& location) {
  std::ofstream out(data_path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(ErrorKind::kUsage, "cannot write '" + data_path + "'");
  uint64_t offset = 0;
  for (auto& t : *p.mutable_graph()->mutable_initializer()) {
    if (!t.has_raw_data() || t.raw_data().size() < kExternalMinBytes) continue;
    const uint64_t pad = (kExternalAlign - offset % kExternalAlign) % kExternalAlign;
    if (pad) {
      std::string zeros(pad, '\0');
      out.write(zeros.data(), static_cast<std::streamsize>(pad));
      offset += pad;
    }
    const std::string& raw = t.raw_data();
    out.write(raw.data(), static_cast<std::streamsize>(raw.size()));
    auto add = [&](const char* k, const std::string& v) {
      auto* e = t.add_external_data();
      e->set_key(k);
      e->set_value(v);
    };
    add("location", location);
    add("offset", std::to_string(offset));
    add("length", std::to_string(raw.size()));
    offset += raw.size();
    t.clear_raw_data();
    t.set_data_location(onnx::TensorProto::EXTERNAL);
  }
  if (!out) throw Error(ErrorKind::kUsage, "failed writing '" + data_path + "'");
}

std::string serialize(const onnx::ModelProto& p) {
  if (p.ByteSizeLong() > static_cast<size_t>(INT32_MAX))
    throw Error(ErrorKind::kUnsupported,
                "the model is over 2 GB; save it to a file so that weights go to external data");
  std::string bytes;
  if (!p.SerializeToString(&bytes)) throw Error(ErrorKind::kInternal, "protobuf serialization failed");
  return bytes;
}

}  // namespace

std::string serialize_onnx_model(const Model& m) {
  return serialize(Exporter(m).run());
}

void save_onnx_model(const Model& m, const std::string& path, const ExportOptions& opts) {
  onnx::ModelProto p = Exporter(m).run();
  namespace fs = std::filesystem;
  const std::string data_path = path + ".data";
  if (initializer_bytes(p.graph()) > opts.external_data_threshold)
    externalize(p, data_path, fs::path(data_path).filename().string());
  std::string bytes = serialize(p);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(ErrorKind::kUsage, "cannot write '" + path + "'");
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw Error(ErrorKind::kUsage, "failed writing '" + path + "'");
}

}  // namespace kiln
