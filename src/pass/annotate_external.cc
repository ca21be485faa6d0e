// annotate-external: marks each main-graph node that one of the offload backends runs
// (Backend::supports) with `kiln.offload` = the first such backend's name, in --offload order.
// Requires: shapes inferred (backends decide on dtypes and ranks). Nodes with subgraphs and
// nodes already marked are left alone. A backend that throws from supports() is taken as "no".
// Guarantees: only attributes change.
// Tests: tests/pass/golden/annotate-external/*.kir
#include "pass/external_view.h"
#include "pass/passes.h"

namespace kiln {
namespace {

bool backend_supports(const ext::Backend& b, const ext::Region& r) {
  try {
    return b.supports(r, r.nodes[0]);
  } catch (...) {
    return false;
  }
}

bool run(Model& m, PassContext& ctx) {
  if (ctx.offload.empty()) return false;
  bool changed = false;
  std::string names;
  for (const auto& backend : ctx.offload) names += (names.empty() ? "" : ", ") + backend->name();
  for (auto& n : m.graph->nodes) {
    if (n->attr("kiln.offload")) continue;
    if (n->has_subgraphs()) {
      ctx.offload_notes.push_back({n->display_name(), n->qualified_op(), "control flow stays native"});
      continue;
    }
    const ext::Region one = node_region(*n);
    for (const auto& backend : ctx.offload) {
      if (!backend_supports(*backend, one)) continue;
      n->attrs["kiln.offload"] = Attribute::make_string(backend->name());
      changed = true;
      break;
    }
    if (!n->attr("kiln.offload"))
      ctx.offload_notes.push_back({n->display_name(), n->qualified_op(), "not supported by " + names + " (its dtypes, shapes or attributes)"});
  }
  return changed;
}

}  // namespace

PassInfo annotate_external_pass() {
  return {"annotate-external", "mark the nodes an --offload backend supports (kiln.offload)", run};
}

}  // namespace kiln
