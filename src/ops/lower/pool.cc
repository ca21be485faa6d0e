// TE lowerings of 2-D sliding-window ops: MaxPool (output 0 only), AveragePool (both
// count_include_pad modes) and depthwise Conv (group == C_in == C_out, weight [C,1,kh,kw]).
// Each output element is a reduction over the kernel window; taps outside the input read a
// clamped (always valid) index and are masked by a select on in-bounds. Float32 only, but
// MaxPool also on int8 / uint8 (a quantized model's pool between QDQ pairs, pass qdq-to-integer);
// anything else declines (the reference kernel runs).
#include <algorithm>
#include <limits>

#include "ops/lowering.h"
#include "ops/window_util.h"

namespace kiln {
namespace {

using tir::Expr;
using tir::ExprKind;
using te::ReduceOp;

Expr i64(int64_t v) { return tir::int_imm(v); }
Expr f32(double v) { return tir::float_imm(v, lower::scalar_type(DType::kFloat32)); }
Expr both(Expr a, Expr b) { return tir::binary(ExprKind::kAnd, std::move(a), std::move(b)); }

// Input coordinate of tap `k` for output position `o` along spatial dim d.
Expr coord(const Window& w, int d, const Expr& o, const Expr& k) {
  return o * w.strides[static_cast<size_t>(d)] - i64(w.pads[static_cast<size_t>(d)]) +
         k * w.dilations[static_cast<size_t>(d)];
}
// 0 <= c < n
Expr in_range(const Expr& c, int64_t n) {
  return both(tir::binary(ExprKind::kGE, c, i64(0)), tir::binary(ExprKind::kLT, c, i64(n)));
}
Expr clamp(const Expr& c, int64_t n) { return tir::max(i64(0), tir::min(c, i64(n - 1))); }

// Common checks: 4-D input of dtype `dtype` (float32, or int8/uint8 where `bytes`) with positive
// spatial dims and a known 4-D output of the same dtype.
bool plain_2d(const LowerContext& ctx, bool bytes = false) {
  if (!ctx.has_input(0) || ctx.in_dtype(0) != ctx.out_dtype()) return false;
  const DType t = ctx.in_dtype(0);
  if (t != DType::kFloat32 && !(bytes && (t == DType::kUInt8 || t == DType::kInt8))) return false;
  const auto& in = ctx.in_shape(0);
  if (in.size() != 4 || ctx.out_shape().size() != 4) return false;
  for (int64_t d : in)
    if (d <= 0) return false;
  for (int64_t d : ctx.out_shape())
    if (d <= 0) return false;
  return true;
}

// The window of a 2-D op; false when it does not match the output shape.
bool window_of(const LowerContext& ctx, const std::vector<int64_t>& kernel, bool ceil_mode, Window* w) {
  const auto& in = ctx.in_shape(0);
  *w = resolve_window(ctx, {in[2], in[3]}, kernel, ceil_mode);
  const auto& out = ctx.out_shape();
  return w->nsp == 2 && w->out.size() == 2 && w->out[0] == out[2] && w->out[1] == out[3];
}

// Per-output count of taps for average pooling: taps inside the input, or (include_pad) inside
// the explicitly padded range (ceil-mode overhang never counts).
te::Tensor tap_count(const LowerContext& ctx, const Window& w, bool include_pad) {
  te::IterVar kh = te::reduce_axis(i64(w.kernel[0]), ctx.name("cnt_kh"));
  te::IterVar kw = te::reduce_axis(i64(w.kernel[1]), ctx.name("cnt_kw"));
  return te::compute(ctx.name("cnt"), lower::to_exprs(w.out), [&](const std::vector<Expr>& o) {
    Expr h = coord(w, 0, o[0], kh->var), x = coord(w, 1, o[1], kw->var);
    Expr ok = include_pad ? both(tir::binary(ExprKind::kLT, h, i64(w.in[0] + w.pads[2])),
                                 tir::binary(ExprKind::kLT, x, i64(w.in[1] + w.pads[3])))
                          : both(in_range(h, w.in[0]), in_range(x, w.in[1]));
    return te::reduce(ReduceOp::kSum, tir::select(ok, f32(1), f32(0)), {kh, kw});
  });
}

template <bool kMax>
LowerResult pool_lower(const LowerContext& ctx) {
  if (!plain_2d(ctx, kMax)) return std::nullopt;
  // MaxPool's Indices output: the reference kernel computes it.
  for (size_t k = 1; k < ctx.output_dtypes.size(); ++k)
    if (ctx.output_dtypes[k] != DType::kUndefined) return std::nullopt;
  if (kMax && ctx.attr_int("storage_order", 0) != 0) return std::nullopt;
  std::vector<int64_t> kernel = ctx.attr_ints("kernel_shape");
  if (kernel.size() != 2 || kernel[0] <= 0 || kernel[1] <= 0) return std::nullopt;
  Window w;
  if (!window_of(ctx, kernel, ctx.attr_int("ceil_mode", 0) != 0, &w)) return std::nullopt;
  const te::Tensor& x = ctx.input(0);
  te::IterVar kh = te::reduce_axis(i64(w.kernel[0]), ctx.name("kh"));
  te::IterVar kw = te::reduce_axis(i64(w.kernel[1]), ctx.name("kw"));
  // Taps outside the input never win a max: the dtype's least value (-inf for floats).
  const DType dt = ctx.in_dtype(0);
  const auto range = integer_range(dt);
  const double pad_value = !kMax ? 0.0 : range ? static_cast<double>(range->first) : -std::numeric_limits<double>::infinity();
  te::Tensor acc = te::compute(ctx.name(kMax ? "out" : "sum"), ctx.out_dims(),
                               [&](const std::vector<Expr>& i) {
    Expr h = coord(w, 0, i[2], kh->var), c = coord(w, 1, i[3], kw->var);
    Expr v = te::access(x, {i[0], i[1], clamp(h, w.in[0]), clamp(c, w.in[1])});
    Expr masked = tir::select(both(in_range(h, w.in[0]), in_range(c, w.in[1])), v, lower::constant(dt, pad_value));
    return te::reduce(kMax ? ReduceOp::kMax : ReduceOp::kSum, masked, {kh, kw});
  });
  if (kMax) return std::vector<te::Tensor>{acc};
  te::Tensor cnt = tap_count(ctx, w, ctx.attr_int("count_include_pad", 0) != 0);
  return std::vector<te::Tensor>{te::compute(ctx.name("out"), ctx.out_dims(),
                                             [&](const std::vector<Expr>& i) {
    Expr n = te::access(cnt, {i[2], i[3]});
    // An empty window averages to 0 (as the reference does).
    return tir::select(tir::binary(ExprKind::kGT, n, f32(0)), te::access(acc, i) / tir::max(n, f32(1)), f32(0));
  })};
}

LowerResult depthwise_conv_lower(const LowerContext& ctx) {
  if (!plain_2d(ctx) || !ctx.has_input(1) || ctx.in_dtype(1) != DType::kFloat32) return std::nullopt;
  const auto& in = ctx.in_shape(0);
  const auto& wt = ctx.in_shape(1);
  const int64_t c = in[1];
  if (ctx.attr_int("group", 1) != c || c <= 1 || wt.size() != 4 || wt[0] != c || wt[1] != 1 ||
      ctx.out_shape()[1] != c || wt[2] <= 0 || wt[3] <= 0 || wt[3] > 32)
    return std::nullopt;
  std::vector<int64_t> kernel = ctx.attr_ints("kernel_shape");
  if (!kernel.empty() && kernel != std::vector<int64_t>{wt[2], wt[3]}) return std::nullopt;
  const bool bias = ctx.has_input(2);
  if (bias && (ctx.in_dtype(2) != DType::kFloat32 || ctx.in_shape(2) != std::vector<int64_t>{c})) return std::nullopt;
  Window w;
  if (!window_of(ctx, {wt[2], wt[3]}, false, &w)) return std::nullopt;
  const te::Tensor& x = ctx.input(0);
  const te::Tensor& f = ctx.input(1);
  // The reduction runs over kernel rows; the taps of one row are unrolled in the body (a full
  // unroll into an injective compute measured slower: the fused vector loop gathers).
  te::IterVar kh = te::reduce_axis(i64(w.kernel[0]), ctx.name("kh"));
  te::Tensor acc = te::compute(ctx.name(bias ? "acc" : "out"), ctx.out_dims(),
                               [&](const std::vector<Expr>& i) {
    Expr h = coord(w, 0, i[2], kh->var);
    Expr hc = clamp(h, w.in[0]), hok = in_range(h, w.in[0]);
    Expr row;
    for (int64_t kw = 0; kw < w.kernel[1]; ++kw) {
      Expr col = coord(w, 1, i[3], i64(kw));
      Expr v = te::access(x, {i[0], i[1], hc, clamp(col, w.in[1])});
      Expr term = tir::select(both(hok, in_range(col, w.in[1])), v, f32(0)) *
                  te::access(f, {i[1], i64(0), kh->var, i64(kw)});
      row = row ? row + term : term;
    }
    return te::reduce(ReduceOp::kSum, row, {kh});
  });
  if (!bias) return std::vector<te::Tensor>{acc};
  return std::vector<te::Tensor>{te::compute(ctx.name("out"), ctx.out_dims(),
                                             [&](const std::vector<Expr>& i) {
    return te::access(acc, i) + te::access(ctx.input(2), {i[1]});
  })};
}

}  // namespace

void add_pool_lowerings(std::vector<LoweringEntry>& t) {
  t.push_back({"", "MaxPool", pool_lower<true>});
  t.push_back({"", "AveragePool", pool_lower<false>});
  t.push_back({"", "Conv", depthwise_conv_lower});
}

}  // namespace kiln
