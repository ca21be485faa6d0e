// Internal to the simplify pass (algebraic_simplify.cc and simplify_*.cc): the rewrite context
// every rule gets, the rule table type, and small helpers for reading static facts (constants,
// static shapes, int lists given as attribute or constant input).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/rewrite.h"

namespace kiln::simplify {

// What a rule may do to the graph it runs on. Rules edit nodes in place or reroute uses; they
// never add nodes, so node order stays topological.
class Rewriter {
 public:
  Rewriter(Graph& g, int64_t opset) : g_(g), ed_(g), opset_(opset) {}
  Graph& graph() { return g_; }
  int64_t opset() const { return opset_; }  // default-domain opset of the model
  // True when a node of this graph (or a subgraph) uses `v`, or `v` is a graph output.
  bool used(const Value* v);
  // Reroutes every use of `from` to `to`. When `from` is a graph output, `to` takes over its
  // name; if it cannot (a graph input, a constant, a captured value or already an output, or
  // `from` is listed twice) nothing changes and the result is false: the caller keeps its node.
  bool replace(Value* from, Value* to);
  // A new constant of this graph holding `t`, named after `base`.
  Value* add_constant(Tensor t, const std::string& base);
  // Marks the use lists stale (after a rule edited node inputs in place).
  void touched() { uses_valid_ = false; }

 private:
  Graph& g_;
  GraphEditor ed_;
  int64_t opset_;
  UseMap uses_;
  bool uses_valid_ = false;
};

// A rule matches a node of default-domain op `op` (and looks at its producers); it returns true
// when it rewrote something. It must not fire again on its own result, so the loop terminates.
using RuleFn = bool (*)(Node& n, Rewriter& rw);
struct Rule {
  const char* op;
  const char* name;  // reported in the per-rule counts
  RuleFn fn;
};

void add_identity_rules(std::vector<Rule>& rules);  // simplify_identity.cc
void add_layout_rules(std::vector<Rule>& rules);    // simplify_layout.cc
void add_shape_rules(std::vector<Rule>& rules);     // simplify_shape.cc

// ---- helpers (algebraic_simplify.cc) --------------------------------------------------------

// The tensor of an initializer (not an overridable graph input) or of a Constant node's `value`.
const Tensor* constant_value(const Value* v);
// Elements of a 0-D or 1-D int32/int64 constant.
std::optional<std::vector<int64_t>> constant_ints(const Value* v);
// The shape of a tensor-typed value when its rank is known; nullptr otherwise.
const Shape* static_shape(const Value* v);
// The node producing `v` when it is a default-domain `op`; nullptr otherwise.
Node* producer_of(const Value* v, const char* op);
// Dims that are provably the same size: equal known sizes or the same named symbol.
bool same_dim(const Dim& a, const Dim& b);
// Both values have known ranks and provably equal dims.
bool same_shape(const Value* a, const Value* b);
// True when a tensor of dims `b` broadcasts into `x` without changing it (numpy rules):
// rank(b) <= rank(x) and each aligned dim of b is 1 or equals x's known dim.
bool broadcasts_into(const std::vector<int64_t>& b, const Shape& x);

// An int list given as attribute `attr` before opset `input_since` and as input `input` from it.
enum class Arg { kAbsent, kStatic, kDynamic };
Arg int_list_arg(const Node& n, int64_t opset, int input, const char* attr, int64_t input_since,
                 std::vector<int64_t>& out);
int64_t int_attr(const Node& n, const char* name, int64_t fallback);
// Axes normalized into [0, rank) and sorted; nullopt when one is out of range or rank < 0 is
// needed (negative axes with unknown rank).
std::optional<std::vector<int64_t>> normalized_axes(std::vector<int64_t> axes, int64_t rank);

}  // namespace kiln::simplify
