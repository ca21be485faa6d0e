// Cast and CastLike between all numeric types, bool, f16/bf16 and strings (numbers print the
// way numpy's astype(str) does, which is what the ONNX reference produces).
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <type_traits>

#include "ops/elementwise_util.h"

namespace kiln {

void register_elementwise_cast_ops(OpRegistry& r);

namespace {

using namespace ew;  // NOLINT: private helpers of this family

// Shortest round-trip digits of v as "d.ddde±x" split into sign, digits and decimal exponent.
struct Digits {
  bool negative = false;
  std::string digits;  // no leading zeros, at least one digit
  int exp10 = 0;       // value = 0.d1d2d3... * 10^(exp10 + 1)
};

Digits parse_scientific(const std::string& s) {
  Digits d;
  size_t i = 0;
  if (s[i] == '-') {
    d.negative = true;
    ++i;
  }
  size_t e = s.find_first_of("eE", i);
  for (size_t k = i; k < e; ++k)
    if (s[k] != '.') d.digits.push_back(s[k]);
  d.exp10 = std::atoi(s.c_str() + e + 1);
  while (d.digits.size() > 1 && d.digits.back() == '0') d.digits.pop_back();
  return d;
}

template <class H>
std::string shortest_half(float v) {
  // f16/bf16 have at most 5 significant decimal digits; find the fewest that round-trip.
  char buf[64];
  for (int prec = 0; prec < 9; ++prec) {
    std::snprintf(buf, sizeof(buf), "%.*e", prec, static_cast<double>(v));
    if (static_cast<float>(H(std::strtof(buf, nullptr))) == v) break;
  }
  return buf;
}

// numpy's float -> str: positional for 1e-4 <= |v| < cutoff (with at least one fractional
// digit), otherwise scientific with a two-digit exponent.
std::string format_float(std::string sci, double value, double cutoff) {
  Digits d = parse_scientific(sci);
  std::string out = d.negative ? "-" : "";
  double a = std::fabs(value);
  if (a == 0 || (a >= 1e-4 && a < cutoff)) {
    if (d.digits == "0") return out + "0.0";
    if (d.exp10 >= 0) {
      std::string ip = d.digits.substr(0, std::min<size_t>(d.digits.size(), d.exp10 + 1));
      ip.append(static_cast<size_t>(d.exp10 + 1) - ip.size(), '0');
      std::string fp = d.digits.size() > static_cast<size_t>(d.exp10 + 1)
                           ? d.digits.substr(static_cast<size_t>(d.exp10 + 1))
                           : "0";
      return out + ip + "." + fp;
    }
    return out + "0." + std::string(static_cast<size_t>(-d.exp10 - 1), '0') + d.digits;
  }
  out += d.digits.substr(0, 1);
  if (d.digits.size() > 1) out += "." + d.digits.substr(1);
  char eb[16];
  std::snprintf(eb, sizeof(eb), "e%c%02d", d.exp10 < 0 ? '-' : '+', std::abs(d.exp10));
  return out + eb;
}

template <class T>
std::string to_text(T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "True" : "False";
  } else if constexpr (std::is_integral_v<T>) {
    return std::to_string(v);
  } else {
    const double dv = static_cast<double>(static_cast<std::conditional_t<std::is_same_v<T, double>,
                                                                        double, float>>(v));
    if (std::isnan(dv)) return "nan";
    if (std::isinf(dv)) return dv > 0 ? "inf" : "-inf";
    if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
      return format_float(shortest_half<T>(static_cast<float>(v)), dv, 1e3);
    } else {
      char buf[64];
      auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
      return format_float(std::string(buf, res.ptr), dv,
                          std::is_same_v<T, float> ? 1e6 : 1e16);
    }
  }
}

template <class T>
T from_text(const AttrReader& at, const std::string& s) {
  const char* begin = s.c_str();
  char* end = nullptr;
  auto bad = [&]() -> T {
    at.fail(ErrorKind::kBadInput, "cannot convert string \"" + s + "\" to " +
                                      std::string(std::is_same_v<T, bool> ? "bool" : "a number"));
  };
  if constexpr (std::is_same_v<T, bool>) {
    if (s == "True" || s == "true") return true;
    if (s == "False" || s == "false") return false;
    double d = std::strtod(begin, &end);
    if (end == begin) return bad();
    return d != 0;
  } else if constexpr (std::is_integral_v<T>) {
    errno = 0;
    if constexpr (std::is_signed_v<T>) {
      long long v = std::strtoll(begin, &end, 10);
      if (end != begin && *end == '\0' && errno == 0) return static_cast<T>(v);
    } else {
      unsigned long long v = std::strtoull(begin, &end, 10);
      if (end != begin && *end == '\0' && errno == 0) return static_cast<T>(v);
    }
    double d = std::strtod(begin, &end);
    if (end == begin || std::isnan(d)) return bad();
    if (d <= static_cast<double>(std::numeric_limits<T>::lowest()))
      return std::numeric_limits<T>::lowest();
    if (d >= static_cast<double>(std::numeric_limits<T>::max()))
      return std::numeric_limits<T>::max();
    return static_cast<T>(d);
  } else if constexpr (std::is_same_v<T, double>) {
    double d = std::strtod(begin, &end);  // accepts inf/+inf/-inf/nan in any case
    if (end == begin) return bad();
    return d;
  } else {
    float f = std::strtof(begin, &end);
    if (end == begin) return bad();
    return T(f);
  }
}

Tensor cast_tensor(const AttrReader& at, const Tensor& x, DType to);

// ---- float8 (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ) and 4-bit integers ------------------------

struct F8Format {
  int mant_bits, bias;
  bool fnuz;     // no -0 and no inf; 0x80 is the only NaN
  bool has_inf;  // E5M2 only
  uint8_t max_code;
};

std::optional<F8Format> f8_format(DType t) {
  switch (t) {
    case DType::kFloat8E4M3FN: return F8Format{3, 7, false, false, 0x7e};
    case DType::kFloat8E4M3FNUZ: return F8Format{3, 8, true, false, 0x7f};
    case DType::kFloat8E5M2: return F8Format{2, 15, false, true, 0x7b};
    case DType::kFloat8E5M2FNUZ: return F8Format{2, 16, true, false, 0x7f};
    default: return std::nullopt;
  }
}

// Magnitude of the non-negative code c (c <= max_code, or max_code + 1 as a virtual next value).
double f8_magnitude(const F8Format& f, int c) {
  const int e = c >> f.mant_bits;
  const int m = c & ((1 << f.mant_bits) - 1);
  if (e == 0) return std::ldexp(static_cast<double>(m), 1 - f.bias - f.mant_bits);
  return std::ldexp(static_cast<double>((1 << f.mant_bits) + m), e - f.bias - f.mant_bits);
}

float f8_to_float(const F8Format& f, uint8_t v) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  if (f.fnuz && v == 0x80) return nan;
  const int c = v & 0x7f;
  if (!f.fnuz) {
    if (f.has_inf && c >= 0x7c) return c == 0x7c ? ((v & 0x80) ? -INFINITY : INFINITY) : nan;
    if (!f.has_inf && c == 0x7f) return nan;
  }
  const float mag = static_cast<float>(f8_magnitude(f, c));
  return (v & 0x80) ? -mag : mag;
}

// Round to nearest even; out-of-range values saturate or become inf/NaN as the Cast spec says.
uint8_t float_to_f8(const F8Format& f, double x, bool saturate) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const uint8_t nan_code =
      f.fnuz ? 0x80 : static_cast<uint8_t>(sign | (f.has_inf ? 0x7e : 0x7f));
  if (std::isnan(x)) return nan_code;
  const double a = std::fabs(x);
  const uint8_t overflow = saturate ? static_cast<uint8_t>(sign | f.max_code)
                           : f.has_inf ? static_cast<uint8_t>(sign | 0x7c)
                                       : nan_code;
  if (std::isinf(a)) return overflow;
  int lo = 0, hi = f.max_code + 1;  // find the largest code with magnitude <= a
  while (hi - lo > 1) {
    int mid = (lo + hi) / 2;
    (f8_magnitude(f, mid) <= a ? lo : hi) = mid;
  }
  int code = lo;
  if (lo < f.max_code + 1) {
    const double d_lo = a - f8_magnitude(f, lo);
    const double d_hi = f8_magnitude(f, lo + 1) - a;
    if (d_hi < d_lo || (d_hi == d_lo && (lo & 1))) code = lo + 1;
  }
  if (code > f.max_code) return overflow;
  if (code == 0 && f.fnuz) return 0;  // no negative zero
  return static_cast<uint8_t>(sign | code);
}

bool is_int4(DType t) { return t == DType::kInt4 || t == DType::kUInt4; }

// Float8 and 4-bit casts go through f32 (from) or f64 (to), which hold every value exactly.
Tensor cast_narrow(const AttrReader& at, const Tensor& x, DType to) {
  const int64_t n = x.numel();
  Tensor src = x;
  if (auto f = f8_format(x.dtype())) {
    src = Tensor(DType::kFloat32, x.dims());
    for (int64_t i = 0; i < n; ++i) src.data<float>()[i] = f8_to_float(*f, x.data<uint8_t>()[i]);
  } else if (x.dtype() == DType::kInt4) {
    src = Tensor(DType::kInt8, x.dims());
    for (int64_t i = 0; i < n; ++i) src.data<int8_t>()[i] = x.data<int8_t>()[i];
  } else if (x.dtype() == DType::kUInt4) {
    src = Tensor(DType::kUInt8, x.dims());
    for (int64_t i = 0; i < n; ++i) src.data<uint8_t>()[i] = x.data<uint8_t>()[i];
  }
  if (!f8_format(to) && !is_int4(to)) return cast_tensor(at, src, to);
  Tensor y(to, x.dims());
  if (auto f = f8_format(to)) {
    const bool saturate = at.attr_int("saturate", 1) != 0;
    Tensor d = cast_tensor(at, src, DType::kFloat64);
    for (int64_t i = 0; i < n; ++i)
      y.data<uint8_t>()[i] = float_to_f8(*f, d.data<double>()[i], saturate);
  } else {
    Tensor v = cast_tensor(at, src, DType::kInt64);  // truncates floats, then keeps the low bits
    for (int64_t i = 0; i < n; ++i) {
      const int64_t low = v.data<int64_t>()[i] & 0xf;
      if (to == DType::kInt4) y.data<int8_t>()[i] = static_cast<int8_t>((low ^ 8) - 8);
      else y.data<uint8_t>()[i] = static_cast<uint8_t>(low);
    }
  }
  return y;
}

Tensor cast_tensor(const AttrReader& at, const Tensor& x, DType to) {
  if (x.dtype() == to) return x.clone();
  if (f8_format(x.dtype()) || f8_format(to) || is_int4(x.dtype()) || is_int4(to))
    return cast_narrow(at, x, to);
  const bool from_str = x.dtype() == DType::kString;
  const bool to_str = to == DType::kString;
  if (!from_str && !to_str) {
    dispatch<kNumeric | kBoolType | kHalves>(at, x.dtype(), [](auto) {});
    dispatch<kNumeric | kBoolType | kHalves>(at, to, [](auto) {});
    return convert_tensor(x, to);
  }
  Tensor y(to, x.dims());
  const int64_t n = x.numel();
  if (to_str) {
    dispatch<kNumeric | kBoolType | kHalves>(at, x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* px = x.data<T>();
      std::string* py = y.data<std::string>();
      for (int64_t i = 0; i < n; ++i) py[i] = to_text(px[i]);
    });
  } else {
    dispatch<kNumeric | kBoolType | kHalves>(at, to, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const std::string* px = x.data<std::string>();
      T* py = y.data<T>();
      for (int64_t i = 0; i < n; ++i) py[i] = from_text<T>(at, px[i]);
    });
  }
  return y;
}

DType target_dtype(const AttrReader& at) {
  const Attribute* attr = at.node().attr("to");
  if (attr && attr->kind == Attribute::Kind::kString) {  // Cast-1 names the type ("FLOAT")
    static const std::pair<const char*, DType> kNames[] = {
        {"FLOAT", DType::kFloat32}, {"UINT8", DType::kUInt8},     {"INT8", DType::kInt8},
        {"UINT16", DType::kUInt16}, {"INT16", DType::kInt16},     {"INT32", DType::kInt32},
        {"INT64", DType::kInt64},   {"STRING", DType::kString},   {"BOOL", DType::kBool},
        {"FLOAT16", DType::kFloat16}, {"DOUBLE", DType::kFloat64}, {"UINT32", DType::kUInt32},
        {"UINT64", DType::kUInt64}, {"BFLOAT16", DType::kBFloat16}};
    for (const auto& [name, dt] : kNames)
      if (attr->s == name) return dt;
    at.fail(ErrorKind::kInvalidModel, "attribute 'to' is not a valid type name: " + attr->s);
  }
  int64_t to = at.attr_int("to");
  if (to < 0 || to > std::numeric_limits<int32_t>::max() || !dtype_is_valid(static_cast<int32_t>(to)))
    at.fail(ErrorKind::kInvalidModel, "attribute 'to' is not a valid dtype: " + std::to_string(to));
  return static_cast<DType>(to);
}

void cast_kernel(KernelContext& ctx) {
  ctx.set_output(0, cast_tensor(ctx, ctx.input(0), target_dtype(ctx)));
}

void castlike_kernel(KernelContext& ctx) {
  ctx.set_output(0, cast_tensor(ctx, ctx.input(0), ctx.input(1).dtype()));
}

void infer_cast(InferContext& ctx) {
  Type t = ctx.input_type(0);
  t.dtype = target_dtype(ctx);
  ctx.set_output_type(0, t);
}

void infer_castlike(InferContext& ctx) {
  Type t = ctx.input_type(0);
  t.dtype = ctx.input_type(1).dtype;
  ctx.set_output_type(0, t);
}

}  // namespace

void register_elementwise_cast_ops(OpRegistry& r) {
  r.add("Cast").since(1).inputs(1).outputs(1).kind(PatternKind::kElementwise).run(cast_kernel)
      .shape(infer_cast);
  r.add("CastLike").since(15).inputs(2).outputs(1).kind(PatternKind::kElementwise)
      .run(castlike_kernel).shape(infer_castlike);
}

}  // namespace kiln
