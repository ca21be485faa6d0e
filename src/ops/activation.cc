// Activation functions (Relu, Sigmoid, Gelu, Elu, HardSwish, PRelu, ...) and the Softmax family
// (Softmax, LogSoftmax, Hardmax with the pre-13 "coerce to 2D" semantics).
#include <cmath>
#include <type_traits>

#include "ops/elementwise_util.h"
#include "ops/families.h"

namespace kiln {
namespace {

using namespace ew;  // NOLINT: private helpers of this family

struct ReluOp : UnaryBase {
  using UnaryBase::UnaryBase;
  template <class T>
  T operator()(T x) const { return x > T(0) ? x : T(0); }
};
struct SigmoidOp : UnaryBase {
  using UnaryBase::UnaryBase;
  template <class T>
  T operator()(T x) const {
    // Two branches keep exp() from overflowing for large |x|.
    if (x >= T(0)) return T(1) / (T(1) + std::exp(-x));
    T e = std::exp(x);
    return e / (T(1) + e);
  }
};
struct TanhOp : UnaryBase {
  using UnaryBase::UnaryBase;
  template <class T>
  T operator()(T x) const { return std::tanh(x); }
};
template <class T>
T softplus(T x) {
  return x > T(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}
struct SoftplusOp : UnaryBase {
  using UnaryBase::UnaryBase;
  template <class T>
  T operator()(T x) const { return softplus(x); }
};
struct SoftsignOp : UnaryBase {
  using UnaryBase::UnaryBase;
  template <class T>
  T operator()(T x) const { return x / (T(1) + std::fabs(x)); }
};
struct MishOp : UnaryBase {
  using UnaryBase::UnaryBase;
  template <class T>
  T operator()(T x) const { return x * std::tanh(softplus(x)); }
};
struct HardSwishOp : UnaryBase {
  using UnaryBase::UnaryBase;
  template <class T>
  T operator()(T x) const {
    T v = x / T(6) + T(0.5);
    return x * (v < T(0) ? T(0) : v > T(1) ? T(1) : v);
  }
};
struct LeakyReluOp {
  float alpha;
  explicit LeakyReluOp(const AttrReader& at) : alpha(at.attr_float("alpha", 0.01f)) {}
  template <class T>
  T operator()(T x) const { return x < T(0) ? static_cast<T>(alpha) * x : x; }
};
struct EluOp {
  float alpha;
  explicit EluOp(const AttrReader& at) : alpha(at.attr_float("alpha", 1.f)) {}
  template <class T>
  T operator()(T x) const { return x < T(0) ? static_cast<T>(alpha) * std::expm1(x) : x; }
};
struct SeluOp {
  float alpha, gamma;
  explicit SeluOp(const AttrReader& at)
      : alpha(at.attr_float("alpha", 1.67326319217681884765625f)),
        gamma(at.attr_float("gamma", 1.05070102214813232421875f)) {}
  template <class T>
  T operator()(T x) const {
    const T g = static_cast<T>(gamma);
    return x > T(0) ? g * x : g * (static_cast<T>(alpha) * std::exp(x) - static_cast<T>(alpha));
  }
};
struct CeluOp {
  float alpha;
  explicit CeluOp(const AttrReader& at) : alpha(at.attr_float("alpha", 1.f)) {
    if (alpha == 0.f) at.fail(ErrorKind::kInvalidModel, "attribute 'alpha' must be nonzero");
  }
  template <class T>
  T operator()(T x) const {
    const T a = static_cast<T>(alpha);
    return x > T(0) ? x : a * std::expm1(x / a);
  }
};
struct HardSigmoidOp {
  float alpha, beta;
  explicit HardSigmoidOp(const AttrReader& at)
      : alpha(at.attr_float("alpha", 0.2f)), beta(at.attr_float("beta", 0.5f)) {}
  template <class T>
  T operator()(T x) const {
    T v = static_cast<T>(alpha) * x + static_cast<T>(beta);
    return v < T(0) ? T(0) : v > T(1) ? T(1) : v;
  }
};
struct ThresholdedReluOp {
  float alpha;
  explicit ThresholdedReluOp(const AttrReader& at) : alpha(at.attr_float("alpha", 1.f)) {}
  template <class T>
  T operator()(T x) const { return x > static_cast<T>(alpha) ? x : T(0); }
};
struct ShrinkOp {
  double bias, lambd;
  explicit ShrinkOp(const AttrReader& at)
      : bias(at.attr_float("bias", 0.f)), lambd(at.attr_float("lambd", 0.5f)) {}
  template <class T>
  T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (x < static_cast<T>(-lambd)) return x + static_cast<T>(bias);
      if (x > static_cast<T>(lambd)) return x - static_cast<T>(bias);
      return T(0);
    } else {
      const double d = static_cast<double>(x);
      if (d < -lambd) return static_cast<T>(d + bias);
      if (d > lambd) return static_cast<T>(d - bias);
      return T(0);
    }
  }
};
struct GeluOp {
  bool tanh_approx;
  explicit GeluOp(const AttrReader& at) {
    std::string mode = at.attr_string("approximate", "none");
    if (mode != "none" && mode != "tanh")
      at.fail(ErrorKind::kInvalidModel,
              "attribute 'approximate' should be \"none\" or \"tanh\", got \"" + mode + "\"");
    tanh_approx = mode == "tanh";
  }
  template <class T>
  T operator()(T x) const {
    if (tanh_approx) {
      const T k = static_cast<T>(0.7978845608028654);  // sqrt(2/pi)
      return T(0.5) * x * (T(1) + std::tanh(k * (x + static_cast<T>(0.044715) * x * x * x)));
    }
    return T(0.5) * x * (T(1) + std::erf(x * static_cast<T>(0.7071067811865476)));
  }
};

// PRelu: y = x < 0 ? slope * x : x, with slope broadcast against x.
struct PReluOp {
  template <class T>
  T operator()(T x, T s) const {
    if constexpr (std::is_unsigned_v<T>) {
      return x;
    } else {
      return x < T(0) ? static_cast<T>(s * x) : x;
    }
  }
};

void prelu_kernel(KernelContext& ctx) {
  const DType orig = ctx.input(0).dtype();
  Tensor x = widen_half(ctx.input(0));
  Tensor s = widen_half(ctx.input(1));
  // Before opset 7 a 1-D slope of size C applies per channel (axis 1).
  if (ctx.opset() < 7 && s.rank() == 1 && x.rank() >= 2 && s.numel() == x.dim(1) &&
      s.numel() != 1) {
    std::vector<int64_t> dims(static_cast<size_t>(x.rank() - 1), 1);
    dims[0] = s.numel();
    s = s.reshaped(dims);
  }
  if (x.dtype() != s.dtype())
    ctx.fail(ErrorKind::kInvalidModel, "X and slope should have the same dtype, got " +
                                           std::string(dtype_name(orig)) + " and " +
                                           std::string(dtype_name(ctx.input(1).dtype())));
  Tensor y(x.dtype(), broadcast_dims(ctx, {x.dims(), s.dims()}));
  PReluOp op;
  dispatch<kFloats | kInts>(ctx, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    binary_loop<T, T>(x, s, y, op);
  });
  if (is_half(orig)) y = convert_tensor(y, orig);
  ctx.set_output(0, std::move(y));
}

// ---- Softmax family --------------------------------------------------------------------------

enum class SoftmaxKind { kSoftmax, kLogSoftmax, kHardmax };

// Applies the op along runs of n elements spaced `inner` apart, for outer x inner runs.
template <class T, SoftmaxKind K>
void softmax_runs(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      const T* px = x + o * n * inner + in;
      T* py = y + o * n * inner + in;
      T mx = px[0];
      int64_t arg = 0;
      for (int64_t i = 1; i < n; ++i)
        if (px[i * inner] > mx) {
          mx = px[i * inner];
          arg = i;
        }
      if constexpr (K == SoftmaxKind::kHardmax) {
        for (int64_t i = 0; i < n; ++i) py[i * inner] = i == arg ? T(1) : T(0);
      } else {
        double sum = 0;
        if (inner == 1) {
          for (int64_t i = 0; i < n; ++i) {
            T e = std::exp(px[i] - mx);
            if constexpr (K == SoftmaxKind::kSoftmax) py[i] = e;
            sum += e;
          }
        } else {
          for (int64_t i = 0; i < n; ++i) {
            T e = std::exp(px[i * inner] - mx);
            if constexpr (K == SoftmaxKind::kSoftmax) py[i * inner] = e;
            sum += e;
          }
        }
        if constexpr (K == SoftmaxKind::kSoftmax) {
          const T inv = static_cast<T>(1.0 / sum);
          for (int64_t i = 0; i < n; ++i) py[i * inner] *= inv;
        } else {
          const T lse = static_cast<T>(std::log(sum));
          for (int64_t i = 0; i < n; ++i) py[i * inner] = px[i * inner] - mx - lse;
        }
      }
    }
  }
}

template <SoftmaxKind K>
void softmax_kernel(KernelContext& ctx) {
  const DType orig = ctx.input(0).dtype();
  Tensor x = widen_half(ctx.input(0));
  const int64_t rank = x.rank();
  const bool legacy = ctx.opset() < 13;
  const int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", legacy ? 1 : -1), rank);
  int64_t outer = 1, n = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t d = x.dims()[static_cast<size_t>(i)];
    if (i < axis) outer *= d;
    else if (i == axis || legacy) n *= d;
    else inner *= d;
  }
  Tensor y(x.dtype(), x.dims());
  if (x.numel() > 0) {
    dispatch<kFloats>(ctx, x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      softmax_runs<T, K>(x.data<T>(), y.data<T>(), outer, n, inner);
    });
  }
  if (is_half(orig)) y = convert_tensor(y, orig);
  ctx.set_output(0, std::move(y));
}

}  // namespace

void register_activation_ops(OpRegistry& r) {
  struct Entry {
    const char* name;
    int since;
    KernelFn fn;
  };
  const Entry ops[] = {
      {"Relu", 1, unary_kernel<ReluOp, kFloats | kSigned>},
      {"Sigmoid", 1, unary_kernel<SigmoidOp, kFloats>},
      {"Tanh", 1, unary_kernel<TanhOp, kFloats>},
      {"Softplus", 1, unary_kernel<SoftplusOp, kFloats>},
      {"Softsign", 1, unary_kernel<SoftsignOp, kFloats>},
      {"Mish", 18, unary_kernel<MishOp, kFloats>},
      {"HardSwish", 14, unary_kernel<HardSwishOp, kFloats>},
      {"LeakyRelu", 1, unary_kernel<LeakyReluOp, kFloats>},
      {"Elu", 1, unary_kernel<EluOp, kFloats>},
      {"Selu", 1, unary_kernel<SeluOp, kFloats>},
      {"Celu", 12, unary_kernel<CeluOp, kFloats>},
      {"HardSigmoid", 1, unary_kernel<HardSigmoidOp, kFloats>},
      {"ThresholdedRelu", 10, unary_kernel<ThresholdedReluOp, kFloats>},
      {"Shrink", 9, unary_kernel<ShrinkOp, kNumeric>},
      {"Gelu", 20, unary_kernel<GeluOp, kFloats>},
  };
  for (const Entry& e : ops)
    r.add(e.name).since(e.since).inputs(1).outputs(1).kind(PatternKind::kElementwise).run(e.fn)
        .shape(infer_same_as_input0).via_float();
  r.add("PRelu").since(1).inputs(2).outputs(1).kind(PatternKind::kBroadcast).run(prelu_kernel)
      .shape(infer_broadcast).via_float();
  const std::pair<const char*, KernelFn> softmaxes[] = {
      {"Softmax", softmax_kernel<SoftmaxKind::kSoftmax>},
      {"LogSoftmax", softmax_kernel<SoftmaxKind::kLogSoftmax>},
      {"Hardmax", softmax_kernel<SoftmaxKind::kHardmax>},
  };
  for (const auto& [name, fn] : softmaxes)
    r.add(name).since(1).inputs(1).outputs(1).kind(PatternKind::kReduction).run(fn)
        .shape(infer_same_as_input0).via_float();
}

}  // namespace kiln
