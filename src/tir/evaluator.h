// A reference TIR interpreter: runs a PrimFunc's loops directly, one lane at a time, with the
// same scalar semantics as the simplifier's constant folding (tir/scalar_ops.h). It is the
// oracle for testing lowering, tir passes and codegen without LLVM. Parallel loops run serially.
// Supported element types: f32, f64, bool, i8, u8, i16, u16, i32, u32, i64, u64. Out-of-bounds
// accesses (against the buffer's shape) throw an internal error naming the buffer and index.
// Tests: tests/tir/test_tir.cc.
#pragma once

#include <cstdint>
#include <vector>

#include "tir/ir.h"

namespace kiln::tir {

// `buffers[i]` points to the flat row-major data of f.buffer_params[i] (its element type);
// `scalars[i]` is the value of f.scalar_params[i].
void evaluate(const PrimFunc& f, const std::vector<void*>& buffers,
              const std::vector<int64_t>& scalars);

}  // namespace kiln::tir
