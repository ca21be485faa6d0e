// fusion: groups nodes into fused groups by pattern kind, with the dominator-based algorithm of
// TVM's FuseOps, and records each node's group as the int attribute `kiln.group`.
//   - The dataflow graph's edges carry the consumer's pattern kind; a broadcast edge whose input
//     has the consumer's output shape (statically equal, or provably so from the other inputs'
//     dims being 1 or the same) counts as elementwise.
//   - A post-dominator tree: a node's immediate post-dominator is the least common ancestor of
//     its consumers; a node whose value is a graph output has none.
//   - A node fuses into its post-dominator's group when every node on every path between them
//     is fusable (checked on the groups' pattern kinds): elementwise/broadcast into injective or
//     reduction successors (and into out-fusable epilogue groups); out-fusable ops (Conv, Gemm,
//     MatMul) take elementwise epilogues when the path is elementwise/broadcast; injective ops
//     fuse in a second phase so that out-fusable epilogues finish first; reductions and opaque
//     ops take producers but fuse into nothing. All nodes on the paths join the group, so
//     groups are convex and a value feeds at most one group internally.
// Group ids index the groups in a topological order of the group graph (by their last node);
// nested graphs are grouped on their own, with ids counted per graph.
// Requires: a verified model (types help: broadcast edges need static shapes to count as
// elementwise). Guarantees: only `kiln.group` attributes change; the graph computes the same.
// Tests: tests/pass/golden/fusion/*.kir
#include <algorithm>
#include <functional>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "ir/rewrite.h"
#include "ops/registry.h"
#include "pass/passes.h"

namespace kiln {
namespace {

constexpr int kMaxGroupNodes = 256;
constexpr const char* kGroupAttr = "kiln.group";

using PK = PatternKind;
PK combine(PK a, PK b) { return std::max(a, b); }

struct Edge {
  int node;
  PK pattern;
};

struct DomNode {
  int parent = -1;  // immediate post-dominator, -1 = none (the virtual sink)
  int depth = 0;
  PK pattern = PK::kElementwise;  // combined edge pattern on the paths to `parent`
};

// Every dim is a known size or a named symbol: two such shapes that compare equal are equal.
bool comparable(const Type& t) {
  if (t.kind != Type::Kind::kTensor || !t.shape) return false;
  for (const Dim& d : t.shape->dims)
    if (!d.known() && d.symbol.empty()) return false;
  return true;
}

bool same_dim(const Dim& a, const Dim& b) {
  return a.known() ? a.value == b.value : !a.symbol.empty() && a.symbol == b.symbol;
}

// True when input `v` of broadcast node `n` has the shape of n's output: its static shape equals
// the output's, or (when dims are unknown) every other input has no higher rank and, aligned
// from the right, only dims that are 1 or the same as v's (then the broadcast result is v's
// shape whatever the unknown dims are).
bool same_shape_as_output(const Node& n, const Value* v) {
  const Value* out = n.outputs.empty() ? nullptr : n.outputs[0];
  if (!out) return false;
  if (comparable(v->type) && comparable(out->type)) return *v->type.shape == *out->type.shape;
  if (v->type.kind != Type::Kind::kTensor || !v->type.shape) return false;
  const auto& vd = v->type.shape->dims;
  if (out->type.kind != Type::Kind::kTensor ||
      (out->type.shape && out->type.shape->rank() != vd.size()))
    return false;
  for (const Value* u : n.inputs) {
    if (!u || u == v) continue;
    if (u->type.kind != Type::Kind::kTensor || !u->type.shape) return false;
    const auto& ud = u->type.shape->dims;
    if (ud.size() > vd.size()) return false;
    for (size_t k = 0; k < ud.size(); ++k) {
      const Dim& a = ud[ud.size() - 1 - k];
      const Dim& b = vd[vd.size() - 1 - k];
      if (!(a.known() && a.value == 1) && !same_dim(a, b)) return false;
    }
  }
  return true;
}

class Fuser {
 public:
  Fuser(const Model& m, Graph& g) : g_(g) {
    // S1: node patterns and edges (consumer pattern; same-shape broadcast edges are elementwise).
    const auto& reg = OpRegistry::global();
    const size_t n = g.nodes.size();
    std::unordered_map<const Node*, int> index;
    for (size_t i = 0; i < n; ++i) index[g.nodes[i].get()] = static_cast<int>(i);
    pattern_.resize(n, PK::kOpaque);
    extern_ref_.resize(n, false);
    outputs_.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const Node& node = *g.nodes[i];
      const OpSchema* s = reg.find(node.domain, node.op_type, m.opset(node.domain));
      bool has_subgraph = false;
      for (const auto& [k, a] : node.attrs) has_subgraph |= a.g != nullptr || !a.graphs.empty();
      pattern_[i] = s && !has_subgraph ? s->pattern : PK::kOpaque;
    }
    UseMap uses = compute_uses(g);
    for (size_t i = 0; i < n; ++i) {
      std::map<int, PK> edges;
      for (const Value* v : g.nodes[i]->outputs) {
        if (!v) continue;
        if (is_graph_output(g, v)) extern_ref_[i] = true;
        for (const Node* user : uses.of(v)) {
          auto it = index.find(user);
          if (it == index.end()) continue;
          int c = it->second;
          PK p = pattern_[c];
          if (p == PK::kBroadcast && same_shape_as_output(*g.nodes[c], v)) p = PK::kElementwise;
          auto [e, fresh] = edges.emplace(c, p);
          if (!fresh) e->second = combine(e->second, p);
        }
      }
      for (const auto& [c, p] : edges) outputs_[i].push_back({c, p});
    }
    build_post_dominators();
    groups_.resize(n);
    for (size_t i = 0; i < n; ++i) groups_[i] = {static_cast<int>(i), pattern_[i], 1};
  }

  // Returns true when some node's group attribute changed.
  bool run() {
    // S3: two phases over the nodes in topological order (injective ops wait for phase 1).
    for (int phase = 0; phase < 2; ++phase)
      for (int i = 0; i < static_cast<int>(g_.nodes.size()); ++i) try_fuse(i, phase);
    return assign_group_ids();
  }

 private:
  struct Group {
    int parent;
    PK pattern;
    int num_nodes;
  };

  // S2: post-dominator tree, built from the last node backwards.
  void build_post_dominators() {
    const int n = static_cast<int>(g_.nodes.size());
    dom_.assign(n, {});
    for (int i = n - 1; i >= 0; --i) {
      DomNode& d = dom_[i];
      if (extern_ref_[i] || outputs_[i].empty()) {
        d.parent = -1;
        d.depth = 1;
        d.pattern = PK::kOpaque;
        continue;
      }
      PK pattern = PK::kElementwise;
      int parent = outputs_[i][0].node;
      pattern = combine(pattern, outputs_[i][0].pattern);
      for (size_t k = 1; k < outputs_[i].size(); ++k) {
        parent = lca(parent, outputs_[i][k].node, pattern);
        pattern = combine(pattern, outputs_[i][k].pattern);
      }
      d.parent = parent;
      d.depth = parent >= 0 ? dom_[parent].depth + 1 : 1;
      d.pattern = pattern;
    }
  }

  int lca(int a, int b, PK& pattern) const {
    while (a != b) {
      if (a < 0 || b < 0) return -1;
      if (dom_[a].depth < dom_[b].depth) {
        pattern = combine(pattern, dom_[b].pattern);
        b = dom_[b].parent;
      } else if (dom_[b].depth < dom_[a].depth) {
        pattern = combine(pattern, dom_[a].pattern);
        a = dom_[a].parent;
      } else {
        pattern = combine(pattern, combine(dom_[a].pattern, dom_[b].pattern));
        a = dom_[a].parent;
        b = dom_[b].parent;
      }
    }
    return a;
  }

  int find(int i) {
    while (groups_[i].parent != i) {
      groups_[i].parent = groups_[groups_[i].parent].parent;
      i = groups_[i].parent;
    }
    return i;
  }

  void merge(int child, int target) {
    child = find(child);
    target = find(target);
    if (child == target) return;
    groups_[child].parent = target;
    groups_[target].num_nodes += groups_[child].num_nodes;
    groups_[target].pattern = combine(groups_[target].pattern, groups_[child].pattern);
  }

  // True when every node on the paths from `src` (exclusive) to `sink` satisfies `ok`, judged by
  // the pattern of its group.
  bool check_path(int src, int sink, const std::function<bool(PK, bool)>& ok) {
    std::unordered_set<int> seen;
    std::function<bool(int)> visit = [&](int v) {
      if (!seen.insert(v).second) return true;
      if (!ok(groups_[find(v)].pattern, v == sink)) return false;
      if (v == sink) return true;
      for (const Edge& e : outputs_[v])
        if (!visit(e.node)) return false;
      return true;
    };
    for (const Edge& e : outputs_[src])
      if (!visit(e.node)) return false;
    return true;
  }

  // Every node on the paths from `src` up to `sink` joins sink's group.
  void commit(int src, int sink) {
    std::unordered_set<int> seen;
    std::function<void(int)> visit = [&](int v) {
      if (v == sink || !seen.insert(v).second) return;
      merge(v, sink);
      for (const Edge& e : outputs_[v]) visit(e.node);
    };
    visit(src);
  }

  int fused_size(int src, int sink) {
    std::unordered_set<int> seen, roots;
    std::function<void(int)> visit = [&](int v) {
      if (!seen.insert(v).second) return;
      roots.insert(find(v));
      if (v == sink) return;
      for (const Edge& e : outputs_[v]) visit(e.node);
    };
    visit(src);
    int total = 0;
    for (int r : roots) total += groups_[r].num_nodes;
    return total;
  }

  void try_fuse(int i, int phase) {
    const PK own = groups_[i].pattern;
    if (own == PK::kOpaque || own == PK::kReduction) return;
    const DomNode& d = dom_[i];
    if (d.parent < 0) return;
    if (find(i) == find(d.parent)) return;
    if (fused_size(i, d.parent) > kMaxGroupNodes) return;
    if (own == PK::kOutFusable) {
      if (phase != 0 || d.pattern != PK::kElementwise) return;
      if (check_path(i, d.parent, [](PK k, bool) { return k <= PK::kBroadcast; }))
        commit(i, d.parent);
    } else if (own <= PK::kBroadcast) {
      if (d.pattern > PK::kInjective && d.pattern != PK::kReduction) return;
      auto ok = [](PK k, bool sink) { return sink ? k != PK::kOpaque : k <= PK::kInjective; };
      if (check_path(i, d.parent, ok)) commit(i, d.parent);
    } else if (own == PK::kInjective) {
      if (phase != 1) return;
      if (check_path(i, d.parent, [](PK k, bool) { return k <= PK::kInjective; }))
        commit(i, d.parent);
    }
  }

  // S4: number the groups in a topological order of the group graph (ties: by last node) and
  // record them on the nodes.
  bool assign_group_ids() {
    const int n = static_cast<int>(g_.nodes.size());
    std::unordered_map<int, int> last;  // root -> last node index
    for (int i = 0; i < n; ++i) last[find(i)] = i;
    std::unordered_map<int, std::set<int>> succ;
    std::unordered_map<int, int> indegree;
    for (const auto& [r, l] : last) indegree[r] = 0;
    for (int i = 0; i < n; ++i)
      for (const Edge& e : outputs_[i]) {
        int a = find(i), b = find(e.node);
        if (a != b && succ[a].insert(b).second) ++indegree[b];
      }
    using Item = std::pair<int, int>;  // (last node, root)
    std::priority_queue<Item, std::vector<Item>, std::greater<Item>> ready;
    for (const auto& [r, deg] : indegree)
      if (deg == 0) ready.push({last[r], r});
    std::unordered_map<int, int64_t> id;
    while (!ready.empty()) {
      int r = ready.top().second;
      ready.pop();
      id[r] = static_cast<int64_t>(id.size());
      for (int s : succ[r])
        if (--indegree[s] == 0) ready.push({last[s], s});
    }
    KILN_CHECK(id.size() == last.size());  // convex groups form a DAG
    bool changed = false;
    for (int i = 0; i < n; ++i) {
      Node& node = *g_.nodes[i];
      int64_t gid = id[find(i)];
      const Attribute* old = node.attr(kGroupAttr);
      if (old && old->kind == Attribute::Kind::kInt && old->i == gid) continue;
      node.attrs[kGroupAttr] = Attribute::make_int(gid);
      changed = true;
    }
    return changed;
  }

  Graph& g_;
  std::vector<PK> pattern_;
  std::vector<bool> extern_ref_;
  std::vector<std::vector<Edge>> outputs_;
  std::vector<DomNode> dom_;
  std::vector<Group> groups_;
};

bool fuse_graph(const Model& m, Graph& g) {
  return Fuser(m, g).run();
}

bool run(Model& m, PassContext&) { return rewrite_graphs(*m.graph, [&](Graph& g) { return fuse_graph(m, g); }); }

}  // namespace

PassInfo fusion_pass() {
  return {"fusion", "group nodes into fused kernels by pattern kind (attribute kiln.group)", run};
}

}  // namespace kiln
