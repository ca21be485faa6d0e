// shape-inference: fills the types of node outputs from each op's OpSchema::infer, in
// topological order, recursively into subgraphs. Loop and Scan (opset >= 9) body inputs get the
// types derivable from the node's inputs (iteration counter, condition, dtype of loop-carried
// values, scan slices); If branches need none. Symbolic dims flow through as the infer
// functions produce them.
// Merging: a declared type is never replaced by a less precise one. Per dim, a known size wins
// over a symbol, a symbol over an unknown; a declared symbol stays when the inference gives
// another symbol. Declared and inferred tensor types that genuinely disagree (different dtypes,
// ranks or static sizes) are a kInvalidModel error naming the node and op; a different kind
// (tensor/sequence/optional) keeps the declared type.
// Requires: a verified model. Guarantees: only Value::type of node outputs and of Loop/Scan body
// inputs change, each becoming equal or more precise; the graph structure is untouched. Ops
// without `infer`, or whose inference fails (the kernel will report it at run time), keep their
// declared output types.
// Tests: tests/pass/golden/shape-inference/*.kir
#include "pass/shape_inference.h"

#include <algorithm>

#include "ops/registry.h"
#include "ops/tensor_util.h"
#include "pass/passes.h"

namespace kiln {
namespace {

bool is_unknown(const Type& t) {
  return t.kind == Type::Kind::kTensor && t.dtype == DType::kUndefined && !t.shape;
}

// Merges one dim; false on a genuine conflict (two different static sizes).
bool merge_dim(const Dim& declared, const Dim& inferred, Dim& out) {
  if (declared.known()) {
    out = declared;
    return !inferred.known() || inferred.value == declared.value;
  }
  if (inferred.known() || declared.symbol.empty()) out = inferred;
  else out = declared;
  return true;
}

// The more precise combination of a declared and an inferred type; false on a genuine conflict
// (then `out` holds the declared type).
bool merge_type(const Type& declared, const Type& inferred, Type& out) {
  out = declared;
  if (is_unknown(inferred)) return true;
  if (is_unknown(declared)) {
    out = inferred;
    return true;
  }
  // Different kinds (e.g. a Loop carrying an optional whose body returns the sequence itself):
  // the declared kind stays; only tensor dtype/shape disagreements are conflicts.
  if (declared.kind != inferred.kind) return true;
  if (declared.kind != Type::Kind::kTensor) {
    if (!declared.elem || !inferred.elem) {
      if (!declared.elem) out = inferred;
      return true;
    }
    Type elem;
    if (!merge_type(*declared.elem, *inferred.elem, elem)) {
      out = declared;
      return false;
    }
    out = Type::wrap(declared.kind, elem);
    return true;
  }
  if (declared.dtype != DType::kUndefined && inferred.dtype != DType::kUndefined &&
      declared.dtype != inferred.dtype)
    return false;
  if (declared.dtype == DType::kUndefined) out.dtype = inferred.dtype;
  if (!inferred.shape) return true;
  if (!declared.shape) {
    out.shape = inferred.shape;
    return true;
  }
  if (declared.shape->rank() != inferred.shape->rank()) return false;
  for (size_t i = 0; i < declared.shape->rank(); ++i)
    if (!merge_dim(declared.shape->dims[i], inferred.shape->dims[i], out.shape->dims[i])) {
      out = declared;
      return false;
    }
  return true;
}

// Refines `v`'s type with `derived` where that is more precise; conflicts keep the declared type.
bool refine_quietly(Value* v, const Type& derived) {
  Type merged;
  if (!merge_type(v->type, derived, merged) || merged == v->type) return false;
  v->type = merged;
  return true;
}

// Drops what a loop iteration may change: the shape of tensors (also inside sequences).
Type dtype_only(const Type& t) {
  if (t.kind == Type::Kind::kTensor) return Type::tensor(t.dtype);
  if (!t.elem) return t;
  return Type::wrap(t.kind, dtype_only(*t.elem));
}

// S2: types of Loop/Scan body inputs that the node's inputs determine.
bool type_body_inputs(const Node& n, int64_t opset) {
  if (!n.domain.empty()) return false;
  bool changed = false;
  if (n.op_type == "Loop") {
    const Attribute* a = n.attr("body");
    if (!a || !a->g) return false;
    Graph& body = *a->g;
    for (size_t i = 0; i < body.inputs.size(); ++i) {
      Type t;
      if (i == 0) t = Type::tensor(DType::kInt64, Shape());
      else if (i == 1) t = Type::tensor(DType::kBool, Shape());
      else if (i < n.inputs.size() && n.inputs[i]) t = dtype_only(n.inputs[i]->type);
      else continue;
      changed |= refine_quietly(body.inputs[i], t);
    }
  } else if (n.op_type == "Scan" && opset >= 9) {
    const Attribute* a = n.attr("body");
    if (!a || !a->g) return false;
    Graph& body = *a->g;
    AttrReader at(n);
    int64_t n_scan = at.attr_int("num_scan_inputs", 0);
    int64_t n_state = static_cast<int64_t>(n.inputs.size()) - n_scan;
    std::vector<int64_t> axes = at.attr_ints("scan_input_axes");
    for (int64_t i = 0; i < static_cast<int64_t>(n.inputs.size()) &&
                        i < static_cast<int64_t>(body.inputs.size());
         ++i) {
      const Value* in = n.inputs[static_cast<size_t>(i)];
      if (!in) continue;
      Type t = dtype_only(in->type);
      if (i >= n_state && in->type.kind == Type::Kind::kTensor && in->type.shape) {
        const int64_t k = i - n_state;
        const int64_t rank = static_cast<int64_t>(in->type.shape->rank());
        int64_t axis = k < static_cast<int64_t>(axes.size()) ? axes[static_cast<size_t>(k)] : 0;
        if (axis < 0) axis += rank;
        if (axis < 0 || axis >= rank) continue;
        Shape s = *in->type.shape;
        s.dims.erase(s.dims.begin() + axis);
        t.shape = s;
      }
      changed |= refine_quietly(body.inputs[static_cast<size_t>(i)], t);
    }
  }
  return changed;
}

ErrorLocation where(const Node& n) {
  ErrorLocation loc;
  loc.node = n.display_name();
  loc.op = n.qualified_op();
  return loc;
}

}  // namespace

Tensor shape_op_value(const Node& n, int64_t opset, const std::vector<int64_t>& dims) {
  if (n.op_type == "Size") {
    int64_t numel = 1;
    for (int64_t d : dims) numel *= d;
    return Tensor::scalar(DType::kInt64, numel);
  }
  return shape_value(AttrReader(n), opset, dims);
}

bool infer_node_types(Node& n, const Model& m) {
  const int64_t opset = m.opset(n.domain);
  const OpSchema* s = OpRegistry::global().find(n.domain, n.op_type, opset);
  if (!s || !s->infer) return false;
  InferContext ctx(n, opset);
  try {
    s->infer(ctx);
  } catch (const std::exception&) {
    return false;  // a failure leaves the declared types (run time reports it)
  }
  bool changed = false;
  const auto& inferred = ctx.output_types();
  for (size_t i = 0; i < inferred.size() && i < n.outputs.size(); ++i) {
    Value* v = n.outputs[i];
    if (!v) continue;
    Type merged;
    if (!merge_type(v->type, inferred[i], merged))
      throw Error(ErrorKind::kInvalidModel,
                  "output '" + v->name + "' is declared " + to_string(v->type) + " but the op computes " +
                      to_string(inferred[i]),
                  where(n));
    if (!(merged == v->type)) {
      v->type = merged;
      changed = true;
    }
  }
  return changed;
}

namespace {

bool infer_graph(Graph& g, const Model& m) {
  bool changed = false;
  for (auto& np : g.nodes) {
    Node& n = *np;
    const int64_t opset = m.opset(n.domain);
    // S1: subgraphs first, so that If/Loop/Scan inference sees their output types.
    bool has_subgraph = false;
    for (auto& [k, a] : n.attrs) has_subgraph |= a.g || !a.graphs.empty();
    if (has_subgraph) {
      changed |= type_body_inputs(n, opset);
      for (auto& [k, a] : n.attrs) {
        if (a.g) changed |= infer_graph(*a.g, m);
        for (auto& sg : a.graphs) changed |= infer_graph(*sg, m);
      }
    }
    // S3: the op's own inference, merged into the declared types.
    changed |= infer_node_types(n, m);
  }
  return changed;
}

bool run(Model& m, PassContext&) { return infer_graph(*m.graph, m); }

}  // namespace

PassInfo shape_inference_pass() {
  return {"shape-inference", "fill node output types from each op's shape inference", run};
}

}  // namespace kiln
