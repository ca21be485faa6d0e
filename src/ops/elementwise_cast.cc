// Cast and CastLike between all numeric types, bool, f16/bf16 and strings (numbers print the
// way numpy's astype(str) does, which is what the ONNX reference produces).
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>

#include "core/narrow_float.h"
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

// ---- narrow floats (float8 variants, float8e8m0, float4e2m1) and 4-/2-bit integers ----------
// Values follow the ONNX reference (op_cast.py: ml_dtypes' astype, numpy_helper.saturate_cast
// and to_float8e8m0). Sub-byte integers are stored unpacked (int4/int2 sign-extended in int8).

bool is_sub_byte_int(DType t) {
  return t == DType::kInt4 || t == DType::kUInt4 || t == DType::kInt2 || t == DType::kUInt2;
}
bool is_narrow(DType t) { return is_narrow_float(t) || is_sub_byte_int(t); }

E8M0Rounding e8m0_rounding(const AttrReader& at) {
  const std::string mode = at.attr_string("round_mode", "up");
  if (mode == "up") return E8M0Rounding::kUp;
  if (mode == "down") return E8M0Rounding::kDown;
  if (mode == "nearest") return E8M0Rounding::kNearest;
  at.fail(ErrorKind::kInvalidModel, "attribute 'round_mode' must be up, down or nearest, not '" + mode + "'");
}

// Narrow sources are widened first (floats decode exactly to f32, sub-byte integers to i8/u8);
// narrow targets are produced from f64 (floats, which hold every source value exactly) or i64.
Tensor cast_narrow(const AttrReader& at, const Tensor& x, DType to) {
  const int64_t n = x.numel();
  Tensor src = x;
  if (is_narrow_float(x.dtype())) {
    src = Tensor(DType::kFloat32, x.dims());
    for (int64_t i = 0; i < n; ++i) src.data<float>()[i] = narrow_float_decode(x.dtype(), x.data<uint8_t>()[i]);
  } else if (is_sub_byte_int(x.dtype())) {
    const bool sign = x.dtype() == DType::kInt4 || x.dtype() == DType::kInt2;
    src = Tensor(sign ? DType::kInt8 : DType::kUInt8, x.dims());
    std::memcpy(src.raw(), x.raw(), static_cast<size_t>(n));
  }
  if (!is_narrow(to)) return cast_tensor(at, src, to);
  Tensor y(to, x.dims());
  if (is_narrow_float(to)) {
    const bool saturate = at.attr_int("saturate", 1) != 0;
    const E8M0Rounding rounding = to == DType::kFloat8E8M0 ? e8m0_rounding(at) : E8M0Rounding::kUp;
    Tensor d = cast_tensor(at, src, DType::kFloat64);
    for (int64_t i = 0; i < n; ++i)
      y.data<uint8_t>()[i] = narrow_float_encode(to, d.data<double>()[i], saturate, rounding);
    return y;
  }
  // Sub-byte integers keep the low bits; floats are truncated through int32 first, where NaN
  // and out-of-range values become INT32_MIN (low bits zero), as ml_dtypes does.
  const int bits = dtype_packed_bits(to);
  const int64_t mask = (int64_t{1} << bits) - 1;
  const bool sign = to == DType::kInt4 || to == DType::kInt2;
  const bool from_float = is_float(src.dtype()) || src.dtype() == DType::kString;
  Tensor v = cast_tensor(at, src, from_float ? DType::kFloat64 : DType::kInt64);
  for (int64_t i = 0; i < n; ++i) {
    int64_t iv;
    if (from_float) {
      const double d = v.data<double>()[i];
      iv = (d > -2147483649.0 && d < 2147483648.0) ? static_cast<int64_t>(d) : 0;
    } else {
      iv = v.data<int64_t>()[i];
    }
    int64_t low = iv & mask;
    if (sign && low > (mask >> 1)) low -= mask + 1;
    y.data<uint8_t>()[i] = static_cast<uint8_t>(low);
  }
  return y;
}

Tensor cast_tensor(const AttrReader& at, const Tensor& x, DType to) {
  if (x.dtype() == to) return x.clone();
  if (is_narrow(x.dtype()) || is_narrow(to)) return cast_narrow(at, x, to);
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
