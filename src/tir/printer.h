// Readable text of TIR for logs, tests and `kiln inspect --print-kernels`:
//   func add(A: f32[64, 64], B: f32[64, 64], C: f32[64, 64]) {
//     for i0 in [0, 64) parallel:
//       for i1 in [0, 64):
//         C[i0*64 + i1] = A[i0*64 + i1] + B[i0*64 + i1]
//   }
// `//` and `%` are floor division and modulo, `/` true (float) or truncating (int) division.
// i64 and f32 constants print bare, other types as `i32(3)`; vector nodes as ramp(b, s, n) and
// broadcast(v, n).
#pragma once

#include <string>

#include "tir/ir.h"

namespace kiln::tir {

std::string print(const PrimFunc& f);
std::string print(const Stmt& s);
std::string print(const Expr& e);

}  // namespace kiln::tir
