// S1 of the compile steps (plan_builder.h): every value's dtype and dims, from shape inference
// with the input dims bound (pass/bind_shapes.h) or, where it stops, from a reference run; then
// the values that the input shapes alone decide become plan constants.
#include <atomic>
#include <chrono>
#include <cstdlib>

#include "driver/compile/plan_builder.h"
#include "pass/bind_shapes.h"

namespace kiln::compile {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<int64_t> g_reference_runs{0};

// KILN_VERIFY_PLAN_SHAPES=1: every plan whose shapes came from inference also runs the reference
// interpreter and compares (tests run the conformance suites and models this way).
bool verify_plan_shapes() {
  static const bool on = [] {
    const char* e = std::getenv("KILN_VERIFY_PLAN_SHAPES");
    return e && *e && std::string(e) != "0";
  }();
  return on;
}

void check_against_run(const ShapeRun& run, const std::vector<RtValue>& feeds, const BoundShapes& bound) {
  run(feeds, [&](const Value& v, const RtValue& r) {
    auto it = bound.values.find(&v);
    if (it == bound.values.end() || !r.is_tensor()) return;
    const BoundValue& b = it->second;
    if (b.dtype != r.tensor.dtype() || b.dims != r.tensor.dims())
      throw Error(ErrorKind::kInternal, "shape inference gave '" + v.name + "' " + std::string(dtype_name(b.dtype)) +
                                            dims_to_string(b.dims) + ", a run gives " +
                                            std::string(dtype_name(r.tensor.dtype())) + dims_to_string(r.tensor.dims()));
  });
}

// KILN_SYMBOLIC_DIMS: "auto" (default) lowers the dims that vary with the input sizes as kernel
// params; "off" specialises every kernel to its sizes; "all" makes every dim other than 1 a
// param (a test mode: the conformance suites then check the symbolic lowering of every op).
enum class SymbolicDims { kOff, kAuto, kAll };
SymbolicDims symbolic_dims_mode() {
  static const SymbolicDims mode = [] {
    const char* e = std::getenv("KILN_SYMBOLIC_DIMS");
    const std::string v = e ? e : "";
    if (v == "0" || v == "off") return SymbolicDims::kOff;
    if (v == "all") return SymbolicDims::kAll;
    return SymbolicDims::kAuto;
  }();
  return mode;
}

constexpr int64_t kFoldMaxElements = 1 << 16;

}  // namespace

int64_t reference_runs() { return g_reference_runs.load(); }

void PlanBuilder::plan_shapes(const std::vector<RtValue>& feeds) {
  const auto t0 = Clock::now();
  for (const auto& n : g.nodes) {
    const OpSchema* schema = OpRegistry::global().find(n->domain, n->op_type, model_.opset(n->domain));
    KILN_CHECK(schema != nullptr);
    plan->schemas.push_back(schema);
  }
  auto learn_type = [&](const Value* v, DType dtype, const std::vector<int64_t>& dims) {
    auto it = slot_of.find(v);
    if (it == slot_of.end()) return;
    PlanSlot& ps = ex.slots[static_cast<size_t>(it->second)];
    ps.tensor = true;
    ps.dims = dims;
    ps.dtype = dtype;
  };
  auto learn = [&](const Value* v, const RtValue& r) {
    if (r.is_tensor()) learn_type(v, r.tensor.dtype(), r.tensor.dims());
  };
  for (size_t i = 0; i < g.inputs.size(); ++i) learn(g.inputs[i], feeds[i]);
  for (size_t i = 0; i < captures_.size(); ++i) learn(captures_[i], feeds[g.inputs.size() + i]);
  for (size_t s = 0; s < values.size(); ++s)
    if (values[s]->is_constant()) learn(values[s], RtValue(values[s]->initializer));
  // Small values that the input shapes and constants decide, kept for the folding below.
  BoundShapes bound = bind_shapes(model_, feeds, kFoldMaxElements, captures_);
  if (bound.complete) {
    for (const auto& [v, b] : bound.values) {
      learn_type(v, b.dtype, b.dims);
      if (b.value.defined()) small_values[v] = b.value;
    }
    plan->stats.shapes = "inference";
    if (verify_plan_shapes()) check_against_run(shape_run_, feeds, bound);
    find_variable_dims(feeds, bound);
  } else {
    // Shape inference stopped (a value-dependent op, an op without inference, sequences): a
    // reference run learns the shapes (and reports input errors the way the interpreter does).
    log("shapes by a reference run: " + bound.stopped_at);
    plan->stats.shapes = "reference run (" + bound.stopped_at + ")";
    g_reference_runs.fetch_add(1);
    shape_run_(feeds, [&](const Value& v, const RtValue& r) {
      learn(&v, r);
      if (r.is_tensor() && r.tensor.numel() <= kFoldMaxElements) small_values[&v] = r.tensor;
    });
  }
  plan->stats.shapes_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Which dims vary with the input sizes: the shapes bound again with every dim the model leaves
// symbolic one larger (input data zero), compared dim by dim. A dim taken for constant by
// mistake (one that did not move in the probe) only specialises a kernel; a dim variable is
// always bound to this plan's size, so no choice here can make a kernel wrong.
void PlanBuilder::find_variable_dims(const std::vector<RtValue>& feeds, const BoundShapes& bound) {
  variable_dims.assign(ex.slots.size(), {});
  const SymbolicDims mode = symbolic_dims_mode();
  if (mode == SymbolicDims::kOff) return;
  if (mode == SymbolicDims::kAll) {
    for (size_t s = 0; s < values.size(); ++s)
      if (!values[s]->is_constant()) variable_dims[s].assign(ex.slots[s].dims.size(), true);
    return;
  }
  std::vector<RtValue> probe = feeds;
  bool moved = false;
  for (size_t i = 0; i < g.inputs.size() && i < feeds.size(); ++i) {
    if (!feeds[i].is_tensor() || feeds[i].tensor.dtype() == DType::kString) continue;
    const Tensor& x = feeds[i].tensor;
    const std::optional<Shape>& declared = g.inputs[i]->type.shape;
    std::vector<int64_t> dims = x.dims();
    for (size_t k = 0; k < dims.size(); ++k) {
      const bool fixed = declared && declared->rank() == dims.size() && declared->dims[k].known();
      if (!fixed && dims[k] > 0) ++dims[k];
    }
    if (dims == x.dims()) continue;
    probe[i] = RtValue(Tensor(x.dtype(), dims));
    moved = true;
  }
  if (!moved) return;
  const BoundShapes other = bind_shapes(model_, probe, kFoldMaxElements, captures_);
  if (!other.complete) return;
  for (const auto& [v, b] : bound.values) {
    auto slot = slot_of.find(v);
    auto it = other.values.find(v);
    if (slot == slot_of.end() || it == other.values.end() || it->second.dims.size() != b.dims.size()) continue;
    std::vector<bool>& var = variable_dims[static_cast<size_t>(slot->second)];
    var.assign(b.dims.size(), false);
    for (size_t k = 0; k < b.dims.size(); ++k) var[k] = b.dims[k] != it->second.dims[k];
  }
}

// Values the input shapes alone decide (Shape/Size and what is computed from them and from
// constants: the reshape targets exporters compute at run time) become plan constants, and
// their nodes run no step. Not graph outputs, nodes with subgraphs, or random ops.
void PlanBuilder::fold_shape_values() {
  std::unordered_set<const Value*> outputs_set(g.outputs.begin(), g.outputs.end());
  for (int i = 0; i < static_cast<int>(g.nodes.size()); ++i) {
    const Node& n = *g.nodes[static_cast<size_t>(i)];
    if ((!n.domain.empty() && n.domain != "ai.onnx") || OpRegistry::global().is_random(n) || n.has_subgraphs() ||
        n.inputs.empty() || n.outputs.empty())
      continue;
    bool ok = true;
    if (n.op_type == "Shape" || n.op_type == "Size") {
      ok = n.inputs[0] != nullptr;
    } else {
      for (const Value* v : n.inputs) ok = ok && (!v || v->is_constant() || folded.count(v));
    }
    for (const Value* v : n.outputs) ok = ok && v && !outputs_set.count(v) && small_values.count(v);
    if (!ok) continue;
    for (const Value* v : n.outputs) folded[v] = &small_values[v];
    folded_nodes.insert(i);
  }
  for (auto& [v, t] : folded) {
    PlanSlot& ps = ex.slots[static_cast<size_t>(slot_of.at(v))];
    ps.constant = static_cast<int32_t>(ex.constants.size());
    ex.constants.push_back(t->clone());  // (the reference run owns *t)
  }
  plan->stats.folded_nodes = static_cast<int>(folded_nodes.size());
}

// A value's tensor when it is known at plan time: an initializer or a folded value.
const Tensor* PlanBuilder::constant_of(const Value* v) {
  if (v->is_constant()) return &v->initializer;
  auto it = folded.find(v);
  return it == folded.end() ? nullptr : it->second;
}

}  // namespace kiln::compile
