// The attention op family: Attention (opset 23-25), ai.onnx.preview::FlexAttention and
// LinearAttention. Scores, softmax and products run in double; f16/bf16 go through f32.
#include <cmath>
#include <limits>

#include "ops/families.h"
#include "ops/gemm_ref.h"
#include "ops/op_util.h"

namespace kiln {

void register_transformer_ops(OpRegistry& r);  // ops/transformer.cc

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

void require_float(const KernelContext& ctx, const Tensor& t, const char* what) {
  if (t.dtype() != DType::kFloat32 && t.dtype() != DType::kFloat64)
    ctx.fail(ErrorKind::kUnsupported, std::string(what) + " should be a float tensor, got " +
                                          std::string(dtype_name(t.dtype())));
}

std::vector<double> to_doubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::kFloat32) {
    const float* p = t.data<float>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = p[i];
  } else if (t.dtype() == DType::kFloat64) {
    const double* p = t.data<double>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = p[i];
  } else {
    for (size_t i = 0; i < v.size(); ++i) v[i] = t.get_double(static_cast<int64_t>(i));
  }
  return v;
}

Tensor from_doubles(const std::vector<double>& v, DType dt, std::vector<int64_t> dims) {
  Tensor t(dt, std::move(dims));
  if (dt == DType::kFloat32) {
    float* p = t.data<float>();
    for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<float>(v[i]);
  } else if (dt == DType::kFloat64) {
    double* p = t.data<double>();
    for (size_t i = 0; i < v.size(); ++i) p[i] = v[i];
  } else {
    for (size_t i = 0; i < v.size(); ++i) t.set_double(static_cast<int64_t>(i), v[i]);
  }
  return t;
}

// A (B, H, S, D) tensor as doubles; 3-D inputs (B, S, H*D) are split into `heads` heads.
struct Heads {
  int64_t b = 0, h = 0, s = 0, d = 0;
  std::vector<double> v;  // (b, h, s, d) row-major
  const double* at(int64_t bi, int64_t hi) const { return v.data() + (bi * h + hi) * s * d; }
};

Heads to_heads(const KernelContext& ctx, const Tensor& t, int64_t heads, const char* what) {
  Heads r;
  if (t.rank() == 4) {
    r.b = t.dim(0), r.h = t.dim(1), r.s = t.dim(2), r.d = t.dim(3);
    r.v = to_doubles(t);
    return r;
  }
  if (t.rank() != 3)
    ctx.fail(ErrorKind::kBadInput, std::string(what) + " should have rank 3 or 4, got " +
                                       dims_to_string(t.dims()));
  if (heads <= 0 || t.dim(2) % heads != 0)
    ctx.fail(ErrorKind::kBadInput, std::string(what) + " hidden size " + std::to_string(t.dim(2)) +
                                       " should be a positive multiple of the head count (q_num_heads / kv_num_heads "
                                       "attribute, required for 3-D inputs), got " +
                                       std::to_string(heads));
  r.b = t.dim(0), r.h = heads, r.s = t.dim(1), r.d = t.dim(2) / heads;
  const std::vector<double> flat = to_doubles(t);
  r.v.resize(flat.size());
  for (int64_t bi = 0; bi < r.b; ++bi)
    for (int64_t si = 0; si < r.s; ++si)
      for (int64_t hi = 0; hi < r.h; ++hi)
        for (int64_t di = 0; di < r.d; ++di)
          r.v[((bi * r.h + hi) * r.s + si) * r.d + di] = flat[((bi * r.s + si) * r.h + hi) * r.d + di];
  return r;
}

// (B, H, S, D) back to a tensor: 4-D as is, or 3-D (B, S, H*D).
Tensor from_heads(const std::vector<double>& v, DType dt, int64_t b, int64_t h, int64_t s,
                  int64_t d, bool three_d) {
  if (!three_d) return from_doubles(v, dt, {b, h, s, d});
  std::vector<double> flat(v.size());
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t hi = 0; hi < h; ++hi)
      for (int64_t si = 0; si < s; ++si)
        for (int64_t di = 0; di < d; ++di)
          flat[((bi * s + si) * h + hi) * d + di] = v[((bi * h + hi) * s + si) * d + di];
  return from_doubles(flat, dt, {b, s, h * d});
}

// Appends `cur` to `past` along the sequence axis (both (B, H, S, D)).
Heads concat_seq(const KernelContext& ctx, const Tensor& past_t, const Heads& cur,
                 const char* what) {
  if (past_t.rank() != 4 || past_t.dim(0) != cur.b || past_t.dim(1) != cur.h ||
      past_t.dim(3) != cur.d)
    ctx.fail(ErrorKind::kBadInput, std::string(what) + " should have shape [" +
                                       std::to_string(cur.b) + "," + std::to_string(cur.h) +
                                       ",past," + std::to_string(cur.d) + "], got " +
                                       dims_to_string(past_t.dims()));
  const std::vector<double> past = to_doubles(past_t);
  const int64_t p = past_t.dim(2);
  Heads r = cur;
  r.s = p + cur.s;
  r.v.assign(static_cast<size_t>(r.b * r.h * r.s * r.d), 0.0);
  for (int64_t bh = 0; bh < r.b * r.h; ++bh) {
    std::copy_n(past.data() + bh * p * r.d, p * r.d, r.v.data() + bh * r.s * r.d);
    std::copy_n(cur.v.data() + bh * cur.s * r.d, cur.s * r.d, r.v.data() + bh * r.s * r.d + p * r.d);
  }
  return r;
}

// Softmax of one row in place; an all -inf row gives zeros (as the ONNX reference does).
void softmax_row(double* x, int64_t n) {
  double m = kNegInf;
  for (int64_t j = 0; j < n; ++j) m = std::max(m, x[j]);
  if (m == kNegInf) m = 0;
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    x[j] = std::exp(x[j] - m);
    sum += x[j];
  }
  if (sum == 0) sum = 1;
  for (int64_t j = 0; j < n; ++j) x[j] /= sum;
}

// ---- Attention -----------------------------------------------------------------------------

void attention_kernel(KernelContext& ctx) {
  const Tensor& qt = ctx.input(0);
  const Tensor& kt = ctx.input(1);
  const Tensor& vt = ctx.input(2);
  require_float(ctx, qt, "Q");
  require_float(ctx, kt, "K");
  require_float(ctx, vt, "V");
  if (qt.rank() != kt.rank() || qt.rank() != vt.rank())
    ctx.fail(ErrorKind::kBadInput, "Q, K and V should have the same rank, got " +
                                       dims_to_string(qt.dims()) + ", " + dims_to_string(kt.dims()) +
                                       ", " + dims_to_string(vt.dims()));
  const bool three_d = qt.rank() == 3;
  const int64_t q_heads_attr = ctx.attr_int("q_num_heads", 0);
  const int64_t kv_heads_attr = ctx.attr_int("kv_num_heads", 0);
  Heads q = to_heads(ctx, qt, q_heads_attr, "Q");
  Heads k = to_heads(ctx, kt, kv_heads_attr, "K");
  Heads v = to_heads(ctx, vt, kv_heads_attr, "V");
  if (k.b != q.b || v.b != q.b || k.d != q.d || v.h != k.h || v.s != k.s)
    ctx.fail(ErrorKind::kBadInput, "inconsistent Q/K/V shapes " + dims_to_string(qt.dims()) + ", " +
                                       dims_to_string(kt.dims()) + ", " +
                                       dims_to_string(vt.dims()));
  if (k.h <= 0 || q.h % k.h != 0)
    ctx.fail(ErrorKind::kBadInput, "q_num_heads " + std::to_string(q.h) +
                                       " should be a multiple of kv_num_heads " +
                                       std::to_string(k.h));
  const bool has_past = ctx.has_input(4) || ctx.has_input(5);
  if (has_past && !(ctx.has_input(4) && ctx.has_input(5)))
    ctx.fail(ErrorKind::kInvalidModel, "past_key and past_value should be given together");
  int64_t past_len = 0;
  if (has_past) {
    past_len = ctx.input(4).rank() == 4 ? ctx.input(4).dim(2) : 0;
    k = concat_seq(ctx, ctx.input(4), k, "past_key");
    v = concat_seq(ctx, ctx.input(5), v, "past_value");
  }
  const int64_t B = q.b, Hq = q.h, Hkv = k.h, Sq = q.s, T = k.s, D = q.d, Dv = v.d;

  std::vector<int64_t> nonpad;
  if (ctx.has_input(6)) {
    if (has_past)
      ctx.fail(ErrorKind::kInvalidModel, "nonpad_kv_seqlen cannot be combined with past_key");
    const Tensor& np_t = ctx.input(6);
    if (np_t.numel() != B || !is_integer(np_t.dtype()))
      ctx.fail(ErrorKind::kBadInput, "nonpad_kv_seqlen should be an integer [batch] vector, got " +
                                         dims_to_string(np_t.dims()));
    nonpad = np_t.to_int64_vector();
  }
  // The offset of the query block inside the key sequence, for causal and window masks.
  auto offset = [&](int64_t b) {
    if (has_past) return past_len;
    if (!nonpad.empty()) return nonpad[b] - Sq;
    return int64_t{0};
  };

  // attn_mask: right-aligned broadcast to (B, Hq, Sq, T); a short last dim is padded with -inf.
  const Tensor* mask = ctx.has_input(3) ? &ctx.input(3) : nullptr;
  std::vector<double> mask_v;
  int64_t ms[4] = {0, 0, 0, 0}, mlen = 0;
  bool mask_bool = false;
  if (mask) {
    const int mr = mask->rank();
    if (mr < 1 || mr > 4 || mask->dims().back() > T)
      ctx.fail(ErrorKind::kBadInput, "attn_mask should have rank 1..4 and last dim <= " +
                                         std::to_string(T) + ", got " +
                                         dims_to_string(mask->dims()));
    mask_bool = mask->dtype() == DType::kBool;
    if (!mask_bool) require_float(ctx, *mask, "attn_mask");
    const int64_t target[4] = {B, Hq, Sq, T};
    int64_t stride = 1;
    for (int a = 3; a >= 4 - mr; --a) {
      const int64_t dsz = mask->dim(a - (4 - mr));
      if (a < 3 && dsz != 1 && dsz != target[a])
        ctx.fail(ErrorKind::kBadInput, "attn_mask shape " + dims_to_string(mask->dims()) +
                                           " does not broadcast to (B, H, Sq, T) = " +
                                           dims_to_string({B, Hq, Sq, T}));
      ms[a] = (a < 3 && dsz == 1) ? 0 : stride;
      stride *= dsz;
    }
    mlen = mask->dims().back();
    mask_v = to_doubles(*mask);
    if (mask_bool)
      for (double& m : mask_v) m = m != 0 ? 0.0 : kNegInf;
  }
  const bool causal = ctx.attr_int("is_causal", 0) != 0;
  const int64_t left = ctx.attr_int("left_window_size", -1);
  const int64_t right = ctx.attr_int("right_window_size", -1);
  if (left < -1 || right < -1)
    ctx.fail(ErrorKind::kInvalidModel, "left/right_window_size should be -1 or >= 0");
  const double softcap = ctx.attr_float("softcap", 0.0f);
  const int64_t mode = ctx.attr_int("qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3)
    ctx.fail(ErrorKind::kInvalidModel, "qk_matmul_output_mode should be 0..3, got " +
                                           std::to_string(mode));
  // Q and K are each scaled by sqrt(scale) rounded to the input type, as the spec's function does.
  double scale = ctx.has_attr("scale") ? ctx.attr_float("scale", 0.0f)
                                       : 1.0 / std::sqrt(static_cast<double>(D));
  double sqrt_scale = std::sqrt(scale);
  if (qt.dtype() == DType::kFloat32) sqrt_scale = static_cast<float>(sqrt_scale);
  const double alpha = sqrt_scale * sqrt_scale;

  const bool want_qk = ctx.num_outputs() > 3 && ctx.wants_output(3);
  std::vector<double> y(static_cast<size_t>(B * Hq * Sq * Dv), 0.0);
  std::vector<double> qk_out(want_qk ? static_cast<size_t>(B * Hq * Sq * T) : 0);
  std::vector<double> scores(static_cast<size_t>(Sq * T)), bias(scores.size());
  const int64_t group = Hq / Hkv;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t off = offset(b);
      std::vector<bool> row_masked(static_cast<size_t>(Sq));
      for (int64_t i = 0; i < Sq; ++i) {
        double row_max = kNegInf;
        for (int64_t j = 0; j < T; ++j) {
          double bv = 0;
          if (mask) bv = j < mlen ? mask_v[b * ms[0] + h * ms[1] + i * ms[2] + j * ms[3]] : kNegInf;
          if (causal && j > i + off) bv += kNegInf;
          const int64_t diff = i + off - j;
          if ((left >= 0 && diff > left) || (right >= 0 && -diff > right)) bv += kNegInf;
          if (!nonpad.empty() && j >= nonpad[b]) bv += kNegInf;
          bias[i * T + j] = bv;
          row_max = std::max(row_max, bv);
        }
        row_masked[i] = row_max == kNegInf;
      }
      const int64_t kh = h / group;
      gemm_ref(false, true, Sq, T, D, alpha, q.at(b, h), D, k.at(b, kh), D, 0.0, scores.data(), T);
      double* qk = want_qk ? qk_out.data() + (b * Hq + h) * Sq * T : nullptr;
      if (qk && mode == 0) std::copy(scores.begin(), scores.end(), qk);
      if (softcap > 0)
        for (double& s : scores) s = softcap * std::tanh(s / softcap);
      if (qk && mode == 1) std::copy(scores.begin(), scores.end(), qk);
      for (size_t i = 0; i < scores.size(); ++i) scores[i] += bias[i];
      if (qk && mode == 2) std::copy(scores.begin(), scores.end(), qk);
      for (int64_t i = 0; i < Sq; ++i) {
        double* row = scores.data() + i * T;
        if (row_masked[i]) std::fill(row, row + T, 0.0); else softmax_row(row, T);
      }
      if (qk && mode == 3) std::copy(scores.begin(), scores.end(), qk);
      gemm_ref(false, false, Sq, Dv, T, 1.0, scores.data(), T, v.at(b, kh), Dv, 0.0,
               y.data() + (b * Hq + h) * Sq * Dv, Dv);
    }
  }
  ctx.set_output(0, from_heads(y, qt.dtype(), B, Hq, Sq, Dv, three_d));
  if (ctx.num_outputs() > 1 && ctx.wants_output(1))
    ctx.set_output(1, from_doubles(k.v, kt.dtype(), {B, Hkv, T, D}));
  if (ctx.num_outputs() > 2 && ctx.wants_output(2))
    ctx.set_output(2, from_doubles(v.v, vt.dtype(), {B, Hkv, T, Dv}));
  if (want_qk) ctx.set_output(3, from_doubles(qk_out, qt.dtype(), {B, Hq, Sq, T}));
}

void infer_attention(InferContext& ctx) {
  const Type& qt = ctx.input_type(0);
  const Type& vt = ctx.input_type(2);
  std::optional<Shape> ys;
  if (qt.shape && vt.shape && qt.shape->rank() == 4 && vt.shape->rank() == 4) {
    ys = Shape({qt.shape->dims[0], qt.shape->dims[1], qt.shape->dims[2], vt.shape->dims[3]});
  } else if (qt.shape && vt.shape && qt.shape->rank() == 3 && vt.shape->rank() == 3) {
    const int64_t qh = ctx.attr_int("q_num_heads", 0), kvh = ctx.attr_int("kv_num_heads", 0);
    Dim hidden;
    const Dim& vd = vt.shape->dims[2];
    if (qh > 0 && kvh > 0 && vd.known() && vd.value % kvh == 0) hidden = Dim(vd.value / kvh * qh);
    ys = Shape({qt.shape->dims[0], qt.shape->dims[1], hidden});
  }
  ctx.set_output_type(0, Type::tensor(qt.dtype, ys));
  for (int i = 1; i < ctx.num_outputs() && i < 3; ++i)
    ctx.set_output_type(i, Type::tensor(ctx.input_type(i).dtype));
  if (ctx.num_outputs() > 3) ctx.set_output_type(3, Type::tensor(qt.dtype));
}

// ---- FlexAttention (ai.onnx.preview) -------------------------------------------------------

// Runs a one-in one-out modifier subgraph on `x` and checks that the shape is preserved.
Tensor run_modifier(KernelContext& ctx, const char* attr, const Tensor& x) {
  std::vector<RtValue> outs = ctx.run_subgraph(*ctx.attr_graph(attr), {RtValue(x)});
  if (outs.size() != 1 || !outs[0].is_tensor() || outs[0].tensor.dims() != x.dims())
    ctx.fail(ErrorKind::kBadInput, std::string(attr) + " should return one tensor of shape " +
                                       dims_to_string(x.dims()));
  return outs[0].tensor;
}

void flex_attention_kernel(KernelContext& ctx) {
  const Tensor& qt = ctx.input(0);
  const Tensor& kt = ctx.input(1);
  const Tensor& vt = ctx.input(2);
  require_float(ctx, qt, "Q");
  if (qt.rank() != 4 || kt.rank() != 4 || vt.rank() != 4)
    ctx.fail(ErrorKind::kBadInput, "Q, K and V should have rank 4, got " +
                                       dims_to_string(qt.dims()) + ", " + dims_to_string(kt.dims()) +
                                       ", " + dims_to_string(vt.dims()));
  const Heads q = to_heads(ctx, qt, 0, "Q"), k = to_heads(ctx, kt, 0, "K");
  const Heads v = to_heads(ctx, vt, 0, "V");
  if (k.b != q.b || v.b != q.b || k.d != q.d || v.h != k.h || v.s != k.s || k.h <= 0 ||
      q.h % k.h != 0)
    ctx.fail(ErrorKind::kBadInput, "inconsistent Q/K/V shapes " + dims_to_string(qt.dims()) + ", " +
                                       dims_to_string(kt.dims()) + ", " +
                                       dims_to_string(vt.dims()));
  const int64_t B = q.b, Hq = q.h, L = q.s, S = k.s, D = q.d, Dv = v.d, group = q.h / k.h;
  DType compute = qt.dtype() == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
  if (ctx.has_attr("softmax_precision")) {
    const int64_t p = ctx.attr_int("softmax_precision");
    if (p != 1 && p != 10 && p != 11 && p != 16)
      ctx.fail(ErrorKind::kInvalidModel,
               "softmax_precision should be 1, 10, 11 or 16, got " + std::to_string(p));
    compute = static_cast<DType>(p);
  }
  const double scale = ctx.has_attr("scale") ? ctx.attr_float("scale", 0.0f)
                                             : 1.0 / std::sqrt(static_cast<double>(D));
  double sqrt_scale = static_cast<float>(std::sqrt(static_cast<float>(scale)));
  const double alpha = sqrt_scale * sqrt_scale;
  std::vector<double> scores(static_cast<size_t>(B * Hq * L * S));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h)
      gemm_ref(false, true, L, S, D, alpha, q.at(b, h), D, k.at(b, h / group), D, 0.0,
               scores.data() + (b * Hq + h) * L * S, S);
  const std::vector<int64_t> sdims = {B, Hq, L, S};
  if (ctx.has_attr("score_mod"))
    scores = to_doubles(convert_tensor(
        run_modifier(ctx, "score_mod", convert_tensor(from_doubles(scores, DType::kFloat64, sdims),
                                                      compute)),
        DType::kFloat64));
  for (int64_t r = 0; r < B * Hq * L; ++r) {
    double* row = scores.data() + r * S;
    double m = kNegInf, sum = 0;
    for (int64_t j = 0; j < S; ++j) m = std::max(m, row[j]);
    for (int64_t j = 0; j < S; ++j) sum += (row[j] = std::exp(row[j] - m));
    for (int64_t j = 0; j < S; ++j) row[j] /= sum;
  }
  if (ctx.has_attr("prob_mod"))
    scores = to_doubles(convert_tensor(
        run_modifier(ctx, "prob_mod", convert_tensor(from_doubles(scores, DType::kFloat64, sdims),
                                                     compute)),
        DType::kFloat64));
  std::vector<double> y(static_cast<size_t>(B * Hq * L * Dv));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h)
      gemm_ref(false, false, L, Dv, S, 1.0, scores.data() + (b * Hq + h) * L * S, S,
               v.at(b, h / group), Dv, 0.0, y.data() + (b * Hq + h) * L * Dv, Dv);
  ctx.set_output(0, from_doubles(y, vt.dtype(), {B, Hq, L, Dv}));
}

// ---- LinearAttention -----------------------------------------------------------------------

void linear_attention_kernel(KernelContext& ctx) {
  const std::string rule = ctx.attr_string("update_rule", "gated_delta");
  if (rule != "linear" && rule != "gated" && rule != "delta" && rule != "gated_delta")
    ctx.fail(ErrorKind::kInvalidModel, "update_rule should be linear, gated, delta or "
                                       "gated_delta, got '" + rule + "'");
  const bool gating = rule == "gated" || rule == "gated_delta";
  const bool delta = rule == "delta" || rule == "gated_delta";
  const int64_t hq = ctx.attr_int("q_num_heads", 0), hkv = ctx.attr_int("kv_num_heads", 0);
  if (hq <= 0 || hkv <= 0 || hq % hkv != 0)
    ctx.fail(ErrorKind::kInvalidModel, "q_num_heads (" + std::to_string(hq) +
                                           ") should be a positive multiple of kv_num_heads (" +
                                           std::to_string(hkv) + ")");
  if (gating != ctx.has_input(4))
    ctx.fail(ErrorKind::kInvalidModel, "update_rule '" + rule + "' " +
                                           (gating ? "requires" : "forbids") + " the decay input");
  if (delta != ctx.has_input(5))
    ctx.fail(ErrorKind::kInvalidModel, "update_rule '" + rule + "' " +
                                           (delta ? "requires" : "forbids") + " the beta input");
  const Tensor& qt = ctx.input(0);
  require_float(ctx, qt, "query");
  for (int i = 0; i < 3; ++i)
    if (ctx.input(i).rank() != 3)
      ctx.fail(ErrorKind::kBadInput, "query/key/value should have rank 3 (B, T, H*D), got " +
                                         dims_to_string(ctx.input(i).dims()));
  const Heads q = to_heads(ctx, qt, hq, "query");
  const Heads k = to_heads(ctx, ctx.input(1), hkv, "key");
  const Heads v = to_heads(ctx, ctx.input(2), hkv, "value");
  const int64_t B = q.b, T = q.s, dk = q.d, dv = v.d, group = hq / hkv;
  if (k.b != B || v.b != B || k.s != T || v.s != T || k.d != dk)
    ctx.fail(ErrorKind::kBadInput, "inconsistent query/key/value shapes");
  auto per_step = [&](int i, int64_t last_a, int64_t last_b, const char* what) {
    const Tensor& t = ctx.input(i);
    if (t.rank() != 3 || t.dim(0) != B || t.dim(1) != T ||
        (t.dim(2) != last_a && t.dim(2) != last_b))
      ctx.fail(ErrorKind::kBadInput, std::string(what) + " should be [" + std::to_string(B) + "," +
                                         std::to_string(T) + "," + std::to_string(last_a) + " or " +
                                         std::to_string(last_b) + "], got " +
                                         dims_to_string(t.dims()));
    return to_doubles(t);
  };
  std::vector<double> decay, beta;
  int64_t decay_last = 0, beta_last = 0;
  if (gating) {
    decay = per_step(4, hkv, hkv * dk, "decay");
    decay_last = ctx.input(4).dim(2);
  }
  if (delta) {
    beta = per_step(5, hkv, 1, "beta");
    beta_last = ctx.input(5).dim(2);
  }
  std::vector<double> state(static_cast<size_t>(B * hkv * dk * dv), 0.0);
  DType state_dtype = qt.dtype();
  if (ctx.has_input(3)) {
    const Tensor& ps = ctx.input(3);
    if (ps.dims() != std::vector<int64_t>{B, hkv, dk, dv})
      ctx.fail(ErrorKind::kBadInput, "past_state should be " + dims_to_string({B, hkv, dk, dv}) +
                                         ", got " + dims_to_string(ps.dims()));
    state = to_doubles(ps);
    state_dtype = ps.dtype();
  }
  const double sc = ctx.attr_float("scale", 0.0f);
  const double scale = sc == 0.0 ? 1.0 / std::sqrt(static_cast<double>(dk)) : sc;
  std::vector<double> out(static_cast<size_t>(B * T * hq * dv), 0.0), vt(dv);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t h = 0; h < hkv; ++h) {
        double* S = state.data() + (b * hkv + h) * dk * dv;
        const double* kk = k.at(b, h) + t * dk;
        const double* vv = v.at(b, h) + t * dv;
        if (gating) {
          for (int64_t d = 0; d < dk; ++d) {
            const int64_t di = decay_last == hkv ? (b * T + t) * hkv + h
                                                 : (b * T + t) * hkv * dk + h * dk + d;
            const double g = std::exp(decay[di]);
            for (int64_t m = 0; m < dv; ++m) S[d * dv + m] *= g;
          }
        }
        for (int64_t m = 0; m < dv; ++m) vt[m] = vv[m];
        if (delta) {
          const double bt = beta[(b * T + t) * beta_last + (beta_last == 1 ? 0 : h)];
          for (int64_t m = 0; m < dv; ++m) {
            double retrieved = 0;
            for (int64_t d = 0; d < dk; ++d) retrieved += S[d * dv + m] * kk[d];
            vt[m] = bt * (vv[m] - retrieved);
          }
        }
        for (int64_t d = 0; d < dk; ++d)
          for (int64_t m = 0; m < dv; ++m) S[d * dv + m] += kk[d] * vt[m];
        for (int64_t g = 0; g < group; ++g) {
          const int64_t qh = h * group + g;
          const double* qq = q.at(b, qh) + t * dk;
          double* o = out.data() + ((b * T + t) * hq + qh) * dv;
          for (int64_t m = 0; m < dv; ++m) {
            double s = 0;
            for (int64_t d = 0; d < dk; ++d) s += qq[d] * S[d * dv + m];
            o[m] = scale * s;
          }
        }
      }
    }
  }
  ctx.set_output(0, from_doubles(out, qt.dtype(), {B, T, hq * dv}));
  if (ctx.num_outputs() > 1 && ctx.wants_output(1))
    ctx.set_output(1, from_doubles(state, state_dtype, {B, hkv, dk, dv}));
}

}  // namespace

void register_attention_ops(OpRegistry& r) {
  r.add("Attention").since(23).inputs(3, 7).outputs(1, 4).run(attention_kernel)
      .shape(infer_attention).via_float();
  r.add("FlexAttention", "ai.onnx.preview").since(1).inputs(3).outputs(1).takes_subgraphs()
      .run(flex_attention_kernel).via_float();
  r.add("LinearAttention").since(27).inputs(3, 6).outputs(1, 2).run(linear_attention_kernel)
      .via_float();
  register_transformer_ops(r);
}

}  // namespace kiln
