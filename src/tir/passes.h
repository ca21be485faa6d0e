// TIR passes: each is a plain PrimFunc -> PrimFunc function. Run order in lowering:
// flatten_storage -> simplify -> localize_accumulators -> vectorize_reductions -> partition_loops ->
// vectorize_loops -> localize_accumulators (vector accumulators) -> unroll_loops -> fuse_loops ->
// localize_row_buffers -> simplify.
// Each pass lives in its own file (src/tir/<pass>.cc) with a note on what it requires and
// guarantees. Tests: tests/tir/test_tir.cc (every pass is checked by running the function
// before and after it through tir/evaluator.h on random data).
#pragma once

#include <map>

#include "tir/ir.h"

namespace kiln::tir {

using VarMap = std::map<const ExprNode*, Expr>;

// Replaces uses of vars (by identity) with expressions, rebuilding the touched nodes through
// the checked constructors (a scalar var replaced by a vector makes its users vectors).
Expr substitute(const Expr& e, const VarMap& vmap);
Stmt substitute(const Stmt& s, const VarMap& vmap);
Expr substitute(const Expr& e, const Expr& var, const Expr& value);
Stmt substitute(const Stmt& s, const Expr& var, const Expr& value);

// Multi-dimensional Load/Store -> one row-major index; every buffer (params and allocations)
// gets shape {numel}. Accesses with one index are taken as already flat.
PrimFunc flatten_storage(const PrimFunc& f);

// Reductions accumulating into their output element (B[i] = init; for r: B[i] = B[i] op f)
// accumulate in a one-element (or, for B[ramp] after vectorization, one-vector) local buffer
// instead and store B[i] once (see the file).
// vectors_only (the run after vectorize_loops): only vector accumulations into non-local
// buffers, so that accumulators made by the first run or by vectorize_reductions stay as they are.
PrimFunc localize_accumulators(const PrimFunc& f, bool vectors_only = false);

// A serial loop accumulating f(r) into a one-element local float accumulator, with f reading
// contiguously along r and a constant extent of at least two vectors, accumulates in a vector of
// partial results combined after the loop (see the file).
PrimFunc vectorize_reductions(const PrimFunc& f);

// For kVectorized loops with a constant extent: the body runs once with the loop var replaced by
// ramp(min, 1, extent); contiguous accesses become vector loads/stores with a ramp index, other
// lane-varying indices gathers. Loops it cannot vectorize (see vectorize_loops.cc) become serial.
PrimFunc vectorize_loops(const PrimFunc& f);

// For kUnrolled loops with a constant extent: the body repeated with the var replaced by each
// value. Unrolled loops with a symbolic extent become serial.
PrimFunc unroll_loops(const PrimFunc& f);

// Adjacent loops over the same constant range where the second reads what the first writes only
// at the element the same iteration wrote become one loop (row-wise stage chains; see the file).
PrimFunc fuse_loops(const PrimFunc& f);

// A global buffer that one loop touches only within each iteration's own row becomes a row-sized
// local buffer of each iteration (see the file).
PrimFunc localize_row_buffers(const PrimFunc& f);

// Splits a loop whose body holds tail guards `if (cond)` that are provably true on a prefix of
// its range (from non-dividing splits) into a main loop without the guards and a tail loop.
PrimFunc partition_loops(const PrimFunc& f);

}  // namespace kiln::tir
