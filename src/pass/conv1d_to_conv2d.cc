// conv1d-to-conv2d: a 1-D Conv ([N, C, L] input, [M, C/group, k] weight) becomes a 2-D Conv over
// [N, C, 1, L] with a [M, C/group, 1, k] weight between two Reshapes, so that it runs on the 2-D
// conv kernels (GEMM, depthwise) instead of the reference conv. The Reshapes copy dims with 0
// (shape [0, 0, 1, -1] and [0, 0, -1]), so a dynamic batch or length is fine; a constant weight
// is reshaped here.
// Requires: a weight of rank 3 and an input of rank 3 or of unknown rank (a Conv's input has the
// weight's rank: e.g. a value an If returns, whose branches' types differ), a default-domain Conv.
// Applies in every graph, If/Loop/Scan bodies included.
// Guarantees: the same values; strides, dilations, pads and auto_pad carried to the W axis.
// Tests: tests/pass/golden/conv1d-to-conv2d/*.kir
#include "ir/rewrite.h"
#include "pass/passes.h"

namespace kiln {
namespace {

bool rank3(const Value* v) {
  return v && v->type.kind == Type::Kind::kTensor && v->type.shape && v->type.shape->rank() == 3;
}
bool unranked(const Value* v) { return v && v->type.kind == Type::Kind::kTensor && !v->type.shape; }

// `v` reshaped to `dims` by a Reshape node (its output named before its shape constant).
Value* reshaped(GraphEditor& ed, Value* v, Type type, const std::string& base, const std::vector<int64_t>& dims) {
  Node* r = ed.add_node("Reshape", {v}, std::move(type), base);
  r->inputs.push_back(ed.add_ints(dims, base + "_shape"));
  return r->outputs[0];
}

// `v` with a dim of 1 inserted before its last: a constant reshaped here, else a Reshape node
// (of unknown rank when v's is: shape inference fills it in once the dims are bound).
Value* add_unit_dim(GraphEditor& ed, Value* v) {
  Type t = Type::tensor(v->type.dtype);
  if (v->type.shape) {
    const Shape& s = *v->type.shape;
    t = Type::tensor(v->type.dtype, Shape(std::vector<Dim>{s.dims[0], s.dims[1], Dim(1), s.dims[2]}));
  }
  if (!v->is_constant()) return reshaped(ed, v, t, v->name + "_2d", {0, 0, 1, -1});
  const std::vector<int64_t> d = v->initializer.dims();
  return ed.add_constant(v->initializer.reshaped({d[0], d[1], 1, d[2]}), v->name + "_2d");
}

// The attribute's ints with `fill` prepended (per spatial axis) or, for pads, [fill, begin, fill, end].
void widen(Node& n, const std::string& key, int64_t fill) {
  auto it = n.attrs.find(key);
  if (it == n.attrs.end() || it->second.kind != Attribute::Kind::kInts) return;
  std::vector<int64_t>& v = it->second.ints;
  if (key == "pads" && v.size() == 2) v = {fill, v[0], fill, v[1]};
  else if (key != "pads" && v.size() == 1) v = {fill, v[0]};
}

bool rewrite(GraphEditor& ed, Node& n) {
  if (n.inputs.size() < 2 || n.outputs.size() != 1) return false;
  Value *x = n.inputs[0], *w = n.inputs[1], *y = n.outputs[0];
  if (!(rank3(x) || unranked(x)) || !rank3(w) || !y) return false;
  for (const char* key : {"kernel_shape", "strides", "dilations"}) {
    const Attribute* a = n.attr(key);
    if (a && (a->kind != Attribute::Kind::kInts || a->ints.size() != 1)) return false;
  }
  if (const Attribute* a = n.attr("pads"); a && (a->kind != Attribute::Kind::kInts || a->ints.size() != 2)) return false;
  Type t2 = Type::tensor(y->type.dtype);
  if (y->type.shape && y->type.shape->rank() == 3) {
    const std::vector<Dim>& d = y->type.shape->dims;
    t2 = Type::tensor(y->type.dtype, Shape(std::vector<Dim>{d[0], d[1], Dim(1), d[2]}));
  }
  // (Names are taken in this order: the 2-D output, then the input's and the weight's.)
  Node* conv = ed.add_node("Conv", {}, t2, y->name + "_2d");
  conv->inputs = {add_unit_dim(ed, x), add_unit_dim(ed, w)};
  if (n.inputs.size() > 2) conv->inputs.push_back(n.inputs[2]);
  conv->name = n.name;
  conv->attrs = n.attrs;
  widen(*conv, "kernel_shape", 1);
  widen(*conv, "strides", 1);
  widen(*conv, "dilations", 1);
  widen(*conv, "pads", 0);
  ed.replace_all_uses(y, reshaped(ed, conv->outputs[0], y->type, y->name + "_1d", {0, 0, -1}));
  return true;
}

bool run(Model& m, PassContext&) {
  return rewrite_graphs(*m.graph, [](Graph& g) {
    GraphEditor ed(g);
    return ed.rewrite_nodes("Conv", [&](Node& n) { return rewrite(ed, n); });
  });
}

}  // namespace

PassInfo conv1d_to_conv2d_pass() {
  return {"conv1d-to-conv2d", "run 1-D Convs as 2-D Convs over a unit height (between two Reshapes)", run};
}

}  // namespace kiln
