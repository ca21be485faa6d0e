// simplify rules, shape family: the Shape -> Gather/Slice -> Unsqueeze/Squeeze -> Concat chains
// of exported models, evaluated over static types.
//   A Shape/Gather/Slice/Unsqueeze/Squeeze/Concat result whose elements are all statically known
//   (dims known in the types, or constants) -> an int64 constant;
//   Reshape(x, shape) whose shape elements are constants or dims of x at the same position
//   (the same value, or the same named symbol) -> Reshape(x, constant) with 0 ("copy dim") at
//   those positions (allowzero = 0 only).
// Constant folding handles chains whose inputs are all constants; these rules handle Shape of a
// value with a partially static shape (e.g. a symbolic batch dim).
// Part of the simplify pass (algebraic_simplify.cc); tests: tests/pass/golden/simplify/.
#include <algorithm>

#include "ops/registry.h"
#include "pass/simplify.h"

namespace kiln::simplify {
namespace {

constexpr size_t kMaxElems = 64;
constexpr int kMaxDepth = 16;

// One element of an int64 shape-like tensor: a known value, or dim `dim` of value `src`.
struct Elem {
  bool known = false;
  int64_t value = 0;
  const Value* src = nullptr;
  size_t dim = 0;
};

struct ShapeVec {
  std::vector<Elem> elems;
  bool scalar = false;  // 0-D (one element) rather than 1-D
};

bool is_axis0(const std::vector<int64_t>& axes) {
  return axes.size() == 1 && (axes[0] == 0 || axes[0] == -1);
}

std::optional<ShapeVec> elems_of(const Value* v, int64_t opset, int depth);

std::optional<ShapeVec> vector_input(const Node& n, int i, int64_t opset, int depth) {
  if (static_cast<int>(n.inputs.size()) <= i || !n.inputs[i]) return std::nullopt;
  auto sv = elems_of(n.inputs[i], opset, depth + 1);
  if (!sv || sv->scalar) return std::nullopt;
  return sv;
}

std::optional<ShapeVec> shape_of(const Node& n, int64_t opset) {
  const Shape* xs = static_shape(n.inputs[0]);
  if (!xs) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(xs->rank());
  int64_t start = opset >= 15 ? int_attr(n, "start", 0) : 0;
  int64_t end = opset >= 15 ? int_attr(n, "end", rank) : rank;
  auto clamp = [&](int64_t a) { return std::clamp<int64_t>(a < 0 ? a + rank : a, 0, rank); };
  start = clamp(start);
  end = std::max(start, clamp(end));
  ShapeVec out;
  for (int64_t i = start; i < end; ++i) {
    const Dim& d = xs->dims[static_cast<size_t>(i)];
    Elem e;
    if (d.known()) {
      e.known = true;
      e.value = d.value;
    } else {
      e.src = n.inputs[0];
      e.dim = static_cast<size_t>(i);
    }
    out.elems.push_back(e);
  }
  return out;
}

std::optional<ShapeVec> gather_of(const Node& n, int64_t opset, int depth) {
  auto data = vector_input(n, 0, opset, depth);
  const Tensor* idx = constant_value(n.inputs[1]);
  auto indices = constant_ints(n.inputs[1]);
  const int64_t axis = int_attr(n, "axis", 0);
  if (!data || !indices || (axis != 0 && axis != -1)) return std::nullopt;
  const int64_t len = static_cast<int64_t>(data->elems.size());
  ShapeVec out;
  out.scalar = idx->rank() == 0;
  for (int64_t i : *indices) {
    if (i < 0) i += len;
    if (i < 0 || i >= len) return std::nullopt;
    out.elems.push_back(data->elems[static_cast<size_t>(i)]);
  }
  return out;
}

std::optional<ShapeVec> slice_of(const Node& n, int64_t opset, int depth) {
  auto data = vector_input(n, 0, opset, depth);
  if (!data) return std::nullopt;
  std::vector<int64_t> starts, ends, axes, steps;
  if (int_list_arg(n, opset, 1, "starts", 10, starts) != Arg::kStatic ||
      int_list_arg(n, opset, 2, "ends", 10, ends) != Arg::kStatic || starts.size() != 1 ||
      ends.size() != 1)
    return std::nullopt;
  Arg a = int_list_arg(n, opset, 3, "axes", 10, axes);
  Arg s = opset >= 10 ? int_list_arg(n, opset, 4, "steps", 10, steps) : Arg::kAbsent;
  if (a == Arg::kDynamic || (a == Arg::kStatic && !is_axis0(axes))) return std::nullopt;
  if (s == Arg::kDynamic || (s == Arg::kStatic && (steps.size() != 1 || steps[0] != 1)))
    return std::nullopt;
  const int64_t len = static_cast<int64_t>(data->elems.size());
  auto clamp = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + len : v, 0, len); };
  const int64_t b = clamp(starts[0]), e = clamp(ends[0]);
  ShapeVec out;
  for (int64_t i = b; i < e; ++i) out.elems.push_back(data->elems[static_cast<size_t>(i)]);
  return out;
}

std::optional<ShapeVec> elems_of(const Value* v, int64_t opset, int depth) {
  if (!v || depth > kMaxDepth) return std::nullopt;
  if (const Tensor* t = constant_value(v)) {
    if (t->dtype() != DType::kInt64 || t->rank() > 1 || t->numel() > static_cast<int64_t>(kMaxElems))
      return std::nullopt;
    ShapeVec out;
    out.scalar = t->rank() == 0;
    for (int64_t x : t->to_int64_vector()) out.elems.push_back({true, x, nullptr, 0});
    return out;
  }
  const Node* n = v->producer;
  if (!n || !canonical_domain(n->domain).empty() || n->outputs.size() != 1) return std::nullopt;
  const std::string& op = n->op_type;
  std::optional<ShapeVec> out;
  std::vector<int64_t> axes;
  if (op == "Shape") {
    out = shape_of(*n, opset);
  } else if (op == "Identity") {
    out = elems_of(n->inputs[0], opset, depth + 1);
  } else if (op == "Gather") {
    out = gather_of(*n, opset, depth);
  } else if (op == "Slice") {
    out = slice_of(*n, opset, depth);
  } else if (op == "Unsqueeze") {
    out = elems_of(n->inputs[0], opset, depth + 1);
    if (!out || !out->scalar || int_list_arg(*n, opset, 1, "axes", 13, axes) != Arg::kStatic ||
        !is_axis0(axes))
      return std::nullopt;
    out->scalar = false;
  } else if (op == "Squeeze") {
    out = vector_input(*n, 0, opset, depth);
    Arg a = int_list_arg(*n, opset, 1, "axes", 13, axes);
    if (!out || out->elems.size() != 1 || a == Arg::kDynamic || (a == Arg::kStatic && !is_axis0(axes)))
      return std::nullopt;
    out->scalar = true;
  } else if (op == "Concat") {
    const int64_t axis = int_attr(*n, "axis", 1);
    if (axis != 0 && axis != -1) return std::nullopt;
    out = ShapeVec{};
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      auto part = vector_input(*n, static_cast<int>(i), opset, depth);
      if (!part) return std::nullopt;
      out->elems.insert(out->elems.end(), part->elems.begin(), part->elems.end());
    }
  }
  if (out && out->elems.size() > kMaxElems) return std::nullopt;
  return out;
}

// Shape-like results that are fully known become constants.
bool fold_static_dims(Node& n, Rewriter& rw) {
  Value* y = n.outputs[0];
  if (n.outputs.size() != 1 || !y || is_graph_output(rw.graph(), y)) return false;
  auto sv = elems_of(y, rw.opset(), 0);
  if (!sv || (sv->scalar && sv->elems.size() != 1)) return false;
  for (const Elem& e : sv->elems)
    if (!e.known) return false;
  std::vector<int64_t> dims;
  if (!sv->scalar) dims.push_back(static_cast<int64_t>(sv->elems.size()));
  Tensor t(DType::kInt64, dims);
  for (size_t i = 0; i < sv->elems.size(); ++i) t.data<int64_t>()[i] = sv->elems[i].value;
  return rw.replace(y, rw.add_constant(std::move(t), y->name + "_dims"));
}

// Reshape(x, [dims of x at the same positions, constants]) -> Reshape(x, [0 ..., constants]).
bool reshape_copy_dims(Node& n, Rewriter& rw) {
  if (rw.opset() < 5 || n.inputs.size() < 2 || !n.inputs[1] || constant_value(n.inputs[1]))
    return false;
  if (rw.opset() >= 14 && int_attr(n, "allowzero", 0) != 0) return false;
  auto sv = elems_of(n.inputs[1], rw.opset(), 0);
  if (!sv || sv->scalar) return false;
  const Value* x = n.inputs[0];
  const Shape* xs = static_shape(x);
  Tensor t(DType::kInt64, {static_cast<int64_t>(sv->elems.size())});
  for (size_t i = 0; i < sv->elems.size(); ++i) {
    const Elem& e = sv->elems[i];
    if (e.known) {
      t.data<int64_t>()[i] = e.value;
      continue;
    }
    bool same = e.src == x && e.dim == i;
    if (!same && xs && i < xs->rank()) {
      const Dim& d = static_shape(e.src)->dims[e.dim];
      same = !d.symbol.empty() && same_dim(xs->dims[i], d);
    }
    if (!same) return false;
    t.data<int64_t>()[i] = 0;
  }
  n.inputs[1] = rw.add_constant(std::move(t), n.outputs[0]->name + "_shape");
  return true;
}

}  // namespace

void add_shape_rules(std::vector<Rule>& rules) {
  for (const char* op : {"Shape", "Gather", "Slice", "Unsqueeze", "Squeeze", "Concat"})
    rules.push_back({op, "static-dims", fold_static_dims});
  rules.push_back({"Reshape", "reshape-copy-dims", reshape_copy_dims});
}

}  // namespace kiln::simplify
