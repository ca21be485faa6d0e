// unroll_loops: kUnrolled loops with a constant extent become their body repeated, the var
// replaced by min, min+1, ... (then simplified). Unrolled loops with a symbolic extent become
// serial loops (nothing to repeat a known number of times). Inner loops are unrolled first.
// Tests: tests/tir/test_tir.cc (TirUnroll*).
#include "tir/passes.h"
#include "tir/rewrite.h"
#include "tir/simplify.h"

namespace kiln::tir {
namespace {

Stmt unroll(const Stmt& s) {
  Stmt m = map_stmt(s, [](const Expr& e) { return e; }, unroll);
  if (!m || m->kind != StmtKind::kFor || m->for_kind != ForKind::kUnrolled) return m;
  int64_t n = 0;
  Expr mn = simplify(m->min);
  if (!is_const_int(simplify(m->extent), &n))
    return for_loop(m->var, m->min, m->extent, ForKind::kSerial, m->body);
  std::vector<Stmt> bodies;
  for (int64_t k = 0; k < n; ++k)
    bodies.push_back(simplify(substitute(m->body, m->var, simplify(mn + int_imm(k, mn->type)))));
  return seq(std::move(bodies));
}

}  // namespace

PrimFunc unroll_loops(const PrimFunc& f) { return with_rewritten_body(f, unroll); }

}  // namespace kiln::tir
