// MatMul / Gemm / Conv through kernels::sgemm (see gemm_ops.h).
#include "runtime/gemm_ops.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/x86/f32_gemm.h"
#include "runtime/conv_depthwise.h"
#include "runtime/conv_gemm.h"
#include "runtime/conv_integer.h"
#include "runtime/conv_geom.h"
#include "runtime/pack_cache.h"
#include "runtime/conv_select.h"
#include "runtime/conv_stem.h"
#include "runtime/conv_transpose.h"
#include "runtime/matmul_integer.h"
#include "runtime/recurrent.h"
#include "runtime/gemm_epilogue.h"
#include "runtime/gemm_op_util.h"
#include "runtime/matmul_batched.h"
#include "runtime/thread_pool.h"

namespace kiln::gemm_ops {
namespace {

using kernels::GemmEpilogue;
using kernels::PackedB;

// B operand: packed once when constant (shared by every plan, runtime/pack_cache.h), else
// packed per run.
struct BOperand {
  bool trans = false;
  int64_t k = 0, n = 0, ldb = 0;
  std::shared_ptr<const PackedB> packed;  // constant B
  bool constant = false;
  // A tuned micro-kernel and thread split (GemmDesc::choice; constant B only), else the defaults.
  const kernels::F32GemmUkernel* kernel = nullptr;
  std::optional<kernels::GemmSplit> split;

  void tune(const KernelChoice& c) {
    kernel = c.mr > 0 ? kernels::f32_gemm_with_rows(c.mr) : nullptr;
    if (c.chunks > 0 && c.groups > 0) split = kernels::GemmSplit{c.chunks, c.groups};
  }

  void init(bool t, int64_t K, int64_t N, const Tensor* c) {
    trans = t;
    k = K;
    n = N;
    ldb = t ? K : N;
    if (c) {
      const std::string how = "b " + std::to_string(trans) + " " + std::to_string(k) + "x" + std::to_string(n);
      packed = PackCache<PackedB>::global().get(
          *c, how, [&] { return kernels::pack_b(trans, k, n, c->data<float>(), ldb, nullptr, pool_parallel()); });
      constant = true;
    }
  }
  const PackedB& get(const float* b, PackedB& scratch, const kernels::ParallelFor& par) const {
    if (constant) return *packed;
    kernels::pack_b_into(trans, k, n, b, ldb, scratch, nullptr, par);
    return scratch;
  }
  // C[M, n] = alpha * op(A) * B + beta * C: a run-time B is packed by the GEMM's own tasks.
  void multiply(bool trans_a, int64_t M, const float* A, int64_t lda, float alpha, const float* b, float beta,
                float* C, int64_t ldc, const kernels::ParallelFor& par, const GemmEpilogue& ep) const {
    const int threads = current_thread_pool().num_threads();
    if (constant)
      return kernels::sgemm_packed(trans_a, M, A, lda, alpha, *packed, beta, C, ldc, par, ep, threads, kernel,
                                   split ? &*split : nullptr);
    kernels::sgemm(trans_a, trans, M, n, k, alpha, A, lda, b, ldb, beta, C, ldc, par, ep, nullptr, threads);
  }
};

// The residual and clamp of an epilogue tail as the microkernels' store applies them.
GemmEpilogue kernel_epilogue(const EpilogueTail& tail, const std::vector<const RtValue*>& ins, int64_t n) {
  GemmEpilogue ep;
  if (tail.residual >= 0) {
    ep.residual = tail.residual_data(ins);
    ep.ldr = n;
  }
  ep.clamp = tail.has_clamp();
  ep.lo = tail.lo;
  ep.hi = tail.hi;
  ep.act = tail.act;
  return ep;
}

// MatMul: A [..., M, K] x B [K, N] -> [..., M, N] as one GEMM over the flattened rows.
class MatMulOp : public GemmOp {
 public:
  MatMulOp(int64_t rows, int64_t K, int64_t N, const Tensor* b, std::vector<int64_t> out, const KernelChoice& choice)
      : rows_(rows), k_(K), out_(std::move(out)) {
    b_.init(false, K, N, b);
    b_.tune(choice);
  }
  // Bias and Relu go in the microkernel's store; a residual or another clamp in a pass after.
  bool take_epilogue(const GemmDesc& d) override {
    bias_.init(d, nullptr, b_.n);
    tail_.init(d);
    return true;
  }
  Tensor run(const std::vector<const RtValue*>& ins) override {
    Tensor y = output_tensor(DType::kFloat32, out_);
    auto par = pool_parallel();
    GemmEpilogue ep = kernel_epilogue(tail_, ins, b_.n);
    ep.bias = bias_.get(nullptr);
    b_.multiply(false, rows_, fdata(ins[0]), k_, 1.0f, fdata(ins[1]), 0.0f, y.data<float>(), b_.n, par, ep);
    return y;
  }

 private:
  int64_t rows_, k_;
  std::vector<int64_t> out_;
  BOperand b_;
  ChannelBias bias_;
  EpilogueTail tail_;
};

// Gemm: Y = alpha*op(A)*op(B) + beta*C, C unidirectionally broadcast to [M, N].
class GemmNodeOp : public GemmOp {
 public:
  GemmNodeOp(bool ta, bool tb, int64_t M, int64_t K, int64_t N, float alpha, float beta, const Tensor* b,
             const Operand& c, const KernelChoice& choice)
      : ta_(ta), m_(M), k_(K), n_(N), alpha_(alpha), beta_(beta) {
    b_.init(tb, K, N, b);
    b_.tune(choice);
    has_c_ = c.present && beta != 0.0f;
    if (has_c_) {
      c_dims_ = c.dims;
      int64_t cm = c.dims.size() >= 2 ? c.dims[c.dims.size() - 2] : 1;
      int64_t cn = c.dims.empty() ? 1 : c.dims.back();
      c_is_bias_ = cm == 1 && cn == N;
      if (c_is_bias_ && c.constant) {
        bias_.assign(c.constant->data<float>(), c.constant->data<float>() + N);
        for (float& v : bias_) v *= beta;
        bias_const_ = true;
      }
    }
  }
  // The epilogue bias joins C's bias (or stands alone after beta*C); Relu goes in the
  // microkernel's store; a residual or another clamp in a pass after.
  bool take_epilogue(const GemmDesc& d) override {
    if (c_is_bias_ && !bias_const_) return false;  // a run-time bias C: leave it all to the pass
    epi_.init(d, nullptr, n_);
    if (bias_const_ && epi_.present()) {
      const float* e = epi_.get(nullptr);
      for (int64_t j = 0; j < n_; ++j) bias_[static_cast<size_t>(j)] += e[j];
      epi_ = ChannelBias();
    }
    tail_.init(d);
    return true;
  }
  Tensor run(const std::vector<const RtValue*>& ins) override {
    Tensor y = output_tensor(DType::kFloat32, {m_, n_});
    float* out = y.data<float>();
    auto par = pool_parallel();
    GemmEpilogue ep = kernel_epilogue(tail_, ins, n_);
    float beta = 0.0f;
    if (has_c_) {
      const float* c = fdata(ins[2]);
      if (c_is_bias_) {
        if (!bias_const_) {
          bias_.assign(c, c + n_);
          for (float& v : bias_) v *= beta_;
        }
        ep.bias = bias_.data();
      } else {
        int64_t cm = c_dims_.size() >= 2 ? c_dims_[c_dims_.size() - 2] : 1;
        int64_t cn = c_dims_.empty() ? 1 : c_dims_.back();
        for (int64_t i = 0; i < m_; ++i)
          for (int64_t j = 0; j < n_; ++j) out[i * n_ + j] = c[(cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j)];
        beta = beta_;
      }
    }
    if (epi_.present()) ep.bias = epi_.get(nullptr);
    b_.multiply(ta_, m_, fdata(ins[0]), ta_ ? m_ : k_, alpha_, fdata(ins[1]), beta, out, n_, par, ep);
    return y;
  }

 private:
  bool ta_;
  int64_t m_, k_, n_;
  float alpha_, beta_;
  BOperand b_;
  bool has_c_ = false, c_is_bias_ = false, bias_const_ = false;
  std::vector<int64_t> c_dims_;
  std::vector<float> bias_;
  ChannelBias epi_;  // the epilogue bias when C is not a constant bias
  EpilogueTail tail_;
};

// Conv 2-D, group 1, NCHW. Per image: T[HoWo, Co] = col^T[HoWo, CKK] * W^T[CKK, Co] + bias
// (W packed once as B), then T is transposed into Y[Co, HoWo].
class ConvOp : public GemmOp {
 public:
  struct Geom {
    int64_t n, c, h, w, co, kh, kw, ho, wo, sh, sw, dh, dw, pt, pl;
  };
  ConvOp(const Geom& g, const Tensor* w, const Operand& b) : g_(g) {
    w_.init(true, g.c * g.kh * g.kw, g.co, w);
    has_bias_ = b.present;
    if (b.present && b.constant) {
      bias_.assign(b.constant->data<float>(), b.constant->data<float>() + g.co);
      bias_const_ = true;
    }
    direct_ = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pt == 0 && g.pl == 0 && g.ho == g.h &&
              g.wo == g.w;
  }
  // The epilogue bias joins the bias in the microkernel's store; residual and clamp come in a
  // pass after the transpose.
  bool take_epilogue(const GemmDesc& d) override {
    if (has_bias_ && !bias_const_) return false;
    epi_.init(d, nullptr, g_.co);
    if (epi_.present()) {
      const float* e = epi_.get(nullptr);
      if (!has_bias_) bias_.assign(static_cast<size_t>(g_.co), 0.0f);
      for (int64_t o = 0; o < g_.co; ++o) bias_[static_cast<size_t>(o)] += e[o];
      has_bias_ = bias_const_ = true;
    }
    tail_.init(d);
    return true;
  }
  Tensor run(const std::vector<const RtValue*>& ins) override {
    const Geom& g = g_;
    Tensor y(DType::kFloat32, {g.n, g.co, g.ho, g.wo});
    auto par = pool_parallel();
    ThreadPool& pool = current_thread_pool();
    const PackedB& pw = w_.get(fdata(ins[1]), scratch_, par);
    GemmEpilogue ep;
    if (has_bias_) {
      if (!bias_const_) bias_.assign(fdata(ins[2]), fdata(ins[2]) + g.co);
      ep.bias = bias_.data();
    }
    const int64_t hw = g.h * g.w, ohw = g.ho * g.wo, ckk = g.c * g.kh * g.kw;
    tmp_.resize(static_cast<size_t>(ohw * g.co));
    if (!direct_) col_.resize(static_cast<size_t>(ckk * ohw));
    const float* x = fdata(ins[0]);
    float* out = y.data<float>();
    for (int64_t img = 0; img < g.n; ++img) {
      const float* xi = x + img * g.c * hw;
      const float* a = xi;
      if (!direct_) {
        float* col = col_.data();
        pool.parallel_for(ckk, [&](int64_t begin, int64_t end) {
          for (int64_t r = begin; r < end; ++r) {
            const int64_t c = r / (g.kh * g.kw), i = r / g.kw % g.kh, j = r % g.kw;
            const float* xc = xi + c * hw;
            float* dst = col + r * ohw;
            for (int64_t oy = 0; oy < g.ho; ++oy) {
              const int64_t iy = oy * g.sh - g.pt + i * g.dh;
              float* d = dst + oy * g.wo;
              if (iy < 0 || iy >= g.h) {
                std::fill(d, d + g.wo, 0.0f);
                continue;
              }
              const float* xr = xc + iy * g.w;
              for (int64_t ox = 0; ox < g.wo; ++ox) {
                const int64_t ix = ox * g.sw - g.pl + j * g.dw;
                d[ox] = ix >= 0 && ix < g.w ? xr[ix] : 0.0f;
              }
            }
          }
        });
        a = col;
      }
      kernels::sgemm_packed(true, ohw, a, ohw, 1.0f, pw, 0.0f, tmp_.data(), g.co, par, ep,
                          current_thread_pool().num_threads());
      float* yi = out + img * g.co * ohw;
      const float* t = tmp_.data();
      // Transpose [ohw, co] -> [co, ohw] in cache blocks.
      pool.parallel_for(g.co, [&](int64_t begin, int64_t end) {
        constexpr int64_t kB = 32;
        for (int64_t p0 = 0; p0 < ohw; p0 += kB) {
          const int64_t p1 = std::min(ohw, p0 + kB);
          for (int64_t o = begin; o < end; ++o)
            for (int64_t p = p0; p < p1; ++p) yi[o * ohw + p] = t[p * g.co + o];
        }
      });
    }
    tail_.apply(out, g.n * g.co * ohw, ins);
    return y;
  }

 private:
  Geom g_;
  BOperand w_;
  PackedB scratch_;
  bool has_bias_ = false, bias_const_ = false, direct_ = false;
  std::vector<float> bias_, tmp_, col_;
  ChannelBias epi_;
  EpilogueTail tail_;
};

bool all_f32(const std::vector<Operand>& ins) {
  for (const auto& o : ins)
    if (o.present && o.dtype != DType::kFloat32) return false;
  return true;
}

std::unique_ptr<GemmOp> make_matmul(const std::vector<Operand>& ins, const std::vector<int64_t>& out,
                                    const KernelChoice& choice) {
  if (ins.size() != 2 || !ins[0].present || !ins[1].present) return nullptr;
  const auto& a = ins[0].dims;
  const auto& b = ins[1].dims;
  if (a.size() < 2 || b.size() != 2) return nullptr;
  const int64_t K = a.back(), N = b[1];
  if (b[0] != K || out.size() != a.size() || out.back() != N) return nullptr;
  const int64_t rows = numel(a) / std::max<int64_t>(K, 1);
  if (K == 0 || rows == 0 || N == 0) return nullptr;
  return std::make_unique<MatMulOp>(rows, K, N, ins[1].constant, out, choice);
}

std::unique_ptr<GemmOp> make_gemm(const GemmDesc& d) {
  if (auto op = make_gemv_gemm(d)) return op;  // M = 1, constant B
  const std::vector<Operand>& ins = d.operands;
  const std::vector<int64_t>& out = d.out_dims;
  if (ins.size() < 2 || !ins[0].present || !ins[1].present) return nullptr;
  if (ins[0].dims.size() != 2 || ins[1].dims.size() != 2 || out.size() != 2) return nullptr;
  const bool ta = d.trans_a, tb = d.trans_b;
  const int64_t M = ta ? ins[0].dims[1] : ins[0].dims[0], K = ta ? ins[0].dims[0] : ins[0].dims[1];
  const int64_t N = tb ? ins[1].dims[0] : ins[1].dims[1];
  if ((tb ? ins[1].dims[1] : ins[1].dims[0]) != K || out[0] != M || out[1] != N) return nullptr;
  if (M == 0 || N == 0 || K == 0) return nullptr;
  Operand c = ins.size() > 2 ? ins[2] : Operand();
  if (c.present && c.dims.size() > 2) return nullptr;
  return std::make_unique<GemmNodeOp>(ta, tb, M, K, N, d.alpha, d.beta, ins[1].constant, c, d.choice);
}

std::unique_ptr<GemmOp> make_conv(const GemmDesc& d) {
  const std::vector<Operand>& ins = d.operands;
  const std::vector<int64_t>& out = d.out_dims;
  if (ins.size() < 2 || !ins[0].present || !ins[1].present) return nullptr;
  const auto& x = ins[0].dims;
  const auto& w = ins[1].dims;
  if (x.size() != 4 || w.size() != 4 || out.size() != 4) return nullptr;
  if (d.group != 1) return nullptr;
  ConvOp::Geom g{};
  g.n = x[0], g.c = x[1], g.h = x[2], g.w = x[3];
  g.co = w[0], g.kh = w[2], g.kw = w[3];
  if (w[1] != g.c || out[0] != g.n || out[1] != g.co) return nullptr;
  g.ho = out[2], g.wo = out[3];
  const auto& st = d.strides;
  const auto& dl = d.dilations;
  const auto& pads = d.pads;
  if (st.size() != 2 || dl.size() != 2 || pads.size() != 4) return nullptr;
  g.sh = st[0], g.sw = st[1], g.dh = dl[0], g.dw = dl[1];
  const std::string& ap = d.auto_pad;
  if (ap == "NOTSET") {
    g.pt = pads[0], g.pl = pads[1];
  } else if (ap == "VALID") {
    g.pt = g.pl = 0;
  } else if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    int64_t th = std::max<int64_t>(0, (g.ho - 1) * g.sh + (g.kh - 1) * g.dh + 1 - g.h);
    int64_t tw = std::max<int64_t>(0, (g.wo - 1) * g.sw + (g.kw - 1) * g.dw + 1 - g.w);
    g.pt = ap == "SAME_UPPER" ? th / 2 : th - th / 2;
    g.pl = ap == "SAME_UPPER" ? tw / 2 : tw - tw / 2;
  } else {
    return nullptr;
  }
  // The planned output dims must be what these attributes give.
  const int64_t pb = ap == "NOTSET" ? pads[2] : 0, pr = ap == "NOTSET" ? pads[3] : 0;
  if (ap == "NOTSET" || ap == "VALID") {
    if ((g.h + g.pt + pb - (g.kh - 1) * g.dh - 1) / g.sh + 1 != g.ho) return nullptr;
    if ((g.w + g.pl + pr - (g.kw - 1) * g.dw - 1) / g.sw + 1 != g.wo) return nullptr;
  }
  if (g.n == 0 || g.c == 0 || g.co == 0 || g.ho <= 0 || g.wo <= 0 || g.sh <= 0 || g.sw <= 0) return nullptr;
  Operand b = ins.size() > 2 ? ins[2] : Operand();
  if (b.present && numel(b.dims) != g.co) return nullptr;
  return std::make_unique<ConvOp>(g, ins[1].constant, b);
}

}  // namespace

namespace {

// An op whose kernels do not take the fused epilogue, followed by one pass over its output:
// y = clamp(y + bias + residual, lo, hi) (the order the graph applies them in).
class PostEpilogueOp : public GemmOp {
 public:
  PostEpilogueOp(std::unique_ptr<GemmOp> inner, const GemmDesc& d) : inner_(std::move(inner)) {
    channels_ = epilogue_channels(d);
    per_row_ = channels_first(d.kind);  // NCHW: a channel is a row of H*W values
    inner_size_ = 1;
    if (per_row_)
      for (size_t i = 2; i < d.out_dims.size(); ++i) inner_size_ *= d.out_dims[i];
    bias_.init(d, nullptr, channels_);
    tail_.init(d);
  }
  void set_output(const Tensor& out) override { inner_->set_output(out); }
  Tensor run(const std::vector<const RtValue*>& ins) override {
    Tensor y = inner_->run(ins);
    const float* b = bias_.get(nullptr);
    float* out = y.data<float>();
    const int64_t n = y.numel();
    if (b && n > 0) {
      const int64_t row = per_row_ ? inner_size_ : channels_, rows = n / std::max<int64_t>(row, 1);
      const int64_t ch = channels_;
      const bool per_row = per_row_;
      current_thread_pool().parallel_for(rows, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          float* yr = out + r * row;
          if (per_row) {
            const float v = b[r % ch];
            for (int64_t j = 0; j < row; ++j) yr[j] += v;
          } else {
            for (int64_t j = 0; j < row; ++j) yr[j] += b[j];
          }
        }
      });
    }
    tail_.apply(out, n, ins);
    return y;
  }

 private:
  std::unique_ptr<GemmOp> inner_;
  int64_t channels_ = 0, inner_size_ = 1;
  bool per_row_ = false;
  ChannelBias bias_;
  EpilogueTail tail_;
};

std::unique_ptr<GemmOp> make_plain_gemm_op(const GemmDesc& d);

}  // namespace

namespace {

// The input scale's operand (GemmDesc::input_scale): a Conv with group 1 and a constant weight,
// an extra f32 operand (no epilogue operand) that broadcasts to input 0 along the channel axis
// only: [C,1,1], [1,C,1,1] or [N,C,1,1].
bool input_scale_valid(const GemmDesc& d) {
  if (d.kind != GemmKind::kConv || d.input_scale < static_cast<int32_t>(node_arity(d.kind)) ||
      d.input_scale >= static_cast<int32_t>(d.operands.size()) || d.input_scale == d.epilogue_bias ||
      d.input_scale == d.epilogue_residual)
    return false;
  std::optional<conv_ops::ConvGeom> g = conv_ops::conv_geom(d);
  if (!g || g->group != 1 || !d.operands[1].constant) return false;
  const Operand& s = d.operands[static_cast<size_t>(d.input_scale)];
  if (!s.present || s.dtype != DType::kFloat32 || s.dims.size() < 3 || s.dims.size() > 4) return false;
  const size_t r = s.dims.size();
  if (s.dims[r - 1] != 1 || s.dims[r - 2] != 1 || s.dims[r - 3] != g->c) return false;
  return r == 3 || s.dims[0] == 1 || s.dims[0] == g->n;
}

}  // namespace

bool input_scale_pays(const GemmDesc& d) {
  if (d.kind != GemmKind::kConv || d.operands.size() < 2 || !d.operands[1].constant) return false;
  std::optional<conv_ops::ConvGeom> g = conv_ops::conv_geom(d);
  return g && g->group == 1 && g->co * g->kh * g->kw <= g->h * g->w;
}

// The op for the node alone (operands cut to the node's inputs), then its epilogue: taken by
// the op's kernels when it can, else a pass after it. JIT and AOT plans both come here, so the
// ops made from one descriptor are the same.
namespace {
// The descriptor of the node alone: operands cut to the node's inputs, no fused epilogue (an
// integer node's requantization dropped, its output int32 again).
GemmDesc node_alone(const GemmDesc& d) {
  GemmDesc plain = d;
  plain.operands.resize(std::min(plain.operands.size(), node_arity(d.kind)));
  plain.epilogue_bias = plain.epilogue_residual = -1;
  plain.clamp_lo = -std::numeric_limits<float>::infinity();
  plain.clamp_hi = std::numeric_limits<float>::infinity();
  plain.epilogue_activation = 0;
  if (has_requant(d)) {
    plain.requant_scale = plain.requant_y_scale = plain.requant_y_zero_point = plain.requant_scale_factor = -1;
    plain.out_dtype = DType::kInt32;
  }
  return plain;
}
}  // namespace

std::unique_ptr<GemmOp> make_gemm_op(const GemmDesc& d) {
  if (has_requant(d)) {
    // ConvInteger requantizes, in its own kernel where it can (checked before its weights are
    // packed), MatMulInteger dequantizes; requant_constants / dequant_constants check the rest.
    const bool takes = has_dequant(d) ? d.kind == GemmKind::kMatMulInteger
                                      : d.kind == GemmKind::kConvInteger && conv_ops::conv_integer_requantizes();
    if (!takes) return nullptr;
    std::unique_ptr<GemmOp> op = make_plain_gemm_op(node_alone(d));
    return op && op->take_epilogue(d) ? std::move(op) : nullptr;
  }
  if (d.epilogue_max_pool) {
    // Only the stem conv op pools (in its kernel, from cache); it takes the whole epilogue.
    if (d.epilogue_max_pool != 1 || d.kind != GemmKind::kConv || d.out_dims.size() != 4 || d.input_scale >= 0 ||
        d.epilogue_residual >= 0 || d.out_dtype != DType::kFloat32 || !all_f32(d.operands) || !epilogue_valid(d))
      return nullptr;
    std::unique_ptr<GemmOp> op = conv_ops::make_stem_conv_op(d);
    if (op && !op->take_epilogue(d)) return nullptr;
    return op;
  }
  if (d.input_scale >= 0) {
    // Only the GEMM conv op scales its (packed) weights per run; it takes the whole epilogue.
    if (d.out_dtype != DType::kFloat32 || !all_f32(d.operands) || !epilogue_valid(d) || !input_scale_valid(d))
      return nullptr;
    std::unique_ptr<GemmOp> op = conv_ops::make_gemm_conv_op(d);
    if (op && has_epilogue(d) && !op->take_epilogue(d)) return nullptr;
    return op;
  }
  if (!has_epilogue(d)) return make_plain_gemm_op(d);
  if (d.out_dtype != DType::kFloat32 || !all_f32(d.operands) || !epilogue_valid(d)) return nullptr;
  std::unique_ptr<GemmOp> op = make_plain_gemm_op(node_alone(d));
  if (!op) return nullptr;
  if (op->take_epilogue(d)) return op;
  return std::make_unique<PostEpilogueOp>(std::move(op), d);
}

namespace {
std::unique_ptr<GemmOp> make_plain_gemm_op(const GemmDesc& d) {
  if (d.kind == GemmKind::kMatMulInteger) return make_matmul_integer_op(d);
  if (d.kind == GemmKind::kConvInteger) return conv_ops::make_conv_integer_op(d);
  // (A recurrent node's sequence_lens is an integer operand: its op checks its own operands.)
  if (d.out_dtype != DType::kFloat32 || (!recurrent(d.kind) && !all_f32(d.operands))) return nullptr;
  switch (d.kind) {
    case GemmKind::kMatMul:
      // M = 1 GEMV and batched/broadcast shapes (runtime/matmul_batched.h); [..., M, K] x [K, N] below.
      if (auto op = make_matmul_fast_path(d)) return op;
      return make_matmul(d.operands, d.out_dims, d.choice);
    case GemmKind::kGemm: return make_gemm(d);
    case GemmKind::kConv:
      // Depthwise and constant-weight group-1 convs have dedicated ops (runtime/conv_select.h).
      if (auto op = conv_ops::make_conv_op(d)) return op;
      return make_conv(d);
    case GemmKind::kConvTranspose: return conv_ops::make_conv_transpose_op(d);
    // Depthwise only (what the assign-layouts pass makes); others run the reference kernel.
    case GemmKind::kConvNhwc: return conv_ops::make_depthwise_nhwc_conv_op(d);
    case GemmKind::kRnn:
    case GemmKind::kLstm:
    case GemmKind::kGru: return rnn_ops::make_recurrent_op(d);
    case GemmKind::kMatMulInteger:
    case GemmKind::kConvInteger: return nullptr;  // above
  }
  return nullptr;
}
}  // namespace

}  // namespace kiln::gemm_ops
