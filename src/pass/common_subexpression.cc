// cse: merges nodes that compute the same thing: same op and domain, the same input Values,
// the same output arity (with the same omitted outputs) and deeply equal attributes. Later
// duplicates' outputs are replaced by the first node's and the duplicates removed; repeated to
// a fixpoint (merging two nodes can make their consumers equal), in the main graph and in
// every subgraph. Also merges identical small constants (same type, dtype, dims and bytes,
// up to 64 KB). This is what merges the duplicate shape subgraphs of exported BERT models.
// Never merged: nodes with subgraph attributes, random ops (Random*, Bernoulli, Multinomial,
// Dropout), and a duplicate whose output is a graph output when the first's is one too (the
// graph's output names must stay).
// Requires: a verified model. Guarantees: the graph computes the same values; graph output
// names are kept (a surviving value takes over a removed output's name).
// Tests: tests/pass/golden/cse/*.kir
#include <algorithm>
#include <cstring>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "ir/rewrite.h"
#include "ops/registry.h"
#include "pass/passes.h"

namespace kiln {
namespace {

constexpr size_t kMaxConstantBytes = 64 * 1024;

void hash_combine(size_t& h, size_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); }

bool mergeable(const Node& n) {
  if (OpRegistry::global().is_random(n)) return false;
  for (const auto& [k, a] : n.attrs)
    if (a.g || !a.graphs.empty() || a.kind == Attribute::Kind::kGraph || a.kind == Attribute::Kind::kGraphs)
      return false;
  return true;
}

bool same_tensor(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  return !a.defined() || a.same_as(b);
}

bool same_floats(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

bool same_attr(const Attribute& a, const Attribute& b) {
  using K = Attribute::Kind;
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case K::kInt: return a.i == b.i;
    case K::kFloat: return std::memcmp(&a.f, &b.f, sizeof(float)) == 0;
    case K::kString: return a.s == b.s;
    case K::kTensor: return same_tensor(a.t, b.t);
    case K::kInts: return a.ints == b.ints;
    case K::kFloats: return same_floats(a.floats, b.floats);
    case K::kStrings: return a.strings == b.strings;
    case K::kTensors:
      if (a.tensors.size() != b.tensors.size()) return false;
      for (size_t i = 0; i < a.tensors.size(); ++i)
        if (!same_tensor(a.tensors[i], b.tensors[i])) return false;
      return true;
    case K::kType: return a.tp == b.tp;
    case K::kGraph:
    case K::kGraphs: return false;
  }
  return false;
}

bool same_computation(const Node& a, const Node& b) {
  if (a.op_type != b.op_type || a.domain != b.domain || a.inputs != b.inputs) return false;
  if (a.outputs.size() != b.outputs.size()) return false;
  for (size_t i = 0; i < a.outputs.size(); ++i)
    if ((a.outputs[i] == nullptr) != (b.outputs[i] == nullptr)) return false;
  if (a.attrs.size() != b.attrs.size()) return false;
  for (auto ia = a.attrs.begin(), ib = b.attrs.begin(); ia != a.attrs.end(); ++ia, ++ib)
    if (ia->first != ib->first || !same_attr(ia->second, ib->second)) return false;
  return true;
}

// Cheap key; equal computations have equal keys (tensor attributes hash their dims only).
size_t node_key(const Node& n) {
  size_t h = std::hash<std::string>()(n.op_type);
  hash_combine(h, std::hash<std::string>()(n.domain));
  for (const Value* v : n.inputs) hash_combine(h, std::hash<const void*>()(v));
  for (const Value* v : n.outputs) hash_combine(h, v ? 1 : 2);
  for (const auto& [k, a] : n.attrs) {
    hash_combine(h, std::hash<std::string>()(k));
    hash_combine(h, static_cast<size_t>(a.kind));
    hash_combine(h, static_cast<size_t>(a.i));
    for (int64_t x : a.ints) hash_combine(h, static_cast<size_t>(x));
    hash_combine(h, std::hash<std::string>()(a.s));
    if (a.t.defined()) hash_combine(h, static_cast<size_t>(a.t.numel()));
  }
  return h;
}

size_t bytes_key(const Tensor& t) {
  size_t h = std::hash<std::string_view>()(
      std::string_view(static_cast<const char*>(t.raw()), t.nbytes()));
  hash_combine(h, static_cast<size_t>(t.dtype()));
  for (int64_t d : t.dims()) hash_combine(h, static_cast<size_t>(d));
  return h;
}

// Replaces `dup`'s outputs by `keep`'s; false (nothing changed) when both feed graph outputs.
bool merge_into(GraphEditor& ed, const Graph& g, const std::vector<Value*>& dup,
                const std::vector<Value*>& keep) {
  for (size_t i = 0; i < dup.size(); ++i)
    if (dup[i] && is_graph_output(g, dup[i]) && is_graph_output(g, keep[i])) return false;
  for (size_t i = 0; i < dup.size(); ++i)
    if (dup[i]) ed.replace_all_uses(dup[i], keep[i]);
  return true;
}

// S1: identical small constants; uses of later copies go to the first.
bool merge_constants(Graph& g, GraphEditor& ed) {
  std::unordered_map<size_t, std::vector<Value*>> seen;
  std::unordered_set<const Value*> merged;
  for (Value* c : g.constants) {
    const Tensor& t = c->initializer;
    if (!t.defined() || t.dtype() == DType::kString || t.nbytes() > kMaxConstantBytes) continue;
    auto& bucket = seen[bytes_key(t)];
    Value* first = nullptr;
    for (Value* other : bucket)
      if (other->type == c->type && other->initializer.same_as(t)) first = other;
    if (!first) {
      bucket.push_back(c);
      continue;
    }
    if (is_graph_output(g, c)) continue;  // a constant cannot take over an output's name
    ed.replace_all_uses(c, first);
    merged.insert(c);
  }
  if (merged.empty()) return false;
  g.constants.erase(std::remove_if(g.constants.begin(), g.constants.end(),
                                   [&](const Value* v) { return merged.count(v) != 0; }),
                    g.constants.end());
  return true;
}

// S2: one sweep in topological order; consumers of merged nodes see the surviving inputs.
bool merge_nodes(Graph& g, GraphEditor& ed) {
  std::unordered_map<size_t, std::vector<Node*>> seen;
  std::unordered_set<const Node*> removed;
  for (auto& np : g.nodes) {
    Node& n = *np;
    if (!mergeable(n)) continue;
    auto& bucket = seen[node_key(n)];
    Node* first = nullptr;
    for (Node* other : bucket)
      if (same_computation(*other, n)) {
        first = other;
        break;
      }
    if (!first) {
      bucket.push_back(&n);
      continue;
    }
    if (merge_into(ed, g, n.outputs, first->outputs)) removed.insert(&n);
  }
  if (removed.empty()) return false;
  ed.remove_nodes_if([&](const Node& n) { return removed.count(&n) != 0; });
  return true;
}

bool cse_graph(Graph& g) {
  GraphEditor ed(g);
  bool changed = merge_constants(g, ed);
  // S3: repeat to a fixpoint.
  while (merge_nodes(g, ed)) changed = true;
  if (changed) ed.erase_dead_values();
  // S4: subgraphs last, so that their captures already point at the surviving values.
  for (auto& n : g.nodes)
    for (auto& [k, a] : n->attrs) {
      if (a.g) changed |= cse_graph(*a.g);
      for (auto& sg : a.graphs) changed |= cse_graph(*sg);
    }
  return changed;
}

bool run(Model& m, PassContext&) { return cse_graph(*m.graph); }

}  // namespace

PassInfo cse_pass() {
  return {"cse", "merge nodes computing the same op on the same inputs, and equal small constants", run};
}

}  // namespace kiln
