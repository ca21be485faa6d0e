// Float8 / float4 codes <-> values.
#include "core/narrow_float.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace kiln {
namespace {

// A sign-magnitude minifloat: E4M3/E5M2 variants and E2M1.
struct MiniFormat {
  int mant_bits, bias;
  bool fnuz;     // no -0 and no inf; 0x80 is the only NaN
  bool has_inf;  // E5M2 only
  bool has_nan;  // all but E2M1
  uint8_t max_code;  // largest finite magnitude code
  uint8_t sign_bit;
};

bool mini_format(DType t, MiniFormat* f) {
  switch (t) {
    case DType::kFloat8E4M3FN: *f = {3, 7, false, false, true, 0x7e, 0x80}; return true;
    case DType::kFloat8E4M3FNUZ: *f = {3, 8, true, false, true, 0x7f, 0x80}; return true;
    case DType::kFloat8E5M2: *f = {2, 15, false, true, true, 0x7b, 0x80}; return true;
    case DType::kFloat8E5M2FNUZ: *f = {2, 16, true, false, true, 0x7f, 0x80}; return true;
    case DType::kFloat4E2M1: *f = {1, 1, false, false, false, 0x7, 0x8}; return true;
    default: return false;
  }
}

// Magnitude of the non-negative code c (c <= max_code, or max_code + 1 as a virtual next value).
double magnitude(const MiniFormat& f, int c) {
  const int e = c >> f.mant_bits;
  const int m = c & ((1 << f.mant_bits) - 1);
  if (e == 0) return std::ldexp(static_cast<double>(m), 1 - f.bias - f.mant_bits);
  return std::ldexp(static_cast<double>((1 << f.mant_bits) + m), e - f.bias - f.mant_bits);
}

float mini_decode(const MiniFormat& f, uint8_t v) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  v &= static_cast<uint8_t>(f.sign_bit | (f.sign_bit - 1));
  if (f.fnuz && v == 0x80) return nan;
  const int c = v & (f.sign_bit - 1);
  const bool neg = (v & f.sign_bit) != 0;
  if (!f.fnuz && f.has_nan) {
    if (f.has_inf && c >= 0x7c) return c == 0x7c ? (neg ? -INFINITY : INFINITY) : nan;
    if (!f.has_inf && c == 0x7f) return nan;
  }
  const float mag = static_cast<float>(magnitude(f, c));
  return neg ? -mag : mag;
}

// Round to nearest even; out-of-range values saturate or become inf/NaN as the Cast spec says.
uint8_t mini_encode(const MiniFormat& f, double x, bool saturate) {
  const uint8_t sign = std::signbit(x) ? f.sign_bit : 0;
  if (!f.has_nan) {
    // E2M1 (ml_dtypes): NaN -> zero with the sign flipped; inf and overflow saturate.
    saturate = true;
    if (std::isnan(x)) return static_cast<uint8_t>(sign ^ f.sign_bit);
  }
  const uint8_t nan_code = f.fnuz ? 0x80 : static_cast<uint8_t>(sign | (f.has_inf ? 0x7e : 0x7f));
  if (std::isnan(x)) return nan_code;
  const double a = std::fabs(x);
  const uint8_t overflow = saturate ? static_cast<uint8_t>(sign | f.max_code)
                           : f.has_inf ? static_cast<uint8_t>(sign | 0x7c)
                                       : nan_code;
  if (std::isinf(a)) return overflow;
  int lo = 0, hi = f.max_code + 1;  // find the largest code with magnitude <= a
  while (hi - lo > 1) {
    int mid = (lo + hi) / 2;
    (magnitude(f, mid) <= a ? lo : hi) = mid;
  }
  int code = lo;
  if (lo < f.max_code + 1) {
    const double d_lo = a - magnitude(f, lo);
    const double d_hi = magnitude(f, lo + 1) - a;
    if (d_hi < d_lo || (d_hi == d_lo && (lo & 1))) code = lo + 1;
  }
  if (code > f.max_code) return overflow;
  if (code == 0 && f.fnuz) return 0;  // no negative zero
  return static_cast<uint8_t>(sign | code);
}

// onnx.numpy_helper.to_float8e8m0, element by element.
uint8_t e8m0_encode(double x, bool saturate, E8M0Rounding rounding) {
  const float f = static_cast<float>(x);
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  uint32_t exponent = (bits >> 23) & 0xff;
  if (exponent == 0xff) return 0xff;  // inf and NaN
  bool round_up = false;
  switch (rounding) {
    case E8M0Rounding::kNearest: {
      const bool g = (bits & 0x400000) != 0, r = (bits & 0x200000) != 0, s = (bits & 0x1fffff) != 0;
      const bool lsb = exponent > 0;
      round_up = g && (r || s || lsb);
      break;
    }
    case E8M0Rounding::kUp: round_up = (bits & 0x7fffff) != 0; break;
    case E8M0Rounding::kDown: break;
  }
  if (saturate && exponent == 0xfe) round_up = false;
  if (round_up) ++exponent;
  return static_cast<uint8_t>(exponent);
}

}  // namespace

bool is_narrow_float(DType t) {
  MiniFormat f;
  return t == DType::kFloat8E8M0 || mini_format(t, &f);
}

float narrow_float_decode(DType t, uint8_t code) {
  if (t == DType::kFloat8E8M0) {
    if (code == 0xff) return std::numeric_limits<float>::quiet_NaN();
    return std::ldexp(1.0f, static_cast<int>(code) - 127);
  }
  MiniFormat f;
  if (!mini_format(t, &f)) return std::numeric_limits<float>::quiet_NaN();
  return mini_decode(f, code);
}

uint8_t narrow_float_encode(DType t, double x, bool saturate, E8M0Rounding rounding) {
  if (t == DType::kFloat8E8M0) return e8m0_encode(x, saturate, rounding);
  MiniFormat f;
  if (!mini_format(t, &f)) return 0;
  return mini_encode(f, x, saturate);
}

}  // namespace kiln
