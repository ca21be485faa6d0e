// Scalar semantics of TIR operators, shared by the simplifier's constant folding and the
// evaluator so that both agree bit for bit. Integers are held in int64_t (wrapped to their
// dtype after every op; u64 as its bit pattern), floats in double (rounded to f32 after every
// op on f32 values). Internal to src/tir.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "tir/ir.h"

namespace kiln::tir::scalar {

inline int64_t wrap_int(int64_t v, DType t) {
  switch (t) {
    case DType::kBool: return v != 0;
    case DType::kInt8: return static_cast<int8_t>(v);
    case DType::kUInt8: return static_cast<uint8_t>(v);
    case DType::kInt16: return static_cast<int16_t>(v);
    case DType::kUInt16: return static_cast<uint16_t>(v);
    case DType::kInt32: return static_cast<int32_t>(v);
    case DType::kUInt32: return static_cast<uint32_t>(v);
    default: return v;
  }
}

inline double round_float(double v, DType t) {
  if (t == DType::kFloat32) return static_cast<double>(static_cast<float>(v));
  return v;
}

inline int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
inline int64_t floor_mod(int64_t a, int64_t b) { return a - floor_div(a, b) * b; }

inline bool is_compare(ExprKind k) { return k >= ExprKind::kEQ && k <= ExprKind::kGE; }

// a `k` b on integers of dtype t; false when undefined (division by zero, overflowing division).
inline bool int_binary(ExprKind k, DType t, int64_t a, int64_t b, int64_t* out) {
  const bool u64 = t == DType::kUInt64;
  const uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  int64_t r = 0;
  switch (k) {
    case ExprKind::kAdd: r = static_cast<int64_t>(ua + ub); break;
    case ExprKind::kSub: r = static_cast<int64_t>(ua - ub); break;
    case ExprKind::kMul: r = static_cast<int64_t>(ua * ub); break;
    case ExprKind::kDiv:
    case ExprKind::kFloorDiv:
    case ExprKind::kFloorMod:
      if (b == 0) return false;
      if (u64) {
        r = static_cast<int64_t>(k == ExprKind::kFloorMod ? ua % ub : ua / ub);
        break;
      }
      if (a == std::numeric_limits<int64_t>::min() && b == -1) return false;
      r = k == ExprKind::kDiv ? a / b : k == ExprKind::kFloorDiv ? floor_div(a, b) : floor_mod(a, b);
      break;
    case ExprKind::kMin: r = u64 ? static_cast<int64_t>(ua < ub ? ua : ub) : (a < b ? a : b); break;
    case ExprKind::kMax: r = u64 ? static_cast<int64_t>(ua > ub ? ua : ub) : (a > b ? a : b); break;
    case ExprKind::kEQ: *out = a == b; return true;
    case ExprKind::kNE: *out = a != b; return true;
    case ExprKind::kLT: *out = u64 ? ua < ub : a < b; return true;
    case ExprKind::kLE: *out = u64 ? ua <= ub : a <= b; return true;
    case ExprKind::kGT: *out = u64 ? ua > ub : a > b; return true;
    case ExprKind::kGE: *out = u64 ? ua >= ub : a >= b; return true;
    case ExprKind::kAnd: *out = (a != 0) && (b != 0); return true;
    case ExprKind::kOr: *out = (a != 0) || (b != 0); return true;
    default: return false;
  }
  *out = wrap_int(r, t);
  return true;
}

// Arithmetic on floats of dtype t (comparisons: use float_compare).
inline double float_binary(ExprKind k, DType t, double a, double b) {
  double r = 0;
  switch (k) {
    case ExprKind::kAdd: r = a + b; break;
    case ExprKind::kSub: r = a - b; break;
    case ExprKind::kMul: r = a * b; break;
    case ExprKind::kDiv: r = a / b; break;
    case ExprKind::kFloorDiv: r = std::floor(a / b); break;
    case ExprKind::kFloorMod: r = a - std::floor(a / b) * b; break;
    case ExprKind::kMin: r = a < b ? a : b; break;
    case ExprKind::kMax: r = a > b ? a : b; break;
    default: r = std::nan(""); break;
  }
  return round_float(r, t);
}

inline bool float_compare(ExprKind k, double a, double b) {
  switch (k) {
    case ExprKind::kEQ: return a == b;
    case ExprKind::kNE: return a != b;
    case ExprKind::kLT: return a < b;
    case ExprKind::kLE: return a <= b;
    case ExprKind::kGT: return a > b;
    case ExprKind::kGE: return a >= b;
    default: return false;
  }
}

// Float -> integer conversion (truncation) with NaN -> 0 and saturation at the int64 range, then
// wrapped to the dtype (C++ leaves out-of-range conversions undefined).
inline int64_t float_to_int(double v, DType t) {
  if (std::isnan(v)) return 0;
  v = std::trunc(v);
  if (t == DType::kUInt64 && v >= 9223372036854775808.0) {
    if (v >= 18446744073709551616.0) return -1;
    return static_cast<int64_t>(static_cast<uint64_t>(v));
  }
  if (v >= 9223372036854775807.0) return wrap_int(std::numeric_limits<int64_t>::max(), t);
  if (v <= -9223372036854775808.0) return wrap_int(std::numeric_limits<int64_t>::min(), t);
  return wrap_int(static_cast<int64_t>(v), t);
}

inline double int_to_float(int64_t v, DType from, DType to) {
  double d = from == DType::kUInt64 ? static_cast<double>(static_cast<uint64_t>(v))
                                    : static_cast<double>(v);
  if (to == DType::kFloat32) {
    // Round once, directly from the integer (double rounding could differ for large ints).
    float f = from == DType::kUInt64 ? static_cast<float>(static_cast<uint64_t>(v))
                                     : static_cast<float>(v);
    return f;
  }
  return d;
}

}  // namespace kiln::tir::scalar
