// Unary elementwise math (Abs, Exp, Sin, Round, Erf, ...), IsNaN/IsInf, Not, BitwiseNot and
// Identity. Registered from register_elementwise_ops.
#include <cmath>
#include <type_traits>

#include "ops/elementwise_util.h"

namespace kiln {

void register_elementwise_unary_ops(OpRegistry& r);

namespace {

using namespace ew;  // NOLINT: private helpers of this family

#define KILN_FLOAT_UNARY(Name, expr)      \
  struct Name : UnaryBase {               \
    using UnaryBase::UnaryBase;           \
    template <class T>                    \
    T operator()(T x) const {             \
      return static_cast<T>(expr);        \
    }                                     \
  };

KILN_FLOAT_UNARY(FloorOp, std::floor(x))
KILN_FLOAT_UNARY(CeilOp, std::ceil(x))
KILN_FLOAT_UNARY(RoundOp, std::nearbyint(x))  // default rounding mode: half to even
KILN_FLOAT_UNARY(SqrtOp, std::sqrt(x))
KILN_FLOAT_UNARY(ReciprocalOp, T(1) / x)
KILN_FLOAT_UNARY(ExpOp, std::exp(x))
KILN_FLOAT_UNARY(LogOp, std::log(x))
KILN_FLOAT_UNARY(SinOp, std::sin(x))
KILN_FLOAT_UNARY(CosOp, std::cos(x))
KILN_FLOAT_UNARY(TanOp, std::tan(x))
KILN_FLOAT_UNARY(AsinOp, std::asin(x))
KILN_FLOAT_UNARY(AcosOp, std::acos(x))
KILN_FLOAT_UNARY(AtanOp, std::atan(x))
KILN_FLOAT_UNARY(SinhOp, std::sinh(x))
KILN_FLOAT_UNARY(CoshOp, std::cosh(x))
KILN_FLOAT_UNARY(AsinhOp, std::asinh(x))
KILN_FLOAT_UNARY(AcoshOp, std::acosh(x))
KILN_FLOAT_UNARY(AtanhOp, std::atanh(x))
KILN_FLOAT_UNARY(ErfOp, std::erf(x))
#undef KILN_FLOAT_UNARY

struct AbsOp : UnaryBase {
  using UnaryBase::UnaryBase;
  template <class T>
  T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return std::fabs(x);
    else if constexpr (std::is_signed_v<T>) return x < 0 ? static_cast<T>(0u - static_cast<uint64_t>(x)) : x;
    else return x;
  }
};
struct NegOp : UnaryBase {
  using UnaryBase::UnaryBase;
  template <class T>
  T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return -x;
    else return static_cast<T>(0u - static_cast<uint64_t>(x));  // wraps like two's complement
  }
};
struct SignOp : UnaryBase {
  using UnaryBase::UnaryBase;
  template <class T>
  T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(x)) return x;
    }
    if constexpr (std::is_signed_v<T>) {
      if (x < 0) return static_cast<T>(-1);
    }
    return x > 0 ? T(1) : T(0);
  }
};
struct NotOp : UnaryBase {
  using UnaryBase::UnaryBase;
  bool operator()(bool x) const { return !x; }
};
struct BitwiseNotOp : UnaryBase {
  using UnaryBase::UnaryBase;
  template <class T>
  T operator()(T x) const { return static_cast<T>(~x); }
};

// IsNaN / IsInf: float input, bool output.
template <bool kIsInf>
void float_class_kernel(KernelContext& ctx) {
  Tensor x = widen_half(ctx.input(0));
  const bool pos = ctx.attr_int("detect_positive", 1) != 0;
  const bool neg = ctx.attr_int("detect_negative", 1) != 0;
  Tensor y(DType::kBool, x.dims());
  dispatch<kFloats>(ctx, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data<T>();
    bool* py = y.data<bool>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      if constexpr (kIsInf) py[i] = std::isinf(px[i]) && (px[i] > 0 ? pos : neg);
      else py[i] = std::isnan(px[i]);
    }
  });
  ctx.set_output(0, std::move(y));
}

void identity_kernel(KernelContext& ctx) { ctx.set_output_value(0, ctx.input_value(0)); }

void infer_bool_same_shape(InferContext& ctx) {
  Type t = ctx.input_type(0);
  t.dtype = DType::kBool;
  ctx.set_output_type(0, t);
}

}  // namespace

void register_elementwise_unary_ops(OpRegistry& r) {
  struct Entry {
    const char* name;
    int since;
    KernelFn fn;
  };
  const Entry float_ops[] = {
      {"Floor", 1, unary_kernel<FloorOp, kFloats>},
      {"Ceil", 1, unary_kernel<CeilOp, kFloats>},
      {"Round", 11, unary_kernel<RoundOp, kFloats>},
      {"Sqrt", 1, unary_kernel<SqrtOp, kFloats>},
      {"Reciprocal", 1, unary_kernel<ReciprocalOp, kFloats>},
      {"Exp", 1, unary_kernel<ExpOp, kFloats>},
      {"Log", 1, unary_kernel<LogOp, kFloats>},
      {"Sin", 7, unary_kernel<SinOp, kFloats>},
      {"Cos", 7, unary_kernel<CosOp, kFloats>},
      {"Tan", 7, unary_kernel<TanOp, kFloats>},
      {"Asin", 7, unary_kernel<AsinOp, kFloats>},
      {"Acos", 7, unary_kernel<AcosOp, kFloats>},
      {"Atan", 7, unary_kernel<AtanOp, kFloats>},
      {"Sinh", 9, unary_kernel<SinhOp, kFloats>},
      {"Cosh", 9, unary_kernel<CoshOp, kFloats>},
      {"Asinh", 9, unary_kernel<AsinhOp, kFloats>},
      {"Acosh", 9, unary_kernel<AcoshOp, kFloats>},
      {"Atanh", 9, unary_kernel<AtanhOp, kFloats>},
      {"Erf", 9, unary_kernel<ErfOp, kFloats>},
      {"Abs", 1, unary_kernel<AbsOp, kNumeric>},
      {"Neg", 1, unary_kernel<NegOp, kNumeric>},
      {"Sign", 9, unary_kernel<SignOp, kNumeric>},
  };
  for (const Entry& e : float_ops)
    r.add(e.name).since(e.since).inputs(1).outputs(1).kind(PatternKind::kElementwise).run(e.fn)
        .shape(infer_same_as_input0).via_float();
  r.add("Not").since(1).inputs(1).outputs(1).kind(PatternKind::kElementwise)
      .run(unary_kernel<NotOp, kBoolType>).shape(infer_same_as_input0);
  r.add("BitwiseNot").since(18).inputs(1).outputs(1).kind(PatternKind::kElementwise)
      .run(unary_kernel<BitwiseNotOp, kInts>).shape(infer_same_as_input0);
  r.add("IsNaN").since(9).inputs(1).outputs(1).kind(PatternKind::kElementwise)
      .run(float_class_kernel<false>).shape(infer_bool_same_shape).via_float();
  r.add("IsInf").since(10).inputs(1).outputs(1).kind(PatternKind::kElementwise)
      .run(float_class_kernel<true>).shape(infer_bool_same_shape).via_float();
  r.add("Identity").since(1).inputs(1).outputs(1).kind(PatternKind::kElementwise)
      .run(identity_kernel).shape(infer_same_as_input0);
}

}  // namespace kiln
