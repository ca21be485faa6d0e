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
// second reads those buffers only in that row and stores to no buffer the first accesses.
// Requires flattened storage. Tests: tests/tir/test_tir.cc (TirFuse*).
#include <map>
#include <set>

#include "tir/passes.h"
#include "tir/rewrite.h"
#include "tir/row_index.h"
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
    const int64_t row = it->second.empty() ? 0 : row_length(it->second[0], first->var);
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
