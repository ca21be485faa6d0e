// localize_accumulators: a reduction that accumulates straight into its output,
//   B[i] = init; for r...: B[i] = B[i] op f(r)        (op: + * min max; i free of the r vars)
// becomes an accumulation in a one-element local buffer stored once:
//   allocate acc local[1] { acc[0] = init; for r...: acc[0] = acc[0] op f(r); B[i] = acc[0] }
// The accumulator then lives in a register and codegen may reassociate it (vectorized sums, see
// codegen/llvm emit_store); B is written once per output element instead of once per term.
// Vector accumulations (B[ramp] = B[ramp] op f, after vectorize_loops: pooling windows) get a
// local buffer of one vector.
// Requires flattened storage (one index per access). Tests: tests/tir/test_tir.cc (TirLocalize*).
#include "tir/passes.h"
#include "tir/rewrite.h"

namespace kiln::tir {
namespace {

// The innermost store of a perfect nest of serial loops, and the loop vars on the way.
const StmtNode* nest_store(const Stmt& s, std::vector<const ExprNode*>* vars) {
  const StmtNode* n = s.get();
  while (n && n->kind == StmtKind::kFor && n->for_kind != ForKind::kParallel) {
    vars->push_back(n->var.get());
    n = n->body.get();
  }
  return n && n->kind == StmtKind::kStore && !vars->empty() ? n : nullptr;
}

// `update` is B[i] = B[i] op f or B[i] = f op B[i] with f free of B: returns the position of
// the B[i] operand (0 or 1), else -1.
int accumulation_operand(const StmtNode& update, const StmtNode& init) {
  if (update.buffer != init.buffer || update.indices.size() != 1 || init.indices.size() != 1) return -1;
  if (!structural_equal(update.indices[0], init.indices[0])) return -1;
  const Expr& v = update.value;
  if (!is_combiner(v->kind) || v->type.lanes != init.value->type.lanes) return -1;
  for (int k = 0; k < 2; ++k) {
    const Expr& self = v->operands[static_cast<size_t>(k)];
    const Expr& other = v->operands[static_cast<size_t>(1 - k)];
    if (self->kind == ExprKind::kLoad && self->buffer == init.buffer && self->operands.size() == 1 &&
        structural_equal(self->operands[0], init.indices[0]) && !loads_buffer(other, init.buffer.get()))
      return k;
  }
  return -1;
}

Stmt replace_store(const Stmt& s, const StmtNode* target, const Stmt& with) {
  if (s.get() == target) return with;
  return map_stmt(s, [](const Expr& e) { return e; }, [&](const Stmt& c) { return replace_store(c, target, with); });
}

// Rewrites adjacent (init store, reduction nest) pairs of one statement list.
std::vector<Stmt> localize(const std::vector<Stmt>& stmts, int* counter, bool vectors_only) {
  std::vector<Stmt> out;
  for (size_t k = 0; k < stmts.size(); ++k) {
    const Stmt& init = stmts[k];
    // Scalar accumulators, or (after vectorize_loops) vector ones stored through a ramp.
    const int lanes = init->kind == StmtKind::kStore ? init->value->type.lanes : 0;
    if (k + 1 < stmts.size() && init->kind == StmtKind::kStore && init->indices.size() == 1 &&
        init->indices[0]->type.lanes == lanes && (lanes == 1 || init->indices[0]->kind == ExprKind::kRamp) &&
        init->buffer->dtype != DType::kBool && (!vectors_only || (lanes > 1 && init->buffer->scope != "local"))) {
      std::vector<const ExprNode*> vars;
      const Stmt& nest = stmts[k + 1];
      const StmtNode* update = nest_store(nest, &vars);
      int self = update ? accumulation_operand(*update, *init) : -1;
      bool invariant = self >= 0;
      for (const ExprNode* v : vars) invariant = invariant && !uses_var(init->indices[0], v);
      if (invariant && !loads_buffer(init->value, init->buffer.get())) {
        Buffer acc = make_buffer(init->buffer->name + "_acc" + std::to_string((*counter)++), init->buffer->dtype,
                                 {int_imm(lanes)}, "local");
        Expr zero = lanes == 1 ? int_imm(0) : ramp(int_imm(0), int_imm(1), lanes);
        std::vector<Expr> ops = update->value->operands;
        ops[static_cast<size_t>(self)] = load(acc, {zero});
        Stmt accumulate = store(acc, {zero}, with_operands(update->value, ops));
        out.push_back(allocate(acc, seq({store(acc, {zero}, init->value), replace_store(nest, update, accumulate),
                                         store(init->buffer, init->indices, load(acc, {zero}))})));
        ++k;
        continue;
      }
    }
    out.push_back(init);
  }
  return out;
}

Stmt rewrite(const Stmt& s, int* counter, bool vectors_only) {
  Stmt m = map_stmt(s, [](const Expr& e) { return e; }, [&](const Stmt& c) { return rewrite(c, counter, vectors_only); });
  if (!m || m->kind != StmtKind::kSeq) return m;
  return seq(localize(m->seq, counter, vectors_only));
}

}  // namespace

PrimFunc localize_accumulators(const PrimFunc& f, bool vectors_only) {
  int counter = 0;
  return with_rewritten_body(f, [&](const Stmt& s) { return rewrite(s, &counter, vectors_only); });
}

}  // namespace kiln::tir
