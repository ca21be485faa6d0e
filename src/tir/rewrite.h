// Generic helpers the tir passes are built from: structural equality, rebuilding a node with new
// children through the checked constructors (so types and lanes are recomputed), and variable
// use queries. Tests: tests/tir/test_tir.cc.
#pragma once

#include <functional>

#include "tir/ir.h"

namespace kiln::tir {

// Same tree shape, kinds, types, constants, buffers; vars compare by identity.
bool structural_equal(const Expr& a, const Expr& b);

// `e` with its operands replaced (rebuilt through binary/load/...: scalar operands broadcast to
// vector ones); returns `e` itself when every operand is unchanged.
Expr with_operands(const Expr& e, std::vector<Expr> operands);
Expr map_operands(const Expr& e, const std::function<Expr(const Expr&)>& f);

// `s` with `fe` applied to its direct expression children (not loop/let vars) and `fs` to its
// direct statement children. A null statement child result removes it: a For/LetStmt/Allocate
// whose body becomes null is null, an If with nothing left is null.
Stmt map_stmt(const Stmt& s, const std::function<Expr(const Expr&)>& fe,
              const std::function<Stmt(const Stmt&)>& fs);

// Calls `f` on every expression node (pre-order) of `e`, of `s`'s expressions (including loop
// and let vars).
void visit_exprs(const Expr& e, const std::function<void(const Expr&)>& f);
void visit_exprs(const Stmt& s, const std::function<void(const Expr&)>& f);
// Calls `f` on every statement (pre-order).
void visit_stmts(const Stmt& s, const std::function<void(const Stmt&)>& f);

bool uses_var(const Expr& e, const ExprNode* var);
bool uses_var(const Stmt& s, const ExprNode* var);
// Whether `e` loads from buffer `b`.
bool loads_buffer(const Expr& e, const BufferNode* b);
// Add, Mul, Min, Max: the reductions' combiners.
inline bool is_combiner(ExprKind k) {
  return k == ExprKind::kAdd || k == ExprKind::kMul || k == ExprKind::kMin || k == ExprKind::kMax;
}

// A pass over a function's body: `f` with `rewrite` applied to its body (when it has one); a
// body that ends up null becomes an empty sequence, as the later passes and codegen expect.
PrimFunc with_rewritten_body(const PrimFunc& f, const std::function<Stmt(const Stmt&)>& rewrite);

}  // namespace kiln::tir
