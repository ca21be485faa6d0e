// simplify rules, layout family: data-movement ops that are no-ops or chains of one kind.
//   Transpose(Transpose(x, p1), p2) -> Transpose(x, p1∘p2), or x when that is the identity;
//   Transpose(x, identity perm) -> x;
//   Reshape(Reshape(x, s1), s2) -> Reshape(x, s2) when s2 is static and its 0 ("copy dim")
//   entries are resolved from the intermediate's static dims (or provably copy the same dim of x);
//   Reshape / Expand / Flatten / Slice whose result provably has x's shape (static types or
//   static arguments) -> x;  Squeeze(Unsqueeze(x, a), a) and Unsqueeze(Squeeze(x, a), a) -> x;
//   Concat of one input -> it;  Split into one output -> x.
// Part of the simplify pass (algebraic_simplify.cc); tests: tests/pass/golden/simplify/.
#include <algorithm>
#include <limits>
#include <numeric>

#include "pass/simplify.h"

namespace kiln::simplify {
namespace {

int64_t rank_of(const Value* v) {
  const Shape* s = static_shape(v);
  return s ? static_cast<int64_t>(s->rank()) : -1;
}

// ---- Transpose --------------------------------------------------------------------------------

// The permutation of a Transpose (default: reversed axes, which needs the rank).
std::optional<std::vector<int64_t>> perm_of(const Node& n, int64_t rank) {
  const Attribute* a = n.attr("perm");
  if (a) {
    if (a->kind != Attribute::Kind::kInts) return std::nullopt;
    std::vector<int64_t> sorted = a->ints;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size(); ++i)
      if (sorted[i] != static_cast<int64_t>(i)) return std::nullopt;
    return a->ints;
  }
  if (rank < 0) return std::nullopt;
  std::vector<int64_t> p(static_cast<size_t>(rank));
  std::iota(p.rbegin(), p.rend(), 0);
  return p;
}

bool is_identity_perm(const std::vector<int64_t>& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

bool transpose_identity(Node& n, Rewriter& rw) {
  auto p = perm_of(n, rank_of(n.inputs[0]));
  return p && is_identity_perm(*p) && rw.replace(n.outputs[0], n.inputs[0]);
}

bool transpose_chain(Node& n, Rewriter& rw) {
  Node* inner = producer_of(n.inputs[0], "Transpose");
  if (!inner) return false;
  Value* x = inner->inputs[0];
  int64_t rank = rank_of(x);
  if (rank < 0 && n.attr("perm")) rank = static_cast<int64_t>(n.attr("perm")->ints.size());
  if (rank < 0 && inner->attr("perm")) rank = static_cast<int64_t>(inner->attr("perm")->ints.size());
  if (!inner->attr("perm") && !n.attr("perm") && rw.replace(n.outputs[0], x))
    return true;  // reversing the axes twice, whatever the rank
  auto p1 = perm_of(*inner, rank);
  auto p2 = perm_of(n, rank);
  if (!p1 || !p2 || p1->size() != p2->size()) return false;
  // Output axis i of the outer is axis p2[i] of the inner, which is axis p1[p2[i]] of x.
  std::vector<int64_t> q(p2->size());
  for (size_t i = 0; i < q.size(); ++i) q[i] = (*p1)[static_cast<size_t>((*p2)[i])];
  if (is_identity_perm(q) && rw.replace(n.outputs[0], x)) return true;
  n.inputs[0] = x;
  n.attrs["perm"] = Attribute::make_ints(q);
  return true;
}

// ---- Reshape ----------------------------------------------------------------------------------

bool allowzero(const Node& n, int64_t opset) {
  return opset >= 14 && int_attr(n, "allowzero", 0) != 0;
}

bool reshape_noop(Node& n, Rewriter& rw) {
  Value* x = n.inputs[0];
  if (same_shape(x, n.outputs[0])) return rw.replace(n.outputs[0], x);
  std::vector<int64_t> s;
  const Shape* xs = static_shape(x);
  if (!xs || int_list_arg(n, rw.opset(), 1, "shape", 5, s) != Arg::kStatic) return false;
  if (s.size() != xs->rank()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const Dim& d = xs->dims[i];
    bool copies = s[i] == 0 && !allowzero(n, rw.opset());
    if (!copies && !(d.known() && d.value == s[i])) return false;
  }
  return rw.replace(n.outputs[0], x);
}

void set_reshape_shape(Node& n, Rewriter& rw, const std::vector<int64_t>& s) {
  if (rw.opset() < 5) {
    n.attrs["shape"] = Attribute::make_ints(s);
    return;
  }
  Tensor t(DType::kInt64, {static_cast<int64_t>(s.size())});
  std::copy(s.begin(), s.end(), t.data<int64_t>());
  n.inputs[1] = rw.add_constant(std::move(t), "shape");
}

bool reshape_chain(Node& n, Rewriter& rw) {
  Node* inner = producer_of(n.inputs[0], "Reshape");
  if (!inner) return false;
  std::vector<int64_t> s;
  if (int_list_arg(n, rw.opset(), 1, "shape", 5, s) != Arg::kStatic) return false;
  Value* mid = n.inputs[0];
  Value* x = inner->inputs[0];
  bool resolved = false;
  if (!allowzero(n, rw.opset())) {
    // A 0 copies dim i of the intermediate: write that size, or keep the 0 when x's dim i is
    // provably the same. A size of 0 cannot be written (it would read as "copy").
    const Shape* ms = static_shape(mid);
    const Shape* xs = static_shape(x);
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] != 0) continue;
      if (!ms || i >= ms->rank()) return false;
      const Dim& md = ms->dims[i];
      if (xs && i < xs->rank() && same_dim(xs->dims[i], md)) continue;
      if (!md.known() || md.value == 0) return false;
      s[i] = md.value;
      resolved = true;
    }
  }
  n.inputs[0] = x;
  if (resolved) set_reshape_shape(n, rw, s);
  return true;
}

// ---- Squeeze / Unsqueeze ----------------------------------------------------------------------

// Static axes of a Squeeze/Unsqueeze normalized against `rank`, or sorted as given when the rank
// is unknown (callers compare two lists that index the same tensor).
std::optional<std::vector<int64_t>> axes_of(const Node& n, int64_t opset, int64_t rank) {
  std::vector<int64_t> axes;
  if (int_list_arg(n, opset, 1, "axes", 13, axes) != Arg::kStatic) return std::nullopt;
  if (rank >= 0) return normalized_axes(axes, rank);
  std::sort(axes.begin(), axes.end());  // both lists are normalized against the same rank
  return axes;
}

bool squeeze_unsqueeze(Node& n, Rewriter& rw) {
  Node* inner = producer_of(n.inputs[0], "Unsqueeze");
  if (!inner) return false;
  Value* x = inner->inputs[0];
  // Both lists index the unsqueezed tensor.
  const int64_t rank = rank_of(n.inputs[0]);
  auto a1 = axes_of(*inner, rw.opset(), rank);
  auto a2 = axes_of(n, rw.opset(), rank);
  return a1 && a2 && !a1->empty() && *a1 == *a2 && rw.replace(n.outputs[0], x);
}

bool unsqueeze_squeeze(Node& n, Rewriter& rw) {
  Node* inner = producer_of(n.inputs[0], "Squeeze");
  if (!inner) return false;
  Value* x = inner->inputs[0];
  // Both lists index the tensor before squeezing (the squeezed dims were 1, else it fails).
  const int64_t rank = rank_of(x);
  auto a1 = axes_of(*inner, rw.opset(), rank);
  auto a2 = axes_of(n, rw.opset(), rank);
  return a1 && a2 && !a1->empty() && *a1 == *a2 && rw.replace(n.outputs[0], x);
}

// ---- Flatten / Expand / Slice / Concat / Split ----------------------------------------------

bool flatten_noop(Node& n, Rewriter& rw) {
  Value* x = n.inputs[0];
  const int64_t axis = int_attr(n, "axis", 1);
  bool noop = rank_of(x) == 2 && (axis == 1 || axis == -1);
  return (noop || same_shape(x, n.outputs[0])) && rw.replace(n.outputs[0], x);
}

bool expand_noop(Node& n, Rewriter& rw) {
  Value* x = n.inputs[0];
  if (same_shape(x, n.outputs[0])) return rw.replace(n.outputs[0], x);
  auto s = constant_ints(n.inputs[1]);
  const Shape* xs = static_shape(x);
  if (!s || !xs || constant_value(n.inputs[1])->rank() != 1) return false;
  return broadcasts_into(*s, *xs) && rw.replace(n.outputs[0], x);
}

bool slice_noop(Node& n, Rewriter& rw) {
  Value* x = n.inputs[0];
  const Shape* xs = static_shape(x);
  if (!xs) return false;
  const int64_t rank = static_cast<int64_t>(xs->rank());
  std::vector<int64_t> starts, ends, axes, steps;
  const int64_t op = rw.opset();
  if (int_list_arg(n, op, 1, "starts", 10, starts) != Arg::kStatic ||
      int_list_arg(n, op, 2, "ends", 10, ends) != Arg::kStatic || starts.size() != ends.size())
    return false;
  Arg a = int_list_arg(n, op, 3, "axes", 10, axes);
  if (a == Arg::kDynamic) return false;
  if (a == Arg::kAbsent) {
    axes.resize(starts.size());
    std::iota(axes.begin(), axes.end(), 0);
  }
  Arg st = op >= 10 ? int_list_arg(n, op, 4, "steps", 10, steps) : Arg::kAbsent;
  if (st == Arg::kDynamic) return false;
  if (st == Arg::kAbsent) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size()) return false;
  bool takes_all = true;
  for (size_t k = 0; k < starts.size() && takes_all; ++k) {
    const int64_t ax = axes[k] < 0 ? axes[k] + rank : axes[k];
    if (ax < 0 || ax >= rank || steps[k] != 1) return false;
    const Dim& d = xs->dims[static_cast<size_t>(ax)];
    const bool start0 = starts[k] == 0 || (d.known() && starts[k] < 0 && starts[k] + d.value <= 0);
    const bool end_all =
        ends[k] == std::numeric_limits<int64_t>::max() || (d.known() && ends[k] >= d.value);
    takes_all = start0 && end_all;
  }
  if (!takes_all && !(std::all_of(steps.begin(), steps.end(), [](int64_t s) { return s == 1; }) &&
                      same_shape(x, n.outputs[0])))
    return false;  // with step 1, a result as long as the input is all of it
  return rw.replace(n.outputs[0], x);
}

bool concat_single(Node& n, Rewriter& rw) {
  return n.inputs.size() == 1 && n.inputs[0] && rw.replace(n.outputs[0], n.inputs[0]);
}

bool split_single(Node& n, Rewriter& rw) {
  return n.outputs.size() == 1 && rw.replace(n.outputs[0], n.inputs[0]);
}

}  // namespace

void add_layout_rules(std::vector<Rule>& rules) {
  rules.insert(rules.end(), {
                                {"Transpose", "transpose-identity", transpose_identity},
                                {"Transpose", "transpose-chain", transpose_chain},
                                {"Reshape", "reshape-noop", reshape_noop},
                                {"Reshape", "reshape-chain", reshape_chain},
                                {"Squeeze", "squeeze-unsqueeze", squeeze_unsqueeze},
                                {"Unsqueeze", "unsqueeze-squeeze", unsqueeze_squeeze},
                                {"Flatten", "flatten-noop", flatten_noop},
                                {"Expand", "expand-noop", expand_noop},
                                {"Slice", "slice-noop", slice_noop},
                                {"Concat", "concat-single", concat_single},
                                {"Split", "split-single", split_single},
                            });
}

}  // namespace kiln::simplify
