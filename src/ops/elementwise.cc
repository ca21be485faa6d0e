// Binary and variadic elementwise ops with multidirectional broadcasting: arithmetic, Pow, Mod,
// Max/Min/Sum/Mean, comparisons, logic, bitwise ops, Where and Clip. Unary math and Cast live
// in elementwise_unary.cc and elementwise_cast.cc, registered from here.
#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/elementwise_util.h"
#include "ops/families.h"

namespace kiln {

namespace ew {

void fail_dtype(const AttrReader& at, DType t, const char* allowed) {
  at.fail(ErrorKind::kUnsupported, "expected " + std::string(allowed) + " input, got " +
                                       std::string(dtype_name(t)));
}

}  // namespace ew

void register_elementwise_unary_ops(OpRegistry& r);  // ops/elementwise_unary.cc
void register_elementwise_cast_ops(OpRegistry& r);   // ops/elementwise_cast.cc

namespace {

using namespace ew;  // NOLINT: private helpers of this family

// Wider unsigned type in which T's arithmetic wraps without signed overflow or int promotion.
template <class T>
using Wrap = std::conditional_t<(sizeof(T) < 4), uint32_t, std::make_unsigned_t<T>>;

template <class T>
constexpr bool kWrapInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;

struct OpBase {
  explicit OpBase(const AttrReader&) {}
  const char* error = nullptr;  // set by integer ops on division by zero
};

struct AddOp : OpBase {
  using OpBase::OpBase;
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (kWrapInt<T>) return static_cast<T>(Wrap<T>(a) + Wrap<T>(b));
    else return a + b;
  }
};
struct SubOp : OpBase {
  using OpBase::OpBase;
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (kWrapInt<T>) return static_cast<T>(Wrap<T>(a) - Wrap<T>(b));
    else return a - b;
  }
};
struct MulOp : OpBase {
  using OpBase::OpBase;
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (kWrapInt<T>) return static_cast<T>(Wrap<T>(a) * Wrap<T>(b));
    else return a * b;
  }
};
struct DivOp : OpBase {
  using OpBase::OpBase;
  template <class T>
  T operator()(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      if (b == 0) {
        error = "integer division by zero";
        return 0;
      }
      if constexpr (std::is_signed_v<T>) {
        if (b == -1) return static_cast<T>(Wrap<T>(0) - Wrap<T>(a));  // INT_MIN / -1 wraps
      }
      return static_cast<T>(a / b);
    } else {
      return a / b;
    }
  }
};
struct ModOp : OpBase {
  bool fmod;
  explicit ModOp(const AttrReader& at) : OpBase(at), fmod(at.attr_int("fmod", 0) != 0) {}
  template <class T>
  T operator()(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      if (b == 0) {
        error = "integer modulo by zero";
        return 0;
      }
      if constexpr (std::is_signed_v<T>) {
        if (b == -1) return 0;
        T r = static_cast<T>(a % b);
        if (!fmod && r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
        return r;
      } else {
        return static_cast<T>(a % b);
      }
    } else {
      T r = std::fmod(a, b);
      if (fmod) return r;
      if (r != 0) {
        if ((r < 0) != (b < 0)) r += b;
      } else {
        r = std::copysign(T(0), b);
      }
      return r;
    }
  }
};
struct MaxOp : OpBase {
  using OpBase::OpBase;
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a)) return a;  // NaN propagates as in numpy
    }
    return a > b ? a : b;
  }
};
struct MinOp : OpBase {
  using OpBase::OpBase;
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a)) return a;
    }
    return a < b ? a : b;
  }
};
struct EqualOp : OpBase {
  using OpBase::OpBase;
  template <class T>
  bool operator()(const T& a, const T& b) const { return a == b; }
};
struct LessOp : OpBase {
  using OpBase::OpBase;
  template <class T>
  bool operator()(T a, T b) const { return a < b; }
};
struct GreaterOp : OpBase {
  using OpBase::OpBase;
  template <class T>
  bool operator()(T a, T b) const { return a > b; }
};
struct LessEqOp : OpBase {
  using OpBase::OpBase;
  template <class T>
  bool operator()(T a, T b) const { return a <= b; }
};
struct GreaterEqOp : OpBase {
  using OpBase::OpBase;
  template <class T>
  bool operator()(T a, T b) const { return a >= b; }
};
struct AndOp : OpBase {
  using OpBase::OpBase;
  template <class T>
  T operator()(T a, T b) const { return static_cast<T>(a & b); }
};
struct OrOp : OpBase {
  using OpBase::OpBase;
  template <class T>
  T operator()(T a, T b) const { return static_cast<T>(a | b); }
};
struct XorOp : OpBase {
  using OpBase::OpBase;
  template <class T>
  T operator()(T a, T b) const { return static_cast<T>(a ^ b); }
};
struct BitShiftOp : OpBase {
  bool left;
  explicit BitShiftOp(const AttrReader& at) : OpBase(at) {
    std::string dir = at.attr_string("direction", "");
    if (dir != "LEFT" && dir != "RIGHT")
      at.fail(ErrorKind::kInvalidModel,
              "attribute 'direction' should be \"LEFT\" or \"RIGHT\", got \"" + dir + "\"");
    left = dir == "LEFT";
  }
  template <class T>
  T operator()(T a, T b) const {
    constexpr int kBits = static_cast<int>(sizeof(T) * 8);
    using U = std::make_unsigned_t<T>;
    bool in_range = static_cast<uint64_t>(b) < static_cast<uint64_t>(kBits);
    bool negative = false;
    if constexpr (std::is_signed_v<T>) {
      in_range = in_range && b >= 0;
      negative = a < 0;
    }
    if (left) return in_range ? static_cast<T>(static_cast<U>(static_cast<U>(a) << b)) : T(0);
    if (!in_range) return negative ? static_cast<T>(-1) : T(0);
    return static_cast<T>(a >> b);  // arithmetic for signed T
  }
};

// Broadcasting a op b into a fresh tensor of dtype `out`; T chosen from a's dtype in set S.
template <class Op, unsigned S>
Tensor apply_binary(const AttrReader& at, const Tensor& a, const Tensor& b, Op& op, bool bool_out) {
  if (a.dtype() != b.dtype())
    at.fail(ErrorKind::kInvalidModel, "inputs should have the same dtype, got " +
                                          std::string(dtype_name(a.dtype())) + " and " +
                                          std::string(dtype_name(b.dtype())));
  std::vector<int64_t> out_dims = broadcast_dims(at, {a.dims(), b.dims()});
  Tensor y(bool_out ? DType::kBool : a.dtype(), out_dims);
  dispatch<S>(at, a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using R = std::conditional_t<std::is_same_v<decltype(op(std::declval<T>(), std::declval<T>())),
                                                bool>, bool, T>;
    binary_loop<T, R>(a, b, y, op);
  });
  if (op.error) at.fail(ErrorKind::kBadInput, op.error);
  return y;
}

// Before opset 7, binary ops broadcast B onto A only with broadcast=1, aligned at `axis` when
// given; numpy broadcasting covers the rest once B gets trailing 1-dims.
Tensor legacy_align(const KernelContext& ctx, const Tensor& a, const Tensor& b) {
  if (ctx.opset() >= 7 || ctx.attr_int("broadcast", 0) == 0 || !ctx.has_attr("axis")) return b;
  const int64_t axis = normalize_axis(ctx, ctx.attr_int("axis"), a.rank());
  const int64_t pad = a.rank() - axis - b.rank();
  if (pad <= 0) return b;
  std::vector<int64_t> dims = b.dims();
  dims.insert(dims.end(), static_cast<size_t>(pad), 1);
  return b.reshaped(dims);
}

template <class Op, unsigned S, bool kBoolOut = false>
void binary_kernel(KernelContext& ctx) {
  const DType orig = ctx.input(0).dtype();
  Tensor a = widen_half(ctx.input(0));
  Tensor b = legacy_align(ctx, a, widen_half(ctx.input(1)));
  Op op(ctx);
  Tensor y = apply_binary<Op, S>(ctx, a, b, op, kBoolOut);
  if (!kBoolOut && is_half(orig)) y = convert_tensor(y, orig);
  ctx.set_output(0, std::move(y));
}

// Max, Min, Sum, Mean: a left fold of the binary op over all inputs.
template <class Op, unsigned S, bool kMean = false>
void variadic_kernel(KernelContext& ctx) {
  if (ctx.num_inputs() < 1) ctx.fail(ErrorKind::kInvalidModel, "expected at least one input");
  const DType orig = ctx.input(0).dtype();
  Tensor acc = widen_half(ctx.input(0));
  Op op(ctx);
  if (ctx.num_inputs() == 1) {
    dispatch<S>(ctx, acc.dtype(), [](auto) {});  // validates the dtype
    acc = acc.clone();
  }
  for (int i = 1; i < ctx.num_inputs(); ++i)
    acc = apply_binary<Op, S>(ctx, acc, widen_half(ctx.input(i)), op, false);
  if constexpr (kMean) {
    const double n = ctx.num_inputs();
    dispatch<kFloats>(ctx, acc.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* p = acc.data<T>();
      for (int64_t i = 0; i < acc.numel(); ++i) p[i] = static_cast<T>(p[i] / n);
    });
  }
  if (is_half(orig)) acc = convert_tensor(acc, orig);
  ctx.set_output(0, std::move(acc));
}

// ---- Pow: base and exponent may have different dtypes -----------------------------------

template <class T>
T int_pow(T base, int64_t e) {
  if (e < 0) {  // integer result of base^e truncated toward zero
    if (base == 1) return 1;
    if constexpr (std::is_signed_v<T>) {
      if (base == -1) return (e & 1) ? T(-1) : T(1);
    }
    return 0;
  }
  Wrap<T> r = 1, b = static_cast<Wrap<T>>(base);
  while (e > 0) {
    if (e & 1) r *= b;
    b *= b;
    e >>= 1;
  }
  return static_cast<T>(r);
}

template <class T>
T float_to(double v) {
  if constexpr (std::is_integral_v<T>) {
    if (std::isnan(v)) return 0;
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest()))
      return std::numeric_limits<T>::lowest();
    if (v >= static_cast<double>(std::numeric_limits<T>::max()))
      return std::numeric_limits<T>::max();
  }
  return static_cast<T>(v);
}

template <class T, class E>
T pow_value(T x, E e) {
  if constexpr (std::is_integral_v<T> && std::is_integral_v<E>) {
    int64_t ie = 0;
    if constexpr (std::is_unsigned_v<E>) {
      ie = static_cast<int64_t>(std::min<uint64_t>(e, uint64_t{1} << 30));
    } else {
      ie = static_cast<int64_t>(e);
    }
    return int_pow<T>(x, ie);
  } else if constexpr (std::is_same_v<T, float> && std::is_same_v<E, float>) {
    return std::pow(x, e);
  } else {
    return float_to<T>(std::pow(static_cast<double>(x), static_cast<double>(e)));
  }
}

void pow_kernel(KernelContext& ctx) {
  const DType orig = ctx.input(0).dtype();
  Tensor a = widen_half(ctx.input(0));
  Tensor b = legacy_align(ctx, a, widen_half(ctx.input(1)));
  std::vector<int64_t> out_dims = broadcast_dims(ctx, {a.dims(), b.dims()});
  Tensor y(a.dtype(), out_dims);
  dispatch<kNumeric>(ctx, a.dtype(), [&](auto ta) {
    using T = typename decltype(ta)::type;
    dispatch<kNumeric>(ctx, b.dtype(), [&](auto tb) {
      using E = typename decltype(tb)::type;
      const T* pa = a.data<T>();
      const E* pb = b.data<E>();
      T* py = y.data<T>();
      auto op = [](T x, E e) { return pow_value<T, E>(x, e); };
      if (b.numel() == 1) {
        const E e = pb[0];
        if constexpr (std::is_floating_point_v<T>) {
          if (e == E(2)) {  // common in LayerNorm variance: keep it exact and fast
            for (int64_t i = 0; i < y.numel(); ++i) py[i] = pa[i] * pa[i];
            return;
          }
        }
      }
      std::vector<int64_t> sa = broadcast_strides(a.dims(), out_dims);
      std::vector<int64_t> sb = broadcast_strides(b.dims(), out_dims);
      for_each_broadcast(out_dims, {sa, sb}, [&](int64_t i, const int64_t* off) {
        py[i] = op(pa[off[0]], pb[off[1]]);
      });
    });
  });
  if (is_half(orig)) y = convert_tensor(y, orig);
  ctx.set_output(0, std::move(y));
}

// ---- Where and Clip ------------------------------------------------------------------------

void where_kernel(KernelContext& ctx) {
  const Tensor& c = ctx.input(0);
  const Tensor& x = ctx.input(1);
  const Tensor& z = ctx.input(2);
  if (c.dtype() != DType::kBool)
    ctx.fail(ErrorKind::kInvalidModel,
             "condition should be bool, got " + std::string(dtype_name(c.dtype())));
  if (x.dtype() != z.dtype())
    ctx.fail(ErrorKind::kInvalidModel, "X and Y should have the same dtype, got " +
                                           std::string(dtype_name(x.dtype())) + " and " +
                                           std::string(dtype_name(z.dtype())));
  std::vector<int64_t> out_dims = broadcast_dims(ctx, {c.dims(), x.dims(), z.dims()});
  Tensor y(x.dtype(), out_dims);
  dispatch<kAnyType>(ctx, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const bool* pc = c.data<bool>();
    const T* px = x.data<T>();
    const T* pz = z.data<T>();
    T* py = y.data<T>();
    for_each_row<3>(out_dims, {&c.dims(), &x.dims(), &z.dims()},
                    [&](int64_t o, const std::array<int64_t, 3>& off, int64_t n,
                        const std::array<int64_t, 3>& s) {
                      const bool* rc = pc + off[0];
                      const T* rx = px + off[1];
                      const T* rz = pz + off[2];
                      T* ry = py + o;
                      // Inner strides are 0 (broadcast) or 1; specialize the common mixes.
                      auto run = [&](auto sc, auto sx, auto sz) {
                        for (int64_t i = 0; i < n; ++i)
                          ry[i] = rc[i * sc] ? rx[i * sx] : rz[i * sz];
                      };
                      using Zero = std::integral_constant<int64_t, 0>;
                      using One = std::integral_constant<int64_t, 1>;
                      const int mask = (s[0] != 0) * 4 + (s[1] != 0) * 2 + (s[2] != 0);
                      switch (mask) {
                        case 7: run(One{}, One{}, One{}); break;
                        case 5: run(One{}, Zero{}, One{}); break;
                        case 6: run(One{}, One{}, Zero{}); break;
                        case 3: run(Zero{}, One{}, One{}); break;
                        default: run(s[0], s[1], s[2]); break;
                      }
                    });
  });
  ctx.set_output(0, std::move(y));
}

void clip_kernel(KernelContext& ctx) {
  const DType orig = ctx.input(0).dtype();
  Tensor x = widen_half(ctx.input(0));
  Tensor y(x.dtype(), x.dims());
  dispatch<kNumeric>(ctx, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T lo = std::numeric_limits<T>::lowest();
    T hi = std::numeric_limits<T>::max();
    if (ctx.opset() < 11) {
      lo = float_to<T>(ctx.attr_float("min", std::numeric_limits<float>::lowest()));
      hi = float_to<T>(ctx.attr_float("max", std::numeric_limits<float>::max()));
    } else {
      auto bound = [&](int i, T& v) {
        if (!ctx.has_input(i)) return;
        Tensor t = widen_half(ctx.input(i));
        if (t.dtype() != x.dtype())
          ctx.fail(ErrorKind::kInvalidModel, "min/max should have the input's dtype " +
                                                 std::string(dtype_name(orig)) + ", got " +
                                                 std::string(dtype_name(ctx.input(i).dtype())));
        if (t.numel() != 1)
          ctx.fail(ErrorKind::kBadInput, std::string(i == 1 ? "min" : "max") +
                                             " should be a scalar, got shape " +
                                             dims_to_string(t.dims()));
        v = t.data<T>()[0];
      };
      bound(1, lo);
      bound(2, hi);
    }
    const T* px = x.data<T>();
    T* py = y.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      T v = px[i] < lo ? lo : px[i];
      py[i] = v > hi ? hi : v;
    }
  });
  if (is_half(orig)) y = convert_tensor(y, orig);
  ctx.set_output(0, std::move(y));
}

void infer_where(InferContext& ctx) {
  infer_broadcast(ctx);
  if (ctx.output_types().empty() || !ctx.has_input(1)) return;
  Type t = ctx.output_types()[0];
  t.dtype = ctx.input_type(1).dtype;
  ctx.set_output_type(0, t);
}

constexpr unsigned kNum = kNumeric;
constexpr unsigned kNumBool = kNumeric | kBoolType;

}  // namespace

void register_elementwise_ops(OpRegistry& r) {
  const auto bcast = PatternKind::kBroadcast;
  for (const char* name : {"Add", "Sub", "Mul", "Div"}) {
    KernelFn fn = std::string(name) == "Add"   ? binary_kernel<AddOp, kNum>
                  : std::string(name) == "Sub" ? binary_kernel<SubOp, kNum>
                  : std::string(name) == "Mul" ? binary_kernel<MulOp, kNum>
                                               : binary_kernel<DivOp, kNum>;
    r.add(name).since(1).inputs(2).outputs(1).kind(bcast).run(fn).shape(infer_broadcast).via_float();
  }
  r.add("Pow").since(1).inputs(2).outputs(1).kind(bcast).run(pow_kernel).shape(infer_broadcast);
  r.add("Mod").since(10).inputs(2).outputs(1).kind(bcast).run(binary_kernel<ModOp, kNum>)
      .shape(infer_broadcast).via_float();
  r.add("Max").since(1).inputs(1, -1).outputs(1).kind(bcast).run(variadic_kernel<MaxOp, kNum>)
      .shape(infer_broadcast).via_float();
  r.add("Min").since(1).inputs(1, -1).outputs(1).kind(bcast).run(variadic_kernel<MinOp, kNum>)
      .shape(infer_broadcast).via_float();
  r.add("Sum").since(1).inputs(1, -1).outputs(1).kind(bcast).run(variadic_kernel<AddOp, kNum>)
      .shape(infer_broadcast).via_float();
  r.add("Mean").since(1).inputs(1, -1).outputs(1).kind(bcast)
      .run(variadic_kernel<AddOp, kFloats, true>).shape(infer_broadcast).via_float();

  r.add("Equal").since(1).inputs(2).outputs(1).kind(bcast)
      .run(binary_kernel<EqualOp, kNumBool | kStrings, true>).shape(infer_broadcast_bool)
      .via_float();
  r.add("Less").since(1).inputs(2).outputs(1).kind(bcast).run(binary_kernel<LessOp, kNum, true>)
      .shape(infer_broadcast_bool).via_float();
  r.add("Greater").since(1).inputs(2).outputs(1).kind(bcast)
      .run(binary_kernel<GreaterOp, kNum, true>).shape(infer_broadcast_bool).via_float();
  r.add("LessOrEqual").since(12).inputs(2).outputs(1).kind(bcast)
      .run(binary_kernel<LessEqOp, kNum, true>).shape(infer_broadcast_bool).via_float();
  r.add("GreaterOrEqual").since(12).inputs(2).outputs(1).kind(bcast)
      .run(binary_kernel<GreaterEqOp, kNum, true>).shape(infer_broadcast_bool).via_float();

  r.add("And").since(1).inputs(2).outputs(1).kind(bcast).run(binary_kernel<AndOp, kBoolType>)
      .shape(infer_broadcast);
  r.add("Or").since(1).inputs(2).outputs(1).kind(bcast).run(binary_kernel<OrOp, kBoolType>)
      .shape(infer_broadcast);
  r.add("Xor").since(1).inputs(2).outputs(1).kind(bcast).run(binary_kernel<XorOp, kBoolType>)
      .shape(infer_broadcast);
  r.add("BitwiseAnd").since(18).inputs(2).outputs(1).kind(bcast).run(binary_kernel<AndOp, kInts>)
      .shape(infer_broadcast);
  r.add("BitwiseOr").since(18).inputs(2).outputs(1).kind(bcast).run(binary_kernel<OrOp, kInts>)
      .shape(infer_broadcast);
  r.add("BitwiseXor").since(18).inputs(2).outputs(1).kind(bcast).run(binary_kernel<XorOp, kInts>)
      .shape(infer_broadcast);
  r.add("BitShift").since(11).inputs(2).outputs(1).kind(bcast)
      .run(binary_kernel<BitShiftOp, kInts>).shape(infer_broadcast);

  r.add("Where").since(9).inputs(3).outputs(1).kind(bcast).run(where_kernel).shape(infer_where);
  r.add("Clip").since(1).inputs(1, 3).outputs(1).kind(PatternKind::kElementwise).run(clip_kernel)
      .shape(infer_same_as_input0).via_float();

  register_elementwise_unary_ops(r);
  register_elementwise_cast_ops(r);
}

}  // namespace kiln
