// ai.onnx.preview.training optimizers: Momentum, Adam, Adagrad (one update step each, over n
// tensors at once); Gradient is registered but unsupported (it needs autodiff).
#include <cmath>

#include "ops/op_util.h"
#include "ops/tensor_util.h"

namespace kiln {
namespace {

constexpr const char* kTraining = "ai.onnx.preview.training";

// Inputs are R, T, then `groups` lists of n tensors each (X..., G..., state...); outputs are
// `groups - 1` lists of n tensors (X_new..., state_new...).
int64_t tensors_per_group(KernelContext& ctx, int groups) {
  const int rest = ctx.num_inputs() - 2;
  if (rest <= 0 || rest % groups != 0)
    ctx.fail(ErrorKind::kInvalidModel, "expected R, T and " + std::to_string(groups) +
                                           " lists of equal length, got " +
                                           std::to_string(ctx.num_inputs()) + " inputs");
  const int n = rest / groups;
  if (ctx.num_outputs() != n * (groups - 1))
    ctx.fail(ErrorKind::kInvalidModel, "expected " + std::to_string(n * (groups - 1)) +
                                           " outputs, got " + std::to_string(ctx.num_outputs()));
  for (int g = 1; g < groups; ++g)
    for (int i = 0; i < n; ++i)
      if (ctx.input(2 + g * n + i).dims() != ctx.input(2 + i).dims())
        ctx.fail(ErrorKind::kBadInput, "input " + std::to_string(2 + g * n + i) + " " +
                                           type_string(ctx.input(2 + g * n + i)) +
                                           " does not match X " + type_string(ctx.input(2 + i)));
  return n;
}

double scalar(KernelContext& ctx, int i) {
  const Tensor& t = ctx.input(i);
  if (t.numel() != 1)
    ctx.fail(ErrorKind::kBadInput, "input #" + std::to_string(i) + " should be a scalar, got " +
                                       type_string(t));
  return t.get_double(0);
}

// Applies f(x, g, s0, s1, &x_new, &s0_new, &s1_new) elementwise for every tensor of the list.
template <int kStates, class F>
void update(KernelContext& ctx, F&& f) {
  const int groups = 2 + kStates;
  const int n = static_cast<int>(tensors_per_group(ctx, groups));
  for (int i = 0; i < n; ++i) {
    const Tensor& x = ctx.input(2 + i);
    std::vector<Tensor> outs;
    for (int s = 0; s <= kStates; ++s) {  // X_new, then each state; G has no output
      const int group = s == 0 ? 0 : s + 1;
      outs.emplace_back(ctx.input(2 + group * n + i).dtype(), x.dims());
    }
    for (int64_t e = 0; e < x.numel(); ++e) {
      double in[2 + kStates], out[1 + kStates];
      for (int g = 0; g < groups; ++g) in[g] = ctx.input(2 + g * n + i).get_double(e);
      f(in, out);
      for (int s = 0; s <= kStates; ++s) outs[static_cast<size_t>(s)].set_double(e, out[s]);
    }
    for (int s = 0; s <= kStates; ++s)
      ctx.set_output(s * n + i, std::move(outs[static_cast<size_t>(s)]));
  }
}

void momentum_kernel(KernelContext& ctx) {
  const double r = scalar(ctx, 0);
  const double t = scalar(ctx, 1);
  const double alpha = ctx.attr_float("alpha", 0), beta = ctx.attr_float("beta", 0);
  const double norm = ctx.attr_float("norm_coefficient", 0);
  const std::string mode = ctx.attr_string("mode", "standard");
  if (mode != "standard" && mode != "nesterov")
    ctx.fail(ErrorKind::kInvalidModel, "mode should be standard or nesterov, got '" + mode + "'");
  const bool nesterov = mode == "nesterov";
  const double beta_adj = t > 0 ? beta : 1.0;  // the first step takes the whole gradient
  update<1>(ctx, [&](const double* in, double* out) {
    const double g = norm * in[0] + in[1];
    const double v = alpha * in[2] + beta_adj * g;
    out[0] = nesterov ? in[0] - r * (g + alpha * v) : in[0] - r * v;
    out[1] = v;
  });
}

void adagrad_kernel(KernelContext& ctx) {
  const double r = scalar(ctx, 0);
  const double t = scalar(ctx, 1);
  const double decay = ctx.attr_float("decay_factor", 0);
  const double eps = ctx.attr_float("epsilon", 1e-6f);
  const double norm = ctx.attr_float("norm_coefficient", 0);
  const double rate = r / (1 + t * decay);
  update<1>(ctx, [&](const double* in, double* out) {
    const double g = norm * in[0] + in[1];
    const double h = in[2] + g * g;
    out[0] = in[0] - rate * g / (std::sqrt(h) + eps);
    out[1] = h;
  });
}

void adam_kernel(KernelContext& ctx) {
  const double r = scalar(ctx, 0);
  const double t = scalar(ctx, 1);
  const double alpha = ctx.attr_float("alpha", 0.9f), beta = ctx.attr_float("beta", 0.999f);
  const double eps = ctx.attr_float("epsilon", 1e-6f);
  const double norm = ctx.attr_float("norm_coefficient", 0);
  const double norm_post = ctx.attr_float("norm_coefficient_post", 0);
  // Bias correction of both momentums applies from the first counted step on.
  const double rate =
      t > 0 ? r * std::sqrt(1 - std::pow(beta, t)) / (1 - std::pow(alpha, t)) : r;
  update<2>(ctx, [&](const double* in, double* out) {
    const double g = norm * in[0] + in[1];
    const double v = alpha * in[2] + (1 - alpha) * g;
    const double h = beta * in[3] + (1 - beta) * g * g;
    const double x = in[0] - rate * (v / (std::sqrt(h) + eps));
    out[0] = (1 - norm_post) * x;
    out[1] = v;
    out[2] = h;
  });
}

void gradient_kernel(KernelContext& ctx) {
  ctx.fail(ErrorKind::kUnsupported,
           "Gradient needs automatic differentiation (training), planned");
}

}  // namespace

void register_training_ops(OpRegistry& r) {
  r.add("Momentum", kTraining).since(1).inputs(5, -1).outputs(2, -1).run(momentum_kernel)
      .via_float();
  r.add("Adagrad", kTraining).since(1).inputs(5, -1).outputs(2, -1).run(adagrad_kernel)
      .via_float();
  r.add("Adam", kTraining).since(1).inputs(6, -1).outputs(3, -1).run(adam_kernel).via_float();
  r.add("Gradient", kTraining).since(1).inputs(1, -1).outputs(1, -1).run(gradient_kernel);
}

}  // namespace kiln
