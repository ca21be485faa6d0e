// The nn op family: convolutions and Col2Im (ops/conv.cc), pooling (ops/pool.cc), and here the
// layout/regularization ops DepthToSpace, SpaceToDepth and Dropout.
#include <random>

#include "ops/families.h"
#include "ops/op_util.h"

namespace kiln {

void register_conv_ops(OpRegistry& r);
void register_pool_ops(OpRegistry& r);

namespace {

// ---- DepthToSpace / SpaceToDepth -----------------------------------------------------------

// Element mapping shared by both ops: for a depth-side tensor [b, cd, h, w] and a space-side
// tensor [b, cs, h*bs, w*bs], depth channel of (cs, i, j) is (i*bs + j)*cs_count + cs in DCR mode
// and cs*bs*bs + i*bs + j in CRD mode.
void depth_space(KernelContext& ctx, bool to_space) {
  const Tensor& x = ctx.input(0);
  if (x.rank() != 4)
    ctx.fail(ErrorKind::kBadInput, "input should be 4-D [N, C, H, W], got " + dims_to_string(x.dims()));
  const int64_t bs = ctx.attr_int("blocksize");
  if (bs <= 0) ctx.fail(ErrorKind::kInvalidModel, "blocksize should be positive");
  const std::string mode = ctx.attr_string("mode", "DCR");
  if (mode != "DCR" && mode != "CRD")
    ctx.fail(ErrorKind::kInvalidModel, "mode should be DCR or CRD, got '" + mode + "'");
  const bool crd = mode == "CRD";
  const int64_t n = x.dim(0);
  int64_t cd, cs, h, w;  // depth-side channels, space-side channels, depth-side H and W
  if (to_space) {
    cd = x.dim(1);
    if (cd % (bs * bs) != 0)
      ctx.fail(ErrorKind::kBadInput, "channels " + std::to_string(cd) +
                                         " are not divisible by blocksize^2 = " + std::to_string(bs * bs));
    cs = cd / (bs * bs);
    h = x.dim(2);
    w = x.dim(3);
  } else {
    cs = x.dim(1);
    cd = cs * bs * bs;
    if (x.dim(2) % bs != 0 || x.dim(3) % bs != 0)
      ctx.fail(ErrorKind::kBadInput, "spatial dims " + dims_to_string(x.dims()) +
                                         " are not divisible by blocksize " + std::to_string(bs));
    h = x.dim(2) / bs;
    w = x.dim(3) / bs;
  }
  Tensor y(x.dtype(), to_space ? std::vector<int64_t>{n, cs, h * bs, w * bs}
                               : std::vector<int64_t>{n, cd, h, w});
  visit_dtype_any(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    for (int64_t b = 0; b < n; ++b)
      for (int64_t c = 0; c < cs; ++c)
        for (int64_t i = 0; i < bs; ++i)
          for (int64_t j = 0; j < bs; ++j) {
            const int64_t dc = crd ? c * bs * bs + i * bs + j : (i * bs + j) * cs + c;
            for (int64_t hh = 0; hh < h; ++hh)
              for (int64_t ww = 0; ww < w; ++ww) {
                const int64_t d_off = ((b * cd + dc) * h + hh) * w + ww;
                const int64_t s_off = ((b * cs + c) * h * bs + hh * bs + i) * w * bs + ww * bs + j;
                if (to_space) {
                  yp[s_off] = xp[d_off];
                } else {
                  yp[d_off] = xp[s_off];
                }
              }
          }
  });
  ctx.set_output(0, std::move(y));
}

void depth_to_space_kernel(KernelContext& ctx) { depth_space(ctx, true); }
void space_to_depth_kernel(KernelContext& ctx) { depth_space(ctx, false); }

void infer_depth_space(InferContext& ctx, bool to_space) {
  const Type& xt = ctx.input_type(0);
  const int64_t bs = ctx.attr_int("blocksize", 0);
  if (!xt.shape || xt.shape->rank() != 4 || bs <= 0) {
    ctx.set_output_type(0, Type::tensor(xt.dtype));
    return;
  }
  Shape s = *xt.shape;
  auto scale = [](const Dim& d, int64_t mul, int64_t div) {
    return d.known() && d.value * mul % div == 0 ? Dim(d.value * mul / div) : Dim();
  };
  s.dims[1] = to_space ? scale(s.dims[1], 1, bs * bs) : scale(s.dims[1], bs * bs, 1);
  for (int i = 2; i < 4; ++i) s.dims[i] = to_space ? scale(s.dims[i], bs, 1) : scale(s.dims[i], 1, bs);
  ctx.set_output_type(0, Type::tensor(xt.dtype, s));
}
void infer_depth_to_space(InferContext& ctx) { infer_depth_space(ctx, true); }
void infer_space_to_depth(InferContext& ctx) { infer_depth_space(ctx, false); }

// ---- Dropout -------------------------------------------------------------------------------

void dropout_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  double ratio = 0.5;
  bool training = false;
  if (ctx.opset() >= 12) {
    if (ctx.has_input(1)) {
      const Tensor& r = ctx.input(1);
      if (r.numel() != 1) ctx.fail(ErrorKind::kBadInput, "ratio should be a scalar");
      ratio = r.get_double(0);
    }
    if (ctx.has_input(2)) {
      const Tensor& t = ctx.input(2);
      if (t.numel() != 1) ctx.fail(ErrorKind::kBadInput, "training_mode should be a scalar");
      training = t.get_double(0) != 0;
    }
  }
  // Before opset 12 the op only ran in inference (is_test / ratio attributes only): identity.
  if (training && (ratio < 0 || ratio >= 1))
    ctx.fail(ErrorKind::kBadInput, "ratio should be in [0, 1), got " + std::to_string(ratio));
  const bool want_mask = ctx.num_outputs() > 1 && ctx.wants_output(1);
  const DType mask_type = ctx.opset() >= 10 ? DType::kBool : x.dtype();
  if (!training || ratio == 0) {
    ctx.set_output(0, x);
    if (want_mask) {
      Tensor mask(mask_type, x.dims());
      for (int64_t i = 0; i < mask.numel(); ++i) mask.set_double(i, 1.0);
      ctx.set_output(1, std::move(mask));
    }
    return;
  }
  Tensor y(x.dtype(), x.dims());
  Tensor mask(DType::kBool, x.dims());
  const double scale = 1.0 / (1.0 - ratio);
  bool* mp = mask.data<bool>();
  if (const Attribute* seed = ctx.node().attr("seed")) {
    // With a seed, draw exactly like numpy's RandomState(seed).uniform (MT19937 seeded by
    // init_genrand, 53-bit doubles), which is how the ONNX reference defines the mask.
    const int64_t s = seed->kind == Attribute::Kind::kInt ? seed->i : static_cast<int64_t>(seed->f);
    std::mt19937 gen(static_cast<uint32_t>(s));
    for (int64_t i = 0; i < x.numel(); ++i) {
      const uint32_t a = gen() >> 5, b = gen() >> 6;
      const double u = (a * 67108864.0 + b) / 9007199254740992.0;
      mp[i] = u >= ratio;
    }
  } else {
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    for (int64_t i = 0; i < x.numel(); ++i) mp[i] = uniform(ctx.rng()) >= ratio;
  }
  for (int64_t i = 0; i < x.numel(); ++i) y.set_double(i, mp[i] ? x.get_double(i) * scale : 0.0);
  ctx.set_output(0, std::move(y));
  if (want_mask) ctx.set_output(1, std::move(mask));
}

void infer_dropout(InferContext& ctx) {
  const Type& xt = ctx.input_type(0);
  ctx.set_output_type(0, xt);
  if (ctx.num_outputs() > 1)
    ctx.set_output_type(1, Type::tensor(ctx.opset() >= 10 ? DType::kBool : xt.dtype, xt.shape));
}

}  // namespace

void register_nn_ops(OpRegistry& r) {
  register_conv_ops(r);
  register_pool_ops(r);
  for (int v : {1, 11, 13})
    r.add("DepthToSpace").since(v).inputs(1).outputs(1).kind(PatternKind::kInjective)
        .run(depth_to_space_kernel).shape(infer_depth_to_space);
  for (int v : {1, 13})
    r.add("SpaceToDepth").since(v).inputs(1).outputs(1).kind(PatternKind::kInjective)
        .run(space_to_depth_kernel).shape(infer_space_to_depth);
  for (int v : {1, 6, 7, 10})
    r.add("Dropout").since(v).inputs(1).outputs(1, 2).kind(PatternKind::kElementwise)
        .run(dropout_kernel).shape(infer_dropout).nondeterministic();
  for (int v : {12, 13, 22})
    r.add("Dropout").since(v).inputs(1, 3).outputs(1, 2).kind(PatternKind::kElementwise)
        .run(dropout_kernel).shape(infer_dropout).nondeterministic();
}

}  // namespace kiln
