// Reduce* ops (Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare); ArgMax/ArgMin,
// TopK and CumSum live in ops/topk.cc and are registered from here.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/families.h"
#include "ops/op_util.h"

namespace kiln {

void register_topk_ops(OpRegistry& r);  // ops/topk.cc

namespace {

enum class RK { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

template <class T>
constexpr bool kIsHalf = std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;

// Which axes a Reduce* node reduces. Axes come from the attribute (older opsets) or the optional
// input (ReduceSum since 13, the others since 18); an empty list reduces everything, or nothing
// with noop_with_empty_axes (the per-element part, e.g. Square for ReduceSumSquare, still runs).
struct ReducePlan {
  std::vector<bool> reduced;       // per input axis
  std::vector<int64_t> keep_dims;  // input dims with 1 on reduced axes
  std::vector<int64_t> out_dims;   // keep_dims, or without reduced axes when keepdims == 0
};

bool axes_from_input(const std::string& op, int64_t opset) {
  return op == "ReduceSum" ? opset >= 13 : opset >= 18;
}

ReducePlan make_plan(const AttrReader& at, const std::vector<int64_t>& dims,
                     std::vector<int64_t> axes, bool noop_with_empty, bool keepdims) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  ReducePlan p;
  p.reduced.assign(dims.size(), false);
  if (axes.empty()) {
    if (!noop_with_empty) p.reduced.assign(dims.size(), true);
  } else {
    for (int64_t a : normalize_axes(at, axes, rank)) {
      if (p.reduced[static_cast<size_t>(a)])
        at.fail(ErrorKind::kInvalidModel, "axis " + std::to_string(a) + " is listed twice in axes");
      p.reduced[static_cast<size_t>(a)] = true;
    }
  }
  for (size_t i = 0; i < dims.size(); ++i) {
    p.keep_dims.push_back(p.reduced[i] ? 1 : dims[i]);
    if (!p.reduced[i] || keepdims) p.out_dims.push_back(p.reduced[i] ? 1 : dims[i]);
  }
  return p;
}

std::vector<int64_t> read_axes(const KernelContext& ctx) {
  if (axes_from_input(ctx.node().op_type, ctx.opset())) {
    if (!ctx.has_input(1)) return {};
    const Tensor& a = ctx.input(1);
    if (a.dtype() != DType::kInt64 && a.dtype() != DType::kInt32)
      ctx.fail(ErrorKind::kBadInput, "axes must be an int64 tensor, got " +
                                         std::string(dtype_name(a.dtype())));
    return a.to_int64_vector();
  }
  return ctx.attr_ints("axes");
}

// Accumulator type: double for floats (exact enough for f32 sums), 64-bit for integers.
template <class T>
constexpr bool kIsUnsignedInt = std::is_unsigned_v<T> && !std::is_same_v<T, bool>;
template <class T>
using AccOf = std::conditional_t<std::is_floating_point_v<T>, double,
                                 std::conditional_t<kIsUnsignedInt<T>, uint64_t, int64_t>>;

template <class T>
T lowest_of() {
  if constexpr (std::is_floating_point_v<T>) return -std::numeric_limits<T>::infinity();
  else return std::numeric_limits<T>::lowest();
}
template <class T>
T highest_of() {
  if constexpr (std::is_floating_point_v<T>) return std::numeric_limits<T>::infinity();
  else return std::numeric_limits<T>::max();
}

template <class T>
bool is_nan_value(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  else return false;
}

// Converts a double result to T; integers truncate toward zero like numpy's astype.
template <class T>
T from_double(double v) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != 0.0;
  } else {
    using L = std::numeric_limits<T>;
    if (std::isnan(v)) return T(0);
    if (v <= static_cast<double>(L::lowest())) return L::lowest();
    if (v >= static_cast<double>(L::max())) return L::max();
    return static_cast<T>(v);
  }
}

template <RK K, class T>
void reduce_typed(const Tensor& x, const ReducePlan& p, Tensor& y) {
  const T* src = x.data<T>();
  T* dst = y.data<T>();
  const int64_t n_out = y.numel();
  // Offsets into the output (viewed with keep_dims) for each input element: reduced axes stride 0.
  std::vector<int64_t> ostr = contiguous_strides(p.keep_dims);
  for (size_t i = 0; i < ostr.size(); ++i)
    if (p.reduced[i]) ostr[i] = 0;
  const int64_t n_in = x.numel();
  const int64_t count = n_out == 0 ? 0 : n_in / n_out;

  if constexpr (K == RK::kMax || K == RK::kMin) {
    std::fill(dst, dst + n_out, K == RK::kMax ? lowest_of<T>() : highest_of<T>());
    for_each_broadcast(x.dims(), {ostr}, [&](int64_t i, const int64_t* off) {
      T v = src[i];
      T& a = dst[off[0]];
      // NaN propagates like numpy's maximum/minimum: once NaN, the accumulator stays NaN.
      if (is_nan_value(v) || (K == RK::kMax ? v > a : v < a)) {
        if (!is_nan_value(a)) a = v;
      }
    });
  } else if constexpr (K == RK::kLogSumExp) {
    std::vector<double> mx(static_cast<size_t>(n_out), -std::numeric_limits<double>::infinity());
    for_each_broadcast(x.dims(), {ostr}, [&](int64_t i, const int64_t* off) {
      double v = static_cast<double>(src[i]);
      double& m = mx[static_cast<size_t>(off[0])];
      if (!std::isinf(v) && v > m) m = v;
    });
    for (auto& m : mx)
      if (std::isinf(m)) m = 0.0;  // all-infinite (or empty) slices: exp(v - 0) keeps them exact
    std::vector<double> sum(static_cast<size_t>(n_out), 0.0);
    for_each_broadcast(x.dims(), {ostr}, [&](int64_t i, const int64_t* off) {
      size_t o = static_cast<size_t>(off[0]);
      sum[o] += std::exp(static_cast<double>(src[i]) - mx[o]);
    });
    for (int64_t o = 0; o < n_out; ++o) {
      size_t u = static_cast<size_t>(o);
      dst[o] = from_double<T>(std::log(sum[u]) + mx[u]);
    }
  } else {
    using Acc = AccOf<T>;
    const Acc init = K == RK::kProd ? Acc(1) : Acc(0);
    std::vector<Acc> acc(static_cast<size_t>(n_out), init);
    for_each_broadcast(x.dims(), {ostr}, [&](int64_t i, const int64_t* off) {
      Acc v = static_cast<Acc>(src[i]);
      Acc& a = acc[static_cast<size_t>(off[0])];
      if constexpr (K == RK::kProd) {
        a *= v;
      } else if constexpr (K == RK::kL1) {
        if constexpr (std::is_signed_v<Acc>) a += v < 0 ? -v : v;
        else a += v;
      } else if constexpr (K == RK::kL2 || K == RK::kSumSquare) {
        a += v * v;
      } else {
        a += v;
      }
    });
    for (int64_t o = 0; o < n_out; ++o) {
      Acc a = acc[static_cast<size_t>(o)];
      if constexpr (K == RK::kMean) {
        if constexpr (std::is_floating_point_v<Acc>) {
          dst[o] = static_cast<T>(a / static_cast<double>(count));
        } else {
          dst[o] = count == 0 ? T(0) : static_cast<T>(a / static_cast<Acc>(count));
        }
      } else if constexpr (K == RK::kL2) {
        dst[o] = from_double<T>(std::sqrt(static_cast<double>(a)));
      } else if constexpr (K == RK::kLogSum) {
        dst[o] = from_double<T>(std::log(static_cast<double>(a)));
      } else {
        dst[o] = static_cast<T>(a);
      }
    }
  }
}

template <RK K>
void reduce_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const bool keepdims = ctx.attr_int("keepdims", 1) != 0;
  const bool noop = ctx.attr_int("noop_with_empty_axes", 0) != 0;
  ReducePlan p = make_plan(ctx, x.dims(), read_axes(ctx), noop, keepdims);
  Tensor y(x.dtype(), p.out_dims);
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kIsHalf<T>) {
      ctx.fail(ErrorKind::kInternal, "half inputs should have been widened to float");
    } else if constexpr (std::is_same_v<T, bool>) {
      if constexpr (K == RK::kMax || K == RK::kMin) reduce_typed<K, T>(x, p, y);
      else ctx.fail(ErrorKind::kUnsupported, "bool input is only supported by ReduceMax/ReduceMin");
    } else {
      reduce_typed<K, T>(x, p, y);
    }
  });
  ctx.set_output(0, std::move(y));
}

void infer_reduce(InferContext& ctx) {
  const Type& in = ctx.input_type(0);
  Type out = Type::tensor(in.dtype);
  const bool keepdims = ctx.attr_int("keepdims", 1) != 0;
  const bool noop = ctx.attr_int("noop_with_empty_axes", 0) != 0;
  std::vector<int64_t> axes;
  if (axes_from_input(ctx.node().op_type, ctx.opset())) {
    if (ctx.has_input(1)) {
      const Tensor* a = ctx.constant_input(1);
      if (!a) {
        ctx.set_output_type(0, out);
        return;
      }
      axes = a->to_int64_vector();
    }
  } else {
    axes = ctx.attr_ints("axes");
  }
  if (in.shape) {
    const int64_t rank = static_cast<int64_t>(in.shape->rank());
    std::vector<bool> red(static_cast<size_t>(rank), axes.empty() && !noop);
    for (int64_t a : normalize_axes(ctx, axes, rank)) red[static_cast<size_t>(a)] = true;
    Shape s;
    for (size_t i = 0; i < red.size(); ++i) {
      if (!red[i]) s.dims.push_back(in.shape->dims[i]);
      else if (keepdims) s.dims.push_back(Dim(1));
    }
    out.shape = s;
  }
  ctx.set_output_type(0, out);
}

template <RK K>
void add_reduce(OpRegistry& r, const char* name) {
  // One entry: whether axes is an attribute or an input is decided from ctx.opset().
  r.add(name).since(1).inputs(1, 2).outputs(1).kind(PatternKind::kReduction).run(reduce_kernel<K>)
      .shape(infer_reduce).via_float();
}

}  // namespace

void register_reduction_ops(OpRegistry& r) {
  add_reduce<RK::kSum>(r, "ReduceSum");
  add_reduce<RK::kMean>(r, "ReduceMean");
  add_reduce<RK::kMax>(r, "ReduceMax");
  add_reduce<RK::kMin>(r, "ReduceMin");
  add_reduce<RK::kProd>(r, "ReduceProd");
  add_reduce<RK::kL1>(r, "ReduceL1");
  add_reduce<RK::kL2>(r, "ReduceL2");
  add_reduce<RK::kLogSum>(r, "ReduceLogSum");
  add_reduce<RK::kLogSumExp>(r, "ReduceLogSumExp");
  add_reduce<RK::kSumSquare>(r, "ReduceSumSquare");
  register_topk_ops(r);
}

}  // namespace kiln
