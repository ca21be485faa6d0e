// Linear quantization: QuantizeLinear, DequantizeLinear (per-tensor, per-axis, blocked; integer,
// float8, 4- and 2-bit types unpacked one element per byte), DynamicQuantizeLinear, ConvInteger,
// QLinearConv and QLinearMatMul. Also registers the recurrent ops (ops/rnn.cc).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "ops/families.h"
#include "ops/gemm_ref.h"
#include "ops/op_util.h"
#include "ops/window_util.h"

namespace kiln {

void register_rnn_ops(OpRegistry& r);  // ops/rnn.cc

namespace {

std::string dt_name(DType t) { return std::string(dtype_name(t)); }

// ---- element codecs ------------------------------------------------------------------------

// Small float formats stored one code per byte; the sign is bit (1 + exp + mant).
struct MiniFloat {
  int mant_bits, bias;
  bool fnuz;     // no -0 and no inf; sign-only code is the NaN
  bool has_inf;  // E5M2
  bool has_nan;  // false for float4e2m1
  int max_code;  // largest finite magnitude code
  int sign_bit;
};

std::optional<MiniFloat> minifloat(DType t) {
  switch (t) {
    case DType::kFloat8E4M3FN: return MiniFloat{3, 7, false, false, true, 0x7e, 7};
    case DType::kFloat8E4M3FNUZ: return MiniFloat{3, 8, true, false, true, 0x7f, 7};
    case DType::kFloat8E5M2: return MiniFloat{2, 15, false, true, true, 0x7b, 7};
    case DType::kFloat8E5M2FNUZ: return MiniFloat{2, 16, true, false, true, 0x7f, 7};
    case DType::kFloat4E2M1: return MiniFloat{1, 1, false, false, false, 0x7, 3};
    default: return std::nullopt;
  }
}

double mf_magnitude(const MiniFloat& f, int c) {
  const int e = c >> f.mant_bits;
  const int m = c & ((1 << f.mant_bits) - 1);
  if (e == 0) return std::ldexp(static_cast<double>(m), 1 - f.bias - f.mant_bits);
  return std::ldexp(static_cast<double>((1 << f.mant_bits) + m), e - f.bias - f.mant_bits);
}

double mf_decode(const MiniFloat& f, uint8_t v) {
  const int sign = 1 << f.sign_bit;
  const int c = v & (sign - 1);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (f.fnuz && v == sign) return nan;
  if (f.has_inf && c >= 0x7c) return c == 0x7c ? ((v & sign) ? -INFINITY : INFINITY) : nan;
  if (f.has_nan && !f.fnuz && !f.has_inf && c == 0x7f) return nan;
  const double mag = mf_magnitude(f, c);
  return (v & sign) ? -mag : mag;
}

// Round to nearest even. Out of range: the largest finite value when saturating, else inf or
// NaN as Cast does. Float4 has neither, so it always saturates (NaN becomes -0 like ml_dtypes).
uint8_t mf_encode(const MiniFloat& f, double x, bool saturate) {
  const int sign_mask = 1 << f.sign_bit;
  const int sign = std::signbit(x) ? sign_mask : 0;
  if (!f.has_nan) saturate = true;
  const int nan_code = !f.has_nan ? sign_mask
                       : f.fnuz   ? sign_mask
                                  : sign | (f.has_inf ? 0x7e : 0x7f);
  if (std::isnan(x)) return static_cast<uint8_t>(nan_code);
  const double a = std::fabs(x);
  const int overflow = saturate ? sign | f.max_code : f.has_inf ? sign | 0x7c : nan_code;
  if (std::isinf(a)) return static_cast<uint8_t>(overflow);
  int lo = 0, hi = f.max_code + 1;  // largest code with magnitude <= a
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    (mf_magnitude(f, mid) <= a ? lo : hi) = mid;
  }
  int code = lo;
  const double d_lo = a - mf_magnitude(f, lo);
  const double d_hi = mf_magnitude(f, lo + 1) - a;
  if (d_hi < d_lo || (d_hi == d_lo && (lo & 1))) code = lo + 1;
  if (code > f.max_code) return static_cast<uint8_t>(overflow);
  if (code == 0 && f.fnuz) return 0;
  return static_cast<uint8_t>(sign | code);
}

// Saturation range of integer quantized types; nullopt for float types.
std::optional<std::pair<int64_t, int64_t>> int_range(DType t) {
  switch (t) {
    case DType::kUInt8: case DType::kInt8: case DType::kUInt16: case DType::kInt16: case DType::kInt32:
    case DType::kUInt4: case DType::kInt4: case DType::kUInt2: case DType::kInt2:
      return integer_range(t);
    default: return std::nullopt;
  }
}

bool is_quant_type(DType t) { return int_range(t).has_value() || minifloat(t).has_value(); }

// Element i of a quantized tensor (integer, float8, sub-byte) as double.
double q_get(const Tensor& t, int64_t i) {
  const DType dt = t.dtype();
  if (auto f = minifloat(dt)) return mf_decode(*f, t.data<uint8_t>()[i]);
  switch (dt) {
    case DType::kInt8:
    case DType::kInt4:
    case DType::kInt2: return t.data<int8_t>()[i];
    case DType::kUInt8:
    case DType::kUInt4:
    case DType::kUInt2: return t.data<uint8_t>()[i];
    case DType::kInt16: return t.data<int16_t>()[i];
    case DType::kUInt16: return t.data<uint16_t>()[i];
    case DType::kInt32: return t.data<int32_t>()[i];
    case DType::kFloat8E8M0: {  // a bare power of two; 0xff is NaN
      const uint8_t c = t.data<uint8_t>()[i];
      return c == 0xff ? std::numeric_limits<double>::quiet_NaN() : std::ldexp(1.0, c - 127);
    }
    default: return t.get_double(i);
  }
}

// Stores v (already rounded and saturated for integer types) into element i.
void q_set(Tensor& t, int64_t i, double v, bool saturate) {
  const DType dt = t.dtype();
  if (auto f = minifloat(dt)) {
    t.data<uint8_t>()[i] = mf_encode(*f, v, saturate);
    return;
  }
  switch (dt) {
    case DType::kInt8:
    case DType::kInt4:
    case DType::kInt2: t.data<int8_t>()[i] = static_cast<int8_t>(v); return;
    case DType::kUInt8:
    case DType::kUInt4:
    case DType::kUInt2: t.data<uint8_t>()[i] = static_cast<uint8_t>(v); return;
    case DType::kInt16: t.data<int16_t>()[i] = static_cast<int16_t>(v); return;
    case DType::kUInt16: t.data<uint16_t>()[i] = static_cast<uint16_t>(v); return;
    case DType::kInt32: t.data<int32_t>()[i] = static_cast<int32_t>(v); return;
    default: t.set_double(i, v);
  }
}

// Quantizes an already scaled value: integers round half to even, add the zero point and
// saturate; float types add the zero point and convert.
double quantize_value(DType to, double v, double zp) {
  if (auto r = int_range(to)) {
    if (std::isnan(v)) v = 0;
    const double q = std::nearbyint(v) + zp;
    return std::clamp(q, static_cast<double>(r->first), static_cast<double>(r->second));
  }
  return v + zp;
}

// Values of a scale tensor (f32/f16/bf16/f64/float8e8m0) as double.
std::vector<double> float_values(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i)
    v[i] = t.dtype() == DType::kFloat8E8M0 ? q_get(t, i) : t.get_double(i);
  return v;
}

// Rounds v to the precision of float type t as numpy does for that type's arithmetic.
double round_to(DType t, double v) {
  switch (t) {
    case DType::kFloat32: return static_cast<float>(v);
    case DType::kFloat16: return static_cast<float>(Float16(static_cast<float>(v)));
    case DType::kBFloat16: return static_cast<float>(BFloat16(static_cast<float>(v)));
    default: return v;
  }
}

// a op b computed in the arithmetic of type t (f16/bf16 go through float like numpy).
double div_in(DType t, double a, double b) {
  if (t == DType::kFloat64) return a / b;
  return round_to(t, static_cast<float>(a) / static_cast<float>(b));
}
double mul_in(DType t, double a, double b) {
  if (t == DType::kFloat64) return a * b;
  return round_to(t, static_cast<float>(a) * static_cast<float>(b));
}

// ---- scale / zero-point layout -------------------------------------------------------------

// Maps element i of x (row-major) to its scale element: per-tensor, per-axis or blocked.
struct ParamMap {
  int64_t inner = 1, axis_len = 1, scale_axis_len = 1, block = 0;
  bool per_tensor = true;
  int64_t operator()(int64_t i) const {
    if (per_tensor) return 0;
    const int64_t a = (i / inner) % axis_len;
    if (block == 0) return a;
    const int64_t outer = i / (inner * axis_len);
    return (outer * scale_axis_len + a / block) * inner + i % inner;
  }
};

ParamMap param_map(const KernelContext& ctx, const Tensor& x, const Tensor& scale,
                   const Tensor* zp) {
  if (zp && zp->dims() != scale.dims() && !(zp->numel() == 1 && scale.numel() == 1))
    ctx.fail(ErrorKind::kBadInput, "zero point shape " + dims_to_string(zp->dims()) +
                                       " differs from scale shape " + dims_to_string(scale.dims()));
  ParamMap m;
  if (scale.numel() == 1) return m;
  if (x.rank() == 0)
    ctx.fail(ErrorKind::kBadInput,
             "a scalar input needs a scalar scale, got shape " + dims_to_string(scale.dims()));
  const int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", 1), x.rank());
  const int64_t block = ctx.attr_int("block_size", 0);
  if (block < 0)
    ctx.fail(ErrorKind::kInvalidModel, "block_size should be >= 0, got " + std::to_string(block));
  m.per_tensor = false;
  m.axis_len = x.dim(static_cast<int>(axis));
  for (int k = static_cast<int>(axis) + 1; k < x.rank(); ++k) m.inner *= x.dim(k);
  if (block == 0) {
    if (scale.rank() != 1 || scale.dim(0) != m.axis_len)
      ctx.fail(ErrorKind::kBadInput, "per-axis scale should be 1-D of length " +
                                         std::to_string(m.axis_len) + " (axis " +
                                         std::to_string(axis) + " of " + dims_to_string(x.dims()) +
                                         "), got shape " + dims_to_string(scale.dims()));
    return m;
  }
  m.block = block;
  std::vector<int64_t> want = x.dims();
  want[axis] = (m.axis_len + block - 1) / block;
  if (scale.dims() != want)
    ctx.fail(ErrorKind::kBadInput, "blocked scale should have shape " + dims_to_string(want) +
                                       " for input " + dims_to_string(x.dims()) +
                                       " and block_size " + std::to_string(block) + ", got " +
                                       dims_to_string(scale.dims()));
  m.scale_axis_len = want[axis];
  return m;
}

void check_scale_type(const KernelContext& ctx, const Tensor& s, const char* what,
                      bool allow_e8m0 = false) {
  const DType t = s.dtype();
  if (t != DType::kFloat32 && t != DType::kFloat16 && t != DType::kBFloat16 &&
      t != DType::kFloat64 && !(allow_e8m0 && t == DType::kFloat8E8M0))
    ctx.fail(ErrorKind::kBadInput,
             std::string(what) + " should be a float tensor, got " + dt_name(t));
}

// ---- QuantizeLinear / DequantizeLinear -----------------------------------------------------

int64_t output_dtype_attr(const AttrReader& at);

DType quantize_output_type(const AttrReader& at, const Tensor* zp) {
  const int64_t out = output_dtype_attr(at);
  if (zp) {
    if (out != 0 && out != static_cast<int64_t>(zp->dtype()))
      at.fail(ErrorKind::kInvalidModel, "output_dtype " + std::to_string(out) +
                                            " differs from the zero point type " +
                                            dt_name(zp->dtype()));
    return zp->dtype();
  }
  return out != 0 ? static_cast<DType>(out) : DType::kUInt8;
}

void quantize_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  const Tensor* zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  check_scale_type(ctx, scale, "y_scale", true);
  const DType xt = x.dtype();
  if (xt != DType::kFloat32 && xt != DType::kFloat16 && xt != DType::kBFloat16 &&
      xt != DType::kInt32 && xt != DType::kFloat64)
    ctx.fail(ErrorKind::kBadInput,
             "QuantizeLinear input should be float or int32, got " + dt_name(xt));
  const DType to = quantize_output_type(ctx, zp);
  if (!is_quant_type(to) || to == DType::kInt32)
    ctx.fail(ErrorKind::kUnsupported, "QuantizeLinear cannot produce type " + dt_name(to));
  const ParamMap pm = param_map(ctx, x, scale, zp);
  // A power-of-two e8m0 scale divides exactly; float32 keeps the quotient like numpy would.
  DType precision = scale.dtype() == DType::kFloat8E8M0 ? DType::kFloat32 : scale.dtype();
  if (const int64_t p = ctx.attr_int("precision", 0); p != 0) {
    precision = static_cast<DType>(p);
    if (precision != DType::kFloat32 && precision != DType::kFloat16 &&
        precision != DType::kBFloat16 && precision != DType::kFloat64)
      ctx.fail(ErrorKind::kInvalidModel,
               "precision should be a float type, got " + std::to_string(p));
  }
  const bool saturate = ctx.attr_int("saturate", 1) != 0;
  const std::vector<double> s = float_values(scale);
  Tensor y(to, x.dims());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t k = pm(i);
    const double v =
        div_in(precision, round_to(precision, x.get_double(i)), round_to(precision, s[k]));
    q_set(y, i, quantize_value(to, v, zp ? q_get(*zp, k) : 0.0), saturate);
  }
  ctx.set_output(0, std::move(y));
}

void dequantize_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  const Tensor* zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  check_scale_type(ctx, scale, "x_scale", true);
  if (!is_quant_type(x.dtype()))
    ctx.fail(ErrorKind::kBadInput, "DequantizeLinear cannot read type " + dt_name(x.dtype()));
  if (zp && zp->dtype() != x.dtype())
    ctx.fail(ErrorKind::kBadInput, "zero point type " + dt_name(zp->dtype()) +
                                       " differs from the input type " + dt_name(x.dtype()));
  const int64_t out_attr = output_dtype_attr(ctx);
  const DType to = out_attr != 0 ? static_cast<DType>(out_attr) : scale.dtype();
  if (to != DType::kFloat32 && to != DType::kFloat16 && to != DType::kBFloat16)
    ctx.fail(ErrorKind::kInvalidModel,
             "output_dtype should be float, float16 or bfloat16, got " + dt_name(to));
  const ParamMap pm = param_map(ctx, x, scale, zp);
  const std::vector<double> s = float_values(scale);
  const bool float_x = minifloat(x.dtype()).has_value();
  Tensor y(to, x.dims());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t k = pm(i);
    // Like the reference: x - zero_point in float32, times the scale in float32.
    float dx = static_cast<float>(q_get(x, i));
    if (zp && !float_x) dx = static_cast<float>(static_cast<double>(dx) - q_get(*zp, k));
    const float v = dx * static_cast<float>(s[k]);
    if (to == DType::kFloat32)
      y.data<float>()[i] = v;
    else if (to == DType::kFloat16)
      y.data<Float16>()[i] = Float16(v);
    else
      y.data<BFloat16>()[i] = BFloat16(v);
  }
  ctx.set_output(0, std::move(y));
}

// The output_dtype attribute (0 when absent); fails on codes that name no type.
int64_t output_dtype_attr(const AttrReader& at) {
  const int64_t out = at.attr_int("output_dtype", 0);
  if (out < 0 || out > std::numeric_limits<int32_t>::max() ||
      (out != 0 && !dtype_is_valid(static_cast<int32_t>(out))))
    at.fail(ErrorKind::kInvalidModel,
            "output_dtype " + std::to_string(out) + " is not a data type");
  return out;
}

void infer_quantize(InferContext& ctx) {
  DType to = DType::kUInt8;
  const int64_t out = output_dtype_attr(ctx);
  if (ctx.has_input(2))
    to = ctx.input_type(2).dtype;
  else if (out != 0)
    to = static_cast<DType>(out);
  ctx.set_output_type(0, Type::tensor(to, ctx.input_type(0).shape));
}

void infer_dequantize(InferContext& ctx) {
  const int64_t out = output_dtype_attr(ctx);
  const DType to = out != 0 ? static_cast<DType>(out) : ctx.input_type(1).dtype;
  ctx.set_output_type(0, Type::tensor(to, ctx.input_type(0).shape));
}

// ---- DynamicQuantizeLinear -----------------------------------------------------------------

// Mirrors the reference's float32 arithmetic step by step so that scale and zero point match.
void dynamic_quantize_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::kFloat32)
    ctx.fail(ErrorKind::kBadInput,
             "DynamicQuantizeLinear input should be float, got " + dt_name(x.dtype()));
  const float* p = x.data<float>();
  float mx = 0.f, mn = 0.f;
  for (int64_t i = 0; i < x.numel(); ++i) {
    mx = std::max(mx, p[i]);
    mn = std::min(mn, p[i]);
  }
  const float scale = (mx == mn ? 1.0f : (mx - mn)) / 255.0f;
  const float zp_f = std::clamp(0.0f - mn / scale, 0.0f, 255.0f);
  const float zp = std::nearbyint(zp_f);
  Tensor y(DType::kUInt8, x.dims());
  // |p / scale| <= 255 (NaN aside), so adding and subtracting 1.5 * 2^23 rounds half to even
  // exactly, as nearbyint does, but in a loop the compiler vectorizes (nearbyint is a libm call
  // on baseline x86-64); this op runs once per quantized MatMul input in dynamic models.
  constexpr float kRound = 12582912.0f;
  uint8_t* out = y.data<uint8_t>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float r = (p[i] / scale + kRound) - kRound;
    const float q = r + zp;
    out[i] = static_cast<uint8_t>(q != q ? 0.f : std::min(std::max(q, 0.f), 255.f));
  }
  ctx.set_output(0, std::move(y));
  if (ctx.wants_output(1)) ctx.set_output(1, Tensor::scalar(DType::kFloat32, scale));
  if (ctx.wants_output(2)) ctx.set_output(2, Tensor::scalar(DType::kUInt8, zp));
}

void infer_dynamic_quantize(InferContext& ctx) {
  ctx.set_output_type(0, Type::tensor(DType::kUInt8, ctx.input_type(0).shape));
  if (ctx.num_outputs() > 1) ctx.set_output_type(1, Type::tensor(DType::kFloat32, Shape()));
  if (ctx.num_outputs() > 2) ctx.set_output_type(2, Type::tensor(DType::kUInt8, Shape()));
}

// ---- integer convolution -------------------------------------------------------------------

void check_int8(const KernelContext& ctx, const Tensor& t, const char* what) {
  if (t.dtype() != DType::kInt8 && t.dtype() != DType::kUInt8)
    ctx.fail(ErrorKind::kBadInput,
             std::string(what) + " should be int8 or uint8, got " + dt_name(t.dtype()));
}

// Zero point of x: a scalar (or one-element tensor) of x's type.
double scalar_zero_point(const KernelContext& ctx, int idx, const Tensor& x, const char* what) {
  if (!ctx.has_input(idx)) return 0;
  const Tensor& z = ctx.input(idx);
  if (z.dtype() != x.dtype())
    ctx.fail(ErrorKind::kBadInput, std::string(what) + " type " + dt_name(z.dtype()) +
                                       " differs from its input's " + dt_name(x.dtype()));
  if (z.numel() != 1)
    ctx.fail(ErrorKind::kBadInput,
             std::string(what) + " should be a scalar, got shape " + dims_to_string(z.dims()));
  return q_get(z, 0);
}

// Per-output-channel values (scalar or 1-D of length m) expanded to m entries.
std::vector<double> per_channel(const KernelContext& ctx, const Tensor& t, int64_t m,
                                const char* what) {
  if (t.numel() != 1 && (t.rank() != 1 || t.dim(0) != m))
    ctx.fail(ErrorKind::kBadInput, std::string(what) + " should be a scalar or 1-D of length " +
                                       std::to_string(m) + ", got shape " +
                                       dims_to_string(t.dims()));
  std::vector<double> v(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i)
    v[i] = is_float(t.dtype()) && !minifloat(t.dtype()) ? t.get_double(t.numel() == 1 ? 0 : i)
                                                        : q_get(t, t.numel() == 1 ? 0 : i);
  return v;
}

struct IntConv {
  std::vector<int64_t> out_dims;
  std::vector<double> acc;  // exact integer sums, [N, M, out spatial...]
};

// Convolution of (x - x_zp) with (w - w_zp[m]) through im2col and a double GEMM: products of
// 8-bit values summed in double stay exact far beyond any real kernel size.
IntConv int_conv(const KernelContext& ctx, const Tensor& x, const Tensor& w, double x_zp,
                 const std::vector<double>& w_zp) {
  if (x.rank() < 3 || w.rank() != x.rank())
    ctx.fail(ErrorKind::kBadInput,
             "conv needs X [N, C, ...] and W [M, C/group, ...] of equal rank >= 3, got " +
                 dims_to_string(x.dims()) + " and " + dims_to_string(w.dims()));
  const int64_t group = ctx.attr_int("group", 1);
  const int64_t n = x.dim(0), c = x.dim(1), m = w.dim(0);
  if (group <= 0 || c % group != 0 || m % group != 0 || w.dim(1) != c / group)
    ctx.fail(ErrorKind::kBadInput, "channels do not fit group " + std::to_string(group) + ": X " +
                                       dims_to_string(x.dims()) + ", W " +
                                       dims_to_string(w.dims()));
  const std::vector<int64_t> in(x.dims().begin() + 2, x.dims().end());
  const std::vector<int64_t> kernel(w.dims().begin() + 2, w.dims().end());
  const std::vector<int64_t> ks = ctx.attr_ints("kernel_shape");
  if (!ks.empty() && ks != kernel)
    ctx.fail(ErrorKind::kBadInput, "kernel_shape " + dims_to_string(ks) +
                                       " differs from the weight's spatial dims " +
                                       dims_to_string(kernel));
  const Window win = resolve_window(ctx, in, kernel, false);
  const int nsp = win.nsp;
  const int64_t cg = c / group, mg = m / group;
  const int64_t in_sp = product(in), out_sp = product(win.out), k_sp = product(kernel);
  IntConv r;
  r.out_dims = {n, m};
  r.out_dims.insert(r.out_dims.end(), win.out.begin(), win.out.end());
  r.acc.assign(static_cast<size_t>(n * m * out_sp), 0.0);
  // Weights minus their zero points, [M, Cg * K].
  std::vector<double> wv(static_cast<size_t>(w.numel()));
  const int64_t w_per_m = cg * k_sp;
  for (int64_t i = 0; i < w.numel(); ++i) wv[i] = q_get(w, i) - w_zp[i / w_per_m];
  // Input coordinate offsets per (kernel position, output position) are shared by channels.
  std::vector<int64_t> src(static_cast<size_t>(k_sp * out_sp), -1);
  {
    int64_t kidx = 0;
    for_each_index(kernel, [&](const std::vector<int64_t>& kk) {
      int64_t oidx = 0;
      for_each_index(win.out, [&](const std::vector<int64_t>& oo) {
        int64_t off = 0;
        bool inside = true;
        for (int d = 0; d < nsp && inside; ++d) {
          const int64_t pos = oo[d] * win.strides[d] - win.pads[d] + kk[d] * win.dilations[d];
          inside = pos >= 0 && pos < in[d];
          off = off * in[d] + pos;
        }
        src[kidx * out_sp + oidx++] = inside ? off : -1;
      });
      ++kidx;
    });
  }
  std::vector<double> col(static_cast<size_t>(cg * k_sp * out_sp));
  std::vector<double> img(static_cast<size_t>(cg * in_sp));
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t g = 0; g < group; ++g) {
      const int64_t base = (b * c + g * cg) * in_sp;
      for (int64_t i = 0; i < cg * in_sp; ++i) img[i] = q_get(x, base + i) - x_zp;
      for (int64_t ch = 0; ch < cg; ++ch)
        for (int64_t k = 0; k < k_sp; ++k) {
          double* dst = col.data() + (ch * k_sp + k) * out_sp;
          const int64_t* s = src.data() + k * out_sp;
          const double* im = img.data() + ch * in_sp;
          for (int64_t o = 0; o < out_sp; ++o) dst[o] = s[o] >= 0 ? im[s[o]] : 0.0;
        }
      if (mg > 0 && out_sp > 0)
        gemm_ref(false, false, mg, out_sp, cg * k_sp, 1.0, wv.data() + g * mg * w_per_m, w_per_m,
                 col.data(), out_sp, 0.0, r.acc.data() + (b * m + g * mg) * out_sp, out_sp);
    }
  }
  return r;
}

// int32 wrap-around of an exact sum (the spec allows overflow only in 32 bits).
int32_t wrap_i32(double v) {
  return static_cast<int32_t>(
      static_cast<uint32_t>(static_cast<uint64_t>(static_cast<int64_t>(v))));
}

void conv_integer_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  check_int8(ctx, x, "x");
  check_int8(ctx, w, "w");
  const double x_zp = scalar_zero_point(ctx, 2, x, "x_zero_point");
  const int64_t m = w.rank() > 0 ? w.dim(0) : 0;
  std::vector<double> w_zp(static_cast<size_t>(m), 0.0);
  if (ctx.has_input(3)) {
    if (ctx.input(3).dtype() != w.dtype())
      ctx.fail(ErrorKind::kBadInput, "w_zero_point type differs from w's");
    w_zp = per_channel(ctx, ctx.input(3), m, "w_zero_point");
  }
  IntConv r = int_conv(ctx, x, w, x_zp, w_zp);
  Tensor y(DType::kInt32, r.out_dims);
  for (size_t i = 0; i < r.acc.size(); ++i) y.data<int32_t>()[i] = wrap_i32(r.acc[i]);
  ctx.set_output(0, std::move(y));
}

// Requantizes exact sums: y = saturate(round_half_even(acc * multiplier + zp)).
void requantize(const KernelContext& ctx, Tensor& y, const std::vector<double>& acc,
                const std::vector<double>& mult, const std::vector<double>& zp) {
  const auto range = int_range(y.dtype());
  for (size_t i = 0; i < acc.size(); ++i) {
    const double v = acc[i] * mult[i] + zp[i];
    if (range) {
      const double q = std::isnan(v) ? zp[i] : std::nearbyint(v);
      q_set(y, static_cast<int64_t>(i),
            std::clamp(q, static_cast<double>(range->first), static_cast<double>(range->second)),
            true);
    } else if (minifloat(y.dtype())) {
      q_set(y, static_cast<int64_t>(i), v, true);
    } else {
      ctx.fail(ErrorKind::kUnsupported, "cannot quantize to " + dt_name(y.dtype()));
    }
  }
}

void qlinear_conv_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(3);
  check_int8(ctx, x, "x");
  check_int8(ctx, w, "w");
  const Tensor& y_zp_t = ctx.input(7);
  check_int8(ctx, y_zp_t, "y_zero_point");
  for (int i : {1, 4, 6}) check_scale_type(ctx, ctx.input(i), "scale");
  const int64_t m = w.rank() > 0 ? w.dim(0) : 0;
  const double x_zp = scalar_zero_point(ctx, 2, x, "x_zero_point");
  if (ctx.input(5).dtype() != w.dtype())
    ctx.fail(ErrorKind::kBadInput, "w_zero_point type differs from w's");
  const std::vector<double> w_zp = per_channel(ctx, ctx.input(5), m, "w_zero_point");
  const std::vector<double> w_scale = per_channel(ctx, ctx.input(4), m, "w_scale");
  if (ctx.input(1).numel() != 1 || ctx.input(6).numel() != 1 || y_zp_t.numel() != 1)
    ctx.fail(ErrorKind::kBadInput, "x_scale, y_scale and y_zero_point should be scalars");
  const double x_scale = ctx.input(1).get_double(0), y_scale = ctx.input(6).get_double(0);
  const double y_zp = q_get(y_zp_t, 0);
  IntConv r = int_conv(ctx, x, w, x_zp, w_zp);
  const int64_t n = r.out_dims[0];
  const int64_t out_sp = m > 0 && n > 0 ? static_cast<int64_t>(r.acc.size()) / (n * m) : 0;
  if (ctx.has_input(8)) {
    const Tensor& bias = ctx.input(8);
    if (bias.dtype() != DType::kInt32 || bias.rank() != 1 || bias.dim(0) != m)
      ctx.fail(ErrorKind::kBadInput, "B should be int32 of shape [" + std::to_string(m) +
                                         "], got " + dt_name(bias.dtype()) +
                                         dims_to_string(bias.dims()));
    for (int64_t b = 0; b < n; ++b)
      for (int64_t ch = 0; ch < m; ++ch)
        for (int64_t o = 0; o < out_sp; ++o)
          r.acc[(b * m + ch) * out_sp + o] += bias.data<int32_t>()[ch];
  }
  std::vector<double> mult(r.acc.size()), zp(r.acc.size(), y_zp);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < m; ++ch) {
      // float32 multiplier as the reference computes it, applied to the int32 sum in double.
      const double mc =
          div_in(DType::kFloat32, mul_in(DType::kFloat32, x_scale, w_scale[ch]), y_scale);
      for (int64_t o = 0; o < out_sp; ++o) mult[(b * m + ch) * out_sp + o] = mc;
    }
  for (double& a : r.acc) a = wrap_i32(a);
  Tensor y(y_zp_t.dtype(), r.out_dims);
  requantize(ctx, y, r.acc, mult, zp);
  ctx.set_output(0, std::move(y));
}

void infer_int_conv(InferContext& ctx, int w_index, DType out) {
  const Type& xt = ctx.input_type(0);
  const Type& wt = ctx.input_type(w_index);
  std::vector<int64_t> in;
  if (!spatial_dims_of(xt, &in) || !wt.shape || wt.shape->rank() != xt.shape->rank() ||
      !wt.shape->is_static()) {
    ctx.set_output_type(0, Type::tensor(out));
    return;
  }
  const std::vector<int64_t> wd = wt.shape->sizes();
  const Window win = resolve_window(ctx, in, std::vector<int64_t>(wd.begin() + 2, wd.end()), false);
  std::vector<Dim> dims = {xt.shape->dims[0], Dim(wd[0])};
  for (int64_t o : win.out) dims.push_back(o >= 0 ? Dim(o) : Dim());
  ctx.set_output_type(0, Type::tensor(out, Shape(dims)));
}

void infer_conv_integer(InferContext& ctx) { infer_int_conv(ctx, 1, DType::kInt32); }
void infer_qlinear_conv(InferContext& ctx) {
  infer_int_conv(ctx, 3, ctx.has_input(7) ? ctx.input_type(7).dtype : ctx.input_type(0).dtype);
}

// ---- QLinearMatMul -------------------------------------------------------------------------

// Values of a quantization parameter broadcast (numpy-style) to `dims`. A 1-D parameter of a
// matrix's row count is per row (the spec's [M] form for `a`).
std::vector<double> broadcast_param(const KernelContext& ctx, const Tensor& p,
                                    std::vector<int64_t> pdims, const std::vector<int64_t>& dims,
                                    const char* what) {
  std::vector<double> v(static_cast<size_t>(p.numel()));
  const bool as_float = is_float(p.dtype()) && !minifloat(p.dtype());
  for (int64_t i = 0; i < p.numel(); ++i) v[i] = as_float ? p.get_double(i) : q_get(p, i);
  if (broadcast_dims(ctx, {dims, pdims}) != dims)
    ctx.fail(ErrorKind::kBadInput, std::string(what) + " of shape " + dims_to_string(p.dims()) +
                                       " does not fit shape " + dims_to_string(dims));
  std::vector<double> out(static_cast<size_t>(checked_numel(dims)));
  const double* src = v.data();
  for_each_broadcast(dims, {broadcast_strides(pdims, dims)},
                     [&](int64_t i, const int64_t* off) { out[i] = src[off[0]]; });
  return out;
}

std::vector<int64_t> param_dims(const Tensor& p, const Tensor& operand, bool is_a) {
  std::vector<int64_t> d = p.dims();
  if (is_a && d.size() == 1 && d[0] != 1 && operand.rank() >= 2) d.push_back(1);
  return d;
}

void qlinear_matmul_kernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(3);
  const Tensor& y_zp_t = ctx.input(7);
  for (const Tensor* t : {&a, &b, &y_zp_t})
    if (!is_quant_type(t->dtype()) || t->dtype() == DType::kInt32)
      ctx.fail(ErrorKind::kBadInput,
               "QLinearMatMul operands should be 8-bit, got " + dt_name(t->dtype()));
  if (ctx.input(2).dtype() != a.dtype() || ctx.input(5).dtype() != b.dtype())
    ctx.fail(ErrorKind::kBadInput, "zero point types should match their operands");
  for (int i : {1, 4, 6}) check_scale_type(ctx, ctx.input(i), "scale");
  if (a.rank() == 0 || b.rank() == 0)
    ctx.fail(ErrorKind::kBadInput, "QLinearMatMul operands need rank >= 1");
  // Operands minus zero points as double matrices; 1-D operands are promoted like numpy.
  std::vector<double> av = broadcast_param(ctx, ctx.input(2), param_dims(ctx.input(2), a, true),
                                           a.dims(), "a_zero_point");
  std::vector<double> bv =
      broadcast_param(ctx, ctx.input(5), ctx.input(5).dims(), b.dims(), "b_zero_point");
  for (int64_t i = 0; i < a.numel(); ++i) av[i] = q_get(a, i) - av[i];
  for (int64_t i = 0; i < b.numel(); ++i) bv[i] = q_get(b, i) - bv[i];
  std::vector<int64_t> ad = a.dims(), bd = b.dims();
  const bool a_vec = ad.size() == 1, b_vec = bd.size() == 1;
  if (a_vec) ad.insert(ad.begin(), 1);
  if (b_vec) bd.push_back(1);
  const int64_t M = ad[ad.size() - 2], K = ad.back(), N = bd.back();
  if (bd[bd.size() - 2] != K)
    ctx.fail(ErrorKind::kBadInput, "QLinearMatMul inner dims differ: " + dims_to_string(a.dims()) +
                                       " x " + dims_to_string(b.dims()));
  const std::vector<int64_t> a_batch(ad.begin(), ad.end() - 2), b_batch(bd.begin(), bd.end() - 2);
  const std::vector<int64_t> batch = broadcast_dims(ctx, {a_batch, b_batch});
  std::vector<int64_t> cd = batch;
  cd.push_back(M);
  cd.push_back(N);
  std::vector<double> c(static_cast<size_t>(checked_numel(cd)));
  for_each_broadcast(batch, {broadcast_strides(a_batch, batch), broadcast_strides(b_batch, batch)},
                     [&](int64_t i, const int64_t* off) {
                       if (M * N > 0)
                         gemm_ref(false, false, M, N, K, 1.0, av.data() + off[0] * M * K, K,
                                  bv.data() + off[1] * K * N, N, 0.0, c.data() + i * M * N, N);
                     });
  for (double& v : c) v = wrap_i32(v);
  std::vector<int64_t> yd = batch;
  if (!a_vec) yd.push_back(M);
  if (!b_vec) yd.push_back(N);
  // Scales and the output zero point broadcast to C's [batch.., M, N] view.
  const DType st = ctx.input(1).dtype();
  auto cparam = [&](int idx, bool is_a, const char* what) {
    const Tensor& p = ctx.input(idx);
    return broadcast_param(ctx, p, param_dims(p, is_a ? a : b, is_a), cd, what);
  };
  const std::vector<double> as = cparam(1, true, "a_scale"), bs = cparam(4, false, "b_scale");
  const std::vector<double> ys =
      broadcast_param(ctx, ctx.input(6), ctx.input(6).dims(), cd, "y_scale");
  const std::vector<double> yz = broadcast_param(ctx, y_zp_t, y_zp_t.dims(), cd, "y_zero_point");
  std::vector<double> mult(c.size());
  for (size_t i = 0; i < c.size(); ++i) mult[i] = div_in(st, mul_in(st, as[i], bs[i]), ys[i]);
  Tensor y(y_zp_t.dtype(), yd);
  requantize(ctx, y, c, mult, yz);
  ctx.set_output(0, std::move(y));
}

void infer_qlinear_matmul(InferContext& ctx) {
  ctx.set_output_type(0, Type::tensor(ctx.input_type(7).dtype));
}

}  // namespace

void register_rnn_quant_ops(OpRegistry& r) {
  register_rnn_ops(r);
  r.add("QuantizeLinear").since(10).inputs(2, 3).outputs(1).kind(PatternKind::kBroadcast)
      .run(quantize_kernel).shape(infer_quantize);
  r.add("DequantizeLinear").since(10).inputs(2, 3).outputs(1).kind(PatternKind::kBroadcast)
      .run(dequantize_kernel).shape(infer_dequantize);
  r.add("DynamicQuantizeLinear").since(11).inputs(1).outputs(1, 3).run(dynamic_quantize_kernel)
      .shape(infer_dynamic_quantize);
  r.add("ConvInteger").since(10).inputs(2, 4).outputs(1).kind(PatternKind::kOutFusable)
      .run(conv_integer_kernel).shape(infer_conv_integer);
  r.add("QLinearConv").since(10).inputs(8, 9).outputs(1).kind(PatternKind::kOutFusable)
      .run(qlinear_conv_kernel).shape(infer_qlinear_conv);
  r.add("QLinearMatMul").since(10).inputs(8).outputs(1).kind(PatternKind::kOutFusable)
      .run(qlinear_matmul_kernel).shape(infer_qlinear_matmul);
}

}  // namespace kiln
