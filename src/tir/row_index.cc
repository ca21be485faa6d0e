// Row-local indices (see row_index.h).
#include "tir/row_index.h"

#include "tir/passes.h"
#include "tir/rewrite.h"

namespace kiln::tir {

void inner_loop_bounds(const Stmt& s, VarBounds& out) {
  visit_stmts(s, [&](const Stmt& x) {
    int64_t m = 0, e = 0;
    if (x->kind == StmtKind::kFor && is_const_int(x->min, &m) && is_const_int(x->extent, &e) && e > 0)
      out[x->var.get()] = IntBound::range(m, m + e - 1);
  });
}

bool in_row(const Expr& e, const Expr& var, int64_t row, const VarBounds& inner) {
  if (!e) return false;
  if (row == 1) return e.get() == var.get();
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

int64_t row_length(const Expr& first_store, const Expr& var) {
  if (!first_store) return 0;
  if (first_store.get() == var.get()) return 1;
  const Expr base = first_store->kind == ExprKind::kRamp ? first_store->operands[0] : first_store;
  int64_t row = 0;
  const Expr step = simplify(substitute(base, var, var + int_imm(1, var->type)) - base);
  return is_const_int(step, &row) && row > 0 ? row : 0;
}

}  // namespace kiln::tir
