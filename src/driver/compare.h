// Comparing computed values against expected ones with ONNX backend-test tolerances.
#pragma once

#include <string>

#include "core/value.h"

namespace kiln {

struct Tolerance {
  double rtol = 1e-3, atol = 1e-5;            // f32/f64
  double half_rtol = 1e-2, half_atol = 1e-3;  // f16/bf16/float8
};

// Empty when `got` matches `want`; otherwise a one-line reason (first mismatch, max error).
// Floats: |got - want| <= atol + rtol * |want|, NaN equals NaN, infinities must match exactly.
// Integers, bools and strings compare exactly.
std::string compare_values(const RtValue& got, const RtValue& want, const Tolerance& tol = {});
std::string compare_tensors(const Tensor& got, const Tensor& want, const Tolerance& tol = {});

}  // namespace kiln
