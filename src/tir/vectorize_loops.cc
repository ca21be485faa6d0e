// vectorize_loops: a kVectorized loop `for v in [min, min + n)` with constant n runs its body
// once with v replaced by ramp(min, 1, n). Scalars meeting vectors are broadcast (the checked
// constructors do it); the simplifier then turns linear indices into ramp(base, stride):
// stride 1 is a dense vector load/store, another constant stride a strided gather, any other
// lane-varying index a general gather.
// Falls back to a serial loop (the body is left as is) when the vector form would not compute
// what the serial loop computes or cannot be expressed in TIR:
//  - the extent is not a constant;
//  - a store writes a lane-varying value to a lane-invariant (or non-injective) index: a
//    reduction across iterations;
//  - a buffer that is stored to is accessed with two different indices: a possible dependence
//    between iterations, which the lock-step vector order would break;
//  - a lane-varying if-condition, loop bound, allocation or effectful call (Evaluate);
//  - a lane-varying non-last index of a multi-dimensional access (run flatten_storage first);
//  - a nested vector (the body already has vector lanes).
// Tests: tests/tir/test_tir.cc (TirVectorize*).
#include <map>

#include "core/error.h"
#include "tir/passes.h"
#include "tir/rewrite.h"
#include "tir/simplify.h"

namespace kiln::tir {
namespace {

struct NotVectorizable {
  std::string why;
};

class Vectorizer {
 public:
  explicit Vectorizer(const Expr& var) : var_(var) {}

  Expr mutate(const Expr& e) {
    if (e.get() == var_.get()) return ramp_;
    if (e->kind == ExprKind::kLet) {
      Expr value = mutate(e->operands[1]);
      // A lane-varying value is inlined (lets are pure) so that its uses are checked as vectors.
      if (value->type.lanes > 1) return mutate(substitute(e->operands[2], e->operands[0], e->operands[1]));
      return let(e->operands[0], value, mutate(e->operands[2]));
    }
    Expr m = map_operands(e, [&](const Expr& x) { return mutate(x); });
    if (m->kind == ExprKind::kLoad) {
      for (size_t k = 0; k + 1 < m->operands.size(); ++k)
        if (m->operands[k]->type.lanes > 1) throw NotVectorizable{"lane-varying non-last index"};
      Expr idx = simplify(m->operands.back());
      std::vector<Expr> ops = m->operands;
      ops.back() = idx;
      accesses_[m->buffer.get()].push_back(idx);
      return load(m->buffer, std::move(ops), 1);
    }
    return m;
  }

  Stmt mutate(const Stmt& s) {
    switch (s->kind) {
      case StmtKind::kFor: {
        Expr mn = mutate(s->min), ext = mutate(s->extent);
        if (mn->type.lanes > 1 || ext->type.lanes > 1) throw NotVectorizable{"lane-varying loop bound"};
        return for_loop(s->var, mn, ext, s->for_kind, mutate(s->body));
      }
      case StmtKind::kLetStmt: {
        Expr value = mutate(s->value);
        if (value->type.lanes > 1) return mutate(substitute(s->body, s->var, s->value));
        return let_stmt(s->var, value, mutate(s->body));
      }
      case StmtKind::kStore: {
        std::vector<Expr> idx;
        for (const Expr& i : s->indices) idx.push_back(mutate(i));
        for (size_t k = 0; k + 1 < idx.size(); ++k)
          if (idx[k]->type.lanes > 1) throw NotVectorizable{"lane-varying non-last index"};
        idx.back() = simplify(idx.back());
        Expr value = mutate(s->value);
        const Expr& last = idx.back();
        if (value->type.lanes > 1 && last->type.lanes == 1)
          throw NotVectorizable{"lane-varying value stored to one place (a reduction)"};
        if (last->type.lanes > 1) {
          int64_t stride = 0;
          bool injective = last->kind == ExprKind::kRamp && is_const_int(last->operands[1], &stride) &&
                           stride != 0;
          if (!injective) throw NotVectorizable{"store index not provably distinct per lane"};
        }
        accesses_[s->buffer.get()].push_back(last);
        stored_.push_back(s->buffer.get());
        return store(s->buffer, std::move(idx), value);
      }
      case StmtKind::kAllocate:
        throw NotVectorizable{"allocation inside the vectorized loop"};
      case StmtKind::kIfThenElse: {
        Expr c = mutate(s->cond);
        if (c->type.lanes > 1) throw NotVectorizable{"lane-varying condition"};
        return if_then_else(c, mutate(s->then_case), s->else_case ? mutate(s->else_case) : nullptr);
      }
      case StmtKind::kSeq: {
        std::vector<Stmt> out;
        for (const Stmt& x : s->seq) out.push_back(mutate(x));
        return seq(std::move(out));
      }
      case StmtKind::kEvaluate: {
        Expr v = mutate(s->value);
        if (v->type.lanes > 1 || uses_var(s->value, var_.get()))
          throw NotVectorizable{"effectful call depends on the loop var"};
        return evaluate(v);
      }
    }
    return s;
  }

  // Every stored buffer must be accessed with one index only.
  void check_dependences() const {
    for (const BufferNode* b : stored_) {
      const std::vector<Expr>& acc = accesses_.at(b);
      for (const Expr& x : acc)
        if (!structural_equal(x, acc[0]))
          throw NotVectorizable{"buffer " + b->name + " is written and accessed at another index"};
    }
  }

  Expr ramp_;

 private:
  Expr var_;
  std::map<const BufferNode*, std::vector<Expr>> accesses_;
  std::vector<const BufferNode*> stored_;
};

Stmt vectorize_loop(const Stmt& loop, int64_t n) {
  Vectorizer v(loop->var);
  v.ramp_ = ramp(loop->min, int_imm(1, loop->var->type), static_cast<int>(n));
  try {
    Stmt body = v.mutate(loop->body);
    v.check_dependences();
    return simplify(body);
  } catch (const NotVectorizable& e) {
    (void)e;  // the reason is documented above; the loop stays correct as a serial loop
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kInternal) throw;  // lane mismatches from the constructors
  }
  return for_loop(loop->var, loop->min, loop->extent, ForKind::kSerial, loop->body);
}

Stmt vectorize(const Stmt& s) {
  Stmt m = map_stmt(s, [](const Expr& e) { return e; }, vectorize);
  if (!m || m->kind != StmtKind::kFor || m->for_kind != ForKind::kVectorized) return m;
  int64_t n = 0;
  if (!is_const_int(simplify(m->extent), &n) || n < 1 || n > 1024)
    return for_loop(m->var, m->min, m->extent, ForKind::kSerial, m->body);
  if (n == 1) return simplify(substitute(m->body, m->var, m->min));
  return vectorize_loop(m, n);
}

}  // namespace

PrimFunc vectorize_loops(const PrimFunc& f) { return with_rewritten_body(f, vectorize); }

}  // namespace kiln::tir
