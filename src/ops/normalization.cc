// The normalization op family: BatchNormalization, InstanceNormalization, LayerNormalization,
// GroupNormalization, LRN, MeanVarianceNormalization, LpNormalization. Statistics accumulate
// in double; f16/bf16 run through f32 (via_float).
#include <cmath>

#include "ops/families.h"
#include "ops/op_util.h"

namespace kiln {
namespace {

// Runs f(TypeTag<float|double>) for the float types; fails for others.
template <class F>
void dispatch_float(const KernelContext& ctx, DType t, F&& f) {
  if (t == DType::kFloat32) {
    f(TypeTag<float>{});
  } else if (t == DType::kFloat64) {
    f(TypeTag<double>{});
  } else {
    ctx.fail(ErrorKind::kUnsupported,
             "expected a float tensor, got element type " + std::string(dtype_name(t)));
  }
}

int64_t product_of(const std::vector<int64_t>& dims) {
  int64_t p = 1;
  for (int64_t d : dims) p *= d;
  return p;
}

// f16/bf16 tensors as f32 (for kernels whose other outputs must keep their own types, so the
// interpreter's via_float round trip would convert them wrongly).
Tensor widen_half(const Tensor& t) {
  const bool half = t.dtype() == DType::kFloat16 || t.dtype() == DType::kBFloat16;
  return half ? convert_tensor(t, DType::kFloat32) : t;
}

// All elements of a (numeric) tensor as doubles.
std::vector<double> as_doubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = t.get_double(i);
  return v;
}

// Input i as doubles, checked to hold exactly `n` elements.
std::vector<double> param(const KernelContext& ctx, int i, int64_t n, const char* what) {
  const Tensor& t = ctx.input(i);
  if (t.numel() != n)
    ctx.fail(ErrorKind::kBadInput, std::string(what) + " should have " + std::to_string(n) +
                                       " elements, got shape " + dims_to_string(t.dims()));
  return as_doubles(t);
}

struct Moments {
  double mean = 0, var = 0;
};

template <class T>
Moments moments(const T* x, int64_t n) {
  Moments m;
  if (n == 0) return m;
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]);
  m.mean = sum / static_cast<double>(n);
  double sq = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(x[i]) - m.mean;
    sq += d * d;
  }
  m.var = sq / static_cast<double>(n);
  return m;
}

void require_rank(const KernelContext& ctx, const Tensor& x, int min_rank) {
  if (x.rank() < min_rank)
    ctx.fail(ErrorKind::kBadInput, "input X should have rank >= " + std::to_string(min_rank) +
                                       " (N, C, ...), got " + dims_to_string(x.dims()));
}

// ---- BatchNormalization --------------------------------------------------------------------

void batch_norm_kernel(KernelContext& ctx) {
  const Tensor& x_in = ctx.input(0);
  const Tensor x = widen_half(x_in);
  require_rank(ctx, x, 2);
  const int64_t n = x.dim(0), c = x.dim(1);
  const int64_t inner = c == 0 || n == 0 ? 0 : x.numel() / (n * c);
  const double eps = ctx.attr_float("epsilon", 1e-5f);
  const bool training = ctx.opset() >= 14 && ctx.attr_int("training_mode", 0) != 0;
  std::vector<double> scale = param(ctx, 1, c, "scale");
  std::vector<double> bias = param(ctx, 2, c, "B");
  std::vector<double> mean = param(ctx, 3, c, "input_mean");
  std::vector<double> var = param(ctx, 4, c, "input_var");
  Tensor y(x.dtype(), x.dims());
  std::vector<double> use_mean = mean, use_var = var;
  dispatch_float(ctx, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    if (training) {
      // Batch statistics over every axis but the channel axis (population variance).
      for (int64_t ch = 0; ch < c; ++ch) {
        double sum = 0, sq = 0;
        for (int64_t b = 0; b < n; ++b)
          for (int64_t i = 0; i < inner; ++i) sum += static_cast<double>(xp[(b * c + ch) * inner + i]);
        const double count = static_cast<double>(n * inner);
        const double mu = count > 0 ? sum / count : 0;
        for (int64_t b = 0; b < n; ++b)
          for (int64_t i = 0; i < inner; ++i) {
            const double d = static_cast<double>(xp[(b * c + ch) * inner + i]) - mu;
            sq += d * d;
          }
        use_mean[ch] = mu;
        use_var[ch] = count > 0 ? sq / count : 0;
      }
    }
    for (int64_t ch = 0; ch < c; ++ch) {
      const double a = scale[ch] / std::sqrt(use_var[ch] + eps);
      const double shift = bias[ch] - use_mean[ch] * a;
      for (int64_t b = 0; b < n; ++b) {
        const T* xs = xp + (b * c + ch) * inner;
        T* ys = yp + (b * c + ch) * inner;
        for (int64_t i = 0; i < inner; ++i)
          ys[i] = static_cast<T>(static_cast<double>(xs[i]) * a + shift);
      }
    }
  });
  ctx.set_output(0, convert_tensor(y, x_in.dtype()));
  if (ctx.num_outputs() == 1) return;
  const double momentum = ctx.attr_float("momentum", 0.9f);
  // Running statistics: unchanged in inference mode, blended with the batch in training mode.
  const DType mean_type = ctx.input(3).dtype(), var_type = ctx.input(4).dtype();
  Tensor run_mean(mean_type, {c}), run_var(var_type, {c});
  for (int64_t ch = 0; ch < c; ++ch) {
    run_mean.set_double(ch, training ? mean[ch] * momentum + use_mean[ch] * (1 - momentum) : mean[ch]);
    run_var.set_double(ch, training ? var[ch] * momentum + use_var[ch] * (1 - momentum) : var[ch]);
  }
  if (ctx.wants_output(1)) ctx.set_output(1, run_mean);
  if (ctx.num_outputs() > 2 && ctx.wants_output(2)) ctx.set_output(2, run_var);
  // Opsets before 14 also list saved mean/variance outputs.
  if (ctx.num_outputs() > 3 && ctx.wants_output(3)) ctx.set_output(3, run_mean.clone());
  if (ctx.num_outputs() > 4 && ctx.wants_output(4)) ctx.set_output(4, run_var.clone());
}

// ---- Instance / Group / Layer normalization -------------------------------------------------

// Normalizes `groups` contiguous runs of `len` elements; element j of a run in group g gets
// scale/bias at index param_index(g, j).
template <class T, class P>
void normalize_runs(const T* x, T* y, int64_t groups, int64_t len, double eps,
                    const std::vector<double>& scale, const std::vector<double>& bias,
                    P&& param_index, double* means = nullptr, double* inv_stds = nullptr) {
  for (int64_t g = 0; g < groups; ++g) {
    const T* xs = x + g * len;
    T* ys = y + g * len;
    const Moments m = moments(xs, len);
    const double inv = 1.0 / std::sqrt(m.var + eps);
    if (means) means[g] = m.mean;
    if (inv_stds) inv_stds[g] = inv;
    for (int64_t j = 0; j < len; ++j) {
      const int64_t p = param_index(g, j);
      const double b = bias.empty() ? 0.0 : bias[p];
      ys[j] = static_cast<T>((static_cast<double>(xs[j]) - m.mean) * inv * scale[p] + b);
    }
  }
}

void instance_norm_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  require_rank(ctx, x, 3);
  const int64_t n = x.dim(0), c = x.dim(1);
  const int64_t inner = n * c == 0 ? 0 : x.numel() / (n * c);
  std::vector<double> scale = param(ctx, 1, c, "scale");
  std::vector<double> bias = param(ctx, 2, c, "B");
  const double eps = ctx.attr_float("epsilon", 1e-5f);
  Tensor y(x.dtype(), x.dims());
  dispatch_float(ctx, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    normalize_runs(x.data<T>(), y.data<T>(), n * c, inner, eps, scale, bias,
                   [c](int64_t g, int64_t) { return g % c; });
  });
  ctx.set_output(0, std::move(y));
}

void group_norm_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  require_rank(ctx, x, 2);
  const int64_t n = x.dim(0), c = x.dim(1);
  const int64_t groups = ctx.attr_int("num_groups");
  if (groups <= 0 || c % groups != 0)
    ctx.fail(ErrorKind::kBadInput, "num_groups (" + std::to_string(groups) +
                                       ") should be positive and divide the channel count " +
                                       std::to_string(c));
  const int64_t spatial = n * c == 0 ? 0 : x.numel() / (n * c);
  const int64_t cpg = c / groups;
  // Opset 18 documented per-group scale/bias, opset 21 per-channel; accept either by size.
  const int64_t pn = ctx.input(1).numel();
  if (pn != c && pn != groups)
    ctx.fail(ErrorKind::kBadInput, "scale should have " + std::to_string(c) + " (channels) or " +
                                       std::to_string(groups) + " (groups) elements, got " +
                                       std::to_string(pn));
  std::vector<double> scale = param(ctx, 1, pn, "scale");
  std::vector<double> bias = param(ctx, 2, pn, "bias");
  const bool per_channel = pn == c;
  const double eps = ctx.attr_float("epsilon", 1e-5f);
  Tensor y(x.dtype(), x.dims());
  dispatch_float(ctx, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    normalize_runs(x.data<T>(), y.data<T>(), n * groups, cpg * spatial, eps, scale, bias,
                   [&](int64_t g, int64_t j) {
                     const int64_t grp = g % groups;
                     return per_channel ? grp * cpg + (spatial ? j / spatial : 0) : grp;
                   });
  });
  ctx.set_output(0, std::move(y));
}

// Expands a parameter tensor to `inner` doubles by unidirectional broadcast to `dims`.
std::vector<double> expand_param(const KernelContext& ctx, const Tensor& p,
                                 const std::vector<int64_t>& dims, const char* what) {
  if (p.rank() > static_cast<int>(dims.size()))
    ctx.fail(ErrorKind::kBadInput, std::string(what) + " shape " + dims_to_string(p.dims()) +
                                       " does not broadcast to " + dims_to_string(dims));
  for (int i = 0; i < p.rank(); ++i) {
    const int64_t d = p.dim(p.rank() - 1 - i), o = dims[dims.size() - 1 - i];
    if (d != 1 && d != o)
      ctx.fail(ErrorKind::kBadInput, std::string(what) + " shape " + dims_to_string(p.dims()) +
                                         " does not broadcast to " + dims_to_string(dims));
  }
  std::vector<double> src = as_doubles(p), out(static_cast<size_t>(product_of(dims)));
  std::vector<std::vector<int64_t>> strides = {broadcast_strides(p.dims(), dims)};
  for_each_broadcast(dims, strides, [&](int64_t i, const int64_t* off) { out[i] = src[off[0]]; });
  return out;
}

void layer_norm_kernel(KernelContext& ctx) {
  const Tensor& x_in = ctx.input(0);
  const Tensor x = widen_half(x_in);
  const int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", -1), x.rank());
  const double eps = ctx.attr_float("epsilon", 1e-5f);
  std::vector<int64_t> inner_dims(x.dims().begin() + axis, x.dims().end());
  int64_t inner = 1;
  for (int64_t d : inner_dims) inner *= d;
  const int64_t outer = inner == 0 ? 0 : x.numel() / inner;
  std::vector<double> scale = expand_param(ctx, ctx.input(1), inner_dims, "Scale");
  std::vector<double> bias;
  if (ctx.has_input(2)) bias = expand_param(ctx, ctx.input(2), inner_dims, "B");
  std::vector<double> means(static_cast<size_t>(outer)), inv_stds(static_cast<size_t>(outer));
  Tensor y(x.dtype(), x.dims());
  dispatch_float(ctx, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    normalize_runs(x.data<T>(), y.data<T>(), outer, inner, eps, scale, bias,
                   [](int64_t, int64_t j) { return j; }, means.data(), inv_stds.data());
  });
  ctx.set_output(0, convert_tensor(y, x_in.dtype()));
  std::vector<int64_t> stat_dims = x.dims();
  for (size_t i = static_cast<size_t>(axis); i < stat_dims.size(); ++i) stat_dims[i] = 1;
  const DType stat_type = x.dtype() == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
  for (int out = 1; out <= 2; ++out) {
    if (ctx.num_outputs() <= out || !ctx.wants_output(out)) continue;
    Tensor t(stat_type, stat_dims);
    const auto& src = out == 1 ? means : inv_stds;
    for (int64_t i = 0; i < outer; ++i) t.set_double(i, src[i]);
    ctx.set_output(out, std::move(t));
  }
}

// ---- LRN, MeanVarianceNormalization, LpNormalization ----------------------------------------

void lrn_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  require_rank(ctx, x, 2);
  const int64_t size = ctx.attr_int("size");
  if (size <= 0) ctx.fail(ErrorKind::kInvalidModel, "size should be positive");
  const double alpha = ctx.attr_float("alpha", 1e-4f), beta = ctx.attr_float("beta", 0.75f);
  const double bias = ctx.attr_float("bias", 1.0f);
  const int64_t n = x.dim(0), c = x.dim(1);
  const int64_t inner = n * c == 0 ? 0 : x.numel() / (n * c);
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  Tensor y(x.dtype(), x.dims());
  dispatch_float(ctx, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    for (int64_t b = 0; b < n; ++b)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t i = 0; i < inner; ++i) {
          double sq = 0;
          for (int64_t k = std::max<int64_t>(0, ch - before); k <= std::min(c - 1, ch + after); ++k) {
            const double v = static_cast<double>(xp[(b * c + k) * inner + i]);
            sq += v * v;
          }
          const int64_t at = (b * c + ch) * inner + i;
          yp[at] = static_cast<T>(static_cast<double>(xp[at]) /
                                  std::pow(bias + alpha / static_cast<double>(size) * sq, beta));
        }
  });
  ctx.set_output(0, std::move(y));
}

void mvn_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> axes = normalize_axes(ctx, ctx.attr_ints("axes", {0, 2, 3}), x.rank());
  std::vector<int64_t> red = x.dims();
  for (int64_t a : axes) red[a] = 1;
  const int64_t red_n = product_of(red);
  const double count = red_n == 0 ? 0 : static_cast<double>(x.numel()) / static_cast<double>(red_n);
  std::vector<std::vector<int64_t>> strides = {broadcast_strides(red, x.dims())};
  std::vector<double> sum(static_cast<size_t>(red_n)), sq(static_cast<size_t>(red_n));
  Tensor y(x.dtype(), x.dims());
  dispatch_float(ctx, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    for_each_broadcast(x.dims(), strides, [&](int64_t i, const int64_t* off) {
      const double v = static_cast<double>(xp[i]);
      sum[off[0]] += v;
      sq[off[0]] += v * v;
    });
    for (int64_t r = 0; r < red_n; ++r) {
      sum[r] /= count;
      // E[x^2] - E[x]^2 as the ONNX function body defines it, clamped against rounding.
      sq[r] = std::sqrt(std::max(0.0, sq[r] / count - sum[r] * sum[r])) + 1e-9;
    }
    for_each_broadcast(x.dims(), strides, [&](int64_t i, const int64_t* off) {
      yp[i] = static_cast<T>((static_cast<double>(xp[i]) - sum[off[0]]) / sq[off[0]]);
    });
  });
  ctx.set_output(0, std::move(y));
}

void lp_norm_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", -1), x.rank());
  const int64_t p = ctx.attr_int("p", 2);
  if (p != 1 && p != 2) ctx.fail(ErrorKind::kInvalidModel, "p should be 1 or 2, got " + std::to_string(p));
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= x.dim(static_cast<int>(i));
  for (int i = static_cast<int>(axis) + 1; i < x.rank(); ++i) inner *= x.dim(i);
  const int64_t len = x.rank() == 0 ? 1 : x.dim(static_cast<int>(axis));
  Tensor y(x.dtype(), x.dims());
  dispatch_float(ctx, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t base = o * len * inner + i;
        double norm = 0;
        for (int64_t k = 0; k < len; ++k) {
          const double v = static_cast<double>(xp[base + k * inner]);
          norm += p == 1 ? std::fabs(v) : v * v;
        }
        if (p == 2) norm = std::sqrt(norm);
        for (int64_t k = 0; k < len; ++k)
          yp[base + k * inner] =
              norm == 0 ? T(0) : static_cast<T>(static_cast<double>(xp[base + k * inner]) / norm);
      }
  });
  ctx.set_output(0, std::move(y));
}

// ---- shape inference -----------------------------------------------------------------------

void infer_batch_norm(InferContext& ctx) {
  ctx.set_output_type(0, ctx.input_type(0));
  for (int i = 1; i < ctx.num_outputs(); ++i)
    if (ctx.has_input(3)) ctx.set_output_type(i, ctx.input_type(i % 2 == 1 ? 3 : 4));
}

void infer_layer_norm(InferContext& ctx) {
  const Type& xt = ctx.input_type(0);
  ctx.set_output_type(0, xt);
  if (ctx.num_outputs() <= 1) return;
  const DType st = xt.dtype == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
  std::optional<Shape> s;
  if (xt.shape) {
    const int64_t r = static_cast<int64_t>(xt.shape->rank());
    int64_t axis = ctx.attr_int("axis", -1);
    if (axis < 0) axis += r;
    if (axis >= 0 && axis < r) {
      s = *xt.shape;
      for (int64_t i = axis; i < r; ++i) s->dims[i] = Dim(1);
    }
  }
  for (int i = 1; i < ctx.num_outputs(); ++i) ctx.set_output_type(i, Type::tensor(st, s));
}

}  // namespace

void register_normalization_ops(OpRegistry& r) {
  for (int v : {1, 6, 7, 9, 14, 15})
    r.add("BatchNormalization").since(v).inputs(5).outputs(1, 5).kind(PatternKind::kBroadcast)
        .run(batch_norm_kernel).shape(infer_batch_norm);
  for (int v : {1, 6, 22})
    r.add("InstanceNormalization").since(v).inputs(3).outputs(1).kind(PatternKind::kOpaque)
        .run(instance_norm_kernel).shape(infer_same_as_input0).via_float();
  r.add("LayerNormalization").since(17).inputs(2, 3).outputs(1, 3).kind(PatternKind::kOpaque)
      .run(layer_norm_kernel).shape(infer_layer_norm);
  for (int v : {18, 21})
    r.add("GroupNormalization").since(v).inputs(3).outputs(1).kind(PatternKind::kOpaque)
        .run(group_norm_kernel).shape(infer_same_as_input0).via_float();
  for (int v : {1, 13})
    r.add("LRN").since(v).inputs(1).outputs(1).kind(PatternKind::kOpaque)
        .run(lrn_kernel).shape(infer_same_as_input0).via_float();
  for (int v : {9, 13})
    r.add("MeanVarianceNormalization").since(v).inputs(1).outputs(1)
        .kind(PatternKind::kOpaque).run(mvn_kernel).shape(infer_same_as_input0).via_float();
  for (int v : {1, 22})
    r.add("LpNormalization").since(v).inputs(1).outputs(1).kind(PatternKind::kOpaque)
        .run(lp_norm_kernel).shape(infer_same_as_input0).via_float();
}

}  // namespace kiln
