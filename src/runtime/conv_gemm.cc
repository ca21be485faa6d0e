// Conv 2-D through sgemm_prepacked_a with implicit im2col (see conv_gemm.h).
#include "runtime/conv_gemm.h"

#include <algorithm>

#include "kernels/x86/f32_gemm_prepacked_a.h"
#include "kernels/x86/f32_im2col.h"
#include "kernels/x86/f32_transpose.h"
#include "runtime/conv_geom.h"
#include "runtime/gemm_epilogue.h"
#include "runtime/thread_pool.h"

namespace kiln::conv_ops {
namespace {

int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

// Pixel-major (Y^T[pixels, Co] = X^T * W^T, then a transpose) when few output pixels would
// leave much of the last 32-column micro-panels empty (7x7: 49 of 64 columns) and the pixels
// pad to fewer micro-panel rows than that (49 -> 56); channel-major otherwise.
bool prefer_pixel_major(int64_t pixels, int64_t co) {
  // (Measured: 5-10% faster at 7x7; at 14x14 the transpose costs more than the padding saves.)
  if (pixels > 100) return false;
  const kernels::F32GemmUkernel& base = kernels::f32_gemm_default();
  const int64_t nr = base.nr;
  const double channel_major = double(round_up(co, kernels::f32_gemm_for_rows(co).mr)) * double(round_up(pixels, nr));
  const double pixel_major = double(round_up(pixels, kernels::f32_gemm_for_rows(pixels).mr)) * double(round_up(co, nr));
  return pixel_major * 1.08 < channel_major;
}

class GemmConvOp : public gemm_ops::GemmOp {
 public:
  GemmConvOp(const ConvGeom& g, const Tensor& w, const gemm_ops::GemmDesc& d, float lo, float hi) : g_(g) {
    const int64_t ckk = g.c * g.kh * g.kw;
    direct_ = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pt == 0 && g.pl == 0 && g.ho == g.h &&
              g.wo == g.w;
    // (Only 1x1 convs: with a column matrix to materialize first, no faster.)
    pixel_major_ = direct_ && prefer_pixel_major(g.ho * g.wo, g.co);
    if (pixel_major_) weight_t_ = kernels::pack_b(true, ckk, g.co, w.data<float>(), ckk);
    else weight_ = kernels::pack_a(g.co, ckk, w.data<float>(), ckk);
    epilogue_.init(d, g.co, lo, hi);
    ig_.c = g.c, ig_.h = g.h, ig_.w = g.w, ig_.kh = g.kh, ig_.kw = g.kw, ig_.ho = g.ho, ig_.wo = g.wo;
    ig_.sh = g.sh, ig_.sw = g.sw, ig_.dh = g.dh, ig_.dw = g.dw, ig_.pt = g.pt, ig_.pl = g.pl;
  }
  // Bias, residual and clamp all go in the per-tile epilogue (the tile is still in L1).
  bool take_epilogue(const gemm_ops::GemmDesc& d) override {
    epilogue_.take(d);
    return true;
  }
  Tensor run(const std::vector<const RtValue*>& ins) override {
    const ConvGeom& g = g_;
    Tensor y = output_tensor(DType::kFloat32, {g.n, g.co, g.ho, g.wo});
    kernels::RowEpilogue ep = epilogue_.bind(ins, g.ho * g.wo);
    const float* res = ep.residual;
    kernels::ParallelFor par = [](int64_t n, std::function<void(int64_t, int64_t)> fn) {
      current_thread_pool().parallel_for(n, fn);
    };
    const int threads = current_thread_pool().num_threads();
    const int64_t chw = g.c * g.h * g.w, ohw = g.ho * g.wo;
    const float* x = ins[0]->tensor.data<float>();
    float* out = y.data<float>();
    if (pixel_major_) {
      run_pixel_major(x, ep, ins, out, par, threads);
      return y;
    }
    for (int64_t img = 0; img < g.n; ++img) {
      const float* xi = x + img * chw;
      float* yi = out + img * g.co * ohw;
      if (res) ep.residual = res + img * g.co * ohw;
      if (direct_) {
        kernels::sgemm_prepacked_a(weight_, ohw, xi, ohw, yi, ohw, ep, par, threads);
      } else {
        kernels::sgemm_prepacked_a(
            weight_, ohw,
            [&](int64_t k0, int64_t kc, int64_t j0, int64_t nc, int nr, float* dst) {
              kernels::im2col_pack_b(ig_, xi, k0, kc, j0, nc, nr, dst);
            },
            yi, ohw, ep, par, threads);
      }
    }
    return y;
  }

 private:
  // 1x1 convs, per image: Y^T = X^T * W^T with the bias (and, without a residual, the clamp and
  // activation) in the GEMM's store, then the transpose into NCHW, 16 channels at a time, each
  // block followed by the residual, clamp and activation.
  void run_pixel_major(const float* x, const kernels::RowEpilogue& ep, const std::vector<const RtValue*>& ins,
                       float* out, const kernels::ParallelFor& par, int threads) {
    const ConvGeom& g = g_;
    const int64_t ohw = g.ho * g.wo;
    kernels::GemmEpilogue gep;
    gep.bias = ep.bias;
    const bool residual = epilogue_.residual_operand() >= 0;
    gemm_ops::EpilogueTail tail;
    tail.residual = epilogue_.residual_operand();
    tail.lo = ep.lo, tail.hi = ep.hi, tail.act = ep.act;
    if (!residual) {
      gep.clamp = tail.has_clamp();
      gep.lo = ep.lo, gep.hi = ep.hi, gep.act = ep.act;
    }
    if (yt_.size() < static_cast<size_t>(ohw * g.co)) yt_.resize(static_cast<size_t>(ohw * g.co));
    ThreadPool& pool = current_thread_pool();
    for (int64_t img = 0; img < g.n; ++img) {
      const float* xi = x + img * g.c * g.h * g.w;
      float* yi = out + img * g.co * ohw;
      kernels::sgemm_packed(true, ohw, xi, ohw, 1.0f, weight_t_, 0.0f, yt_.data(), g.co, par, gep, threads);
      const float* ri = residual ? tail.residual_data(ins) + img * g.co * ohw : nullptr;
      const bool clamp = tail.has_clamp();
      pool.parallel_for((g.co + 15) / 16, [&](int64_t b0, int64_t b1) {
        const int64_t c0 = b0 * 16, c1 = std::min(g.co, b1 * 16);
        float* yb = yi + c0 * ohw;
        kernels::transpose_f32(ohw, c1 - c0, yt_.data() + c0, g.co, yb, ohw);
        if (!ri) return;
        // The residual, clamp and activation while the block's rows are still in L1.
        const float* rb = ri + c0 * ohw;
        const int64_t n = (c1 - c0) * ohw;
        for (int64_t i = 0; i < n; ++i) {
          const float v = yb[i] + rb[i];
          yb[i] = clamp ? std::min(std::max(v, tail.lo), tail.hi) : v;
        }
        kernels::apply_activation_inplace(tail.act, yb, n);
      });
    }
  }

  ConvGeom g_;
  kernels::Im2colGeom ig_;
  bool direct_ = false;
  bool pixel_major_ = false;
  kernels::PackedA weight_;    // channel-major: W as the GEMM's A
  kernels::PackedB weight_t_;  // pixel-major: W^T as the GEMM's B
  std::vector<float> yt_;       // pixel-major scratch: Y^T
  gemm_ops::ConvEpilogue epilogue_;
};

}  // namespace

std::unique_ptr<gemm_ops::GemmOp> make_gemm_conv_op(const gemm_ops::GemmDesc& d, float clamp_lo, float clamp_hi) {
  std::optional<ConvGeom> g = conv_geom(d);
  if (!g || g->group != 1 || !d.operands[1].constant) return nullptr;
  const Tensor* w = d.operands[1].constant;
  if (w->dtype() != DType::kFloat32 || w->numel() != g->co * g->c * g->kh * g->kw) return nullptr;
  const bool has_bias = d.operands.size() > 2 && d.operands[2].present;
  const Tensor* b = has_bias ? d.operands[2].constant : nullptr;
  if (b && (b->dtype() != DType::kFloat32 || b->numel() != g->co)) return nullptr;
  return std::make_unique<GemmConvOp>(*g, *w, d, clamp_lo, clamp_hi);
}

}  // namespace kiln::conv_ops
