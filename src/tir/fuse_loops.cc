// fuse_loops: adjacent loops of one statement list over the same constant range and of the same
// kind, where the second reads what the first writes only at the element the same iteration
// wrote,
//   for i in [0, n): { ... B[i] = ... }        for i in [0, n):
//   for j in [0, n): { ... B[j] ... }    ->      { ... B[i] = ...; ... B[i] ... }
// become one loop. A row-wise chain (Softmax: row max, row exp, row sum of it, normalize;
// LayerNorm: mean, variance, normalize) then reads each row while it is in L1 instead of
// streaming the whole input once per stage. Legal when: every store of the first loop to a
// buffer the second accesses lies in the iteration's own row (the loop var itself as index, or
// var * row + r with 0 <= r < row over the inner loops; no later iteration overwrites it); the
// second reads those buffers only in that row and stores to no buffer the first accesses. Requires flattened storage. Tests: tests/tir/test_tir.cc (TirFuse*).
#include <map>
#include <set>

#include "tir/passes.h"
#include "tir/rewrite.h"
#include "tir/simplify.h"

namespace kiln::tir {
namespace {

struct Accesses {
  std::map<const BufferNode*, std::vector<Expr>> stores, loads;  // flat indices
};

Accesses accesses_of(const Stmt& s) {
  Accesses a;
  visit_stmts(s, [&](const Stmt& x) {
    if (x->kind == StmtKind::kStore) a.stores[x->buffer.get()].push_back(x->indices.size() == 1 ? x->indices[0] : nullptr);
  });
  visit_exprs(s, [&](const Expr& e) {
    if (e->kind == ExprKind::kLoad) a.loads[e->buffer.get()].push_back(e->operands.size() == 1 ? e->operands[0] : nullptr);
  });
  return a;
}

bool is_var(const Expr& e, const Expr& var) { return e && e.get() == var.get(); }

// The constant bounds of the loop vars of the loops inside `s`.
void inner_loop_bounds(const Stmt& s, VarBounds& out) {
  visit_stmts(s, [&](const Stmt& x) {
    int64_t m = 0, e = 0;
    if (x->kind == StmtKind::kFor && is_const_int(x->min, &m) && is_const_int(x->extent, &e) && e > 0)
      out[x->var.get()] = IntBound::range(m, m + e - 1);
  });
}

// Whether every lane of index `e` lies in row `var` of rows of `row` elements: e = var * row + r
// with 0 <= r < row over the inner loops' ranges (row 1: e is var itself).
bool in_row(const Expr& e, const Expr& var, int64_t row, const VarBounds& inner) {
  if (!e) return false;
  if (row == 1) return is_var(e, var);
  Expr base = e;
  int64_t span = 0;  // the lanes beyond the base
  if (e->kind == ExprKind::kRamp) {
    int64_t stride = 0;
    if (!is_const_int(e->operands[1], &stride) || stride < 0) return false;
    base = e->operands[0];
    span = stride * (e->type.lanes - 1);
  }
  const Expr rest = simplify(base - var * int_imm(row, var->type));
  if (uses_var(rest, var.get())) return false;
  const IntBound b = bound_of(rest, inner);
  return b.min != IntBound::kNegInf && b.max != IntBound::kPosInf && b.min >= 0 && b.max + span < row;
}

// The row length the stores of `buf` in `first` write per iteration: 1 when they index by the
// loop var itself, else the coefficient of the var in the first store's index (0: none).
int64_t row_length(const std::vector<Expr>& stores, const Expr& var) {
  if (stores.empty() || !stores[0]) return 0;
  if (is_var(stores[0], var)) return 1;
  const Expr base = stores[0]->kind == ExprKind::kRamp ? stores[0]->operands[0] : stores[0];
  int64_t row = 0;
  const Expr step = simplify(substitute(base, var, var + int_imm(1, var->type)) - base);
  return is_const_int(step, &row) && row > 0 ? row : 0;
}

// Whether `second` (its var already renamed to first's) may run in the same iteration as `first`:
// what the second reads of the first's stores lies in the same row (one element per iteration,
// or a row of elements, e.g. Softmax's exp row that its sum and output read).
bool fusable(const Stmt& first, const Stmt& second) {
  const Accesses a = accesses_of(first), b = accesses_of(second);
  for (const auto& [buf, idx] : b.stores)
    if (a.stores.count(buf) || a.loads.count(buf)) return false;
  VarBounds inner_a, inner_b;
  inner_loop_bounds(first->body, inner_a);
  inner_loop_bounds(second->body, inner_b);
  for (const auto& [buf, idx] : b.loads) {
    auto it = a.stores.find(buf);
    if (it == a.stores.end()) continue;
    const int64_t row = row_length(it->second, first->var);
    if (row == 0) return false;
    for (const Expr& w : it->second)
      if (!in_row(w, first->var, row, inner_a)) return false;
    for (const Expr& r : idx)
      if (!in_row(r, first->var, row, inner_b)) return false;
  }
  return true;
}

bool same_range(const Stmt& a, const Stmt& b) {
  int64_t am = 0, ae = 0, bm = 0, be = 0;
  return a->for_kind == b->for_kind && a->var->type == b->var->type && is_const_int(a->min, &am) &&
         is_const_int(a->extent, &ae) && is_const_int(b->min, &bm) && is_const_int(b->extent, &be) && am == bm &&
         ae == be && a->for_kind != ForKind::kVectorized;
}

Stmt rewrite(const Stmt& s) {
  Stmt m = map_stmt(s, [](const Expr& e) { return e; }, rewrite);
  if (!m || m->kind != StmtKind::kSeq) return m;
  std::vector<Stmt> out;
  for (const Stmt& x : m->seq) {
    if (!out.empty() && out.back()->kind == StmtKind::kFor && x->kind == StmtKind::kFor && same_range(out.back(), x)) {
      const Stmt& prev = out.back();
      Stmt renamed = for_loop(prev->var, x->min, x->extent, x->for_kind, substitute(x->body, x->var, prev->var));
      if (fusable(prev, renamed)) {
        out.back() = for_loop(prev->var, prev->min, prev->extent, prev->for_kind, seq({prev->body, renamed->body}));
        continue;
      }
    }
    out.push_back(x);
  }
  return seq(std::move(out));
}

}  // namespace

PrimFunc fuse_loops(const PrimFunc& f) { return with_rewritten_body(f, rewrite); }

}  // namespace kiln::tir
