// localize_row_buffers: a global buffer that only one loop touches, each iteration i within its
// own row (i * row + r, 0 <= r < row: see row_index.h), as fuse_loops leaves a materialized row
// stage (Softmax's exp),
//   allocate E global[n * row] { ... for i in [0, n): { E[i*row + r] = ...; ... E[i*row + q] ... } ... }
// becomes a row-sized local buffer of each iteration:
//   ... for i in [0, n): allocate E local[row] { E[r] = ...; ... E[q] ... } ...
// so that the row stays in L1 (or the stack of a parallel loop's outlined body) instead of
// streaming an n-row buffer through memory. Requires flattened storage; runs after fuse_loops.
// Tests: tests/tir/test_tir.cc (TirLocalizeRowBuffers*).
#include "tir/passes.h"
#include "tir/rewrite.h"
#include "tir/row_index.h"

namespace kiln::tir {
namespace {

// Rows of at most this many elements go local (the stack of a parallel loop's body).
constexpr int64_t kMaxRow = 16384;

// The accesses of `b` in `s` (store and load indices; false when one is not flat).
bool indices_of(const Stmt& s, const BufferNode* b, std::vector<Expr>& stores, std::vector<Expr>& loads) {
  bool flat = true;
  visit_stmts(s, [&](const Stmt& x) {
    if (x->kind == StmtKind::kStore && x->buffer.get() == b) {
      flat &= x->indices.size() == 1;
      if (x->indices.size() == 1) stores.push_back(x->indices[0]);
    }
  });
  visit_exprs(s, [&](const Expr& e) {
    if (e->kind == ExprKind::kLoad && e->buffer.get() == b) {
      flat &= e->operands.size() == 1;
      if (e->operands.size() == 1) loads.push_back(e->operands[0]);
    }
  });
  return flat;
}

// `s` with the accesses of `from` rebased to `to`: index - var * row.
Stmt rebase(const Stmt& s, const Buffer& from, const Buffer& to, const Expr& var, int64_t row) {
  const Expr origin = var * int_imm(row, var->type);
  std::function<Expr(const Expr&)> fe = [&](const Expr& e) -> Expr {
    Expr m = map_operands(e, fe);
    if (m->kind == ExprKind::kLoad && m->buffer == from) return load(to, {simplify(m->operands[0] - origin)});
    return m;
  };
  std::function<Stmt(const Stmt&)> fs = [&](const Stmt& x) -> Stmt {
    Stmt m = map_stmt(x, fe, fs);
    if (m && m->kind == StmtKind::kStore && m->buffer == from) return store(to, {simplify(m->indices[0] - origin)}, m->value);
    return m;
  };
  return fs(s);
}

Stmt rewrite(const Stmt& s) {
  Stmt m = map_stmt(s, [](const Expr& e) { return e; }, rewrite);
  if (!m || m->kind != StmtKind::kAllocate || m->buffer->scope != "global" || m->buffer->shape.size() != 1) return m;
  const Buffer& b = m->buffer;
  std::vector<Expr> all_stores, all_loads, inside_stores, inside_loads;
  indices_of(m->body, b.get(), all_stores, all_loads);
  // The first loop in pre-order with an access is the outermost one around it: no enclosing
  // loop can carry a row from one run of it to the next.
  const StmtNode* loop = nullptr;
  visit_stmts(m->body, [&](const Stmt& x) {
    if (loop || x->kind != StmtKind::kFor) return;
    std::vector<Expr> stores, loads;
    indices_of(x->body, b.get(), stores, loads);
    if (!stores.empty() || !loads.empty()) loop = x.get();
  });
  if (!loop || !indices_of(loop->body, b.get(), inside_stores, inside_loads) || inside_stores.empty()) return m;
  if (all_stores.size() != inside_stores.size() || all_loads.size() != inside_loads.size()) return m;  // used outside
  const int64_t row = row_length(inside_stores[0], loop->var);
  if (row <= 0 || row > kMaxRow) return m;
  VarBounds inner;
  inner_loop_bounds(loop->body, inner);
  for (const auto* list : {&inside_stores, &inside_loads})
    for (const Expr& idx : *list)
      if (!in_row(idx, loop->var, row, inner)) return m;
  const Buffer local = make_buffer(b->name, b->dtype, {int_imm(row)}, "local");
  std::function<Stmt(const Stmt&)> place = [&](const Stmt& x) -> Stmt {
    if (x.get() == loop)
      return for_loop(x->var, x->min, x->extent, x->for_kind, allocate(local, rebase(x->body, b, local, x->var, row)));
    return map_stmt(x, [](const Expr& e) { return e; }, place);
  };
  return place(m->body);
}

}  // namespace

PrimFunc localize_row_buffers(const PrimFunc& f) { return with_rewritten_body(f, rewrite); }

}  // namespace kiln::tir
