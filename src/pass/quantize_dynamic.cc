// quantize_dynamic: the graph rewrite of `kiln quantize --dynamic` (pass/quantize_dynamic.h).
// One DynamicQuantizeLinear per activation, shared by the MatMuls that read it (attention's
// Q/K/V projections); the weight's scale (and a Gemm's alpha) folds into one Mul after the
// integer product.
// Tests: tests/pass/test_quantize_dynamic.cc (IR in, IR out).
#include "pass/quantize_dynamic.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include "core/error.h"
#include "ir/rewrite.h"
#include "ops/registry.h"
#include "pass/pass.h"

namespace kiln {
namespace {

struct Eligible {
  Value* activation = nullptr;
  Tensor weight;  // [K, N] float (a Gemm's transB undone)
  float alpha = 1;
  Value* bias = nullptr;  // Gemm's C (constant), scaled by beta
  float beta = 1;
};

bool float_tensor(const Value* v) {
  return v && v->type.kind == Type::Kind::kTensor && v->type.dtype == DType::kFloat32;
}

Tensor transposed(const Tensor& w) {
  const int64_t r = w.dim(0), c = w.dim(1);
  Tensor t(DType::kFloat32, {c, r});
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) t.data<float>()[j * r + i] = w.data<float>()[i * c + j];
  return t;
}

// Why `n` stays float, or empty with `e` filled.
std::string eligible(const Node& n, Eligible& e) {
  if (n.inputs.size() < 2 || !float_tensor(n.inputs[0]) || n.inputs[0]->is_constant())
    return "its first input is not a float activation";
  const Value* b = n.inputs[1];
  if (!b->is_constant() || b->initializer.dtype() != DType::kFloat32 || b->initializer.rank() != 2)
    return "its weight is not a constant 2-D float tensor";
  e.activation = n.inputs[0];
  e.weight = b->initializer;
  if (n.op_type == "Gemm") {
    AttrReader at(n);
    if (at.attr_int("transA", 0)) return "transA=1";
    if (at.attr_int("transB", 0)) e.weight = transposed(e.weight);
    e.alpha = at.attr_float("alpha", 1.f);
    e.beta = at.attr_float("beta", 1.f);
    if (n.inputs.size() > 2 && n.inputs[2]) {
      if (!n.inputs[2]->is_constant() || n.inputs[2]->initializer.dtype() != DType::kFloat32)
        return "its bias is not a constant float tensor";
      e.bias = n.inputs[2];
    }
  }
  return "";
}

struct QuantizedActivation {
  Value *q, *scale, *zero_point;
};

QuantizedActivation quantize_activation(Graph& g, GraphEditor& ed, Value* a) {
  Type qt = a->type;
  qt.dtype = DType::kUInt8;
  Value* q = g.add_value(ed.unique_name(a->name + "_quantized"), qt);
  Value* s = g.add_value(ed.unique_name(a->name + "_scale"), Type::tensor(DType::kFloat32, Shape{}));
  Value* z = g.add_value(ed.unique_name(a->name + "_zero_point"), Type::tensor(DType::kUInt8, Shape{}));
  Node* n = g.add_node("DynamicQuantizeLinear", {a}, {q, s, z});
  n->name = q->name;
  return {q, s, z};
}

// Writes the integer path for `n` and reroutes its output to it.
void rewrite(GraphEditor& ed, Node& n, const Eligible& e, const QuantizedActivation& qa, const QdqOptions& opts) {
  const bool per_channel = opts.per_channel;
  const float qmax = static_cast<float>(opts.weight_max());
  const int64_t k = e.weight.dim(0), cols = e.weight.dim(1);
  std::vector<float> scale(per_channel ? cols : 1, 0.f);
  const float* w = e.weight.data<float>();
  for (int64_t i = 0; i < k * cols; ++i) {
    float& s = scale[per_channel ? i % cols : 0];
    s = std::max(s, std::fabs(w[i]));
  }
  for (float& s : scale) s = s > 0 ? s / qmax : 1.f;
  Tensor wq(DType::kInt8, {k, cols});
  for (int64_t i = 0; i < k * cols; ++i)
    wq.data<int8_t>()[i] =
        static_cast<int8_t>(std::clamp(std::nearbyint(w[i] / scale[per_channel ? i % cols : 0]), -qmax, qmax));
  Tensor st = per_channel ? Tensor(DType::kFloat32, {cols}) : Tensor::scalar(DType::kFloat32, scale[0] * e.alpha);
  for (int64_t c = 0; c < cols && per_channel; ++c) st.data<float>()[c] = scale[c] * e.alpha;
  Tensor zt = per_channel ? Tensor(DType::kInt8, {cols}) : Tensor::scalar(DType::kInt8, 0);
  const std::string base = n.inputs[1]->name;
  Value* wv = ed.add_constant(std::move(wq), base + "_quantized");
  Value* sv = ed.add_constant(std::move(st), base + "_scale");
  Value* zv = ed.add_constant(std::move(zt), base + "_zero_point");
  Value* out = n.outputs[0];
  Type it = out->type;
  it.dtype = DType::kInt32;
  Node* mm = ed.add_node("MatMulInteger", {qa.q, wv, qa.zero_point, zv}, it, out->name + "_MatMulInteger");
  Node* cast = ed.add_node("Cast", {mm->outputs[0]}, out->type, out->name + "_Cast");
  cast->attrs["to"] = Attribute::make_int(1);  // FLOAT
  Node* s = ed.add_node("Mul", {qa.scale, sv}, Type::tensor(DType::kFloat32, sv->type.shape), out->name + "_scale");
  Node* y = ed.add_node("Mul", {cast->outputs[0], s->outputs[0]}, out->type, out->name + "_Mul");
  for (Node* x : {mm, cast, s, y}) x->name = x->outputs[0]->name;
  Value* result = y->outputs[0];
  if (e.bias) {
    Tensor c = e.bias->initializer.clone();
    for (int64_t i = 0; i < c.numel(); ++i) c.data<float>()[i] *= e.beta;
    Value* cv = e.beta == 1.f ? e.bias : ed.add_constant(std::move(c), e.bias->name + "_beta");
    Node* add = ed.add_node("Add", {result, cv}, out->type, out->name + "_bias");
    add->name = add->outputs[0]->name;
    result = add->outputs[0];
  }
  ed.replace_all_uses(out, result);
}

}  // namespace

DynamicQuantResult quantize_dynamic(Model& m, const QdqOptions& opts) {
  const int64_t opset = m.opset("");
  if (opset < 11)
    throw Error(ErrorKind::kUnsupported, "quantize --dynamic: the model's opset " + std::to_string(opset) +
                                             " predates DynamicQuantizeLinear (opset 11); convert the model first "
                                             "(onnx.version_converter)");
  Graph& g = *m.graph;
  GraphEditor ed(g);
  DynamicQuantResult r;
  std::unordered_map<Value*, QuantizedActivation> activations;
  std::vector<Node*> nodes;
  for (auto& n : g.nodes) nodes.push_back(n.get());
  std::map<std::string, std::vector<std::string>> left_float;  // reason -> nodes
  for (Node* n : nodes) {
    if (!n->domain.empty() || (n->op_type != "MatMul" && n->op_type != "Gemm")) continue;
    if (opts.exclude.count(n->name) || opts.exclude.count(n->op_type)) continue;
    Eligible e;
    const std::string why = eligible(*n, e);
    if (!why.empty()) {
      left_float[why].push_back(n->display_name());
      continue;
    }
    auto it = activations.find(e.activation);
    if (it == activations.end()) it = activations.emplace(e.activation, quantize_activation(g, ed, e.activation)).first;
    rewrite(ed, *n, e, it->second, opts);
    ++r.quantized_nodes;
  }
  for (const auto& [why, names] : left_float)
    r.notes.push_back(std::to_string(names.size()) + " MatMul/Gemm node(s) left float, " + why + " (" + names[0] +
                      (names.size() > 1 ? ", ..." : "") + ")");
  ed.sort_topologically();
  PassContext ctx;
  find_pass("dce")->run(m, ctx);  // the float MatMuls and weights they held
  return r;
}

}  // namespace kiln
