// kiln's own composite ops (domain "kiln", version 1), produced by the fuse-composites pass from
// the decomposed patterns PyTorch exports:
//   kiln::Gelu(x) {approximate="none"|"tanh"}          0.5*x*(1+erf(x/sqrt2)) or its tanh form
//   kiln::Silu(x)                                      x*sigmoid(x)
//   kiln::HardSwish(x)                                 x*clamp(x/6+0.5, 0, 1)
//   kiln::LayerNorm(x, [scale], [bias]) {axis, epsilon} normalization over axes axis..rank-1
//   kiln::Attention(q, k, v, [mask]) {scale, has_mask}  softmax(q@k^T*scale + mask) @ v
// Attention works on the last two dims; leading dims broadcast like MatMul, the mask like Add.
// Reference kernels compute in double; f16/bf16 go through f32 (via_float).
#include <cmath>

#include "ops/families.h"
#include "ops/op_util.h"
#include "ops/registry.h"
#include "ops/tensor_util.h"

namespace kiln {
namespace {

std::vector<double> to_doubles(const KernelContext& ctx, const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::kFloat32) {
    const float* p = t.data<float>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = p[i];
  } else if (t.dtype() == DType::kFloat64) {
    const double* p = t.data<double>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = p[i];
  } else {
    ctx.fail(ErrorKind::kUnsupported,
             "expected a float tensor, got " + std::string(dtype_name(t.dtype())));
  }
  return out;
}

Tensor from_doubles(const std::vector<double>& v, DType dt, std::vector<int64_t> dims) {
  Tensor t(dt, std::move(dims));
  if (dt == DType::kFloat32) {
    float* p = t.data<float>();
    for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<float>(v[i]);
  } else {
    double* p = t.data<double>();
    for (size_t i = 0; i < v.size(); ++i) p[i] = v[i];
  }
  return t;
}

template <class F>
void unary(KernelContext& ctx, F&& f) {
  const Tensor& x = ctx.input(0);
  std::vector<double> v = to_doubles(ctx, x);
  for (double& e : v) e = f(e);
  ctx.set_output(0, from_doubles(v, x.dtype(), x.dims()));
}

void gelu_kernel(KernelContext& ctx) {
  const std::string mode = ctx.attr_string("approximate", "none");
  if (mode != "none" && mode != "tanh")
    ctx.fail(ErrorKind::kInvalidModel,
             "attribute 'approximate' should be \"none\" or \"tanh\", got \"" + mode + "\"");
  if (mode == "tanh") {
    const double k = std::sqrt(2.0 / M_PI);
    unary(ctx,
          [k](double x) { return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x))); });
  } else {
    unary(ctx, [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); });
  }
}

void silu_kernel(KernelContext& ctx) {
  unary(ctx, [](double x) {
    return x >= 0 ? x / (1.0 + std::exp(-x)) : x * std::exp(x) / (1.0 + std::exp(x));
  });
}

void hard_swish_kernel(KernelContext& ctx) {
  unary(ctx, [](double x) { return x * std::min(1.0, std::max(0.0, x / 6.0 + 0.5)); });
}

// Values of `p` broadcast (right-aligned) to `dims`.
std::vector<double> expand_to(const KernelContext& ctx, const Tensor& p,
                              const std::vector<int64_t>& dims, const char* what) {
  std::vector<int64_t> bd = broadcast_dims(ctx, {p.dims(), dims});
  if (bd != dims)
    ctx.fail(ErrorKind::kBadInput, std::string(what) + " shape " + dims_to_string(p.dims()) +
                                       " does not broadcast to " + dims_to_string(dims));
  std::vector<double> src = to_doubles(ctx, p), out(static_cast<size_t>(checked_numel(dims)));
  for_each_broadcast(dims, {broadcast_strides(p.dims(), dims)},
                     [&](int64_t i, const int64_t* off) { out[i] = src[off[0]]; });
  return out;
}

void layer_norm_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", -1), x.rank());
  const double eps = ctx.attr_float("epsilon", 1e-5f);
  std::vector<int64_t> inner_dims(x.dims().begin() + axis, x.dims().end());
  const int64_t inner = checked_numel(inner_dims);
  const int64_t outer = inner == 0 ? 0 : x.numel() / inner;
  std::vector<double> scale, bias;
  if (ctx.has_input(1)) scale = expand_to(ctx, ctx.input(1), inner_dims, "scale");
  if (ctx.has_input(2)) bias = expand_to(ctx, ctx.input(2), inner_dims, "bias");
  std::vector<double> v = to_doubles(ctx, x);
  for (int64_t o = 0; o < outer; ++o) {
    double* row = v.data() + o * inner;
    double mean = 0, var = 0;
    for (int64_t j = 0; j < inner; ++j) mean += row[j];
    mean /= static_cast<double>(inner);
    for (int64_t j = 0; j < inner; ++j) var += (row[j] - mean) * (row[j] - mean);
    var /= static_cast<double>(inner);
    const double den = std::sqrt(var + eps);
    for (int64_t j = 0; j < inner; ++j) {
      double y = (row[j] - mean) / den;
      if (!scale.empty()) y *= scale[j];
      if (!bias.empty()) y += bias[j];
      row[j] = y;
    }
  }
  ctx.set_output(0, from_doubles(v, x.dtype(), x.dims()));
}

// Batched a @ b (or a @ b^T) with MatMul broadcasting of the leading dims; both rank >= 2.
std::vector<double> batched_matmul(const KernelContext& ctx, const std::vector<double>& a,
                                   const std::vector<int64_t>& ad, const std::vector<double>& b,
                                   const std::vector<int64_t>& bd, bool transpose_b,
                                   std::vector<int64_t>& out_dims) {
  const int64_t m = ad[ad.size() - 2], k = ad.back();
  const int64_t bk = transpose_b ? bd.back() : bd[bd.size() - 2];
  const int64_t n = transpose_b ? bd[bd.size() - 2] : bd.back();
  if (k != bk)
    ctx.fail(ErrorKind::kBadInput, "inner dims differ: " + dims_to_string(ad) + " and " +
                                       dims_to_string(bd) + (transpose_b ? " (transposed)" : ""));
  std::vector<int64_t> ab(ad.begin(), ad.end() - 2), bb(bd.begin(), bd.end() - 2);
  std::vector<int64_t> batch = broadcast_dims(ctx, {ab, bb});
  out_dims = batch;
  out_dims.push_back(m);
  out_dims.push_back(n);
  std::vector<double> out(static_cast<size_t>(checked_numel(out_dims)));
  std::vector<int64_t> as = broadcast_strides(ab, batch), bs = broadcast_strides(bb, batch);
  std::vector<int64_t> batch_dims = batch.empty() ? std::vector<int64_t>{1} : batch;
  if (batch.empty()) as = bs = {0};
  for_each_broadcast(batch_dims, {as, bs}, [&](int64_t bi, const int64_t* off) {
    const double* pa = a.data() + off[0] * m * k;
    const double* pb = b.data() + off[1] * k * n;
    double* po = out.data() + bi * m * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t t = 0; t < k; ++t)
          s += pa[i * k + t] * (transpose_b ? pb[j * k + t] : pb[t * n + j]);
        po[i * n + j] = s;
      }
  });
  return out;
}

void attention_kernel(KernelContext& ctx) {
  const Tensor &q = ctx.input(0), &k = ctx.input(1), &v = ctx.input(2);
  for (const Tensor* t : {&q, &k, &v})
    if (t->rank() < 2) ctx.fail(ErrorKind::kBadInput, "q, k and v need rank >= 2");
  const double scale = ctx.attr_float("scale", 1.f);
  // S1: scores = q @ k^T * scale (+ mask, which may broadcast the scores to more dims).
  std::vector<int64_t> sd;
  std::vector<double> s =
      batched_matmul(ctx, to_doubles(ctx, q), q.dims(), to_doubles(ctx, k), k.dims(), true, sd);
  for (double& e : s) e *= scale;
  if (ctx.attr_int("has_mask", 0) != 0 && ctx.has_input(3)) {
    const Tensor& mask = ctx.input(3);
    std::vector<int64_t> md = broadcast_dims(ctx, {sd, mask.dims()});
    std::vector<double> mv = to_doubles(ctx, mask), sum(static_cast<size_t>(checked_numel(md)));
    for_each_broadcast(md, {broadcast_strides(sd, md), broadcast_strides(mask.dims(), md)},
                       [&](int64_t i, const int64_t* off) { sum[i] = s[off[0]] + mv[off[1]]; });
    s = std::move(sum);
    sd = md;
  }
  // S2: softmax over the last axis.
  const int64_t n = sd.back();
  for (size_t r = 0; n > 0 && r < s.size(); r += static_cast<size_t>(n)) {
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < n; ++j) mx = std::max(mx, s[r + j]);
    for (int64_t j = 0; j < n; ++j) sum += (s[r + j] = std::exp(s[r + j] - mx));
    for (int64_t j = 0; j < n; ++j) s[r + j] /= sum;
  }
  // S3: probabilities @ v.
  std::vector<int64_t> od;
  std::vector<double> o = batched_matmul(ctx, s, sd, to_doubles(ctx, v), v.dims(), false, od);
  ctx.set_output(0, from_doubles(o, q.dtype(), od));
}

// ---- shape inference -----------------------------------------------------------------------

Dim broadcast_dim(const Dim& a, const Dim& b) {
  if (a.known() && a.value == 1) return b;
  if (b.known() && b.value == 1) return a;
  return a == b ? a : Dim();
}

std::vector<Dim> broadcast_shape(const std::vector<Dim>& a, const std::vector<Dim>& b) {
  std::vector<Dim> out(std::max(a.size(), b.size()), Dim(1));
  for (size_t i = 0; i < out.size(); ++i) {
    const Dim da = i < a.size() ? a[a.size() - 1 - i] : Dim(1);
    const Dim db = i < b.size() ? b[b.size() - 1 - i] : Dim(1);
    out[out.size() - 1 - i] = broadcast_dim(da, db);
  }
  return out;
}

void infer_attention(InferContext& ctx) {
  const DType dt = input_dtype(ctx, 0);
  auto q = input_shape(ctx, 0), k = input_shape(ctx, 1), v = input_shape(ctx, 2);
  std::optional<Shape> mask =
      ctx.has_input(3) ? input_shape(ctx, 3) : std::optional<Shape>(Shape());
  if (!q || !k || !v || !mask || q->rank() < 2 || k->rank() < 2 || v->rank() < 2) {
    ctx.set_output_type(0, Type::tensor(dt));
    return;
  }
  std::vector<Dim> s(q->dims.begin(), q->dims.end() - 2);
  s = broadcast_shape(s, std::vector<Dim>(k->dims.begin(), k->dims.end() - 2));
  s.push_back(q->dims[q->rank() - 2]);
  s.push_back(k->dims[k->rank() - 2]);
  s = broadcast_shape(s, mask->dims);
  std::vector<Dim> out(s.begin(), s.end() - 2);
  out = broadcast_shape(out, std::vector<Dim>(v->dims.begin(), v->dims.end() - 2));
  out.push_back(s[s.size() - 2]);
  out.push_back(v->dims.back());
  ctx.set_output_type(0, Type::tensor(dt, Shape(out)));
}

}  // namespace

void register_kiln_composite_ops(OpRegistry& r) {
  const std::pair<const char*, KernelFn> unaries[] = {
      {"Gelu", gelu_kernel}, {"Silu", silu_kernel}, {"HardSwish", hard_swish_kernel}};
  for (const auto& [name, fn] : unaries)
    r.add(name, "kiln")
        .since(1)
        .inputs(1)
        .outputs(1)
        .kind(PatternKind::kElementwise)
        .run(fn)
        .shape(infer_same_as_input0)
        .via_float();
  r.add("LayerNorm", "kiln")
      .since(1)
      .inputs(1, 3)
      .outputs(1)
      .kind(PatternKind::kOpaque)
      .run(layer_norm_kernel)
      .shape(infer_same_as_input0)
      .via_float();
  r.add("Attention", "kiln")
      .since(1)
      .inputs(3, 4)
      .outputs(1)
      .kind(PatternKind::kOpaque)
      .run(attention_kernel)
      .shape(infer_attention)
      .via_float();
}

}  // namespace kiln
