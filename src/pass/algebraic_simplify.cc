// simplify: algebraic simplification by a pattern table (tinygrad style). Every rule matches
// one node (and its producers) and either reroutes the node's uses to an existing value or edits
// the node in place; one loop applies the table to every node, in every graph and subgraph,
// until nothing fires. The rule families live in their own files:
//   simplify_identity.cc  Identity, inference Dropout, no-op Cast / Cast round trips,
//                         neutral elements (x*1, x+(-0), x-0, x/1, x^1);
//   simplify_layout.cc    Transpose and Reshape chains, no-op Reshape/Expand/Flatten/Slice,
//                         Squeeze/Unsqueeze pairs, single-input Concat, single-output Split;
//   simplify_shape.cc     Shape -> Gather/Slice -> Unsqueeze -> Concat chains over statically
//                         known dims become constants; Reshape shapes built from the input's
//                         own dims become constants with 0 ("copy") entries.
// Requires: a verified model; rules read static types (run shape-inference first for best
// results) and never guess: an unknown dim or dtype means no rewrite.
// Guarantees: every rewrite is value-exact for every dtype (no float reassociation, no change of
// the sign of zero, no broadcast removed); graph output names are kept — a rewrite whose
// replacement cannot take over an output's name (graph input, constant, capture) is skipped.
// Nodes left without uses are removed (by dce) at the end. With --time, the per-rule counts are
// logged.
// Tests: tests/pass/golden/simplify/*.kir
#include <algorithm>
#include <iostream>
#include <map>
#include <unordered_map>

#include "ops/registry.h"
#include "pass/passes.h"
#include "pass/simplify.h"

namespace kiln {
namespace simplify {

bool Rewriter::used(const Value* v) {
  if (!uses_valid_) {
    uses_ = compute_uses(g_);
    uses_valid_ = true;
  }
  return uses_.count(v) > 0 || is_graph_output(g_, v);
}

bool Rewriter::replace(Value* from, Value* to) {
  if (from == to) return false;
  const auto outs = std::count(g_.outputs.begin(), g_.outputs.end(), from);
  if (outs > 1 || (outs == 1 && (!to->producer || to->owner != &g_ || is_graph_output(g_, to))))
    return false;
  ed_.replace_all_uses(from, to);
  uses_valid_ = false;
  return true;
}

Value* Rewriter::add_constant(Tensor t, const std::string& base) {
  uses_valid_ = false;
  return ed_.add_constant(std::move(t), base);
}

const Tensor* constant_value(const Value* v) {
  if (!v) return nullptr;
  if (v->is_constant()) return &v->initializer;
  const Node* p = producer_of(v, "Constant");
  if (!p) return nullptr;
  const Attribute* a = p->attr("value");
  return a && a->kind == Attribute::Kind::kTensor && a->t.defined() ? &a->t : nullptr;
}

std::optional<std::vector<int64_t>> constant_ints(const Value* v) {
  const Tensor* t = constant_value(v);
  if (!t || t->rank() > 1 || (t->dtype() != DType::kInt64 && t->dtype() != DType::kInt32))
    return std::nullopt;
  return t->to_int64_vector();
}

const Shape* static_shape(const Value* v) {
  if (!v || v->type.kind != Type::Kind::kTensor || !v->type.shape) return nullptr;
  return &*v->type.shape;
}

Node* producer_of(const Value* v, const char* op) {
  if (!v || !v->producer || v->producer->op_type != op) return nullptr;
  return canonical_domain(v->producer->domain).empty() ? v->producer : nullptr;
}

bool same_dim(const Dim& a, const Dim& b) {
  if (a.known() || b.known()) return a.known() && b.known() && a.value == b.value;
  return !a.symbol.empty() && a.symbol == b.symbol;
}

bool same_shape(const Value* a, const Value* b) {
  const Shape* sa = static_shape(a);
  const Shape* sb = static_shape(b);
  if (!sa || !sb || sa->rank() != sb->rank()) return false;
  for (size_t i = 0; i < sa->rank(); ++i)
    if (!same_dim(sa->dims[i], sb->dims[i])) return false;
  return true;
}

bool broadcasts_into(const std::vector<int64_t>& b, const Shape& x) {
  if (b.size() > x.rank()) return false;
  const size_t off = x.rank() - b.size();
  for (size_t k = 0; k < b.size(); ++k) {
    const Dim& d = x.dims[off + k];
    if (b[k] != 1 && !(d.known() && d.value == b[k])) return false;
  }
  return true;
}

Arg int_list_arg(const Node& n, int64_t opset, int input, const char* attr, int64_t input_since,
                 std::vector<int64_t>& out) {
  if (opset < input_since) {
    const Attribute* a = n.attr(attr);
    if (!a) return Arg::kAbsent;
    if (a->kind != Attribute::Kind::kInts) return Arg::kDynamic;
    out = a->ints;
    return Arg::kStatic;
  }
  if (static_cast<int>(n.inputs.size()) <= input || !n.inputs[input]) return Arg::kAbsent;
  auto v = constant_ints(n.inputs[input]);
  if (!v) return Arg::kDynamic;
  out = std::move(*v);
  return Arg::kStatic;
}

int64_t int_attr(const Node& n, const char* name, int64_t fallback) {
  const Attribute* a = n.attr(name);
  return a && a->kind == Attribute::Kind::kInt ? a->i : fallback;
}

std::optional<std::vector<int64_t>> normalized_axes(std::vector<int64_t> axes, int64_t rank) {
  for (int64_t& a : axes) {
    if (a < 0) {
      if (rank < 0) return std::nullopt;
      a += rank;
    }
    if (a < 0 || (rank >= 0 && a >= rank)) return std::nullopt;
  }
  std::sort(axes.begin(), axes.end());
  return axes;
}

namespace {

constexpr int kMaxRounds = 32;

using RuleTable = std::unordered_map<std::string, std::vector<Rule>>;

const RuleTable& rule_table() {
  static const RuleTable table = [] {
    std::vector<Rule> rules;
    add_identity_rules(rules);
    add_layout_rules(rules);
    add_shape_rules(rules);
    RuleTable t;
    for (const Rule& r : rules) t[r.op].push_back(r);
    return t;
  }();
  return table;
}

bool simplify_graph(Graph& g, int64_t opset, std::map<std::string, int64_t>& fired) {
  bool changed = false;
  // S1: subgraphs first; their rewrites stay inside them.
  for (auto& n : g.nodes)
    for (auto& [k, a] : n->attrs) {
      if (a.g) changed |= simplify_graph(*a.g, opset, fired);
      for (auto& sg : a.graphs) changed |= simplify_graph(*sg, opset, fired);
    }
  // S2: sweep the table over live nodes until a whole sweep fires nothing. Rules add no nodes,
  // so indices stay valid and the order stays topological.
  const RuleTable& table = rule_table();
  Rewriter rw(g, opset);
  for (int round = 0; round < kMaxRounds; ++round) {
    bool any = false;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      Node& n = *g.nodes[i];
      if (!canonical_domain(n.domain).empty()) continue;
      auto it = table.find(n.op_type);
      if (it == table.end()) continue;
      bool live = false;
      for (const Value* o : n.outputs) live |= o && rw.used(o);
      if (!live) continue;
      for (const Rule& r : it->second) {
        if (!r.fn(n, rw)) continue;
        rw.touched();
        ++fired[r.name];
        any = true;
        break;
      }
    }
    if (!any) break;
    changed = true;
  }
  return changed;
}

bool run(Model& m, PassContext& ctx) {
  std::map<std::string, int64_t> fired;
  bool changed = simplify_graph(*m.graph, m.opset(""), fired);
  // S3: the producers whose uses were rerouted are dead now.
  if (changed) dead_code_elimination_pass().run(m, ctx);
  if (ctx.time) {
    std::ostream& log = ctx.log ? *ctx.log : std::cerr;
    log << "simplify rules:";
    for (const auto& [name, count] : fired) log << " " << name << "=" << count;
    log << (fired.empty() ? " none\n" : "\n");
  }
  return changed;
}

}  // namespace
}  // namespace simplify

PassInfo simplify_pass() {
  return {"simplify", "remove no-op nodes and fold reshape/transpose/shape chains by a rule table",
          simplify::run};
}

}  // namespace kiln
