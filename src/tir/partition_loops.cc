// partition_loops: removes tail guards. A loop `for v in [m, m + n)` (constant m and n) whose
// body holds `if (cond)` guards that the bound analysis proves true for v in [m, m + k) but not
// for the whole range (the guards of a non-dividing split: `if (vo*16 + vi < 100)`) becomes
//   for v in [m, m + k): body with those guards folded away
//   for v in [m + k, m + n): body (the tail, where the guards stay or fold to false)
// k is the largest prefix on which every such guard is provable (binary search over the bound
// analysis). Loops are visited outside-in with the bounds of the enclosing vars in scope, so a
// tail's inner loops are partitioned in turn. Requires nothing; guarantees the same stores in
// the same order. Tests: tests/tir/test_tir.cc (TirPartition*).
#include <functional>

#include "tir/passes.h"
#include "tir/rewrite.h"
#include "tir/simplify.h"

namespace kiln::tir {
namespace {

class Partitioner {
 public:
  Stmt mutate(const Stmt& s) {
    if (s->kind != StmtKind::kFor)
      return map_stmt(s, [](const Expr& e) { return e; }, [&](const Stmt& x) { return mutate(x); });
    int64_t m = 0, n = 0;
    Expr mn = simplify(s->min, bounds_), ext = simplify(s->extent, bounds_);
    if (!is_const_int(mn, &m) || !is_const_int(ext, &n) || n <= 1) {
      if (Stmt p = partition_symbolic(s, mn)) return p;
      return recurse_loop(s);
    }
    // Guards provable on the first iteration are the candidates.
    std::vector<Expr> guards = provable_guards(s, m, 1);
    if (guards.empty()) return recurse_loop(s);
    int64_t lo = 1, hi = n;  // largest k in [lo, hi] with all candidates provable
    while (lo < hi) {
      int64_t mid = lo + (hi - lo + 1) / 2;
      if (all_provable(s, m, mid, guards)) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    if (lo == n) return recurse_loop(s);  // provable everywhere: simplify folds the guards
    DataType t = s->var->type;
    Stmt main = for_loop(s->var, int_imm(m, t), int_imm(lo, t), s->for_kind, s->body);
    Expr tail_var = make_var(s->var->name, t);
    Stmt tail = for_loop(tail_var, int_imm(m + lo, t), int_imm(n - lo, t), s->for_kind,
                         substitute(s->body, s->var, tail_var));
    return seq({recurse_loop(main), mutate(tail)});
  }

 private:
  Stmt recurse_loop(const Stmt& s) {
    IntBound bm = bound_of(s->min, bounds_), be = bound_of(s->extent, bounds_);
    IntBound vb{bm.min, be.max == IntBound::kPosInf || bm.max == IntBound::kPosInf
                            ? IntBound::kPosInf
                            : bm.max + be.max - 1};
    bounds_[s->var.get()] = vb;
    Stmt body = mutate(s->body);
    bounds_.erase(s->var.get());
    if (body == s->body) return s;
    return for_loop(s->var, s->min, s->extent, s->for_kind, body);
  }

  // Walks the body with v in [m, m + k) and inner loop vars at their ranges, calling
  // `f(cond, bounds)` on every if-condition that mentions v.
  void walk_guards(const Stmt& loop, int64_t m, int64_t k,
                   const std::function<void(const Expr&, const VarBounds&)>& f) {
    VarBounds vb = bounds_;
    vb[loop->var.get()] = IntBound::range(m, m + k - 1);
    std::function<void(const Stmt&)> walk = [&](const Stmt& s) {
      if (!s) return;
      switch (s->kind) {
        case StmtKind::kFor: {
          IntBound bm = bound_of(s->min, vb), be = bound_of(s->extent, vb);
          vb[s->var.get()] = {bm.min, be.max == IntBound::kPosInf || bm.max == IntBound::kPosInf
                                          ? IntBound::kPosInf
                                          : bm.max + be.max - 1};
          walk(s->body);
          vb.erase(s->var.get());
          return;
        }
        case StmtKind::kIfThenElse:
          if (uses_var(s->cond, loop->var.get())) f(s->cond, vb);
          walk(s->then_case);
          walk(s->else_case);
          return;
        case StmtKind::kLetStmt:
          vb[s->var.get()] = s->value->type.is_int() ? bound_of(s->value, vb) : IntBound{};
          walk(s->body);
          vb.erase(s->var.get());
          return;
        case StmtKind::kAllocate: walk(s->body); return;
        case StmtKind::kSeq:
          for (const Stmt& x : s->seq) walk(x);
          return;
        default: return;
      }
    };
    walk(loop->body);
  }

  std::vector<Expr> provable_guards(const Stmt& loop, int64_t m, int64_t k) {
    std::vector<Expr> out;
    walk_guards(loop, m, k, [&](const Expr& c, const VarBounds& vb) {
      std::optional<bool> p = prove(c, vb);
      if (p && *p) out.push_back(c);
    });
    return out;
  }

  bool all_provable(const Stmt& loop, int64_t m, int64_t k, const std::vector<Expr>& guards) {
    bool ok = true;
    walk_guards(loop, m, k, [&](const Expr& c, const VarBounds& vb) {
      for (const Expr& g : guards) {
        if (g != c) continue;
        std::optional<bool> p = prove(c, vb);
        ok = ok && p && *p;
      }
    });
    return ok;
  }

  // A loop with a symbolic extent (a split of a dim variable) and the split's guard
  // `v*F + w < N` (w an inner loop over [0, F), N free of both): the bound analysis cannot
  // place the split point, but the split's structure does: for v < N // F the guard holds
  // (v*F + w <= (N // F)*F - 1 < N). The main loop drops the guard, the tail (at most one
  // iteration) keeps it. nullptr when the loop has no such guard.
  Stmt partition_symbolic(const Stmt& s, const Expr& mn) {
    int64_t m = 0;
    if (!is_const_int(mn, &m) || m != 0) return nullptr;
    Expr guard, n;
    int64_t factor = 0;
    std::vector<std::pair<const ExprNode*, int64_t>> inner;  // inner loop vars of extent [0, F)
    std::function<void(const Stmt&)> find = [&](const Stmt& x) {
      if (!x || guard) return;
      switch (x->kind) {
        case StmtKind::kFor: {
          int64_t lo = -1, e = 0;
          if (is_const_int(x->min, &lo) && lo == 0 && is_const_int(x->extent, &e)) inner.emplace_back(x->var.get(), e);
          find(x->body);
          if (!inner.empty() && inner.back().first == x->var.get()) inner.pop_back();
          return;
        }
        case StmtKind::kIfThenElse:
          if (split_guard(x->cond, s->var.get(), inner, &factor, &n)) guard = x->cond;
          find(x->then_case);
          find(x->else_case);
          return;
        case StmtKind::kLetStmt: case StmtKind::kAllocate: find(x->body); return;
        case StmtKind::kSeq:
          for (const Stmt& y : x->seq) find(y);
          return;
        default: return;
      }
    };
    find(s->body);
    if (!guard) return nullptr;
    const DataType t = s->var->type;
    // (Never past the loop's own extent: then the whole loop is the guard-free part.)
    Expr split = simplify(floordiv(n, int_imm(factor, t)), bounds_);
    if (!structural_equal(simplify(floordiv(n + int_imm(factor - 1, t), int_imm(factor, t)), bounds_),
                          simplify(s->extent, bounds_)))
      split = simplify(min(split, s->extent), bounds_);
    Stmt body = drop_guard(s->body, guard);
    Stmt main = for_loop(s->var, int_imm(0, t), split, s->for_kind, body);
    Expr tail_var = make_var(s->var->name, t);
    Stmt tail = for_loop(tail_var, split, simplify(s->extent - split, bounds_), s->for_kind,
                         substitute(s->body, s->var, tail_var));
    return seq({recurse_loop(main), recurse_loop(tail)});
  }

  // cond is `v*F + w < N` (either operand order of the sum) with w an inner var of extent F.
  static bool split_guard(const Expr& cond, const ExprNode* v,
                          const std::vector<std::pair<const ExprNode*, int64_t>>& inner, int64_t* factor, Expr* n) {
    if (cond->kind != ExprKind::kLT || cond->type.lanes != 1) return false;
    const Expr& sum = cond->operands[0];
    if (sum->kind != ExprKind::kAdd || uses_var(cond->operands[1], v)) return false;
    for (size_t side = 0; side < 2; ++side) {
      const Expr& mul = sum->operands[side];
      const Expr& w = sum->operands[1 - side];
      int64_t f = 0;
      if (mul->kind != ExprKind::kMul || mul->operands[0].get() != v || !is_const_int(mul->operands[1], &f) || f <= 0)
        continue;
      if (w->kind != ExprKind::kVar || uses_var(cond->operands[1], w.get())) continue;
      for (const auto& [var, extent] : inner)
        if (var == w.get() && extent == f) {
          *factor = f;
          *n = cond->operands[1];
          return true;
        }
    }
    return false;
  }

  static Stmt drop_guard(const Stmt& s, const Expr& guard) {
    if (!s) return s;
    if (s->kind == StmtKind::kIfThenElse && structural_equal(s->cond, guard)) return drop_guard(s->then_case, guard);
    return map_stmt(s, [](const Expr& e) { return e; }, [&](const Stmt& x) { return drop_guard(x, guard); });
  }

  VarBounds bounds_;
};

}  // namespace

PrimFunc partition_loops(const PrimFunc& f) {
  PrimFunc out = f;
  Partitioner p;
  out.body = simplify(p.mutate(f.body));
  return out;
}

}  // namespace kiln::tir
