// conv3d-to-conv2d: a 3-D Conv runs as one 2-D Conv whose input channels also carry the depth
// taps: the input's depth-shifted slices are gathered ([N, C, Do, kd, H, W], a Pad first for
// depth padding), moved to [N*Do, C*kd, H, W], convolved with the weight reshaped to
// [M, C/group*kd, kh, kw], and the result moved back to [N, M, Do, Ho, Wo]. The 2-D conv kernels
// (GEMM with implicit im2col) then do the work instead of the reference conv.
// Requires: static shapes, rank-5 input and constant weight, explicit pads or auto_pad NOTSET/VALID,
// float32. Guarantees: the same values up to summation order.
// Tests: tests/pass/golden/conv3d-to-conv2d/*.kir
#include "ir/rewrite.h"
#include "pass/passes.h"

namespace kiln {
namespace {

std::vector<int64_t> ints_attr(const Node& n, const std::string& key, std::vector<int64_t> def) {
  const Attribute* a = n.attr(key);
  return a && a->kind == Attribute::Kind::kInts ? a->ints : def;
}

// The steps of the rewrite, f32 or int64 constants and f32 nodes named after the Conv's output.
class Emit {
 public:
  Emit(GraphEditor& ed, const std::string& base) : ed_(ed), base_(base) {}
  Value* constant(Tensor t) { return ed_.add_constant(std::move(t), base_ + "_c"); }
  Value* ints(const std::vector<int64_t>& v, const std::vector<int64_t>& dims) {
    Tensor t(DType::kInt64, dims);
    std::copy(v.begin(), v.end(), t.data<int64_t>());
    return constant(std::move(t));
  }
  Node* node(const std::string& op, std::vector<Value*> ins, const std::vector<int64_t>& dims) {
    return ed_.add_node(op, std::move(ins), Type::tensor(DType::kFloat32, Shape::of(dims)), base_);
  }

 private:
  GraphEditor& ed_;
  std::string base_;
};

bool static_shape(const Value* v, size_t rank, std::vector<int64_t>& dims) {
  if (!v || v->type.kind != Type::Kind::kTensor || !v->type.shape || !v->type.shape->is_static()) return false;
  dims = v->type.shape->sizes();
  return dims.size() == rank;
}

bool rewrite(GraphEditor& ed, Node& n, int64_t opset) {
  if (n.inputs.size() < 2 || n.outputs.size() != 1) return false;
  Value *x = n.inputs[0], *w = n.inputs[1], *y = n.outputs[0];
  std::vector<int64_t> xd, wd, yd;
  if (!static_shape(x, 5, xd) || !static_shape(w, 5, wd) || !static_shape(y, 5, yd) || !w->is_constant()) return false;
  if (x->type.dtype != DType::kFloat32 || w->initializer.dtype() != DType::kFloat32) return false;
  const std::string auto_pad = n.attr("auto_pad") ? n.attr("auto_pad")->s : "NOTSET";
  if (auto_pad != "NOTSET" && auto_pad != "VALID") return false;
  const int64_t group = n.attr("group") ? n.attr("group")->i : 1;
  const std::vector<int64_t> st = ints_attr(n, "strides", {1, 1, 1}), dl = ints_attr(n, "dilations", {1, 1, 1});
  std::vector<int64_t> pads = ints_attr(n, "pads", {0, 0, 0, 0, 0, 0});
  if (auto_pad == "VALID") pads.assign(6, 0);
  if (st.size() != 3 || dl.size() != 3 || pads.size() != 6) return false;
  for (int64_t v : pads)
    if (v < 0) return false;
  const int64_t N = xd[0], C = xd[1], D = xd[2], H = xd[3], W = xd[4];
  const int64_t M = wd[0], kd = wd[2], Do = yd[2];
  if (group <= 0 || C % group != 0 || wd[1] * group != C || yd[0] != N || yd[1] != M) return false;
  if (Do != (D + pads[0] + pads[3] - dl[0] * (kd - 1) - 1) / st[0] + 1 || Do <= 0) return false;
  if (opset < 13) return false;  // Pad with pads as an input, Gather/Transpose as today
  Emit e(ed, y->name + "_3d");
  // Depth padding, then the depth taps of every output depth gathered: [N, C, Do, kd, H, W].
  Value* src = x;
  const int64_t Dp = D + pads[0] + pads[3];
  if (pads[0] || pads[3]) {
    Node* p = e.node("Pad", {x, e.ints({0, 0, pads[0], 0, 0, 0, 0, pads[3], 0, 0}, {10})}, {N, C, Dp, H, W});
    src = p->outputs[0];
  }
  std::vector<int64_t> idx;
  for (int64_t od = 0; od < Do; ++od)
    for (int64_t a = 0; a < kd; ++a) idx.push_back(od * st[0] + a * dl[0]);
  Node* gather = e.node("Gather", {src, e.ints(idx, {Do, kd})}, {N, C, Do, kd, H, W});
  gather->attrs["axis"] = Attribute::make_int(2);
  Node* tr = e.node("Transpose", {gather->outputs[0]}, {N, Do, C, kd, H, W});
  tr->attrs["perm"] = Attribute::make_ints({0, 2, 1, 3, 4, 5});
  Node* flat = e.node("Reshape", {tr->outputs[0], e.ints({N * Do, C * kd, H, W}, {4})}, {N * Do, C * kd, H, W});
  // The weight [M, C/group, kd, kh, kw] is already [M, C/group*kd, kh, kw] in memory.
  Value* w2 = e.constant(w->initializer.reshaped({M, wd[1] * kd, wd[3], wd[4]}));
  std::vector<Value*> ins = {flat->outputs[0], w2};
  if (n.inputs.size() > 2 && n.inputs[2]) ins.push_back(n.inputs[2]);
  Node* conv = e.node("Conv", ins, {N * Do, M, yd[3], yd[4]});
  conv->name = n.name;
  conv->attrs["group"] = Attribute::make_int(group);
  conv->attrs["strides"] = Attribute::make_ints({st[1], st[2]});
  conv->attrs["dilations"] = Attribute::make_ints({dl[1], dl[2]});
  conv->attrs["pads"] = Attribute::make_ints({pads[1], pads[2], pads[4], pads[5]});
  Node* split = e.node("Reshape", {conv->outputs[0], e.ints({N, Do, M, yd[3], yd[4]}, {5})}, {N, Do, M, yd[3], yd[4]});
  Node* back = e.node("Transpose", {split->outputs[0]}, yd);
  back->attrs["perm"] = Attribute::make_ints({0, 2, 1, 3, 4});
  ed.replace_all_uses(y, back->outputs[0]);
  return true;
}

bool run(Model& m, PassContext&) {
  const int64_t opset = m.opset("");
  return rewrite_graphs(*m.graph, [&](Graph& g) {
    GraphEditor ed(g);
    return ed.rewrite_nodes("Conv", [&](Node& n) { return rewrite(ed, n, opset); });
  });
}

}  // namespace

PassInfo conv3d_to_conv2d_pass() {
  return {"conv3d-to-conv2d", "run 3-D Convs as 2-D Convs over gathered depth taps", run};
}

}  // namespace kiln
