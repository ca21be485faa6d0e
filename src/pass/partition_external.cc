// partition-external: turns the nodes annotate-external / merge-composites marked (kiln.offload)
// into regions, each one kiln::External node (ops/external.h) holding its nodes as a body graph.
//   - Regions grow in node order: a marked node joins the region of one of its producers with the
//     same backend unless that would make a cycle (the region reaches one of the node's inputs
//     through something outside it, another region included); else it starts a region.
//   - A composite (kiln.composite) goes into one region or, when one of its nodes cannot join,
//     stays native as a whole (the partition is then redone without it).
//   - Regions whose cost (Backend::node_cost summed) is below Backend::min_region_cost stay
//     native: the layout conversions at a region's edges cost more than one small op saves.
// The body takes the region's constants with it; its inputs are the values it reads from
// outside, its outputs those used outside or returned by the graph (they keep their names).
// Requires: annotate-external (a model without marks is left alone). Guarantees: the graph
// computes the same values; the External nodes are in topological order.
// Tests: tests/pass/golden/partition-external/*.kir
#include <algorithm>
#include <set>
#include <unordered_map>

#include "ir/rewrite.h"
#include "ops/external.h"
#include "ops/registry.h"
#include "pass/external_view.h"
#include "pass/passes.h"

namespace kiln {
namespace {

std::string string_attr(const Node& n, const char* key) { return AttrReader(n).attr_string(key, ""); }

struct Region {
  std::string backend;
  std::vector<Node*> nodes;
  std::set<int> deps;  // regions this one reaches back to, transitively
};

// One assignment of the marked nodes to regions (see the file comment).
struct Assignment {
  std::vector<Region> regions;
  std::unordered_map<const Node*, int> region_of;
  std::unordered_map<const Node*, std::set<int>> native_deps;  // regions a native node depends on
  std::unordered_map<std::string, int> composite_region;
  std::set<std::string> conflicts;  // composites that could not stay in one region

  // Regions the value `v` depends on, transitively.
  std::set<int> deps_of(const Value* v) const {
    std::set<int> d;
    const Node* p = v ? v->producer : nullptr;
    if (!p) return d;
    auto r = region_of.find(p);
    if (r != region_of.end()) {
      d = regions[static_cast<size_t>(r->second)].deps;
      d.insert(r->second);
      return d;
    }
    auto nd = native_deps.find(p);
    if (nd == native_deps.end()) return d;
    for (int x : nd->second) {
      d.insert(x);
      d.insert(regions[static_cast<size_t>(x)].deps.begin(), regions[static_cast<size_t>(x)].deps.end());
    }
    return d;
  }

  static std::vector<const Value*> reads(const Node& n) {
    std::vector<const Value*> vs(n.inputs.begin(), n.inputs.end());
    if (n.has_subgraphs())
      for (const Value* v : captured_values(n)) vs.push_back(v);
    return vs;
  }

  // Whether node n can join region r without a cycle.
  bool can_join(const Node& n, int r) const {
    for (const Value* v : reads(n)) {
      if (!v || !v->producer) continue;
      auto p = region_of.find(v->producer);
      if (p != region_of.end() && p->second == r) continue;
      if (deps_of(v).count(r)) return false;
    }
    return true;
  }

  void join(Node& n, int r) {
    region_of[&n] = r;
    Region& reg = regions[static_cast<size_t>(r)];
    reg.nodes.push_back(&n);
    for (const Value* v : reads(n)) {
      if (!v || !v->producer) continue;
      auto p = region_of.find(v->producer);
      if (p != region_of.end() && p->second == r) continue;
      const std::set<int> d = deps_of(v);  // (can_join: r is not among them)
      reg.deps.insert(d.begin(), d.end());
    }
    // Regions that reach r reach what r now reaches.
    for (size_t s = 0; s < regions.size(); ++s)
      if (regions[s].deps.count(r)) regions[s].deps.insert(reg.deps.begin(), reg.deps.end());
  }

  void place(Node& n) {
    const std::string backend = string_attr(n, "kiln.offload");
    if (backend.empty()) {
      std::set<int> d;
      for (const Value* v : reads(n))
        for (int x : deps_of(v)) d.insert(x);
      native_deps[&n] = std::move(d);
      return;
    }
    const std::string composite = string_attr(n, "kiln.composite");
    auto c = composite.empty() ? composite_region.end() : composite_region.find(composite);
    if (c != composite_region.end()) {
      if (can_join(n, c->second)) return join(n, c->second);
      conflicts.insert(composite);  // placed alone so that this (discarded) pass stays consistent
      start_region(n, backend, "");
      return;
    }
    for (const Value* v : reads(n)) {
      auto p = v && v->producer ? region_of.find(v->producer) : region_of.end();
      if (p == region_of.end() || regions[static_cast<size_t>(p->second)].backend != backend) continue;
      if (!can_join(n, p->second)) continue;
      join(n, p->second);
      if (!composite.empty()) composite_region[composite] = p->second;
      return;
    }
    start_region(n, backend, composite);
  }

  void start_region(Node& n, const std::string& backend, const std::string& composite) {
    regions.push_back({backend, {}, {}});
    join(n, static_cast<int>(regions.size()) - 1);
    if (!composite.empty()) composite_region[composite] = static_cast<int>(regions.size()) - 1;
  }
};

Assignment assign(Graph& g, std::vector<OffloadNote>& notes) {
  for (;;) {
    Assignment a;
    for (auto& n : g.nodes) a.place(*n);
    if (a.conflicts.empty()) return a;
    for (auto& n : g.nodes) {
      const std::string c = string_attr(*n, "kiln.composite");
      if (!a.conflicts.count(c)) continue;
      notes.push_back({n->display_name(), n->qualified_op(), "composite " + c + " cannot stay in one region (it would close a cycle)"});
      n->attrs.erase("kiln.offload");
      n->attrs.erase("kiln.composite");
    }
  }
}

double region_cost(const ext::Backend& b, const Region& r) {
  double cost = 0;
  for (const Node* n : r.nodes) {
    const ext::Region one = node_region(*n);
    cost += b.node_cost(one.nodes[0]);
  }
  return cost;
}

// Replaces the region's nodes by one kiln::External node named `name`.
void outline(Model& m, const Region& r, const std::string& name, const UseMap& uses) {
  Graph& g = *m.graph;
  const std::set<const Node*> members(r.nodes.begin(), r.nodes.end());
  auto body = std::make_shared<Graph>();
  body->name = name;
  body->parent = &g;
  std::unordered_map<const Value*, Value*> inner;
  std::vector<Value*> ext_inputs, ext_outputs;
  for (const Node* n : r.nodes) {
    for (Value* v : n->inputs) {
      if (!v || inner.count(v) || (v->producer && members.count(v->producer))) continue;
      Value* b = body->add_value(v->name, v->type);
      if (v->is_constant()) {
        b->initializer = v->initializer;
        body->constants.push_back(b);
      } else {
        b->is_graph_input = true;
        body->inputs.push_back(b);
        ext_inputs.push_back(v);
      }
      inner[v] = b;
    }
    std::vector<Value*> ins, outs;
    for (Value* v : n->inputs) ins.push_back(v ? inner.at(v) : nullptr);
    for (Value* v : n->outputs) {
      Value* b = v ? body->add_value(v->name, v->type) : nullptr;
      if (v) inner[v] = b;
      outs.push_back(b);
    }
    Node* c = body->add_node(n->op_type, std::move(ins), std::move(outs), n->domain);
    c->name = n->name;
    c->attrs = n->attrs;
    c->attrs.erase("kiln.offload");
  }
  for (const Node* n : r.nodes)
    for (Value* v : n->outputs) {
      if (!v) continue;
      bool used_outside = is_graph_output(g, v);
      for (const Node* u : uses.of(v)) used_outside |= !members.count(u);
      if (!used_outside) continue;
      body->outputs.push_back(inner.at(v));
      ext_outputs.push_back(v);
    }
  Node* e = g.add_node(kExternalOp, ext_inputs, ext_outputs, kExternalDomain);
  e->name = name;
  e->attrs["backend"] = Attribute::make_string(r.backend);
  e->attrs["body"] = Attribute::make_graph(body);
  e->attrs["opset"] = Attribute::make_int(m.opset(""));
}

bool run(Model& m, PassContext& ctx) {
  Graph& g = *m.graph;
  bool marked = false;
  for (const auto& n : g.nodes) marked |= n->attr("kiln.offload") != nullptr;
  if (!marked) return false;
  Assignment a = assign(g, ctx.offload_notes);
  const UseMap uses = compute_uses(g);
  std::map<std::string, int> counts;
  std::set<const Node*> outlined;
  for (const Region& r : a.regions) {
    const ext::Backend* b = ctx.offload_backend(r.backend);
    bool has_output = false;
    for (const Node* n : r.nodes)
      for (const Value* v : n->outputs) has_output |= v && (is_graph_output(g, v) || uses.count(v) > 0);
    const double threshold = ctx.offload_min_cost >= 0 ? ctx.offload_min_cost : b ? b->min_region_cost() : 0;
    const double cost = b ? region_cost(*b, r) : 0;
    if (!b || !has_output || cost < threshold) {
      for (const Node* n : r.nodes)
        ctx.offload_notes.push_back({n->display_name(), n->qualified_op(),
                                     "in a " + r.backend + " region of cost " + std::to_string(static_cast<int>(cost)) +
                                         ", under the threshold " + std::to_string(static_cast<int>(threshold)) +
                                         " (--offload-min-cost)"});
      continue;
    }
    outline(m, r, r.backend + "_" + std::to_string(counts[r.backend]++), uses);
    outlined.insert(r.nodes.begin(), r.nodes.end());
  }
  for (auto& n : g.nodes) {
    n->attrs.erase("kiln.offload");
    n->attrs.erase("kiln.composite");
  }
  if (outlined.empty()) return true;
  GraphEditor ed(g);
  ed.remove_nodes_if([&](const Node& n) { return outlined.count(&n) > 0; });
  ed.erase_dead_values();
  ed.sort_topologically();
  m.opsets[kExternalDomain] = std::max<int64_t>(m.opset(kExternalDomain), 1);
  return true;
}

}  // namespace

PassInfo partition_external_pass() {
  return {"partition-external", "group the offloaded nodes into kiln::External regions, one per backend region", run};
}

}  // namespace kiln
