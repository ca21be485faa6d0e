// merge-composites: finds each offload backend's composites (Backend::composites: chains of ops,
// each output consumed only by the next op and not a graph output) and marks their nodes with
// `kiln.composite` = "<composite>_<k>" and `kiln.offload` = the backend, so that
// partition-external keeps a chain in one region or leaves all of it native. A chain is matched
// when none of its nodes is marked for another backend or already in a composite; longer
// composites are tried first, backends in --offload order.
// Requires: annotate-external (marks are read, not required). Guarantees: only attributes change.
// Tests: tests/pass/golden/merge-composites/*.kir
#include <algorithm>

#include "ir/rewrite.h"
#include "ops/registry.h"
#include "pass/passes.h"

namespace kiln {
namespace {

// The chain of nodes starting at `first` that matches `ops`, or empty.
std::vector<Node*> match_chain(Graph& g, const UseMap& uses, Node* first, const std::vector<std::string>& ops,
                               const std::string& backend) {
  std::vector<Node*> chain;
  Node* n = first;
  for (size_t k = 0; k < ops.size(); ++k) {
    if (!n || n->qualified_op() != ops[k] || n->attr("kiln.composite") || n->has_subgraphs()) return {};
    const std::string owner = AttrReader(*n).attr_string("kiln.offload", "");
    if (!owner.empty() && owner != backend) return {};
    chain.push_back(n);
    if (k + 1 == ops.size()) break;
    if (n->outputs.size() != 1 || !n->outputs[0] || is_graph_output(g, n->outputs[0])) return {};
    const auto& users = uses.of(n->outputs[0]);
    if (users.size() != 1) return {};
    n = users[0];
  }
  return chain;
}

bool run(Model& m, PassContext& ctx) {
  Graph& g = *m.graph;
  bool changed = false;
  int next_id = 0;
  for (const auto& backend : ctx.offload) {
    std::vector<ext::Composite> composites = backend->composites();
    std::stable_sort(composites.begin(), composites.end(),
                     [](const ext::Composite& a, const ext::Composite& b) { return a.ops.size() > b.ops.size(); });
    const UseMap uses = compute_uses(g);
    for (const ext::Composite& c : composites) {
      if (c.ops.empty()) continue;
      for (auto& n : g.nodes) {
        const std::vector<Node*> chain = match_chain(g, uses, n.get(), c.ops, backend->name());
        if (chain.empty()) continue;
        const std::string id = c.name + "_" + std::to_string(next_id++);
        for (Node* member : chain) {
          member->attrs["kiln.composite"] = Attribute::make_string(id);
          member->attrs["kiln.offload"] = Attribute::make_string(backend->name());
        }
        changed = true;
      }
    }
  }
  return changed;
}

}  // namespace

PassInfo merge_composites_pass() {
  return {"merge-composites", "mark an --offload backend's composite patterns (kiln.composite)", run};
}

}  // namespace kiln
