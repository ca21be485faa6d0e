// Model statistics and support check against the op registry.
#include "driver/model_info.h"

#include "ops/registry.h"

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

}  // namespace kiln
