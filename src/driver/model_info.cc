// Model statistics and support check against the op registry.
#include "driver/model_info.h"

#include "ops/registry.h"
#include "pass/memory_plan.h"

namespace kiln {
namespace {

void visit(const Model& m, const Graph& g, ModelInfo& info) {
  const auto& reg = OpRegistry::global();
  auto count_params = [&](const Value* v) {
    if (!v->initializer.defined()) return;
    info.parameter_count += v->initializer.numel();
    info.parameter_bytes += static_cast<int64_t>(v->initializer.nbytes());
  };
  for (const Value* v : g.constants) count_params(v);
  for (const Value* v : g.inputs) count_params(v);
  for (const auto& n : g.nodes) {
    ++info.node_count;
    ++info.op_histogram[n->qualified_op()];
    int64_t opset = m.opset(n->domain);
    if (!reg.knows(n->domain, n->op_type)) {
      info.unsupported.push_back({n->display_name(), n->qualified_op(), "unknown operator"});
    } else if (!reg.find(n->domain, n->op_type, opset)) {
      info.unsupported.push_back({n->display_name(), n->qualified_op(),
                                  "needs opset >= " + std::to_string(reg.first_version(n->domain, n->op_type)) +
                                      ", model has " + std::to_string(opset)});
    }
    for (const auto& [k, a] : n->attrs) {
      if (a.g) visit(m, *a.g, info);
      for (const auto& sg : a.graphs) visit(m, *sg, info);
    }
  }
}

}  // namespace

ModelInfo analyze_model(const Model& m) {
  ModelInfo info;
  visit(m, *m.graph, info);
  return info;
}

MemoryInfo analyze_memory(const Model& m, const std::map<std::string, int64_t>& bindings) {
  MemoryInfo info;
  const Graph& g = *m.graph;
  for (const std::string& sym : dim_symbols(g)) info.dim_bindings[sym] = 1;
  for (const auto& [sym, v] : bindings) info.dim_bindings[sym] = v;
  MemoryPlan plan = plan_memory(g, [&](const Value* v) {
    Value bound;
    bound.type = v->type;
    if (bound.type.kind == Type::Kind::kTensor && bound.type.shape)
      for (Dim& d : bound.type.shape->dims)
        if (!d.known() && !d.symbol.empty()) d = Dim(info.dim_bindings.at(d.symbol));
    return static_bytes(&bound);
  });
  info.arena_bytes = plan.arena_bytes;
  info.intermediate_bytes = plan.intermediate_bytes;
  info.live_bytes_lower_bound = plan.live_bytes_lower_bound;
  info.planned_values = plan.values.size();
  info.unplanned_values = plan.unplanned.size();
  info.in_place = plan.in_place_count;
  return info;
}

std::set<std::string> dim_symbols(const Graph& g) {
  std::set<std::string> out;
  for (const auto& v : g.values())
    if (v->type.kind == Type::Kind::kTensor && v->type.shape)
      for (const Dim& d : v->type.shape->dims)
        if (!d.known() && !d.symbol.empty()) out.insert(d.symbol);
  return out;
}

void bind_dims(Model& m, const std::map<std::string, int64_t>& bindings) {
  for (const auto& v : m.graph->values())
    if (v->type.kind == Type::Kind::kTensor && v->type.shape)
      for (Dim& d : v->type.shape->dims) {
        auto it = d.known() || d.symbol.empty() ? bindings.end() : bindings.find(d.symbol);
        if (it != bindings.end()) d = Dim(it->second);
      }
}

}  // namespace kiln
