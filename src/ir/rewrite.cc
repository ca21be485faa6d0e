// Use lists and in-place graph edits.
#include "ir/rewrite.h"

#include <algorithm>
#include <unordered_set>

#include "core/error.h"

namespace kiln {
namespace {

void collect_uses(const Graph& g, Node* owner, UseMap& map) {
  for (const auto& n : g.nodes) {
    Node* user = owner ? owner : n.get();
    for (const Value* v : n->inputs)
      if (v) map.users[v].push_back(user);
    for (const auto& [k, a] : n->attrs) {
      if (a.g) collect_uses(*a.g, user, map);
      for (const auto& sg : a.graphs) collect_uses(*sg, user, map);
    }
  }
  if (owner)
    for (const Value* v : g.outputs) map.users[v].push_back(owner);
}

void replace_in_graph(Graph& g, Value* from, Value* to) {
  for (auto& n : g.nodes) {
    for (auto& v : n->inputs)
      if (v == from) v = to;
    for (auto& [k, a] : n->attrs) {
      if (a.g) replace_in_graph(*a.g, from, to);
      for (auto& sg : a.graphs) replace_in_graph(*sg, from, to);
    }
  }
}

}  // namespace

const std::vector<Node*>& UseMap::of(const Value* v) const {
  static const std::vector<Node*> kNone;
  auto it = users.find(v);
  return it == users.end() ? kNone : it->second;
}

bool rewrite_graphs(Graph& g, const std::function<bool(Graph&)>& rewrite) {
  bool changed = false;
  for (auto& n : g.nodes) {
    // A kiln::External region's body is its backend's (pass/partition_external.cc): the passes
    // after partitioning, which prepare nodes for kiln's own kernels, leave it as it was.
    if (n->domain == "kiln" && n->op_type == "External") continue;
    for (auto& [k, a] : n->attrs) {
      if (a.g) changed |= rewrite_graphs(*a.g, rewrite);
      for (auto& sg : a.graphs) changed |= rewrite_graphs(*sg, rewrite);
    }
  }
  return rewrite(g) || changed;
}

UseMap compute_uses(const Graph& g) {
  UseMap map;
  collect_uses(g, nullptr, map);
  return map;
}

bool is_graph_output(const Graph& g, const Value* v) {
  return std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end();
}

void GraphEditor::replace_all_uses(Value* from, Value* to) {
  if (from == to) return;
  replace_in_graph(g_, from, to);
  bool was_output = false;
  for (auto& o : g_.outputs)
    if (o == from) {
      o = to;
      was_output = true;
    }
  // The graph output keeps its declared type when the replacement's is less precise.
  if (was_output && to->type.kind == Type::Kind::kTensor && from->type.kind == Type::Kind::kTensor) {
    if (to->type.dtype == DType::kUndefined) to->type.dtype = from->type.dtype;
    if (!to->type.shape && from->type.shape && to->type.dtype == from->type.dtype) to->type.shape = from->type.shape;
  }
  if (was_output && to->producer && to->owner == &g_ && !is_graph_output_elsewhere(to)) {
    std::string name = from->name;
    rename(from, unique_name(name + "_replaced"));
    rename(to, name);
  }
}

bool GraphEditor::is_graph_output_elsewhere(const Value* v) const {
  int n = 0;
  for (const Value* o : g_.outputs) n += o == v;
  return n > 1;
}

size_t GraphEditor::remove_nodes_if(const std::function<bool(const Node&)>& pred) {
  size_t before = g_.nodes.size();
  g_.nodes.erase(std::remove_if(g_.nodes.begin(), g_.nodes.end(),
                                [&](const std::unique_ptr<Node>& n) {
                                  if (!pred(*n)) return false;
                                  for (Value* o : n->outputs)
                                    if (o && o->producer == n.get()) o->producer = nullptr;
                                  return true;
                                }),
                 g_.nodes.end());
  return before - g_.nodes.size();
}

void GraphEditor::erase_dead_values() {
  std::unordered_set<const Value*> keep;
  for (const Value* v : g_.inputs) keep.insert(v);
  for (const Value* v : g_.outputs) keep.insert(v);
  for (const Value* v : g_.constants) keep.insert(v);
  for (const auto& n : g_.nodes)
    for (const Value* v : n->outputs) keep.insert(v);
  // Constants nobody uses any more are dropped too.
  UseMap uses = compute_uses(g_);
  g_.constants.erase(std::remove_if(g_.constants.begin(), g_.constants.end(),
                                    [&](const Value* v) {
                                      if (uses.count(v) || is_graph_output(g_, v)) return false;
                                      keep.erase(v);
                                      return true;
                                    }),
                     g_.constants.end());
  for (auto it = g_.by_name_.begin(); it != g_.by_name_.end();)
    it = keep.count(it->second) ? std::next(it) : g_.by_name_.erase(it);
  g_.values_.erase(std::remove_if(g_.values_.begin(), g_.values_.end(),
                                  [&](const std::unique_ptr<Value>& v) { return !keep.count(v.get()); }),
                   g_.values_.end());
}

void GraphEditor::rename(Value* v, const std::string& name) {
  KILN_CHECK(v->owner == &g_);
  auto it = g_.by_name_.find(v->name);
  if (it != g_.by_name_.end() && it->second == v) g_.by_name_.erase(it);
  v->name = name;
  g_.by_name_[name] = v;
}

std::string GraphEditor::unique_name(const std::string& base) {
  for (;;) {
    std::string name = base + "_" + std::to_string(counter_++);
    if (!g_.find(name)) return name;
  }
}

Value* GraphEditor::add_constant(Tensor t, const std::string& base) {
  Value* v = g_.add_value(unique_name(base), Type::tensor(t.dtype(), Shape::of(t.dims())));
  v->initializer = std::move(t);
  g_.constants.push_back(v);
  return v;
}

Value* GraphEditor::add_ints(const std::vector<int64_t>& values, const std::string& base) {
  Tensor t(DType::kInt64, {static_cast<int64_t>(values.size())});
  std::copy(values.begin(), values.end(), t.data<int64_t>());
  return add_constant(std::move(t), base);
}

Node* GraphEditor::add_node(const std::string& op_type, std::vector<Value*> inputs, Type type,
                            const std::string& base) {
  Value* out = g_.add_value(unique_name(base), std::move(type));
  return g_.add_node(op_type, std::move(inputs), {out});
}

bool GraphEditor::rewrite_nodes(const std::string& op_type, const std::function<bool(Node&)>& rewrite) {
  std::vector<Node*> candidates;
  for (auto& n : g_.nodes)
    if (n->op_type == op_type && n->domain.empty()) candidates.push_back(n.get());
  std::unordered_set<const Node*> done;
  for (Node* n : candidates)
    if (rewrite(*n)) done.insert(n);
  if (done.empty()) return false;
  remove_nodes_if([&](const Node& n) { return done.count(&n) > 0; });
  erase_dead_values();
  sort_topologically();
  return true;
}

void GraphEditor::sort_topologically() {
  std::unordered_map<const Value*, Node*> producer;
  for (auto& n : g_.nodes)
    for (Value* o : n->outputs)
      if (o) producer[o] = n.get();
  std::unordered_map<const Node*, int> state;
  std::vector<std::unique_ptr<Node>> order;
  std::unordered_map<const Node*, std::unique_ptr<Node>*> slot;
  for (auto& n : g_.nodes) slot[n.get()] = &n;
  UseMap inner;  // values used inside subgraphs count as inputs of the owning node
  std::function<void(Node*)> visit = [&](Node* n) {
    int& s = state[n];
    if (s == 2) return;
    if (s == 1) throw Error(ErrorKind::kInternal, "a pass created a cycle at node " + n->display_name());
    s = 1;
    std::vector<const Value*> deps(n->inputs.begin(), n->inputs.end());
    for (const auto& [k, a] : n->attrs) {
      auto add_graph = [&](const Graph& sg) {
        UseMap u = compute_uses(sg);
        for (const auto& [v, users] : u.users) deps.push_back(v);
        for (const Value* v : sg.outputs) deps.push_back(v);
      };
      if (a.g) add_graph(*a.g);
      for (const auto& sg : a.graphs) add_graph(*sg);
    }
    for (const Value* v : deps) {
      if (!v) continue;
      auto p = producer.find(v);
      if (p != producer.end() && p->second != n) visit(p->second);
    }
    s = 2;
    order.push_back(std::move(*slot[n]));
  };
  std::vector<Node*> roots;
  for (auto& n : g_.nodes) roots.push_back(n.get());
  for (Node* n : roots) visit(n);
  g_.nodes = std::move(order);
}

}  // namespace kiln
