// Random generators: RandomUniform(Like), RandomNormal(Like), Multinomial, Bernoulli. Draws come
// from the session generator, or from a private one seeded by the node's `seed` attribute.
#include <bit>
#include <cmath>
#include <random>

#include "ops/families.h"
#include "ops/op_util.h"

namespace kiln {
namespace {

// Runs f(engine) with the engine this node should draw from.
template <class F>
void with_engine(KernelContext& ctx, F&& f) {
  if (ctx.has_attr("seed")) {
    std::mt19937_64 engine(std::bit_cast<uint32_t>(ctx.attr_float("seed", 0.f)));
    f(engine);
  } else {
    f(ctx.rng());
  }
}

DType float_dtype_attr(const AttrReader& at, DType fallback) {
  if (!at.has_attr("dtype")) return fallback;
  const auto code = static_cast<int32_t>(at.attr_int("dtype"));
  const DType dt = static_cast<DType>(code);
  if (!dtype_is_valid(code) || !(dt == DType::kFloat16 || dt == DType::kFloat32 ||
                                 dt == DType::kFloat64 || dt == DType::kBFloat16))
    at.fail(ErrorKind::kInvalidModel,
            "dtype should be a float type, got code " + std::to_string(code));
  return dt;
}

std::vector<int64_t> shape_attr(const AttrReader& at) {
  if (!at.has_attr("shape")) at.fail(ErrorKind::kInvalidModel, "missing attribute 'shape'");
  std::vector<int64_t> dims = at.attr_ints("shape");
  for (int64_t d : dims)
    if (d < 0) at.fail(ErrorKind::kInvalidModel, "negative size in shape " + dims_to_string(dims));
  checked_numel(dims);
  return dims;
}

void fill_uniform(KernelContext& ctx, Tensor& out) {
  const double lo = ctx.attr_float("low", 0.f), hi = ctx.attr_float("high", 1.f);
  if (!(lo <= hi)) ctx.fail(ErrorKind::kInvalidModel, "low must not exceed high");
  with_engine(ctx, [&](std::mt19937_64& e) {
    std::uniform_real_distribution<double> dist(lo, hi);
    for (int64_t i = 0; i < out.numel(); ++i) out.set_double(i, dist(e));
  });
}

void fill_normal(KernelContext& ctx, Tensor& out) {
  const double mean = ctx.attr_float("mean", 0.f), scale = ctx.attr_float("scale", 1.f);
  if (!(scale >= 0)) ctx.fail(ErrorKind::kInvalidModel, "scale must be >= 0");
  with_engine(ctx, [&](std::mt19937_64& e) {
    std::normal_distribution<double> dist(mean, scale);
    for (int64_t i = 0; i < out.numel(); ++i) out.set_double(i, dist(e));
  });
}

void random_uniform_kernel(KernelContext& ctx) {
  Tensor out(float_dtype_attr(ctx, DType::kFloat32), shape_attr(ctx));
  fill_uniform(ctx, out);
  ctx.set_output(0, std::move(out));
}

void random_normal_kernel(KernelContext& ctx) {
  Tensor out(float_dtype_attr(ctx, DType::kFloat32), shape_attr(ctx));
  fill_normal(ctx, out);
  ctx.set_output(0, std::move(out));
}

void random_uniform_like_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor out(float_dtype_attr(ctx, x.dtype()), x.dims());
  fill_uniform(ctx, out);
  ctx.set_output(0, std::move(out));
}

void random_normal_like_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor out(float_dtype_attr(ctx, x.dtype()), x.dims());
  fill_normal(ctx, out);
  ctx.set_output(0, std::move(out));
}

DType multinomial_dtype(const AttrReader& at) {
  const DType dt = static_cast<DType>(at.attr_int("dtype", static_cast<int64_t>(DType::kInt32)));
  if (dt != DType::kInt32 && dt != DType::kInt64)
    at.fail(ErrorKind::kInvalidModel, "Multinomial dtype should be int32 or int64");
  return dt;
}

void multinomial_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() != 2 || !is_float(x.dtype()))
    ctx.fail(ErrorKind::kBadInput, "input should be a float [batch, classes] tensor, got " +
                                       std::string(dtype_name(x.dtype())) +
                                       dims_to_string(x.dims()));
  const int64_t samples = ctx.attr_int("sample_size", 1);
  if (samples < 0) ctx.fail(ErrorKind::kInvalidModel, "sample_size must be >= 0");
  const int64_t batch = x.dim(0), classes = x.dim(1);
  Tensor out(multinomial_dtype(ctx), {batch, samples});
  if (classes == 0 && batch * samples > 0)
    ctx.fail(ErrorKind::kBadInput, "cannot sample from zero classes");
  with_engine(ctx, [&](std::mt19937_64& e) {
    std::uniform_real_distribution<double> u(0.0, 1.0);
    std::vector<double> cdf(static_cast<size_t>(classes));
    for (int64_t b = 0; b < batch; ++b) {
      // Input rows are unnormalized log-probabilities.
      double mx = -INFINITY;
      for (int64_t c = 0; c < classes; ++c) mx = std::max(mx, x.get_double(b * classes + c));
      double acc = 0;
      for (int64_t c = 0; c < classes; ++c) {
        const double v = x.get_double(b * classes + c);
        acc += std::isfinite(mx) ? std::exp(v - mx) : 1.0;
        cdf[static_cast<size_t>(c)] = acc;
      }
      for (int64_t s = 0; s < samples; ++s) {
        const double r = u(e) * acc;
        int64_t c = 0;
        while (c + 1 < classes && cdf[static_cast<size_t>(c)] <= r) ++c;
        out.set_double(b * samples + s, static_cast<double>(c));
      }
    }
  });
  ctx.set_output(0, std::move(out));
}

void bernoulli_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  DType dt = x.dtype();
  if (ctx.has_attr("dtype")) {
    const auto code = static_cast<int32_t>(ctx.attr_int("dtype"));
    if (!dtype_is_valid(code) || code == 0 || static_cast<DType>(code) == DType::kString)
      ctx.fail(ErrorKind::kInvalidModel, "invalid dtype code " + std::to_string(code));
    dt = static_cast<DType>(code);
  }
  Tensor out(dt, x.dims());
  with_engine(ctx, [&](std::mt19937_64& e) {
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double p = x.get_double(i);
      if (!(p >= 0.0 && p <= 1.0))
        ctx.fail(ErrorKind::kBadInput,
                 "Bernoulli probability " + std::to_string(p) + " is outside [0, 1]");
      out.set_double(i, u(e) < p ? 1.0 : 0.0);
    }
  });
  ctx.set_output(0, std::move(out));
}

// ---- Static inference ----------------------------------------------------------------------

void infer_random(InferContext& ctx) {
  if (!ctx.has_attr("shape")) return;
  std::vector<int64_t> dims = ctx.attr_ints("shape");
  Shape s;
  for (int64_t d : dims) s.dims.push_back(d >= 0 ? Dim(d) : Dim());
  const auto code = static_cast<int32_t>(ctx.attr_int("dtype", 1));
  ctx.set_output_type(
      0, Type::tensor(dtype_is_valid(code) ? static_cast<DType>(code) : DType::kUndefined, s));
}

void infer_random_like(InferContext& ctx) {
  Type t = ctx.input_type(0);
  if (ctx.has_attr("dtype")) {
    const auto code = static_cast<int32_t>(ctx.attr_int("dtype"));
    t.dtype = dtype_is_valid(code) ? static_cast<DType>(code) : DType::kUndefined;
  }
  ctx.set_output_type(0, t);
}

void infer_multinomial(InferContext& ctx) {
  const Type& x = ctx.input_type(0);
  const auto code = static_cast<int32_t>(ctx.attr_int("dtype", 6));
  Shape s({Dim(), Dim(ctx.attr_int("sample_size", 1))});
  if (x.shape && x.shape->rank() == 2) s.dims[0] = x.shape->dims[0];
  ctx.set_output_type(
      0, Type::tensor(dtype_is_valid(code) ? static_cast<DType>(code) : DType::kUndefined, s));
}

}  // namespace

void register_random_ops(OpRegistry& r) {
  r.add("RandomUniform")
      .since(1)
      .inputs(0)
      .outputs(1)
      .run(random_uniform_kernel)
      .shape(infer_random).nondeterministic();
  r.add("RandomNormal").since(1).inputs(0).outputs(1).run(random_normal_kernel).shape(infer_random).nondeterministic();
  r.add("RandomUniformLike")
      .since(1)
      .inputs(1)
      .outputs(1)
      .run(random_uniform_like_kernel)
      .shape(infer_random_like).nondeterministic();
  r.add("RandomNormalLike")
      .since(1)
      .inputs(1)
      .outputs(1)
      .run(random_normal_like_kernel)
      .shape(infer_random_like).nondeterministic();
  r.add("Multinomial")
      .since(7)
      .inputs(1)
      .outputs(1)
      .run(multinomial_kernel)
      .shape(infer_multinomial).nondeterministic();
  r.add("Bernoulli").since(15).inputs(1).outputs(1).run(bernoulli_kernel).shape(infer_random_like).nondeterministic();
}

}  // namespace kiln
