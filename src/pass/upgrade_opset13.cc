// upgrade-opset13: rewrites an opset 11/12 model into the same model at opset 13, where
// QuantizeLinear/DequantizeLinear take an axis (per-channel weights; kiln quantize runs it).
// Ops whose meaning or form changed by 13 are rewritten: Squeeze/Unsqueeze/ReduceSum/Split move
// axes/split from attributes to inputs; Softmax/LogSoftmax/Hardmax (13: one axis, not the
// flattened trailing axes) need their axis to be the last one; Dropout-11's ratio becomes an
// input. Scatter, Upsample and Resize's tf_half_pixel_for_nn have no opset-13 form.
// Requires: opset 11 or 12; ranks where a Softmax's axis is not negative-last.
// Guarantees: nothing changes unless every node converts (upgrade_to_opset13 says why not).
// Tests: tests/pass/golden/upgrade-opset13/*.kir
#include "pass/upgrade_opset13.h"

#include "core/error.h"
#include "ir/rewrite.h"
#include "ops/registry.h"
#include "pass/passes.h"

namespace kiln {
namespace {

bool is_softmax_family(const Node& n) {
  return n.op_type == "Softmax" || n.op_type == "LogSoftmax" || n.op_type == "Hardmax";
}

// Why `n` has no opset-13 form, or empty.
std::string blocker(const Node& n) {
  if (!n.domain.empty()) return "";
  if (n.op_type == "Scatter" || n.op_type == "Upsample") return n.op_type + " was removed before opset 13";
  if (n.op_type == "Resize") {
    const Attribute* a = n.attr("coordinate_transformation_mode");
    if (a && a->s == "tf_half_pixel_for_nn") return "Resize's tf_half_pixel_for_nn mode was removed in opset 13";
  }
  if (is_softmax_family(n)) {
    const int64_t axis = AttrReader(n).attr_int("axis", 1);
    if (axis == -1) return "";
    const auto& shape = n.inputs[0]->type.shape;
    if (!shape) return n.op_type + " over an input of unknown rank (opset 13 changed its axis meaning)";
    const int64_t rank = static_cast<int64_t>(shape->rank());
    if ((axis < 0 ? axis + rank : axis) != rank - 1)
      return n.op_type + " over flattened axes " + std::to_string(axis) + ".. (opset 13 normalises one axis)";
  }
  return "";
}

std::string first_blocker(const Graph& g) {
  for (const auto& n : g.nodes) {
    std::string why = blocker(*n);
    if (!why.empty()) return n->display_name() + ": " + why;
    for (const auto& [k, a] : n->attrs) {
      std::vector<std::shared_ptr<Graph>> bodies = a.graphs;
      if (a.g) bodies.push_back(a.g);
      for (const auto& b : bodies)
        if (std::string inner = first_blocker(*b); !inner.empty()) return inner;
    }
  }
  return "";
}

// Moves an ints attribute to a new constant input at `index` (later inputs keep their place).
void attribute_to_input(GraphEditor& ed, Node& n, const std::string& attr, size_t index) {
  auto it = n.attrs.find(attr);
  if (it == n.attrs.end()) return;
  Value* c = ed.add_ints(it->second.ints, n.outputs[0]->name + "_" + attr);
  n.attrs.erase(it);
  if (n.inputs.size() < index) n.inputs.resize(index, nullptr);
  n.inputs.insert(n.inputs.begin() + static_cast<std::ptrdiff_t>(index), c);
}

void upgrade_node(GraphEditor& ed, Node& n) {
  if (!n.domain.empty()) return;
  if (n.op_type == "Squeeze" || n.op_type == "Unsqueeze" || n.op_type == "ReduceSum") {
    attribute_to_input(ed, n, "axes", 1);
  } else if (n.op_type == "Split") {
    attribute_to_input(ed, n, "split", 1);
  } else if (is_softmax_family(n)) {
    n.attrs["axis"] = Attribute::make_int(-1);
  } else if (n.op_type == "Dropout") {
    auto it = n.attrs.find("ratio");
    if (it != n.attrs.end()) {
      Value* r = ed.add_constant(Tensor::scalar(DType::kFloat32, it->second.f), n.outputs[0]->name + "_ratio");
      n.attrs.erase(it);
      n.inputs.resize(1);
      n.inputs.push_back(r);
    }
  }
}

void upgrade_graph(Graph& g) {
  GraphEditor ed(g);
  for (auto& n : g.nodes) {
    upgrade_node(ed, *n);
    for (auto& [k, a] : n->attrs) {
      if (a.g) upgrade_graph(*a.g);
      for (auto& b : a.graphs) upgrade_graph(*b);
    }
  }
}

bool run(Model& m, PassContext&) {
  const int64_t opset = m.opset("");
  if (opset >= 13) return false;
  if (std::string why = upgrade_to_opset13(m); !why.empty())
    throw Error(ErrorKind::kUnsupported, "upgrade-opset13: " + why);
  return true;
}

}  // namespace

std::string upgrade_to_opset13(Model& m) {
  const int64_t opset = m.opset("");
  if (opset >= 13) return "";
  if (opset < 11) return "opset " + std::to_string(opset) + " (only opsets 11 and 12 are upgraded)";
  if (std::string why = first_blocker(*m.graph); !why.empty()) return why;
  upgrade_graph(*m.graph);
  m.opsets[""] = 13;
  return "";
}

PassInfo upgrade_opset13_pass() {
  return {"upgrade-opset13", "rewrite an opset 11/12 model for opset 13 (kiln quantize: per-channel weights)", run,
          /*in_default_pipeline=*/false};
}

}  // namespace kiln
