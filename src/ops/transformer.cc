// Transformer building blocks next to attention: RMSNormalization, RotaryEmbedding, SwiGLU and
// CausalConvWithState. Math in double; f16/bf16 go through f32 (via_float).
#include <cmath>

#include "ops/families.h"
#include "ops/op_util.h"

namespace kiln {
namespace {

void require_float(const KernelContext& ctx, const Tensor& t, const char* what) {
  if (t.dtype() != DType::kFloat32 && t.dtype() != DType::kFloat64)
    ctx.fail(ErrorKind::kUnsupported, std::string(what) + " should be a float tensor, got " +
                                          std::string(dtype_name(t.dtype())));
}

// Calls f(TypeTag<float|double>) for the tensor's float type.
template <class F>
void dispatch_float(const KernelContext& ctx, const Tensor& t, const char* what, F&& f) {
  require_float(ctx, t, what);
  if (t.dtype() == DType::kFloat32) f(TypeTag<float>{}); else f(TypeTag<double>{});
}

// ---- RMSNormalization ----------------------------------------------------------------------

void rms_norm_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  if (ctx.attr_int("stash_type", 1) != 1)
    ctx.fail(ErrorKind::kUnsupported, "only stash_type 1 (float) is supported");
  const int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", -1), x.rank());
  const double eps = ctx.attr_float("epsilon", 1e-5f);
  if (scale.dtype() != x.dtype())
    ctx.fail(ErrorKind::kBadInput, "scale should have X's element type");
  std::vector<int64_t> sdims = scale.dims();
  if (sdims.size() > x.dims().size())
    ctx.fail(ErrorKind::kBadInput, "scale " + dims_to_string(sdims) + " has higher rank than X " +
                                       dims_to_string(x.dims()));
  for (size_t i = 0; i < sdims.size(); ++i) {
    const int64_t xd = x.dims()[x.dims().size() - sdims.size() + i];
    if (sdims[i] != 1 && sdims[i] != xd)
      ctx.fail(ErrorKind::kBadInput, "scale " + dims_to_string(sdims) +
                                         " does not broadcast to X " + dims_to_string(x.dims()));
  }
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < x.rank(); ++d) (d < axis ? outer : inner) *= x.dim(static_cast<int>(d));
  const std::vector<int64_t> sstr = broadcast_strides(sdims, x.dims());
  Tensor y(x.dtype(), x.dims());
  dispatch_float(ctx, x, "X", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = x.data<T>();
    const T* sp = scale.data<T>();
    T* yp = y.data<T>();
    std::vector<int64_t> scale_off(static_cast<size_t>(x.numel()));
    for_each_broadcast(x.dims(), {sstr}, [&](int64_t i, const int64_t* off) { scale_off[i] = off[0]; });
    for (int64_t o = 0; o < outer; ++o) {
      const int64_t base = o * inner;
      double sq = 0;
      for (int64_t i = 0; i < inner; ++i) sq += static_cast<double>(xp[base + i]) * xp[base + i];
      const double inv = 1.0 / std::sqrt(sq / static_cast<double>(inner) + eps);
      for (int64_t i = 0; i < inner; ++i)
        yp[base + i] = static_cast<T>(static_cast<double>(xp[base + i]) * inv *
                                      static_cast<double>(sp[scale_off[base + i]]));
    }
  });
  ctx.set_output(0, std::move(y));
}

// ---- RotaryEmbedding -----------------------------------------------------------------------

void rotary_embedding_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& cos_t = ctx.input(1);
  const Tensor& sin_t = ctx.input(2);
  require_float(ctx, x, "X");
  const bool interleaved = ctx.attr_int("interleaved", 0) != 0;
  const int64_t num_heads = ctx.attr_int("num_heads", 0);
  int64_t B = 0, S = 0, H = 0, D = 0;
  if (x.rank() == 4) {
    B = x.dim(0), H = x.dim(1), S = x.dim(2), D = x.dim(3);
  } else if (x.rank() == 3) {
    if (num_heads <= 0 || x.dim(2) % num_heads != 0)
      ctx.fail(ErrorKind::kBadInput, "3-D input needs num_heads dividing the hidden size " +
                                         std::to_string(x.dim(2)) + ", got num_heads=" +
                                         std::to_string(num_heads));
    B = x.dim(0), S = x.dim(1), H = num_heads, D = x.dim(2) / num_heads;
  } else {
    ctx.fail(ErrorKind::kBadInput, "X should have rank 3 or 4, got " + dims_to_string(x.dims()));
  }
  int64_t rot = ctx.attr_int("rotary_embedding_dim", 0);
  if (rot == 0) rot = D;
  if (rot < 0 || rot > D || rot % 2 != 0)
    ctx.fail(ErrorKind::kInvalidModel, "rotary_embedding_dim should be even and <= head size " +
                                           std::to_string(D) + ", got " + std::to_string(rot));
  const int64_t half = rot / 2;
  const bool has_pos = ctx.has_input(3);
  std::vector<int64_t> pos;
  if (has_pos) {
    const Tensor& p = ctx.input(3);
    if (p.rank() != 2 || p.dim(0) != B || p.dim(1) != S)
      ctx.fail(ErrorKind::kBadInput, "position_ids should be [" + std::to_string(B) + "," +
                                         std::to_string(S) + "], got " + dims_to_string(p.dims()));
    pos = p.to_int64_vector();
    if (cos_t.rank() != 2 || sin_t.dims() != cos_t.dims() || cos_t.dim(1) != half)
      ctx.fail(ErrorKind::kBadInput, "cos/sin caches should be [max_position, " +
                                         std::to_string(half) + "], got " +
                                         dims_to_string(cos_t.dims()) + " and " +
                                         dims_to_string(sin_t.dims()));
    for (int64_t v : pos)
      if (v < 0 || v >= cos_t.dim(0))
        ctx.fail(ErrorKind::kBadInput, "position id " + std::to_string(v) + " is outside [0, " +
                                           std::to_string(cos_t.dim(0)) + ")");
  } else if (cos_t.dims() != std::vector<int64_t>{B, S, half} || sin_t.dims() != cos_t.dims()) {
    ctx.fail(ErrorKind::kBadInput, "cos/sin caches should be " + dims_to_string({B, S, half}) +
                                       ", got " + dims_to_string(cos_t.dims()) + " and " +
                                       dims_to_string(sin_t.dims()));
  }
  Tensor y = x.clone();
  const bool four_d = x.rank() == 4;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t s = 0; s < S; ++s) {
      const int64_t row = has_pos ? pos[b * S + s] : b * S + s;
      for (int64_t h = 0; h < H; ++h) {
        const int64_t base = four_d ? ((b * H + h) * S + s) * D : ((b * S + s) * H + h) * D;
        for (int64_t i = 0; i < half; ++i) {
          const double c = cos_t.get_double(row * half + i), sn = sin_t.get_double(row * half + i);
          const int64_t i1 = base + (interleaved ? 2 * i : i);
          const int64_t i2 = base + (interleaved ? 2 * i + 1 : i + half);
          const double x1 = x.get_double(i1), x2 = x.get_double(i2);
          y.set_double(i1, c * x1 - sn * x2);
          y.set_double(i2, sn * x1 + c * x2);
        }
      }
    }
  }
  ctx.set_output(0, std::move(y));
}

// ---- SwiGLU --------------------------------------------------------------------------------

void swiglu_kernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.dims() != b.dims() || a.dtype() != b.dtype())
    ctx.fail(ErrorKind::kBadInput, "A and B should have identical shapes and types, got " +
                                       dims_to_string(a.dims()) + " and " +
                                       dims_to_string(b.dims()));
  const double alpha = ctx.attr_float("alpha", 1.0f);
  Tensor y(a.dtype(), a.dims());
  dispatch_float(ctx, a, "A", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* ap = a.data<T>();
    const T* bp = b.data<T>();
    T* yp = y.data<T>();
    for (int64_t i = 0; i < a.numel(); ++i) {
      const double av = ap[i];
      yp[i] = static_cast<T>(av / (1.0 + std::exp(-alpha * av)) * static_cast<double>(bp[i]));
    }
  });
  ctx.set_output(0, std::move(y));
}

// ---- CausalConvWithState -------------------------------------------------------------------

void causal_conv_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  require_float(ctx, x, "input");
  const std::string act = ctx.attr_string("activation", "none");
  if (act != "none" && act != "silu" && act != "swish")
    ctx.fail(ErrorKind::kInvalidModel,
             "activation should be none, silu or swish, got '" + act + "'");
  if (x.rank() != 3)
    ctx.fail(ErrorKind::kBadInput, "input should be (batch, channels, length), got " +
                                       dims_to_string(x.dims()));
  const int64_t B = x.dim(0), C = x.dim(1), L = x.dim(2);
  if (w.rank() != 3 || w.dim(0) != C || w.dim(1) != 1 || w.dim(2) < 1)
    ctx.fail(ErrorKind::kBadInput, "weight should be (" + std::to_string(C) + ", 1, k), got " +
                                       dims_to_string(w.dims()));
  const int64_t K = w.dim(2), P = K - 1;
  std::vector<double> bias(static_cast<size_t>(C), 0.0);
  if (ctx.has_input(2)) {
    const Tensor& bt = ctx.input(2);
    if (bt.numel() != C)
      ctx.fail(ErrorKind::kBadInput, "bias should have " + std::to_string(C) +
                                         " elements, got " + dims_to_string(bt.dims()));
    for (int64_t c = 0; c < C; ++c) bias[c] = bt.get_double(c);
  }
  const Tensor* past = ctx.has_input(3) ? &ctx.input(3) : nullptr;
  if (past && past->dims() != std::vector<int64_t>{B, C, P})
    ctx.fail(ErrorKind::kBadInput, "past_state should be " + dims_to_string({B, C, P}) +
                                       ", got " + dims_to_string(past->dims()));
  Tensor y(x.dtype(), {B, C, L});
  Tensor present(past ? past->dtype() : x.dtype(), {B, C, P});
  std::vector<double> padded(static_cast<size_t>(P + L));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t t = 0; t < P; ++t) padded[t] = past ? past->get_double((b * C + c) * P + t) : 0;
      for (int64_t t = 0; t < L; ++t) padded[P + t] = x.get_double((b * C + c) * L + t);
      for (int64_t t = 0; t < L; ++t) {
        double s = bias[c];
        for (int64_t j = 0; j < K; ++j) s += w.get_double(c * K + j) * padded[t + j];
        if (act != "none") s = s / (1.0 + std::exp(-s));
        y.set_double((b * C + c) * L + t, s);
      }
      for (int64_t t = 0; t < P; ++t) present.set_double((b * C + c) * P + t, padded[L + t]);
    }
  }
  ctx.set_output(0, std::move(y));
  if (ctx.num_outputs() > 1 && ctx.wants_output(1)) ctx.set_output(1, std::move(present));
}

}  // namespace

void register_transformer_ops(OpRegistry& r) {
  r.add("RMSNormalization").since(23).inputs(2).outputs(1).run(rms_norm_kernel)
      .shape(infer_same_as_input0).via_float();
  r.add("RotaryEmbedding").since(23).inputs(3, 4).outputs(1).run(rotary_embedding_kernel)
      .shape(infer_same_as_input0).via_float();
  r.add("SwiGLU").since(28).inputs(2).outputs(1).kind(PatternKind::kElementwise)
      .run(swiglu_kernel).shape(infer_same_as_input0).via_float();
  r.add("CausalConvWithState").since(27).inputs(2, 4).outputs(1, 2).run(causal_conv_kernel)
      .via_float();
}

}  // namespace kiln
