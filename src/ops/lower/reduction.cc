// TE lowerings of reductions: ReduceSum/Mean/Max/Min/Prod/SumSquare/L1/L2/LogSum/LogSumExp,
// Softmax/LogSoftmax (max, exp-sum, normalize), kiln::LayerNorm, ONNX LayerNormalization and InstanceNormalization (mean,
// variance, normalize), GlobalAveragePool/GlobalMaxPool. Floats only (integer reductions run
// their reference kernel).
#include <algorithm>
#include <cmath>
#include <set>

#include "ops/lowering.h"

namespace kiln {
namespace {

using tir::Expr;
using tir::ExprKind;
using te::ReduceOp;

enum class RK { kSum, kMean, kMax, kMin, kProd, kSumSquare, kL1, kL2, kLogSum, kLogSumExp };

Expr k(DType dt, double v) { return lower::constant(dt, v); }
Expr fn(const char* name, DType dt, Expr x) { return tir::call(name, lower::scalar_type(dt), {std::move(x)}); }

// Reduces x (shape `in`) over `axes` into a tensor of shape `out` (keepdims or not):
// out[...] = reduce(op, pre(x[...]), axes).
// `in`: x's dims as expressions (symbolic where they vary).
te::Tensor reduce_over(const LowerContext& ctx, const std::string& name, const te::Tensor& x,
                       const std::vector<Expr>& in, const std::set<int64_t>& axes, bool keepdims,
                       ReduceOp op, const std::function<Expr(Expr)>& pre) {
  std::vector<Expr> out;
  for (size_t d = 0; d < in.size(); ++d) {
    if (!axes.count(static_cast<int64_t>(d))) out.push_back(in[d]);
    else if (keepdims) out.push_back(tir::int_imm(1));
  }
  std::vector<te::IterVar> rs;
  for (int64_t a : axes) rs.push_back(te::reduce_axis(in[static_cast<size_t>(a)], ctx.name(name + "_r" + std::to_string(a))));
  return te::compute(ctx.name(name), out, [&](const std::vector<Expr>& i) {
    std::vector<Expr> j;
    size_t oi = 0, ri = 0;
    for (size_t d = 0; d < in.size(); ++d) {
      if (axes.count(static_cast<int64_t>(d))) {
        j.push_back(rs[ri++]->var);
        if (keepdims) ++oi;
      } else {
        j.push_back(i[oi++]);
      }
    }
    return te::reduce(op, pre(te::access(x, j)), rs);
  });
}

te::Tensor map(const LowerContext& ctx, const std::string& name, const std::vector<Expr>& shape,
               const std::function<Expr(const std::vector<Expr>&)>& f) {
  return te::compute(ctx.name(name), shape, f);
}

// The element count of the axes in `set` of dims `in`, as a float of dtype dt.
Expr count_of(DType dt, const std::vector<Expr>& in, const std::set<int64_t>& set) {
  Expr n = tir::int_imm(1);
  for (int64_t a : set) n = lower::mul(n, in[static_cast<size_t>(a)]);
  return lower::as_float(dt, n);
}

// Index into a keepdims reduction result of `in`-shaped index i.
std::vector<Expr> kept(const std::vector<Expr>& i, const std::set<int64_t>& axes) {
  std::vector<Expr> j = i;
  for (int64_t a : axes) j[static_cast<size_t>(a)] = tir::int_imm(0);
  return j;
}

template <RK K>
LowerResult reduce_lower(const LowerContext& ctx) {
  if (!ctx.has_input(0) || !is_float(ctx.in_dtype(0)) || !lower::supported_dtype(ctx.in_dtype(0)) ||
      ctx.out_dtype() != ctx.in_dtype(0))
    return std::nullopt;
  DType dt = ctx.in_dtype(0);
  const auto& in = ctx.in_shape(0);
  int64_t r = static_cast<int64_t>(in.size());
  std::vector<int64_t> axes;
  bool axes_from_input = ctx.opset() >= 18 || (K == RK::kSum && ctx.opset() >= 13);
  if (axes_from_input) {
    if (ctx.has_input(1)) {
      auto a = ctx.constant_ints(1);
      if (!a) return std::nullopt;
      axes = *a;
    }
  } else {
    axes = ctx.attr_ints("axes");
  }
  bool keepdims = ctx.attr_int("keepdims", 1) != 0;
  std::set<int64_t> set;
  if (axes.empty()) {
    if (ctx.attr_int("noop_with_empty_axes", 0) != 0) return std::nullopt;  // reference handles it
    for (int64_t d = 0; d < r; ++d) set.insert(d);
  }
  for (int64_t a : axes) {
    int64_t n = lower::norm_axis(a, r);
    if (n < 0) return std::nullopt;
    set.insert(n);
  }
  int64_t count = 1;
  for (int64_t a : set) count *= in[static_cast<size_t>(a)];
  if (count == 0 || r == 0) return std::nullopt;
  te::Tensor x = ctx.input(0);
  const std::vector<Expr> in_e = ctx.in_dims(0);
  auto id = [](Expr v) { return v; };
  auto sq = [](Expr v) { return v * v; };
  auto ab = [dt](Expr v) { return tir::select(tir::binary(ExprKind::kLT, v, k(dt, 0)), k(dt, 0) - v, v); };
  const std::vector<Expr> out = ctx.out_dims();
  auto post = [&](te::Tensor s, std::function<Expr(Expr)> f) {
    return std::vector<te::Tensor>{map(ctx, "out", out, [&](const std::vector<Expr>& i) { return f(te::access(s, i)); })};
  };
  switch (K) {
    case RK::kSum: return std::vector<te::Tensor>{reduce_over(ctx, "out", x, in_e, set, keepdims, ReduceOp::kSum, id)};
    case RK::kMax: return std::vector<te::Tensor>{reduce_over(ctx, "out", x, in_e, set, keepdims, ReduceOp::kMax, id)};
    case RK::kMin: return std::vector<te::Tensor>{reduce_over(ctx, "out", x, in_e, set, keepdims, ReduceOp::kMin, id)};
    case RK::kProd: return std::vector<te::Tensor>{reduce_over(ctx, "out", x, in_e, set, keepdims, ReduceOp::kProd, id)};
    case RK::kSumSquare: return std::vector<te::Tensor>{reduce_over(ctx, "out", x, in_e, set, keepdims, ReduceOp::kSum, sq)};
    case RK::kL1: return std::vector<te::Tensor>{reduce_over(ctx, "out", x, in_e, set, keepdims, ReduceOp::kSum, ab)};
    case RK::kMean:
      return post(reduce_over(ctx, "sum", x, in_e, set, keepdims, ReduceOp::kSum, id),
                  [&](Expr v) { return v / count_of(dt, in_e, set); });
    case RK::kL2:
      return post(reduce_over(ctx, "sum", x, in_e, set, keepdims, ReduceOp::kSum, sq), [&](Expr v) { return fn("sqrt", dt, v); });
    case RK::kLogSum:
      return post(reduce_over(ctx, "sum", x, in_e, set, keepdims, ReduceOp::kSum, id), [&](Expr v) { return fn("log", dt, v); });
    case RK::kLogSumExp: {
      te::Tensor m = reduce_over(ctx, "max", x, in_e, set, true, ReduceOp::kMax, id);
      te::Tensor e = map(ctx, "exp", in_e, [&](const std::vector<Expr>& i) {
        return fn("exp", dt, te::access(x, i) - te::access(m, kept(i, set)));
      });
      te::Tensor s = reduce_over(ctx, "sum", e, in_e, set, keepdims, ReduceOp::kSum, id);
      return std::vector<te::Tensor>{map(ctx, "out", out, [&](const std::vector<Expr>& i) {
        std::vector<Expr> mi;
        if (keepdims) {
          mi = i;
        } else {
          size_t oi = 0;
          for (size_t d = 0; d < in.size(); ++d) mi.push_back(set.count(static_cast<int64_t>(d)) ? tir::int_imm(0) : i[oi++]);
        }
        return fn("log", dt, te::access(s, i)) + te::access(m, mi);
      })};
    }
  }
  return std::nullopt;
}

template <bool kLog>
LowerResult softmax_lower(const LowerContext& ctx) {
  if (!ctx.has_input(0) || !is_float(ctx.in_dtype(0)) || !lower::supported_dtype(ctx.in_dtype(0))) return std::nullopt;
  DType dt = ctx.in_dtype(0);
  const auto& in = ctx.in_shape(0);
  int64_t r = static_cast<int64_t>(in.size());
  if (r == 0) return std::nullopt;
  int64_t axis = lower::norm_axis(ctx.attr_int("axis", ctx.opset() >= 13 ? -1 : 1), r);
  if (axis < 0) return std::nullopt;
  std::set<int64_t> set;
  if (ctx.opset() >= 13) set.insert(axis);
  else
    for (int64_t d = axis; d < r; ++d) set.insert(d);
  for (int64_t a : set)
    if (in[static_cast<size_t>(a)] == 0) return std::nullopt;
  te::Tensor x = ctx.input(0);
  const std::vector<Expr> in_e = ctx.in_dims(0);
  auto id = [](Expr v) { return v; };
  te::Tensor m = reduce_over(ctx, "max", x, in_e, set, true, ReduceOp::kMax, id);
  te::Tensor e = map(ctx, "exp", in_e, [&](const std::vector<Expr>& i) {
    return fn("exp", dt, te::access(x, i) - te::access(m, kept(i, set)));
  });
  te::Tensor s = reduce_over(ctx, "sum", e, in_e, set, true, ReduceOp::kSum, id);
  return std::vector<te::Tensor>{map(ctx, "out", in_e, [&](const std::vector<Expr>& i) {
    if (kLog) return te::access(x, i) - te::access(m, kept(i, set)) - fn("log", dt, te::access(s, kept(i, set)));
    // One division per row (hoisted out of the row loop), then a multiply per element, as ONNX
    // Runtime does: a vector division per 16 elements cost about a sixth of the kernel.
    return te::access(e, i) * (lower::constant(dt, 1.0) / te::access(s, kept(i, set)));
  })};
}

// Inserts the spatial axes (2 and on, NCHW...) of `in` into `set`; returns their element count.
int64_t spatial_axes(const std::vector<int64_t>& in, std::set<int64_t>& set) {
  int64_t count = 1;
  for (size_t d = 2; d < in.size(); ++d) {
    set.insert(static_cast<int64_t>(d));
    count *= in[d];
  }
  return count;
}

// (x - mean) / sqrt(var + eps) over the axes in `set`, then
// `affine` (the op's scale and bias) on each normalized value at its index.
template <class Affine>
LowerResult normalize_over(const LowerContext& ctx, const std::set<int64_t>& set, double eps,
                           Affine affine) {
  DType dt = ctx.in_dtype(0);
  const std::vector<Expr> in = ctx.in_dims(0);
  te::Tensor x = ctx.input(0);
  auto id = [](Expr v) { return v; };
  Expr n = count_of(dt, in, set);
  te::Tensor sum = reduce_over(ctx, "sum", x, in, set, true, ReduceOp::kSum, id);
  te::Tensor cen = map(ctx, "cen", in, [&](const std::vector<Expr>& i) {
    return te::access(x, i) - te::access(sum, kept(i, set)) / n;
  });
  te::Tensor var = reduce_over(ctx, "var", cen, in, set, true, ReduceOp::kSum, [](Expr v) { return v * v; });
  return std::vector<te::Tensor>{map(ctx, "out", in, [&](const std::vector<Expr>& i) {
    return affine(te::access(cen, i) / fn("sqrt", dt, te::access(var, kept(i, set)) / n + k(dt, eps)), i);
  })};
}

LowerResult layer_norm_lower(const LowerContext& ctx) {
  if (!ctx.has_input(0) || !is_float(ctx.in_dtype(0)) || !lower::supported_dtype(ctx.in_dtype(0))) return std::nullopt;
  DType dt = ctx.in_dtype(0);
  const auto& in = ctx.in_shape(0);
  int64_t r = static_cast<int64_t>(in.size());
  int64_t axis = lower::norm_axis(ctx.attr_int("axis", -1), r);
  if (axis < 0) return std::nullopt;
  std::set<int64_t> set;
  int64_t count = 1;
  for (int64_t d = axis; d < r; ++d) {
    set.insert(d);
    count *= in[static_cast<size_t>(d)];
  }
  if (count == 0) return std::nullopt;
  for (int i : {1, 2})
    if (ctx.has_input(i) && (ctx.in_dtype(i) != dt || ctx.in_shape(i).size() > in.size())) return std::nullopt;
  return normalize_over(ctx, set, ctx.attr_float("epsilon", 1e-5f), [&](Expr y, const std::vector<Expr>& i) {
    if (ctx.has_input(1)) y = y * te::access(ctx.input(1), lower::broadcast_index(ctx.in_shape(1), in, i));
    if (ctx.has_input(2)) y = y + te::access(ctx.input(2), lower::broadcast_index(ctx.in_shape(2), in, i));
    return y;
  });
}

// ONNX InstanceNormalization: per image and channel over the spatial axes; scale and bias [C].
LowerResult instance_norm_lower(const LowerContext& ctx) {
  if (!ctx.has_input(0) || (ctx.in_dtype(0) != DType::kFloat32 && ctx.in_dtype(0) != DType::kFloat64)) return std::nullopt;
  DType dt = ctx.in_dtype(0);
  const auto& in = ctx.in_shape(0);
  if (in.size() < 3) return std::nullopt;
  for (int i : {1, 2})
    if (!ctx.has_input(i) || ctx.in_dtype(i) != dt || ctx.in_shape(i) != std::vector<int64_t>{in[1]}) return std::nullopt;
  std::set<int64_t> set;
  const int64_t count = spatial_axes(in, set);
  if (count == 0) return std::nullopt;
  return normalize_over(ctx, set, ctx.attr_float("epsilon", 1e-5f), [&](Expr y, const std::vector<Expr>& i) {
    return y * te::access(ctx.input(1), {i[1]}) + te::access(ctx.input(2), {i[1]});
  });
}

// ONNX LayerNormalization when only Y is used (Mean and InvStdDev outputs run the reference
// kernel) and the input is float32/float64 (stash_type's float32 math is then exact).
LowerResult onnx_layer_norm_lower(const LowerContext& ctx) {
  for (size_t k = 1; k < ctx.output_dtypes.size(); ++k)
    if (ctx.output_dtypes[k] != DType::kUndefined) return std::nullopt;
  if (!ctx.has_input(0) || (ctx.in_dtype(0) != DType::kFloat32 && ctx.in_dtype(0) != DType::kFloat64)) return std::nullopt;
  return layer_norm_lower(ctx);
}

template <bool kMax>
LowerResult global_pool_lower(const LowerContext& ctx) {
  if (!ctx.has_input(0) || !is_float(ctx.in_dtype(0)) || !lower::supported_dtype(ctx.in_dtype(0))) return std::nullopt;
  DType dt = ctx.in_dtype(0);
  const auto& in = ctx.in_shape(0);
  if (in.size() < 3) return std::nullopt;
  std::set<int64_t> set;
  const int64_t count = spatial_axes(in, set);
  if (count == 0) return std::nullopt;
  auto id = [](Expr v) { return v; };
  if (kMax) return std::vector<te::Tensor>{reduce_over(ctx, "out", ctx.input(0), ctx.in_dims(0), set, true, ReduceOp::kMax, id)};
  te::Tensor s = reduce_over(ctx, "sum", ctx.input(0), ctx.in_dims(0), set, true, ReduceOp::kSum, id);
  return std::vector<te::Tensor>{map(ctx, "out", ctx.out_dims(), [&](const std::vector<Expr>& i) {
    return te::access(s, i) / count_of(dt, ctx.in_dims(0), set);
  })};
}

}  // namespace

void add_reduction_lowerings(std::vector<LoweringEntry>& t) {
  t.push_back({"", "ReduceSum", reduce_lower<RK::kSum>});
  t.push_back({"", "ReduceMean", reduce_lower<RK::kMean>});
  t.push_back({"", "ReduceMax", reduce_lower<RK::kMax>});
  t.push_back({"", "ReduceMin", reduce_lower<RK::kMin>});
  t.push_back({"", "ReduceProd", reduce_lower<RK::kProd>});
  t.push_back({"", "ReduceSumSquare", reduce_lower<RK::kSumSquare>});
  t.push_back({"", "ReduceL1", reduce_lower<RK::kL1>});
  t.push_back({"", "ReduceL2", reduce_lower<RK::kL2>});
  t.push_back({"", "ReduceLogSum", reduce_lower<RK::kLogSum>});
  t.push_back({"", "ReduceLogSumExp", reduce_lower<RK::kLogSumExp>});
  t.push_back({"", "Softmax", softmax_lower<false>});
  t.push_back({"", "LogSoftmax", softmax_lower<true>});
  t.push_back({"kiln", "LayerNorm", layer_norm_lower});
  t.push_back({"", "LayerNormalization", onnx_layer_norm_lower});
  t.push_back({"", "InstanceNormalization", instance_norm_lower});
  t.push_back({"", "GlobalAveragePool", global_pool_lower<false>});
  t.push_back({"", "GlobalMaxPool", global_pool_lower<true>});
}

}  // namespace kiln
