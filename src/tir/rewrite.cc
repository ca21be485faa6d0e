// Structural equality and child-rebuilding helpers for the tir passes (see rewrite.h).
#include "tir/rewrite.h"

#include <algorithm>

#include "core/error.h"

namespace kiln::tir {

bool structural_equal(const Expr& a, const Expr& b) {
  if (a == b) return true;
  if (!a || !b) return false;
  if (a->kind != b->kind || a->type != b->type) return false;
  switch (a->kind) {
    case ExprKind::kIntImm: return a->int_value == b->int_value;
    case ExprKind::kFloatImm: return a->float_value == b->float_value;
    case ExprKind::kVar: return false;  // distinct vars (identity checked above)
    case ExprKind::kCall:
      if (a->name != b->name) return false;
      break;
    case ExprKind::kLoad:
      if (a->buffer != b->buffer) return false;
      break;
    default: break;
  }
  if (a->operands.size() != b->operands.size()) return false;
  for (size_t i = 0; i < a->operands.size(); ++i)
    if (!structural_equal(a->operands[i], b->operands[i])) return false;
  return true;
}

Expr with_operands(const Expr& e, std::vector<Expr> ops) {
  bool same = ops.size() == e->operands.size();
  for (size_t i = 0; same && i < ops.size(); ++i) same = ops[i] == e->operands[i];
  if (same) return e;
  switch (e->kind) {
    case ExprKind::kIntImm:
    case ExprKind::kFloatImm:
    case ExprKind::kVar:
      return e;
    case ExprKind::kNot: return logical_not(ops[0]);
    case ExprKind::kSelect: return select(ops[0], ops[1], ops[2]);
    case ExprKind::kCast: return cast(e->type.with_lanes(ops[0]->type.lanes), ops[0]);
    case ExprKind::kLoad: return load(e->buffer, std::move(ops), 1);
    case ExprKind::kCall: {
      int lanes = 1;
      for (const Expr& a : ops) lanes = std::max(lanes, a->type.lanes);
      if (lanes == 1) return call(e->name, e->type, std::move(ops));
      for (Expr& a : ops)
        if (a->type.lanes == 1) a = broadcast(a, lanes);
      return call(e->name, e->type.with_lanes(lanes), std::move(ops));
    }
    case ExprKind::kRamp: return ramp(ops[0], ops[1], e->type.lanes);
    case ExprKind::kBroadcast: return broadcast(ops[0], e->type.lanes);
    case ExprKind::kLet: return let(ops[0], ops[1], ops[2]);
    default: return binary(e->kind, ops[0], ops[1]);
  }
}

Expr map_operands(const Expr& e, const std::function<Expr(const Expr&)>& f) {
  if (e->operands.empty()) return e;
  std::vector<Expr> ops;
  ops.reserve(e->operands.size());
  for (size_t i = 0; i < e->operands.size(); ++i) {
    // The bound var of a Let is a binding, not a use.
    if (e->kind == ExprKind::kLet && i == 0) {
      ops.push_back(e->operands[0]);
    } else {
      ops.push_back(f(e->operands[i]));
    }
  }
  return with_operands(e, std::move(ops));
}

Stmt map_stmt(const Stmt& s, const std::function<Expr(const Expr&)>& fe,
              const std::function<Stmt(const Stmt&)>& fs) {
  switch (s->kind) {
    case StmtKind::kFor: {
      Expr mn = fe(s->min), ext = fe(s->extent);
      Stmt body = fs(s->body);
      if (!body) return nullptr;
      if (mn == s->min && ext == s->extent && body == s->body) return s;
      return for_loop(s->var, mn, ext, s->for_kind, body);
    }
    case StmtKind::kLetStmt: {
      Expr v = fe(s->value);
      Stmt body = fs(s->body);
      if (!body) return nullptr;
      if (v == s->value && body == s->body) return s;
      return let_stmt(s->var, v, body);
    }
    case StmtKind::kStore: {
      std::vector<Expr> idx;
      bool same = true;
      for (const Expr& i : s->indices) {
        idx.push_back(fe(i));
        same = same && idx.back() == i;
      }
      Expr v = fe(s->value);
      if (same && v == s->value) return s;
      return store(s->buffer, std::move(idx), v);
    }
    case StmtKind::kAllocate: {
      Stmt body = fs(s->body);
      if (!body) return nullptr;
      if (body == s->body) return s;
      return allocate(s->buffer, body);
    }
    case StmtKind::kIfThenElse: {
      Expr c = fe(s->cond);
      Stmt t = fs(s->then_case);
      Stmt e = s->else_case ? fs(s->else_case) : nullptr;
      if (!t && !e) return nullptr;
      if (!t) return if_then_else(logical_not(c), e);
      if (c == s->cond && t == s->then_case && e == s->else_case) return s;
      return if_then_else(c, t, e);
    }
    case StmtKind::kSeq: {
      std::vector<Stmt> out;
      bool same = true;
      for (const Stmt& x : s->seq) {
        Stmt y = fs(x);
        same = same && y == x;
        if (y) out.push_back(y);
      }
      if (same) return s;
      if (out.empty()) return nullptr;
      return seq(std::move(out));
    }
    case StmtKind::kEvaluate: {
      Expr v = fe(s->value);
      if (v == s->value) return s;
      return evaluate(v);
    }
  }
  return s;
}

void visit_exprs(const Expr& e, const std::function<void(const Expr&)>& f) {
  if (!e) return;
  f(e);
  for (const Expr& o : e->operands) visit_exprs(o, f);
}

void visit_stmts(const Stmt& s, const std::function<void(const Stmt&)>& f) {
  if (!s) return;
  f(s);
  visit_stmts(s->body, f);
  visit_stmts(s->then_case, f);
  visit_stmts(s->else_case, f);
  for (const Stmt& x : s->seq) visit_stmts(x, f);
}

void visit_exprs(const Stmt& s, const std::function<void(const Expr&)>& f) {
  visit_stmts(s, [&](const Stmt& x) {
    visit_exprs(x->var, f);
    visit_exprs(x->min, f);
    visit_exprs(x->extent, f);
    visit_exprs(x->value, f);
    visit_exprs(x->cond, f);
    for (const Expr& i : x->indices) visit_exprs(i, f);
  });
}

bool uses_var(const Expr& e, const ExprNode* var) {
  if (!e) return false;
  if (e.get() == var) return true;
  for (const Expr& o : e->operands)
    if (uses_var(o, var)) return true;
  return false;
}

bool uses_var(const Stmt& s, const ExprNode* var) {
  bool found = false;
  visit_exprs(s, [&](const Expr& e) { found = found || e.get() == var; });
  return found;
}

bool loads_buffer(const Expr& e, const BufferNode* b) {
  bool found = false;
  visit_exprs(e, [&](const Expr& x) { found = found || (x->kind == ExprKind::kLoad && x->buffer.get() == b); });
  return found;
}

PrimFunc with_rewritten_body(const PrimFunc& f, const std::function<Stmt(const Stmt&)>& rewrite) {
  PrimFunc out = f;
  out.body = f.body ? rewrite(f.body) : f.body;
  if (!out.body) out.body = seq({});
  return out;
}

}  // namespace kiln::tir
