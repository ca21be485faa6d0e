// conv1d-to-conv2d: a 1-D Conv ([N, C, L] input, [M, C/group, k] weight) becomes a 2-D Conv over
// [N, C, 1, L] with a [M, C/group, 1, k] weight between two Reshapes, so that it runs on the 2-D
// conv kernels (GEMM, depthwise) instead of the reference conv. The Reshapes copy dims with 0
// (shape [0, 0, 1, -1] and [0, 0, -1]), so a dynamic batch or length is fine; a constant weight
// is reshaped here.
// Requires: the input and weight of rank 3 (known ranks), a default-domain Conv.
// Guarantees: the same values; strides, dilations, pads and auto_pad carried to the W axis.
// Tests: tests/pass/golden/conv1d-to-conv2d/*.kir
#include <set>

#include "ir/rewrite.h"
#include "pass/passes.h"

namespace kiln {
namespace {

bool rank3(const Value* v) {
  return v && v->type.kind == Type::Kind::kTensor && v->type.shape && v->type.shape->rank() == 3;
}

Value* shape_constant(Graph& g, GraphEditor& ed, const std::string& base, const std::vector<int64_t>& dims) {
  Tensor t(DType::kInt64, {static_cast<int64_t>(dims.size())});
  std::copy(dims.begin(), dims.end(), t.data<int64_t>());
  Value* v = g.add_value(ed.unique_name(base), Type::tensor(DType::kInt64, Shape::of(t.dims())));
  v->initializer = std::move(t);
  g.constants.push_back(v);
  return v;
}

// `v` with a dim of 1 inserted before its last: a constant reshaped here, else a Reshape node.
Value* add_unit_dim(Graph& g, GraphEditor& ed, Value* v) {
  const Shape& s = *v->type.shape;
  std::vector<Dim> dims = {s.dims[0], s.dims[1], Dim(1), s.dims[2]};
  Type t = Type::tensor(v->type.dtype, Shape(dims));
  if (v->is_constant()) {
    Tensor w = v->initializer;
    const std::vector<int64_t> d = w.dims();
    Value* c = g.add_value(ed.unique_name(v->name + "_2d"), t);
    c->initializer = w.reshaped({d[0], d[1], 1, d[2]});
    g.constants.push_back(c);
    return c;
  }
  Value* out = g.add_value(ed.unique_name(v->name + "_2d"), t);
  g.add_node("Reshape", {v, shape_constant(g, ed, v->name + "_2d_shape", {0, 0, 1, -1})}, {out});
  return out;
}

// The attribute's ints with `fill` prepended (per spatial axis) or, for pads, [fill, begin, fill, end].
void widen(Node& n, const std::string& key, int64_t fill) {
  auto it = n.attrs.find(key);
  if (it == n.attrs.end() || it->second.kind != Attribute::Kind::kInts) return;
  std::vector<int64_t>& v = it->second.ints;
  if (key == "pads" && v.size() == 2) v = {fill, v[0], fill, v[1]};
  else if (key != "pads" && v.size() == 1) v = {fill, v[0]};
}

bool rewrite(Graph& g, GraphEditor& ed, Node& n) {
  if (n.op_type != "Conv" || !n.domain.empty() || n.inputs.size() < 2 || n.outputs.size() != 1) return false;
  Value *x = n.inputs[0], *w = n.inputs[1], *y = n.outputs[0];
  if (!rank3(x) || !rank3(w) || !y) return false;
  for (const char* key : {"kernel_shape", "strides", "dilations"}) {
    const Attribute* a = n.attr(key);
    if (a && (a->kind != Attribute::Kind::kInts || a->ints.size() != 1)) return false;
  }
  if (const Attribute* a = n.attr("pads"); a && (a->kind != Attribute::Kind::kInts || a->ints.size() != 2)) return false;
  std::vector<Dim> ydims;
  if (y->type.shape && y->type.shape->rank() == 3)
    ydims = {y->type.shape->dims[0], y->type.shape->dims[1], Dim(1), y->type.shape->dims[2]};
  Value* y2 = g.add_value(ed.unique_name(y->name + "_2d"),
                          ydims.empty() ? Type::tensor(y->type.dtype) : Type::tensor(y->type.dtype, Shape(ydims)));
  std::vector<Value*> inputs = {add_unit_dim(g, ed, x), add_unit_dim(g, ed, w)};
  if (n.inputs.size() > 2) inputs.push_back(n.inputs[2]);
  Node* conv = g.add_node("Conv", inputs, {y2});
  conv->name = n.name;
  conv->attrs = n.attrs;
  widen(*conv, "kernel_shape", 1);
  widen(*conv, "strides", 1);
  widen(*conv, "dilations", 1);
  widen(*conv, "pads", 0);
  Value* back = g.add_value(ed.unique_name(y->name + "_1d"), y->type);
  g.add_node("Reshape", {y2, shape_constant(g, ed, y->name + "_1d_shape", {0, 0, -1})}, {back});
  ed.replace_all_uses(y, back);
  return true;
}

bool run(Model& m, PassContext&) {
  Graph& g = *m.graph;
  GraphEditor ed(g);
  std::vector<Node*> convs;
  for (auto& n : g.nodes)
    if (n->op_type == "Conv") convs.push_back(n.get());
  std::set<const Node*> done;
  for (Node* n : convs)
    if (rewrite(g, ed, *n)) done.insert(n);
  if (done.empty()) return false;
  ed.remove_nodes_if([&](const Node& n) { return done.count(&n) > 0; });
  ed.erase_dead_values();
  ed.sort_topologically();
  return true;
}

}  // namespace

PassInfo conv1d_to_conv2d_pass() {
  return {"conv1d-to-conv2d", "run 1-D Convs as 2-D Convs over a unit height (between two Reshapes)", run};
}

}  // namespace kiln
