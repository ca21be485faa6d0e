// TE lowerings of broadcasting ops: arithmetic, Pow, variadic Max/Min/Sum/Mean, comparisons,
// logic, Where, PRelu. Inputs broadcast to the output shape (numpy rules, right-aligned).
#include "ops/lowering.h"

namespace kiln {
namespace {

using tir::Expr;
using tir::ExprKind;

enum class Types { kNum, kFloat, kBool };

bool dtypes_ok(const LowerContext& ctx, Types types) {
  if (ctx.opset() < 7 && ctx.attr_int("broadcast", 0) != 0 && ctx.has_attr("axis")) return false;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return false;
    DType d = ctx.in_dtype(i);
    if (!lower::supported_dtype(d) || d != ctx.in_dtype(0)) return false;
    if (types == Types::kFloat && !is_float(d)) return false;
    if (types == Types::kBool && d != DType::kBool) return false;
    if (types == Types::kNum && d == DType::kBool) return false;
    // Numpy (right-aligned) broadcasting only; legacy axis broadcasting runs the reference.
    const auto& in = ctx.in_shape(i);
    const auto& out = ctx.out_shape();
    if (in.size() > out.size()) return false;
    for (size_t k = 0; k < in.size(); ++k)
      if (in[k] != 1 && in[k] != out[k + out.size() - in.size()]) return false;
  }
  return ctx.num_inputs() > 0 && lower::supported_dtype(ctx.out_dtype());
}

Expr read(const LowerContext& ctx, int k, const std::vector<Expr>& i) {
  return te::access(ctx.input(k), lower::broadcast_index(ctx.in_shape(k), ctx.out_shape(), i));
}

// out = fold(f, inputs...) elementwise with broadcasting.
template <ExprKind K, Types T>
LowerResult nary(const LowerContext& ctx) {
  if (!dtypes_ok(ctx, T)) return std::nullopt;
  return std::vector<te::Tensor>{te::compute(ctx.name("out"), ctx.out_dims(),
                                             [&](const std::vector<Expr>& i) {
    Expr acc = read(ctx, 0, i);
    for (int k = 1; k < ctx.num_inputs(); ++k) acc = tir::binary(K, acc, read(ctx, k, i));
    return acc;
  })};
}

LowerResult mean_lower(const LowerContext& ctx) {
  if (!dtypes_ok(ctx, Types::kFloat)) return std::nullopt;
  return std::vector<te::Tensor>{te::compute(ctx.name("out"), ctx.out_dims(),
                                             [&](const std::vector<Expr>& i) {
    Expr acc = read(ctx, 0, i);
    for (int k = 1; k < ctx.num_inputs(); ++k) acc = acc + read(ctx, k, i);
    return acc / lower::constant(ctx.in_dtype(0), static_cast<double>(ctx.num_inputs()));
  })};
}

LowerResult pow_lower(const LowerContext& ctx) {
  if (!dtypes_ok(ctx, Types::kFloat)) return std::nullopt;
  DType dt = ctx.in_dtype(0);
  // x^2 and x^0.5 are common in normalizations; avoid the libm call.
  const Tensor* e = ctx.constant(1);
  return std::vector<te::Tensor>{te::compute(ctx.name("out"), ctx.out_dims(),
                                             [&](const std::vector<Expr>& i) -> Expr {
    Expr x = read(ctx, 0, i);
    if (e && e->numel() == 1 && e->get_double(0) == 2.0) return x * x;
    if (e && e->numel() == 1 && e->get_double(0) == 1.0) return x;
    return tir::call("pow", lower::scalar_type(dt), {x, read(ctx, 1, i)});
  })};
}

LowerResult where_lower(const LowerContext& ctx) {
  if (ctx.num_inputs() != 3 || ctx.in_dtype(0) != DType::kBool || ctx.in_dtype(1) != ctx.in_dtype(2) ||
      !lower::supported_dtype(ctx.in_dtype(1)))
    return std::nullopt;
  for (int i = 0; i < 3; ++i) {
    const auto& in = ctx.in_shape(i);
    const auto& out = ctx.out_shape();
    if (in.size() > out.size()) return std::nullopt;
    for (size_t k = 0; k < in.size(); ++k)
      if (in[k] != 1 && in[k] != out[k + out.size() - in.size()]) return std::nullopt;
  }
  return std::vector<te::Tensor>{te::compute(ctx.name("out"), ctx.out_dims(),
                                             [&](const std::vector<Expr>& i) {
    return tir::select(read(ctx, 0, i), read(ctx, 1, i), read(ctx, 2, i));
  })};
}

LowerResult prelu_lower(const LowerContext& ctx) {
  if (!dtypes_ok(ctx, Types::kFloat) || ctx.in_shape(1).size() > ctx.out_shape().size()) return std::nullopt;
  DType dt = ctx.in_dtype(0);
  return std::vector<te::Tensor>{te::compute(ctx.name("out"), ctx.out_dims(),
                                             [&](const std::vector<Expr>& i) {
    Expr x = read(ctx, 0, i);
    return tir::select(tir::binary(ExprKind::kLT, x, lower::constant(dt, 0)), x * read(ctx, 1, i), x);
  })};
}

// BatchNormalization in inference mode (one output): y = (x - mean) * (scale / sqrt(var + eps)) + B,
// its four [C] operands read at the channel index (dim 1). The passes fold a BatchNormalization
// that follows a Conv into its weights; this runs the others (after a ConvTranspose, an Add, ...).
LowerResult batchnorm_lower(const LowerContext& ctx) {
  if (ctx.num_inputs() != 5 || ctx.output_shapes.size() != 1 || ctx.attr_int("training_mode", 0) != 0)
    return std::nullopt;
  const DType dt = ctx.in_dtype(0);
  const std::vector<int64_t>& xs = ctx.in_shape(0);
  if (!is_float(dt) || !lower::supported_dtype(dt) || ctx.out_dtype() != dt || xs.size() < 2) return std::nullopt;
  for (int k = 1; k < 5; ++k)
    if (!ctx.has_input(k) || ctx.in_dtype(k) != dt || ctx.in_shape(k) != std::vector<int64_t>{xs[1]}) return std::nullopt;
  const Expr eps = lower::constant(dt, ctx.attr_float("epsilon", 1e-5f));
  return std::vector<te::Tensor>{te::compute(ctx.name("out"), ctx.out_dims(), [&](const std::vector<Expr>& i) {
    auto channel = [&](int k) { return te::access(ctx.input(k), {i[1]}); };
    const Expr inv_std = channel(1) / tir::call("sqrt", lower::scalar_type(dt), {channel(4) + eps});
    return (te::access(ctx.input(0), i) - channel(3)) * inv_std + channel(2);
  })};
}

}  // namespace

void add_binary_lowerings(std::vector<LoweringEntry>& t) {
  t.push_back({"", "Add", nary<ExprKind::kAdd, Types::kNum>});
  t.push_back({"", "Sub", nary<ExprKind::kSub, Types::kNum>});
  t.push_back({"", "Mul", nary<ExprKind::kMul, Types::kNum>});
  t.push_back({"", "Div", nary<ExprKind::kDiv, Types::kFloat>});  // integer division by 0 traps
  t.push_back({"", "Pow", pow_lower});
  t.push_back({"", "Max", nary<ExprKind::kMax, Types::kNum>});
  t.push_back({"", "Min", nary<ExprKind::kMin, Types::kNum>});
  t.push_back({"", "Sum", nary<ExprKind::kAdd, Types::kNum>});
  t.push_back({"", "Mean", mean_lower});
  t.push_back({"", "Equal", nary<ExprKind::kEQ, Types::kNum>});
  t.push_back({"", "Less", nary<ExprKind::kLT, Types::kNum>});
  t.push_back({"", "Greater", nary<ExprKind::kGT, Types::kNum>});
  t.push_back({"", "LessOrEqual", nary<ExprKind::kLE, Types::kNum>});
  t.push_back({"", "GreaterOrEqual", nary<ExprKind::kGE, Types::kNum>});
  t.push_back({"", "And", nary<ExprKind::kAnd, Types::kBool>});
  t.push_back({"", "Or", nary<ExprKind::kOr, Types::kBool>});
  t.push_back({"", "Where", where_lower});
  t.push_back({"", "PRelu", prelu_lower});
  t.push_back({"", "BatchNormalization", batchnorm_lower});
}

}  // namespace kiln
