// constant-folding: evaluates nodes whose inputs are all constants through their reference
// kernels (ops/evaluate.h, the interpreter's f16/bf16 handling included) and turns their
// outputs into constants of the same name; also folds Shape and Size of values whose type has
// a static shape, and Gather of a Shape's static dims (the 768 of [batch, seq, 768]), so that
// exported Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains become constants when
// shapes are static. Works in subgraphs too (outer constants count).
// Not folded: DequantizeLinear (a quantized model keeps its int8 weights through `kiln optimize`;
// fold-dequantize, in the engine's pipeline only, folds them), random ops (Random*, Bernoulli, Multinomial, Dropout with a training_mode input),
// nodes with subgraph attributes, graph inputs with defaults (they can be fed), results of more
// than PassContext::fold_max_elements elements, sequence/optional results, results that
// disagree with the declared output type, and nodes whose kernel fails (the failure is then
// reported at run time).
// Requires: a verified model; types from shape-inference help (static Shape/Size, size
// limits checked before evaluating). Guarantees: the graph computes the same values; folded
// nodes are removed, their inputs may become unused (dce drops them).
// fold-dequantize: DequantizeLinear of constants (a QDQ model's int8 weights and int32 biases)
// folded into float constants whatever their size, so that the compiled engine packs them as
// weights once instead of dequantizing them on every run.
// Tests: tests/pass/golden/constant-folding/*.kir, tests/pass/golden/fold-dequantize/*.kir
#include <algorithm>
#include <limits>
#include <unordered_set>

#include "ir/rewrite.h"
#include "ops/evaluate.h"
#include "ops/registry.h"
#include "ops/tensor_util.h"
#include "pass/passes.h"
#include "pass/shape_inference.h"

namespace kiln {
namespace {

// A computed tensor may replace a value of this declared type.
bool fits_declared(const Type& t, const Tensor& x) {
  if (t.kind != Type::Kind::kTensor) return false;
  if (t.dtype != DType::kUndefined && t.dtype != x.dtype()) return false;
  if (!t.shape) return true;
  if (t.shape->rank() != static_cast<size_t>(x.rank())) return false;
  for (size_t i = 0; i < t.shape->rank(); ++i) {
    const Dim& d = t.shape->dims[i];
    if (d.known() && d.value != x.dims()[i]) return false;
  }
  return true;
}

// S2: Shape/Size of a value whose type fixes its shape (not a subgraph input: those are bound
// per call). Returns an undefined tensor when not foldable.
Tensor fold_static_shape(const Node& n, int64_t opset) {
  if (!n.domain.empty() || (n.op_type != "Shape" && n.op_type != "Size") || n.inputs.size() != 1 ||
      !n.inputs[0])
    return {};
  const Value* x = n.inputs[0];
  if (x->is_graph_input && x->owner && x->owner->parent) return {};
  const Type& t = x->type;
  if (t.kind != Type::Kind::kTensor || !t.shape || !t.shape->is_static()) return {};
  return shape_op_value(n, opset, t.shape->sizes());
}

// S2b: Gather(Shape(x), constant indices) along axis 0 when x's type fixes the gathered dims
// (e.g. the hidden size of [batch, seq, 768]), even if other dims are symbolic.
Tensor fold_shape_gather(const Node& n, int64_t opset) {
  if (!n.domain.empty() || n.op_type != "Gather" || n.inputs.size() != 2 || !n.inputs[0] || !n.inputs[1])
    return {};
  if (AttrReader(n).attr_int("axis", 0) != 0) return {};
  const Node* shape = n.inputs[0]->producer;
  const Value* idx = n.inputs[1];
  if (!shape || !shape->domain.empty() || shape->op_type != "Shape" || shape->inputs.size() != 1 ||
      !shape->inputs[0] || !idx->is_constant() || !is_integer(idx->initializer.dtype()))
    return {};
  const Value* x = shape->inputs[0];
  if (x->is_graph_input && x->owner && x->owner->parent) return {};
  const Type& t = x->type;
  if (t.kind != Type::Kind::kTensor || !t.shape) return {};
  const int64_t rank = static_cast<int64_t>(t.shape->rank());
  auto [start, end] = shape_range(AttrReader(*shape), opset, rank);
  const int64_t len = end - start;
  const Tensor& ix = idx->initializer;
  Tensor y(DType::kInt64, ix.dims());
  for (int64_t i = 0; i < ix.numel(); ++i) {
    int64_t k = ix.get_int(i);
    if (k < 0) k += len;
    if (k < 0 || k >= len) return {};
    const Dim& d = t.shape->dims[static_cast<size_t>(start + k)];
    if (!d.known()) return {};
    y.data<int64_t>()[i] = d.value;
  }
  return y;
}

// S3: true when static inference already shows an output larger than the limit (so the kernel
// is not even run, e.g. a huge ConstantOfShape).
bool known_too_large(const Node& n, const OpSchema& s, int64_t opset, int64_t limit) {
  if (!s.infer) return false;
  InferContext ctx(n, opset);
  try {
    s.infer(ctx);
  } catch (const std::exception&) {
    return false;
  }
  for (const Type& t : ctx.output_types()) {
    if (t.kind != Type::Kind::kTensor || !t.shape || !t.shape->is_static()) continue;
    double numel = 1;
    for (const Dim& d : t.shape->dims) numel *= static_cast<double>(d.value);
    if (numel > static_cast<double>(limit)) return true;
  }
  return false;
}

// S4: evaluates a node with constant inputs; empty when it cannot or should not be folded.
std::vector<Tensor> evaluate_constant(const Node& n, const Model& m, int64_t limit) {
  if (OpRegistry::global().is_random(n) || n.has_subgraphs()) return {};
  for (const Value* v : n.inputs)
    if (v && !v->is_constant()) return {};
  const int64_t opset = m.opset(n.domain);
  const OpSchema* s = OpRegistry::global().find(n.domain, n.op_type, opset);
  if (!s || !s->kernel) return {};
  const int nin = static_cast<int>(n.inputs.size()), nout = static_cast<int>(n.outputs.size());
  if (nin < s->min_inputs || (s->max_inputs >= 0 && nin > s->max_inputs)) return {};
  if (nout < s->min_outputs || (s->max_outputs >= 0 && nout > s->max_outputs)) return {};
  if (known_too_large(n, *s, opset, limit)) return {};
  std::vector<RtValue> in_values;
  in_values.reserve(n.inputs.size());
  std::vector<const RtValue*> ins;
  for (const Value* v : n.inputs) {
    if (!v) {
      ins.push_back(nullptr);
      continue;
    }
    in_values.emplace_back(v->initializer);
    ins.push_back(&in_values.back());
  }
  std::vector<RtValue> outs;
  try {
    outs = evaluate_node(n, *s, opset, ins);
  } catch (const std::exception&) {
    return {};  // reported when the model runs
  }
  std::vector<Tensor> result(n.outputs.size());
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    if (!n.outputs[i]) continue;
    const RtValue& r = outs[i];
    if (!r.is_tensor() || r.optional || r.tensor.numel() > limit) return {};
    result[i] = r.tensor;
  }
  return result;
}

bool is_dequantize(const Node& n) { return n.domain.empty() && n.op_type == "DequantizeLinear"; }

// Which nodes a sweep folds: all but DequantizeLinear (constant-folding), or only those.
enum class Fold { kGeneral, kDequantize };

bool fold_graph(Graph& g, const Model& m, int64_t limit, Fold what) {
  bool changed = false;
  std::unordered_set<const Node*> folded;
  for (auto& np : g.nodes) {
    Node& n = *np;
    // S1: subgraphs see the outer values folded so far as constants.
    for (auto& [k, a] : n.attrs) {
      if (a.g) changed |= fold_graph(*a.g, m, limit, what);
      for (auto& sg : a.graphs) changed |= fold_graph(*sg, m, limit, what);
    }
    std::vector<Tensor> result;
    if (is_dequantize(n) == (what == Fold::kDequantize)) {
      Tensor shape = fold_static_shape(n, m.opset(n.domain));
      if (!shape.defined()) shape = fold_shape_gather(n, m.opset(""));
      if (shape.defined() && shape.numel() <= limit) result.push_back(shape);
      else result = evaluate_constant(n, m, limit);
    }
    bool fits = !result.empty();
    for (size_t i = 0; fits && i < n.outputs.size(); ++i)
      if (n.outputs[i] && !fits_declared(n.outputs[i]->type, result[i])) fits = false;
    if (!fits) {
      // Types downstream of folded values sharpen now, so later Shape nodes can fold this sweep.
      changed |= infer_node_types(n, m);
      continue;
    }
    // S5: the outputs become constants with their names; the node goes.
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      Value* v = n.outputs[i];
      if (!v) continue;
      const Tensor& t = result[i];
      v->initializer = t;
      v->type = Type::tensor(t.dtype(), Shape::of(t.dims()));
      g.constants.push_back(v);
    }
    folded.insert(&n);
  }
  if (!folded.empty()) {
    GraphEditor(g).remove_nodes_if([&](const Node& n) { return folded.count(&n) != 0; });
    changed = true;
  }
  return changed;
}

bool run(Model& m, PassContext& ctx) { return fold_graph(*m.graph, m, ctx.fold_max_elements, Fold::kGeneral); }

bool run_dequantize(Model& m, PassContext&) {
  return fold_graph(*m.graph, m, std::numeric_limits<int64_t>::max(), Fold::kDequantize);
}

}  // namespace

PassInfo constant_folding_pass() {
  return {"constant-folding", "evaluate nodes whose inputs are constants (and static Shape/Size)", run};
}

PassInfo fold_dequantize_pass() {
  return {"fold-dequantize", "fold DequantizeLinear of constant weights into float constants (engine only)",
          run_dequantize};
}

}  // namespace kiln
