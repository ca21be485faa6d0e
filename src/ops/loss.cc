// Loss functions: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (registered from
// register_extra_ops in ops/generator.cc).
#include <cmath>

#include "ops/op_util.h"
#include "ops/tensor_util.h"

namespace kiln {
namespace {

// Shared tail of both losses: `logp` is [N, C, D] log-probabilities (row-major, D the product of
// the trailing dims), target [N, D]. Writes the per-element or reduced loss as output 0.
template <class T>
void nll_from_log_prob(KernelContext& ctx, const T* logp, const std::vector<int64_t>& x_dims,
                       const Tensor& target, DType dt) {
  const int64_t n = x_dims[0], c = x_dims[1];
  int64_t d = 1;
  for (size_t i = 2; i < x_dims.size(); ++i) d *= x_dims[i];
  std::vector<int64_t> want(x_dims);
  want.erase(want.begin() + 1);
  if (target.dims() != want)
    ctx.fail(ErrorKind::kBadInput, "target should have shape " + ints_to_string(want) +
                                       ", got " + type_string(target));
  if (!is_integer(target.dtype()))
    ctx.fail(ErrorKind::kBadInput, "target should be an integer tensor, got " +
                                       type_string(target));
  const std::string reduction = ctx.attr_string("reduction", "mean");
  if (reduction != "mean" && reduction != "sum" && reduction != "none")
    ctx.fail(ErrorKind::kInvalidModel, "reduction should be none, sum or mean, got '" +
                                           reduction + "'");
  const bool has_ii = ctx.has_attr("ignore_index");
  const int64_t ii = ctx.attr_int("ignore_index", 0);
  const Tensor* weight = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  if (weight && (weight->rank() != 1 || weight->dim(0) != c))
    ctx.fail(ErrorKind::kBadInput, "weight should have shape [" + std::to_string(c) + "], got " +
                                       type_string(*weight));
  std::vector<double> loss(static_cast<size_t>(n * d));
  double loss_sum = 0, weight_sum = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < d; ++j) {
      const int64_t t = target.get_int(i * d + j);
      double l = 0, w = 0;
      if (!(has_ii && t == ii)) {
        if (t < 0 || t >= c)
          ctx.fail(ErrorKind::kBadInput, "target value " + std::to_string(t) +
                                             " is outside [0, " + std::to_string(c) + ")");
        w = weight ? weight->get_double(t) : 1.0;
        l = -static_cast<double>(logp[(i * c + t) * d + j]) * w;
      }
      loss[static_cast<size_t>(i * d + j)] = l;
      loss_sum += l;
      weight_sum += w;
    }
  Tensor out;
  if (reduction == "none") {
    out = Tensor(dt, want);
    T* o = out.data<T>();
    for (size_t i = 0; i < loss.size(); ++i) o[i] = static_cast<T>(loss[i]);
  } else {
    out = Tensor(dt, {});
    double v = loss_sum;
    // Unweighted mean without ignore_index is a plain mean; otherwise it divides by the weights.
    if (reduction == "mean") v = loss_sum / (weight || has_ii ? weight_sum : double(n * d));
    out.data<T>()[0] = static_cast<T>(v);
  }
  ctx.set_output(0, std::move(out));
}

void check_input(KernelContext& ctx, const Tensor& x) {
  if (x.rank() < 2)
    ctx.fail(ErrorKind::kBadInput, "input should be [N, C, d1, ...], got " + type_string(x));
}

void nll_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  check_input(ctx, x);
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      nll_from_log_prob<T>(ctx, x.data<T>(), x.dims(), ctx.input(1), x.dtype());
    } else {
      ctx.fail(ErrorKind::kUnsupported, "NegativeLogLikelihoodLoss needs float input");
    }
  });
}

void sce_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  check_input(ctx, x);
  const int64_t n = x.dim(0), c = x.dim(1);
  const int64_t d = n * c == 0 ? 0 : x.numel() / (n * c);
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      Tensor logp(x.dtype(), x.dims());
      const T* s = x.data<T>();
      T* lp = logp.data<T>();
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < d; ++j) {
          const T* row = s + i * c * d + j;
          double mx = -INFINITY;
          for (int64_t k = 0; k < c; ++k) mx = std::max(mx, static_cast<double>(row[k * d]));
          double sum = 0;
          for (int64_t k = 0; k < c; ++k) sum += std::exp(static_cast<double>(row[k * d]) - mx);
          const double lse = mx + std::log(sum);
          for (int64_t k = 0; k < c; ++k)
            lp[i * c * d + k * d + j] = static_cast<T>(static_cast<double>(row[k * d]) - lse);
        }
      nll_from_log_prob<T>(ctx, lp, x.dims(), ctx.input(1), x.dtype());
      if (ctx.num_outputs() > 1 && ctx.wants_output(1)) ctx.set_output(1, std::move(logp));
    } else {
      ctx.fail(ErrorKind::kUnsupported, "SoftmaxCrossEntropyLoss needs float input");
    }
  });
}

void infer_loss(InferContext& ctx) {
  const DType dt = input_dtype(ctx, 0);
  std::optional<Shape> s;
  if (ctx.attr_string("reduction", "mean") != "none") s = Shape();
  else if (auto t = input_shape(ctx, 1)) s = t;
  ctx.set_output_type(0, Type::tensor(dt, s));
  if (ctx.num_outputs() > 1) ctx.set_output_type(1, Type::tensor(dt, input_shape(ctx, 0)));
}

}  // namespace

void register_loss_ops(OpRegistry& r) {
  r.add("NegativeLogLikelihoodLoss").since(12).inputs(2, 3).outputs(1).run(nll_kernel)
      .shape(infer_loss).via_float();
  r.add("SoftmaxCrossEntropyLoss").since(12).inputs(2, 3).outputs(1, 2).run(sce_kernel)
      .shape(infer_loss).via_float();
}

}  // namespace kiln
