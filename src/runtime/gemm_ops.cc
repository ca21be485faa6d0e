// MatMul / Gemm / Conv through kernels::sgemm (see gemm_ops.h).
#include "runtime/gemm_ops.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/x86/f32_gemm.h"
#include "runtime/conv_select.h"
#include "runtime/thread_pool.h"

namespace kiln::gemm_ops {
namespace {

using kernels::GemmEpilogue;
using kernels::PackedB;

int64_t numel(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

kernels::ParallelFor pool_parallel() {
  return [](int64_t n, std::function<void(int64_t, int64_t)> fn) { current_thread_pool().parallel_for(n, fn); };
}

const float* fdata(const RtValue* v) { return v->tensor.data<float>(); }

// B operand: packed once when constant, else packed per run.
struct BOperand {
  bool trans = false;
  int64_t k = 0, n = 0, ldb = 0;
  PackedB packed;  // constant B
  bool constant = false;

  void init(bool t, int64_t K, int64_t N, const Tensor* c) {
    trans = t;
    k = K;
    n = N;
    ldb = t ? K : N;
    if (c) {
      packed = kernels::pack_b(trans, k, n, c->data<float>(), ldb, nullptr, pool_parallel());
      constant = true;
    }
  }
  const PackedB& get(const float* b, PackedB& scratch, const kernels::ParallelFor& par) const {
    if (constant) return packed;
    scratch = kernels::pack_b(trans, k, n, b, ldb, nullptr, par);
    return scratch;
  }
};

// MatMul: A [..., M, K] x B [K, N] -> [..., M, N] as one GEMM over the flattened rows.
class MatMulOp : public GemmOp {
 public:
  MatMulOp(int64_t rows, int64_t K, int64_t N, const Tensor* b, std::vector<int64_t> out)
      : rows_(rows), k_(K), out_(std::move(out)) {
    b_.init(false, K, N, b);
  }
  Tensor run(const std::vector<const RtValue*>& ins) override {
    Tensor y = Tensor::uninitialized(DType::kFloat32, out_);
    auto par = pool_parallel();
    const PackedB& pb = b_.get(fdata(ins[1]), scratch_, par);
    kernels::sgemm_packed(false, rows_, fdata(ins[0]), k_, 1.0f, pb, 0.0f, y.data<float>(), b_.n, par);
    return y;
  }

 private:
  int64_t rows_, k_;
  std::vector<int64_t> out_;
  BOperand b_;
  PackedB scratch_;
};

// Gemm: Y = alpha*op(A)*op(B) + beta*C, C unidirectionally broadcast to [M, N].
class GemmNodeOp : public GemmOp {
 public:
  GemmNodeOp(bool ta, bool tb, int64_t M, int64_t K, int64_t N, float alpha, float beta, const Tensor* b,
             const Operand& c)
      : ta_(ta), m_(M), k_(K), n_(N), alpha_(alpha), beta_(beta) {
    b_.init(tb, K, N, b);
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
  Tensor run(const std::vector<const RtValue*>& ins) override {
    Tensor y = Tensor::uninitialized(DType::kFloat32, {m_, n_});
    float* out = y.data<float>();
    auto par = pool_parallel();
    const PackedB& pb = b_.get(fdata(ins[1]), scratch_, par);
    GemmEpilogue ep;
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
    kernels::sgemm_packed(ta_, m_, fdata(ins[0]), ta_ ? m_ : k_, alpha_, pb, beta, out, n_, par, ep);
    return y;
  }

 private:
  bool ta_;
  int64_t m_, k_, n_;
  float alpha_, beta_;
  BOperand b_;
  PackedB scratch_;
  bool has_c_ = false, c_is_bias_ = false, bias_const_ = false;
  std::vector<int64_t> c_dims_;
  std::vector<float> bias_;
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
      kernels::sgemm_packed(true, ohw, a, ohw, 1.0f, pw, 0.0f, tmp_.data(), g.co, par, ep);
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
    return y;
  }

 private:
  Geom g_;
  BOperand w_;
  PackedB scratch_;
  bool has_bias_ = false, bias_const_ = false, direct_ = false;
  std::vector<float> bias_, tmp_, col_;
};

bool all_f32(const std::vector<Operand>& ins) {
  for (const auto& o : ins)
    if (o.present && o.dtype != DType::kFloat32) return false;
  return true;
}

std::unique_ptr<GemmOp> make_matmul(const std::vector<Operand>& ins, const std::vector<int64_t>& out) {
  if (ins.size() != 2 || !ins[0].present || !ins[1].present) return nullptr;
  const auto& a = ins[0].dims;
  const auto& b = ins[1].dims;
  if (a.size() < 2 || b.size() != 2) return nullptr;
  const int64_t K = a.back(), N = b[1];
  if (b[0] != K || out.size() != a.size() || out.back() != N) return nullptr;
  const int64_t rows = numel(a) / std::max<int64_t>(K, 1);
  if (K == 0 || rows == 0 || N == 0) return nullptr;
  return std::make_unique<MatMulOp>(rows, K, N, ins[1].constant, out);
}

std::unique_ptr<GemmOp> make_gemm(const GemmDesc& d) {
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
  return std::make_unique<GemmNodeOp>(ta, tb, M, K, N, d.alpha, d.beta, ins[1].constant, c);
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

std::unique_ptr<GemmOp> make_gemm_op(const GemmDesc& d) {
  if (d.out_dtype != DType::kFloat32 || !all_f32(d.operands)) return nullptr;
  switch (d.kind) {
    case GemmKind::kMatMul: return make_matmul(d.operands, d.out_dims);
    case GemmKind::kGemm: return make_gemm(d);
    case GemmKind::kConv:
      // Depthwise and constant-weight group-1 convs have dedicated ops (runtime/conv_select.h).
      if (auto op = conv_ops::make_conv_op(d)) return op;
      return make_conv(d);
  }
  return nullptr;
}

}  // namespace kiln::gemm_ops
