// vectorize_reductions: a serial loop that accumulates into a one-element local accumulator
// (what localize_accumulators makes of a reduction) over a constant extent E >= 32 (f32; 16 f64),
//   for r in [m, m + E): acc[0] = acc[0] op f(r)          (op: + * min max; float acc)
// where every load in f reads contiguously along r (or does not depend on r), becomes L partial
// accumulators combined at the end:
//   allocate vacc local[L] {
//     for l in [0, L) vectorized: vacc[l] = identity(op)
//     for r.vo in [0, E / L): for l in [0, L) vectorized: vacc[l] = vacc[l] op f(m + r.vo*L + l)
//     vacc[0:L/2] = vacc[0:L/2] op vacc[L/2:L]; ... ; vacc[0] = vacc[0] op vacc[1]   (a tree)
//     acc[0] = acc[0] op vacc[0]
//   }
//   allocate vtail local[T] {                                          (the tail, T = E % L > 0)
//     for l in [0, T) vectorized: vtail[l] = f(m + E / L * L + l)
//     for l in [0, T) unrolled: acc[0] = acc[0] op vtail[l]
//   }
// A symbolic extent E (a dim variable) gets L = 16 (8 f64) and a scalar tail loop over
// [E / L * L, E) instead.
// So f (exp, loads, ...) runs on vectors and max/min reductions vectorize too (LLVM's loop
// vectorizer leaves float max/min reductions scalar). Float sums are reassociated, which kiln
// allows for reductions (see codegen/llvm emit_store). L = 16 lanes of f32 (8 of f64), 32 (16) when
// E >= 64 (32).
// Requires flattened storage; runs after localize_accumulators and before vectorize_loops.
// Tests: tests/tir/test_tir.cc (TirVectorizeReductions*).
#include <cmath>
#include <limits>

#include "tir/passes.h"
#include "tir/rewrite.h"
#include "tir/simplify.h"

namespace kiln::tir {
namespace {

bool is_acc_load(const Expr& e, const Buffer& acc) {
  int64_t c = -1;
  return e->kind == ExprKind::kLoad && e->buffer == acc && e->operands.size() == 1 &&
         is_const_int(e->operands[0], &c) && c == 0;
}

// Every load in f, with `var` running over a vector of lanes, reads a dense ramp or one element;
// f holds no lets (their vector form is checked by vectorize_loops, kept simple here).
bool contiguous_in(const Expr& f, const Expr& var, int lanes) {
  bool ok = true;
  const Expr r = ramp(int_imm(0, var->type), int_imm(1, var->type), lanes);
  visit_exprs(f, [&](const Expr& x) {
    if (!ok) return;
    if (x->kind == ExprKind::kLet) ok = false;
    if (x->kind != ExprKind::kLoad) return;
    if (x->operands.size() != 1) {
      ok = false;
      return;
    }
    if (!uses_var(x->operands[0], var.get())) return;
    Expr idx = simplify(substitute(x->operands[0], var, r));
    int64_t stride = 0;
    ok = idx->kind == ExprKind::kRamp && is_const_int(idx->operands[1], &stride) && stride == 1;
  });
  return ok;
}

Expr identity(ExprKind op, DataType t) {
  const double inf = std::numeric_limits<double>::infinity();
  switch (op) {
    case ExprKind::kMul: return float_imm(1.0, t);
    case ExprKind::kMax: return float_imm(-inf, t);
    case ExprKind::kMin: return float_imm(inf, t);
    default: return float_imm(0.0, t);
  }
}

// The rewrite of one loop, or null when it does not match.
Stmt vectorize_reduction(const Stmt& loop) {
  if (loop->kind != StmtKind::kFor || loop->for_kind != ForKind::kSerial) return nullptr;
  const Stmt& st = loop->body;
  if (!st || st->kind != StmtKind::kStore) return nullptr;
  const Buffer& acc = st->buffer;
  if (acc->scope != "local" || acc->shape.size() != 1 || st->indices.size() != 1) return nullptr;
  int64_t one = 0, zero = -1;
  if (!is_const_int(acc->shape[0], &one) || one != 1 || !is_const_int(st->indices[0], &zero) || zero != 0)
    return nullptr;
  if (acc->dtype != DType::kFloat32 && acc->dtype != DType::kFloat64) return nullptr;
  const Expr& v = st->value;
  if (!is_combiner(v->kind) || v->type.lanes != 1) return nullptr;
  int self = is_acc_load(v->operands[0], acc) ? 0 : is_acc_load(v->operands[1], acc) ? 1 : -1;
  if (self < 0) return nullptr;
  const Expr f = v->operands[static_cast<size_t>(1 - self)];
  if (loads_buffer(f, acc.get()) || !uses_var(f, loop->var.get())) return nullptr;
  // Two registers of partials (32 lanes of f32) once the row holds four or more: two independent
  // dependency chains hide the latency of the combining op.
  const int reg = acc->dtype == DType::kFloat32 ? 16 : 8;
  int64_t extent = 0;
  const bool symbolic = !is_const_int(loop->extent, &extent);
  if (!symbolic && extent < 2 * reg) return nullptr;
  const int lanes = symbolic ? reg : extent >= 4 * reg ? 2 * reg : reg;
  if (!contiguous_in(f, loop->var, lanes)) return nullptr;

  const DataType it = loop->var->type;
  const DataType et{acc->dtype, 1};
  const Expr blocks = symbolic ? simplify(floordiv(loop->extent, int_imm(lanes, it))) : int_imm(extent / lanes, it);
  Buffer vacc = make_buffer(acc->name + "_v", acc->dtype, {int_imm(lanes)}, "local");
  Expr lane = make_var(loop->var->name + ".lane", it);
  Expr outer = make_var(loop->var->name + ".vo", it);
  Stmt init = for_loop(lane, int_imm(0, it), int_imm(lanes, it), ForKind::kVectorized,
                       store(vacc, {lane}, identity(v->kind, et)));
  Expr r = simplify(loop->min + outer * int_imm(lanes, it) + lane);
  Stmt update = for_loop(outer, int_imm(0, it), blocks, ForKind::kSerial,
                         for_loop(lane, int_imm(0, it), int_imm(lanes, it), ForKind::kVectorized,
                                  store(vacc, {lane}, binary(v->kind, load(vacc, {lane}), substitute(f, loop->var, r)))));
  // The partials fold as a tree (16 -> 8 -> 4 -> 2 -> 1 lanes): four dependent operations on the
  // row's critical path instead of sixteen.
  std::vector<Stmt> body{init, update};
  for (int w = lanes / 2; w >= 1; w /= 2) {
    Expr lo = w == 1 ? int_imm(0, it) : ramp(int_imm(0, it), int_imm(1, it), w);
    Expr hi = w == 1 ? int_imm(1, it) : ramp(int_imm(w, it), int_imm(1, it), w);
    body.push_back(store(vacc, {lo}, binary(v->kind, load(vacc, {lo}), load(vacc, {hi}))));
  }
  body.push_back(store(acc, st->indices, binary(v->kind, load(acc, st->indices), load(vacc, {int_imm(0, it)}))));
  Stmt result = allocate(vacc, seq(std::move(body)));
  if (symbolic) {
    // A symbolic extent (a dim variable): the tail is the original loop over what is left.
    Expr tv = make_var(loop->var->name + ".tail", it);
    Expr done = simplify(blocks * int_imm(lanes, it));
    Stmt tail = for_loop(tv, simplify(loop->min + done), simplify(loop->extent - done), ForKind::kSerial,
                         store(acc, st->indices, binary(v->kind, load(acc, st->indices), substitute(f, loop->var, tv))));
    return seq({result, tail});
  }
  const int64_t tail = extent - extent / lanes * lanes;
  const int64_t full = extent / lanes * lanes;
  if (tail == 0) return result;
  // The tail's terms as one short vector too (f's exp and loads), folded lane by lane.
  Buffer vtail = make_buffer(acc->name + "_t", acc->dtype, {int_imm(tail)}, "local");
  Expr tl = make_var(loop->var->name + ".tail", it), tf = make_var(loop->var->name + ".tfold", it);
  Expr rt = simplify(loop->min + int_imm(full, it) + tl);
  Stmt terms = for_loop(tl, int_imm(0, it), int_imm(tail, it), ForKind::kVectorized,
                        store(vtail, {tl}, substitute(f, loop->var, rt)));
  Stmt tail_fold = for_loop(tf, int_imm(0, it), int_imm(tail, it), ForKind::kUnrolled,
                            store(acc, st->indices, binary(v->kind, load(acc, st->indices), load(vtail, {tf}))));
  return seq({result, allocate(vtail, seq({terms, tail_fold}))});
}

Stmt rewrite(const Stmt& s) {
  if (Stmt v = vectorize_reduction(s)) return v;
  return map_stmt(s, [](const Expr& e) { return e; }, rewrite);
}

}  // namespace

PrimFunc vectorize_reductions(const PrimFunc& f) { return with_rewritten_body(f, rewrite); }

}  // namespace kiln::tir
