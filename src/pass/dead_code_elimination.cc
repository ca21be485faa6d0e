// dce: removes nodes whose outputs are not used by any node or graph output, in the main
// graph and in nested subgraphs, and drops unused constants.
// Requires: a verified model. Guarantees: outputs unchanged; ops with side effects do not exist
// in ONNX inference graphs, so every unused node is removable.
// Tests: tests/pass/golden/dce/*.kir
#include <unordered_set>

#include "ir/rewrite.h"
#include "pass/passes.h"

namespace kiln {
namespace {

bool eliminate(Graph& g) {
  bool changed = false;
  // S1: recurse into subgraphs first; their captures count as uses of the owning node below.
  for (auto& n : g.nodes)
    for (auto& [k, a] : n->attrs) {
      if (a.g) changed |= eliminate(*a.g);
      for (auto& sg : a.graphs) changed |= eliminate(*sg);
    }
  // S2: walk backwards so chains of dead nodes disappear in one sweep.
  UseMap uses = compute_uses(g);
  std::unordered_map<const Value*, size_t> live_uses;
  std::unordered_map<const Node*, std::vector<const Value*>> used_by;  // inputs and captures
  for (const auto& [v, users] : uses.users) {
    live_uses[v] = users.size();
    for (const Node* u : users) used_by[u].push_back(v);
  }
  for (const Value* v : g.outputs) ++live_uses[v];
  std::unordered_set<const Node*> dead;
  for (auto it = g.nodes.rbegin(); it != g.nodes.rend(); ++it) {
    Node* n = it->get();
    bool used = false;
    for (const Value* o : n->outputs)
      if (o && live_uses[o] > 0) used = true;
    if (used) continue;
    dead.insert(n);
    for (const Value* v : used_by[n]) --live_uses[v];
  }
  GraphEditor ed(g);
  if (ed.remove_nodes_if([&](const Node& n) { return dead.count(&n) != 0; })) changed = true;
  size_t before = g.constants.size();
  ed.erase_dead_values();
  return changed || g.constants.size() != before;
}

bool run(Model& m, PassContext&) { return eliminate(*m.graph); }

}  // namespace

PassInfo dead_code_elimination_pass() {
  return {"dce", "remove nodes and constants whose values nothing uses", run};
}

PassInfo dead_code_elimination_pass_again() {
  return {"dce-late", "dce again, after rewrites that leave dead producers behind", run};
}

}  // namespace kiln
