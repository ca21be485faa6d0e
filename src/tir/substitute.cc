// substitute: replaces vars by expressions (see passes.h). Bindings (loop and let vars) are not
// uses and are left alone.
#include "tir/passes.h"
#include "tir/rewrite.h"

namespace kiln::tir {

Expr substitute(const Expr& e, const VarMap& vmap) {
  if (!e || vmap.empty()) return e;
  if (e->kind == ExprKind::kVar) {
    auto it = vmap.find(e.get());
    return it == vmap.end() ? e : it->second;
  }
  return map_operands(e, [&](const Expr& x) { return substitute(x, vmap); });
}

Stmt substitute(const Stmt& s, const VarMap& vmap) {
  if (!s || vmap.empty()) return s;
  return map_stmt(
      s, [&](const Expr& x) { return substitute(x, vmap); },
      [&](const Stmt& x) { return substitute(x, vmap); });
}

Expr substitute(const Expr& e, const Expr& var, const Expr& value) {
  return substitute(e, VarMap{{var.get(), value}});
}

Stmt substitute(const Stmt& s, const Expr& var, const Expr& value) {
  return substitute(s, VarMap{{var.get(), value}});
}

}  // namespace kiln::tir
