// Row-local indices, shared by the tir passes that fuse or shrink row-wise stages (fuse_loops,
// localize_row_buffers): an index of loop var v that stays in "row" v of a buffer split into rows
// of `row` elements, v * row + r with 0 <= r < row over the inner loops' ranges.
// Tests: tests/tir/test_tir.cc (TirFuseLoops*, TirLocalizeRowBuffers*).
#pragma once

#include <cstdint>
#include <vector>

#include "tir/ir.h"
#include "tir/simplify.h"

namespace kiln::tir {

// The constant bounds of the loop vars of the loops inside `s` (added to `out`).
void inner_loop_bounds(const Stmt& s, VarBounds& out);

// Whether every lane of index `e` lies in row `var` of rows of `row` elements (row 1: e is var
// itself). `inner` bounds the other vars of `e`.
bool in_row(const Expr& e, const Expr& var, int64_t row, const VarBounds& inner);

// The row length the index `first_store` of an iteration of loop `var` writes: 1 when it is the
// var itself, else the coefficient of the var in it; 0 when neither.
int64_t row_length(const Expr& first_store, const Expr& var);

}  // namespace kiln::tir
