// TE lowerings of QuantizeLinear and DequantizeLinear (per tensor or per axis; f32 <-> u8/i8, and
// i32 biases): elementwise, so the Q/DQ pairs of a QDQ model fuse with the ops around them
// instead of running as reference kernels; and DynamicQuantizeLinear (min/max reductions, then
// the elementwise quantization: the activations of dynamically quantized MatMuls). Blocked
// quantization, other float types and the precision attribute stay on the reference kernels.
// Arithmetic as the reference kernels (ops/quantize.cc): Q = saturate(round_half_even(x / s) +
// zp) with the quotient in float32; DQ = float32(x - zp) * s.
#include "ops/lowering.h"

namespace kiln {
namespace {

using tir::Expr;

bool quant_type(DType d) { return d == DType::kUInt8 || d == DType::kInt8; }

// The element of a scale/zero-point input for output index i: [0] when it holds one value,
// else [i[axis]] (per-axis parameters).
Expr param(const LowerContext& ctx, int input, const std::vector<Expr>& i, int64_t axis) {
  const auto& shape = ctx.in_shape(input);
  if (shape.size() == 1 && shape[0] == 1) return te::access(ctx.input(input), {lower::constant(DType::kInt64, 0)});
  return te::access(ctx.input(input), {i[static_cast<size_t>(axis)]});
}

// Per-axis parameters are 1-D of the axis's size; anything else (blocked) is not lowered.
std::optional<int64_t> param_axis(const LowerContext& ctx) {
  if (ctx.attr_int("block_size", 0) != 0 || ctx.attr_int("precision", 0) != 0) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(ctx.out_shape().size());
  const int64_t axis = lower::norm_axis(ctx.attr_int("axis", 1), std::max<int64_t>(rank, 1));
  for (int k = 1; k < ctx.num_inputs(); ++k) {
    if (!ctx.has_input(k)) continue;
    const auto& s = ctx.in_shape(k);
    const bool scalar = s.size() == 1 && s[0] == 1;
    if (!scalar && !(s.size() == 1 && axis < rank && s[0] == ctx.out_shape()[static_cast<size_t>(axis)]))
      return std::nullopt;
  }
  return axis;
}

LowerResult quantize_lower(const LowerContext& ctx) {
  const DType to = ctx.out_dtype();
  if (ctx.in_dtype(0) != DType::kFloat32 || ctx.in_dtype(1) != DType::kFloat32 || !quant_type(to)) return std::nullopt;
  if (ctx.has_input(2) && ctx.in_dtype(2) != to) return std::nullopt;
  const auto axis = param_axis(ctx);
  if (!axis) return std::nullopt;
  const double lo = to == DType::kUInt8 ? 0 : -128, hi = lo + 255;
  return std::vector<te::Tensor>{te::compute(ctx.name("q"), ctx.out_dims(), [&](const std::vector<Expr>& i) {
    // div_exact: the quotient the reference computes (a vector divided by one value would
    // otherwise be multiplied by its reciprocal, which moves ties to the other integer).
    const Expr ratio = tir::call("div_exact", tir::f32(), {te::access(ctx.input(0), i), param(ctx, 1, i, *axis)});
    const Expr q = tir::call("round", tir::f32(), {ratio});
    Expr v = ctx.has_input(2) ? q + tir::cast(tir::f32(), param(ctx, 2, i, *axis)) : q;
    v = tir::max(lower::constant(DType::kFloat32, lo), tir::min(lower::constant(DType::kFloat32, hi), v));
    return tir::cast(lower::scalar_type(to), v);
  })};
}

LowerResult dequantize_lower(const LowerContext& ctx) {
  const DType from = ctx.in_dtype(0);
  if (!(quant_type(from) || from == DType::kInt32) || ctx.in_dtype(1) != DType::kFloat32 ||
      ctx.out_dtype() != DType::kFloat32 || ctx.attr_int("output_dtype", 0) != 0)
    return std::nullopt;
  if (ctx.has_input(2) && ctx.in_dtype(2) != from) return std::nullopt;
  const auto axis = param_axis(ctx);
  if (!axis) return std::nullopt;
  return std::vector<te::Tensor>{te::compute(ctx.name("dq"), ctx.out_dims(), [&](const std::vector<Expr>& i) {
    Expr x = tir::cast(tir::f32(), te::access(ctx.input(0), i));
    if (ctx.has_input(2)) x = x - tir::cast(tir::f32(), param(ctx, 2, i, *axis));
    return x * param(ctx, 1, i, *axis);
  })};
}

// DynamicQuantizeLinear (all three outputs used): range [min(x, 0), max(x, 0)], scale = range /
// 255 (1/255 for an empty range), zero point = round(clamp(-min / scale, 0, 255)), y = saturate(
// round(x / scale) + zero point), as the reference kernel computes them in float32.
LowerResult dynamic_quantize_lower(const LowerContext& ctx) {
  if (ctx.in_dtype(0) != DType::kFloat32 || ctx.output_dtypes.size() != 3 || ctx.out_dtype(0) != DType::kUInt8 ||
      ctx.out_dtype(1) != DType::kFloat32 || ctx.out_dtype(2) != DType::kUInt8)
    return std::nullopt;
  const te::Tensor& x = ctx.input(0);
  const std::vector<Expr> in = ctx.in_dims(0);
  std::vector<te::IterVar> axes;
  for (size_t d = 0; d < in.size(); ++d) axes.push_back(te::reduce_axis(in[d], ctx.name("r" + std::to_string(d))));
  auto all = [&](te::ReduceOp op, const char* name) {
    return te::compute(ctx.name(name), {tir::int_imm(1)}, [&](const std::vector<Expr>&) {
      std::vector<Expr> j;
      for (const auto& a : axes) j.push_back(a->var);
      return te::reduce(op, te::access(x, j), axes);
    });
  };
  const te::Tensor lo = all(te::ReduceOp::kMin, "min"), hi = all(te::ReduceOp::kMax, "max");
  const Expr zero = lower::constant(DType::kFloat32, 0), one = lower::constant(DType::kFloat32, 1);
  const Expr k255 = lower::constant(DType::kFloat32, 255);
  const std::vector<Expr> at0 = {lower::constant(DType::kInt64, 0)};
  const te::Tensor scale = te::compute(ctx.name("scale"), {tir::int_imm(1)}, [&](const std::vector<Expr>&) {
    const Expr mn = tir::min(te::access(lo, at0), zero), mx = tir::max(te::access(hi, at0), zero);
    return tir::select(tir::binary(tir::ExprKind::kEQ, mx, mn), one, mx - mn) / k255;
  });
  const te::Tensor zp_f = te::compute(ctx.name("zp_f"), {tir::int_imm(1)}, [&](const std::vector<Expr>&) {
    const Expr mn = tir::min(te::access(lo, at0), zero);
    const Expr z = zero - tir::call("div_exact", tir::f32(), {mn, te::access(scale, at0)});
    return tir::call("round", tir::f32(), {tir::max(zero, tir::min(k255, z))});
  });
  const te::Tensor zp = te::compute(ctx.name("zp"), {tir::int_imm(1)}, [&](const std::vector<Expr>&) {
    return tir::cast(lower::scalar_type(DType::kUInt8), te::access(zp_f, at0));
  });
  const te::Tensor y = te::compute(ctx.name("y"), ctx.out_dims(0), [&](const std::vector<Expr>& i) {
    const Expr q = tir::call("round", tir::f32(), {tir::call("div_exact", tir::f32(), {te::access(x, i), te::access(scale, at0)})}) +
                   te::access(zp_f, at0);
    const Expr v = tir::select(tir::binary(tir::ExprKind::kNE, q, q), zero, tir::max(zero, tir::min(k255, q)));
    return tir::cast(lower::scalar_type(DType::kUInt8), v);
  });
  return std::vector<te::Tensor>{y, scale, zp};
}

}  // namespace

void add_quantize_lowerings(std::vector<LoweringEntry>& t) {
  t.push_back({"", "DynamicQuantizeLinear", dynamic_quantize_lower});
  t.push_back({"", "QuantizeLinear", quantize_lower});
  t.push_back({"", "DequantizeLinear", dequantize_lower});
}

}  // namespace kiln
