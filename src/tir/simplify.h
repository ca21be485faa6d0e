// Arithmetic simplifier and constant-integer bound analysis for TIR.
// Expressions: constant folding for every op and type (with the dtype's wrap-around and f32
// rounding), identities (x+0, x*1, x*0 and x-x for ints, min/max, floordiv/floormod by 1),
// constants ordered to the right and nested constants combined (x+1+2 -> x+3), multiples pulled
// out of floordiv/floormod ((x*64 + y) // 64 -> x + y // 64), bound-based proofs (i < extent,
// floormod(i, 64) -> i when 0 <= i < 64), select with a constant condition, casts of constants,
// and vector index forms (broadcast(a) + ramp(b, s) -> ramp(a + b, s)).
// Statements: also removes loops of extent 1 (substituting min) or <= 0, folds if-statements
// whose condition is provable, removes empty Seqs. Float arithmetic is never reassociated.
// Tests: tests/tir/test_tir.cc (TirSimplify*).
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>

#include "tir/ir.h"

namespace kiln::tir {

// A closed integer interval [min, max]; the int64 limits stand for -inf/+inf.
struct IntBound {
  static constexpr int64_t kNegInf = std::numeric_limits<int64_t>::min();
  static constexpr int64_t kPosInf = std::numeric_limits<int64_t>::max();
  int64_t min = kNegInf;
  int64_t max = kPosInf;
  static IntBound point(int64_t v) { return {v, v}; }
  static IntBound range(int64_t lo, int64_t hi) { return {lo, hi}; }
  bool is_point() const { return min == max && min != kNegInf && max != kPosInf; }
  bool operator==(const IntBound& o) const { return min == o.min && max == o.max; }
};
using VarBounds = std::map<const ExprNode*, IntBound>;

// Bounds of an integer (or bool: [0, 1]) expression over all lanes; vars not in `var_bounds`
// range over their dtype.
IntBound bound_of(const Expr& e, const VarBounds& var_bounds = {});

// true/false when the scalar bool `cond` is provably so under `var_bounds`, else nullopt.
std::optional<bool> prove(const Expr& cond, const VarBounds& var_bounds = {});

Expr simplify(const Expr& e, const VarBounds& var_bounds = {});
// A statement that simplifies to nothing becomes an empty Seq.
Stmt simplify(const Stmt& s, const VarBounds& var_bounds = {});
PrimFunc simplify(const PrimFunc& f);

}  // namespace kiln::tir
