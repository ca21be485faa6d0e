// TE lowerings of elementwise unary ops: math, activations, Cast, Identity. Floats (f32, f64)
// for the math; Abs/Neg/Relu/Clip/Identity also on integers. Math calls use the intrinsics
// exp, log, sqrt, tanh, erf, floor, ceil, pow of tir::call.
#include <cmath>

#include "ops/lowering.h"

namespace kiln {
namespace {

using tir::Expr;
using tir::ExprKind;

// out = f(ctx, x, dtype) elementwise over input 0.
template <Expr (*F)(const LowerContext&, Expr, DType), bool kIntsToo = false>
LowerResult unary(const LowerContext& ctx) {
  if (!ctx.has_input(0)) return std::nullopt;
  DType dt = ctx.in_dtype(0);
  if (!lower::supported_dtype(dt) || dt == DType::kBool || ctx.out_dtype() != dt) return std::nullopt;
  if (!kIntsToo && !is_float(dt)) return std::nullopt;
  te::Tensor x = ctx.input(0);
  Expr probe = F(ctx, te::access(x, lower::to_exprs(std::vector<int64_t>(ctx.in_shape(0).size(), 0))), dt);
  if (!probe) return std::nullopt;
  return std::vector<te::Tensor>{te::compute(ctx.name("out"), ctx.out_dims(),
                                             [&](const std::vector<Expr>& i) { return F(ctx, te::access(x, i), dt); })};
}

// Identity: a copy in any supported dtype, bool included (Loop bodies pass their condition on).
LowerResult identity(const LowerContext& ctx) {
  if (!ctx.has_input(0) || !lower::supported_dtype(ctx.in_dtype(0)) || ctx.out_dtype() != ctx.in_dtype(0))
    return std::nullopt;
  te::Tensor x = ctx.input(0);
  return std::vector<te::Tensor>{te::compute(ctx.name("out"), ctx.out_dims(),
                                             [&](const std::vector<Expr>& i) { return te::access(x, i); })};
}

Expr k(DType dt, double v) { return lower::constant(dt, v); }
Expr fn(const char* name, DType dt, Expr x) { return tir::call(name, lower::scalar_type(dt), {std::move(x)}); }
Expr lt(Expr a, Expr b) { return tir::binary(ExprKind::kLT, std::move(a), std::move(b)); }
Expr clamp01(DType dt, Expr v) { return tir::max(k(dt, 0), tir::min(k(dt, 1), std::move(v))); }
Expr sigmoid(DType dt, Expr x) { return k(dt, 1) / (k(dt, 1) + fn("exp", dt, k(dt, 0) - x)); }

Expr abs_f(const LowerContext&, Expr x, DType dt) { return tir::select(lt(x, k(dt, 0)), k(dt, 0) - x, x); }
Expr neg_f(const LowerContext&, Expr x, DType dt) { return k(dt, 0) - x; }
Expr exp_f(const LowerContext&, Expr x, DType dt) { return fn("exp", dt, x); }
Expr log_f(const LowerContext&, Expr x, DType dt) { return fn("log", dt, x); }
Expr sqrt_f(const LowerContext&, Expr x, DType dt) { return fn("sqrt", dt, x); }
Expr tanh_f(const LowerContext&, Expr x, DType dt) { return fn("tanh", dt, x); }
Expr erf_f(const LowerContext&, Expr x, DType dt) { return fn("erf", dt, x); }
Expr floor_f(const LowerContext&, Expr x, DType dt) { return fn("floor", dt, x); }
Expr ceil_f(const LowerContext&, Expr x, DType dt) { return fn("ceil", dt, x); }
Expr reciprocal_f(const LowerContext&, Expr x, DType dt) { return k(dt, 1) / x; }
Expr sigmoid_f(const LowerContext&, Expr x, DType dt) { return sigmoid(dt, x); }
Expr relu_f(const LowerContext&, Expr x, DType dt) { return tir::max(x, k(dt, 0)); }
Expr leaky_relu_f(const LowerContext& c, Expr x, DType dt) {
  return tir::select(lt(x, k(dt, 0)), k(dt, c.attr_float("alpha", 0.01f)) * x, x);
}
Expr elu_f(const LowerContext& c, Expr x, DType dt) {
  return tir::select(lt(x, k(dt, 0)), k(dt, c.attr_float("alpha", 1.0f)) * (fn("exp", dt, x) - k(dt, 1)), x);
}
Expr selu_f(const LowerContext& c, Expr x, DType dt) {
  Expr alpha = k(dt, c.attr_float("alpha", 1.67326319217681884765625f));
  Expr gamma = k(dt, c.attr_float("gamma", 1.05070102214813232421875f));
  return gamma * tir::select(lt(x, k(dt, 0)), alpha * (fn("exp", dt, x) - k(dt, 1)), x);
}
Expr hard_sigmoid_f(const LowerContext& c, Expr x, DType dt) {
  return clamp01(dt, k(dt, c.attr_float("alpha", 0.2f)) * x + k(dt, c.attr_float("beta", 0.5f)));
}
Expr hard_swish_f(const LowerContext&, Expr x, DType dt) { return x * clamp01(dt, x * k(dt, 1.0 / 6.0) + k(dt, 0.5)); }
Expr softplus_f(const LowerContext&, Expr x, DType dt) {
  // log(1 + exp(x)) without overflow: x + log(1 + exp(-x)) for x > 0.
  Expr ax = tir::select(lt(x, k(dt, 0)), k(dt, 0) - x, x);
  return tir::max(x, k(dt, 0)) + fn("log", dt, k(dt, 1) + fn("exp", dt, k(dt, 0) - ax));
}
Expr silu_f(const LowerContext&, Expr x, DType dt) { return x * sigmoid(dt, x); }
Expr gelu_f(const LowerContext& c, Expr x, DType dt) {
  std::string mode = c.attr_string("approximate", "none");
  if (mode == "tanh") {
    Expr inner = k(dt, std::sqrt(2.0 / M_PI)) * (x + k(dt, 0.044715) * x * x * x);
    return k(dt, 0.5) * x * (k(dt, 1) + fn("tanh", dt, inner));
  }
  if (mode != "none") return nullptr;
  return k(dt, 0.5) * x * (k(dt, 1) + fn("erf", dt, x * k(dt, M_SQRT1_2)));
}
Expr clip_f(const LowerContext& c, Expr x, DType dt) {
  double lo = -INFINITY, hi = INFINITY;
  if (c.opset() < 11) {
    lo = c.attr_float("min", -INFINITY);
    hi = c.attr_float("max", INFINITY);
  } else {
    for (int i : {1, 2}) {
      if (!c.has_input(i)) continue;
      const Tensor* t = c.constant(i);
      if (!t || t->numel() != 1) return nullptr;
      (i == 1 ? lo : hi) = t->get_double(0);
    }
  }
  if (lo != -INFINITY) x = tir::max(x, k(dt, lo));
  if (hi != INFINITY) x = tir::min(x, k(dt, hi));
  return x;
}

LowerResult cast_lower(const LowerContext& ctx) {
  DType from = ctx.in_dtype(0), to = ctx.out_dtype();
  if (!lower::supported_dtype(from) || !lower::supported_dtype(to)) return std::nullopt;
  te::Tensor x = ctx.input(0);
  return std::vector<te::Tensor>{te::compute(ctx.name("out"), ctx.out_dims(),
                                             [&](const std::vector<Expr>& i) -> Expr {
    Expr v = te::access(x, i);
    if (from == to) return v;
    if (to == DType::kBool) return tir::binary(ExprKind::kNE, v, lower::constant(from, 0));
    return tir::cast(lower::scalar_type(to), v);
  })};
}

LowerResult not_lower(const LowerContext& ctx) {
  if (ctx.in_dtype(0) != DType::kBool) return std::nullopt;
  te::Tensor x = ctx.input(0);
  return std::vector<te::Tensor>{te::compute(ctx.name("out"), ctx.out_dims(),
                                             [&](const std::vector<Expr>& i) { return tir::logical_not(te::access(x, i)); })};
}

}  // namespace

void add_unary_lowerings(std::vector<LoweringEntry>& t) {
  t.push_back({"", "Identity", identity});
  t.push_back({"", "Abs", unary<abs_f, true>});
  t.push_back({"", "Neg", unary<neg_f, true>});
  t.push_back({"", "Relu", unary<relu_f, true>});
  t.push_back({"", "Clip", unary<clip_f, true>});
  t.push_back({"", "Exp", unary<exp_f>});
  t.push_back({"", "Log", unary<log_f>});
  t.push_back({"", "Sqrt", unary<sqrt_f>});
  t.push_back({"", "Tanh", unary<tanh_f>});
  t.push_back({"", "Erf", unary<erf_f>});
  t.push_back({"", "Floor", unary<floor_f>});
  t.push_back({"", "Ceil", unary<ceil_f>});
  t.push_back({"", "Reciprocal", unary<reciprocal_f>});
  t.push_back({"", "Sigmoid", unary<sigmoid_f>});
  t.push_back({"", "LeakyRelu", unary<leaky_relu_f>});
  t.push_back({"", "Elu", unary<elu_f>});
  t.push_back({"", "Selu", unary<selu_f>});
  t.push_back({"", "HardSigmoid", unary<hard_sigmoid_f>});
  t.push_back({"", "HardSwish", unary<hard_swish_f>});
  t.push_back({"", "Softplus", unary<softplus_f>});
  t.push_back({"", "Gelu", unary<gelu_f>});
  t.push_back({"kiln", "Gelu", unary<gelu_f>});
  t.push_back({"kiln", "Silu", unary<silu_f>});
  t.push_back({"kiln", "HardSwish", unary<hard_swish_f>});
  t.push_back({"", "Cast", cast_lower});
  t.push_back({"", "Not", not_lower});
}

}  // namespace kiln
