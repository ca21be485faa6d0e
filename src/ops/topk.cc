// Index-producing and scan reductions: ArgMax, ArgMin, TopK and CumSum (registered from
// register_reduction_ops in ops/reduction.cc).
#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <type_traits>

#include "ops/op_util.h"

namespace kiln {

void register_topk_ops(OpRegistry& r);

namespace {

template <class T>
constexpr bool kIsHalf = std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;

template <class T>
bool nan_value(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  else return false;
}

// A tensor seen as [outer, axis, inner] around one axis.
struct AxisSplit {
  int64_t outer = 1, len = 1, inner = 1;
};

AxisSplit split_at(const std::vector<int64_t>& dims, int64_t axis) {
  AxisSplit s;
  for (int64_t i = 0; i < static_cast<int64_t>(dims.size()); ++i) {
    if (i < axis) s.outer *= dims[static_cast<size_t>(i)];
    else if (i == axis) s.len = dims[static_cast<size_t>(i)];
    else s.inner *= dims[static_cast<size_t>(i)];
  }
  return s;
}

// ---- ArgMax / ArgMin ----------------------------------------------------------------------

std::vector<int64_t> arg_out_dims(const std::vector<int64_t>& dims, int64_t axis, bool keepdims) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < static_cast<int64_t>(dims.size()); ++i) {
    if (i != axis) out.push_back(dims[static_cast<size_t>(i)]);
    else if (keepdims) out.push_back(1);
  }
  return out;
}

template <bool kMax>
void arg_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", 0), x.rank());
  const bool keepdims = ctx.attr_int("keepdims", 1) != 0;
  const bool last = ctx.attr_int("select_last_index", 0) != 0;
  if (x.rank() == 0) ctx.fail(ErrorKind::kBadInput, "input must have rank >= 1, got a scalar");
  const AxisSplit s = split_at(x.dims(), axis);
  Tensor y(DType::kInt64, arg_out_dims(x.dims(), axis, keepdims));
  if (s.len == 0 && y.numel() > 0)
    ctx.fail(ErrorKind::kBadInput, "cannot take the arg of an empty axis " + std::to_string(axis) +
                                       " of shape " + dims_to_string(x.dims()));
  int64_t* dst = y.data<int64_t>();
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kIsHalf<T>) {
      ctx.fail(ErrorKind::kInternal, "half inputs should have been widened to float");
    } else {
      const T* src = x.data<T>();
      for (int64_t o = 0; o < s.outer; ++o) {
        for (int64_t in = 0; in < s.inner; ++in) {
          const T* p = src + o * s.len * s.inner + in;
          int64_t best = 0;
          T bv = p[0];
          // The first NaN wins, like numpy's argmax/argmin.
          for (int64_t k = 1; k < s.len && !nan_value(bv); ++k) {
            T v = p[k * s.inner];
            bool better = nan_value(v) || (kMax ? v > bv : v < bv) || (last && v == bv);
            if (better) {
              best = k;
              bv = v;
            }
          }
          dst[o * s.inner + in] = best;
        }
      }
    }
  });
  ctx.set_output(0, std::move(y));
}

void infer_arg(InferContext& ctx) {
  const Type& in = ctx.input_type(0);
  Type out = Type::tensor(DType::kInt64);
  if (in.shape && in.shape->rank() > 0) {
    const int64_t rank = static_cast<int64_t>(in.shape->rank());
    const int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", 0), rank);
    const bool keepdims = ctx.attr_int("keepdims", 1) != 0;
    Shape s;
    for (int64_t i = 0; i < rank; ++i) {
      if (i != axis) s.dims.push_back(in.shape->dims[static_cast<size_t>(i)]);
      else if (keepdims) s.dims.push_back(Dim(1));
    }
    out.shape = s;
  }
  ctx.set_output_type(0, out);
}

// ---- TopK ---------------------------------------------------------------------------------

// The first k of row[0], row[stride], ... (len values) in TopK order (NaN the largest; of equal
// values the lower index first) into idx, one pass in index order keeping them sorted: an
// element enters only when it comes strictly before the current k-th, almost always rejected by
// one compare of values. vals: scratch for the chosen values (k).
template <bool Largest, class T>
void select_top_k(const T* row, int64_t len, int64_t stride, int64_t k, int64_t* idx, T* vals) {
  // a (at a later index than b) comes before b.
  auto later_before = [](T a, T b) {
    if constexpr (Largest) return a > b || (nan_value(a) && !nan_value(b));
    else return a < b || (nan_value(b) && !nan_value(a));
  };
  int64_t n = 0;
  for (int64_t i = 0; i < len; ++i) {
    const T v = row[i * stride];
    if (n == k && !later_before(v, vals[k - 1])) continue;
    int64_t j = n < k ? n++ : k - 1;
    for (; j > 0 && later_before(v, vals[j - 1]); --j) {
      vals[j] = vals[j - 1];
      idx[j] = idx[j - 1];
    }
    vals[j] = v;
    idx[j] = i;
  }
}

int64_t topk_k(const KernelContext& ctx) {
  if (ctx.opset() < 10) return ctx.attr_int("k");
  const Tensor& kt = ctx.input(1);
  if (kt.numel() != 1 || (kt.dtype() != DType::kInt64 && kt.dtype() != DType::kInt32))
    ctx.fail(ErrorKind::kBadInput, "K must be a 1-element int64 tensor, got " + tensor_summary(kt));
  return kt.get_int(0);
}

void topk_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() == 0) ctx.fail(ErrorKind::kBadInput, "input must have rank >= 1, got a scalar");
  const int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", -1), x.rank());
  const bool largest = ctx.opset() < 11 || ctx.attr_int("largest", 1) != 0;
  const int64_t k = topk_k(ctx);
  const AxisSplit s = split_at(x.dims(), axis);
  if (k < 0 || k > s.len)
    ctx.fail(ErrorKind::kBadInput, "K must be in [0, " + std::to_string(s.len) + "] for axis " +
                                       std::to_string(axis) + ", got " + std::to_string(k));
  std::vector<int64_t> out_dims = x.dims();
  out_dims[static_cast<size_t>(axis)] = k;
  Tensor values(x.dtype(), out_dims);
  Tensor indices(DType::kInt64, out_dims);
  int64_t* idx_out = indices.data<int64_t>();
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kIsHalf<T>) {
      ctx.fail(ErrorKind::kInternal, "half inputs should have been widened to float");
    } else {
      const T* src = x.data<T>();
      T* val_out = values.data<T>();
      // Total order: NaN counts as the largest value; ties go to the lower index.
      auto before = [&](const T* p, int64_t a, int64_t b) {
        T va = p[a * s.inner], vb = p[b * s.inner];
        bool na = nan_value(va), nb = nan_value(vb);
        if (na || nb) {
          if (na && nb) return a < b;
          return largest ? na : nb;
        }
        if (va != vb) return largest ? va > vb : va < vb;
        return a < b;
      };
      // Few of many (k <= 16, the usual detection / beam-search case): one pass (select_top_k).
      // Otherwise a partial sort of the indices.
      const bool one_pass = k > 0 && k <= 16 && k * 4 <= s.len;
      std::vector<int64_t> order(one_pass ? 0 : static_cast<size_t>(s.len));
      std::vector<int64_t> best(static_cast<size_t>(k));
      std::unique_ptr<T[]> best_values(new T[static_cast<size_t>(std::max<int64_t>(k, 1))]());  // (T may be bool)
      for (int64_t o = 0; o < s.outer; ++o) {
        for (int64_t in = 0; in < s.inner; ++in) {
          const T* p = src + o * s.len * s.inner + in;
          if (one_pass) {
            if (largest) select_top_k<true>(p, s.len, s.inner, k, best.data(), best_values.get());
            else select_top_k<false>(p, s.len, s.inner, k, best.data(), best_values.get());
          } else {
            std::iota(order.begin(), order.end(), int64_t{0});
            std::partial_sort(order.begin(), order.begin() + k, order.end(),
                              [&](int64_t a, int64_t b) { return before(p, a, b); });
          }
          const std::vector<int64_t>& chosen = one_pass ? best : order;
          for (int64_t j = 0; j < k; ++j) {
            int64_t dst = o * k * s.inner + j * s.inner + in;
            idx_out[dst] = chosen[static_cast<size_t>(j)];
            val_out[dst] = p[chosen[static_cast<size_t>(j)] * s.inner];
          }
        }
      }
    }
  });
  ctx.set_output(0, std::move(values));
  ctx.set_output(1, std::move(indices));
}

void infer_topk(InferContext& ctx) {
  const Type& in = ctx.input_type(0);
  Type vals = Type::tensor(in.dtype);
  Type idx = Type::tensor(DType::kInt64);
  if (in.shape && in.shape->rank() > 0) {
    const int64_t rank = static_cast<int64_t>(in.shape->rank());
    const int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", -1), rank);
    Shape s = *in.shape;
    Dim kd;
    if (ctx.opset() < 10) {
      kd = Dim(ctx.attr_int("k"));
    } else if (const Tensor* kt = ctx.constant_input(1); kt && kt->numel() == 1) {
      kd = Dim(kt->get_int(0));
    }
    s.dims[static_cast<size_t>(axis)] = kd;
    vals.shape = s;
    idx.shape = s;
  }
  ctx.set_output_type(0, vals);
  ctx.set_output_type(1, idx);
}

// ---- CumSum -------------------------------------------------------------------------------

void cumsum_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& at = ctx.input(1);
  if (at.numel() != 1 || (at.dtype() != DType::kInt64 && at.dtype() != DType::kInt32))
    ctx.fail(ErrorKind::kBadInput, "axis must be a scalar int32/int64 tensor, got " +
                                       tensor_summary(at));
  if (x.rank() == 0) ctx.fail(ErrorKind::kBadInput, "input must have rank >= 1, got a scalar");
  const int64_t axis = normalize_axis(ctx, at.get_int(0), x.rank());
  const bool exclusive = ctx.attr_int("exclusive", 0) != 0;
  const bool reverse = ctx.attr_int("reverse", 0) != 0;
  const AxisSplit s = split_at(x.dims(), axis);
  Tensor y(x.dtype(), x.dims());
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kIsHalf<T> || std::is_same_v<T, bool>) {
      ctx.fail(ErrorKind::kUnsupported, "CumSum does not support " +
                                            std::string(dtype_name(x.dtype())));
    } else {
      const T* src = x.data<T>();
      T* dst = y.data<T>();
      for (int64_t o = 0; o < s.outer; ++o) {
        for (int64_t in = 0; in < s.inner; ++in) {
          const int64_t base = o * s.len * s.inner + in;
          T acc = T(0);
          for (int64_t j = 0; j < s.len; ++j) {
            const int64_t kk = reverse ? s.len - 1 - j : j;
            const int64_t off = base + kk * s.inner;
            if (exclusive) {
              dst[off] = acc;
              acc = static_cast<T>(acc + src[off]);
            } else {
              acc = static_cast<T>(acc + src[off]);
              dst[off] = acc;
            }
          }
        }
      }
    }
  });
  ctx.set_output(0, std::move(y));
}

}  // namespace

void register_topk_ops(OpRegistry& r) {
  r.add("ArgMax").since(1).inputs(1).outputs(1).kind(PatternKind::kOpaque).run(arg_kernel<true>)
      .shape(infer_arg).via_float();
  r.add("ArgMin").since(1).inputs(1).outputs(1).kind(PatternKind::kOpaque).run(arg_kernel<false>)
      .shape(infer_arg).via_float();
  r.add("TopK").since(1).inputs(1).outputs(2).kind(PatternKind::kOpaque).run(topk_kernel)
      .shape(infer_topk).via_float();
  r.add("TopK").since(10).inputs(2).outputs(2).kind(PatternKind::kOpaque).run(topk_kernel)
      .shape(infer_topk).via_float();
  r.add("CumSum").since(11).inputs(2).outputs(1).kind(PatternKind::kOpaque).run(cumsum_kernel)
      .shape(infer_same_as_input0).via_float();
}

}  // namespace kiln
