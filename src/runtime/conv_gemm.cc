// Conv 2-D through sgemm_prepacked_a with implicit im2col (see conv_gemm.h).
#include "runtime/conv_gemm.h"

#include <algorithm>
#include <vector>

#include "kernels/x86/f32_gemm_prepacked_a.h"
#include "kernels/x86/f32_im2col.h"
#include "runtime/conv_geom.h"
#include "runtime/gemm_epilogue.h"
#include "runtime/gemm_op_util.h"
#include "runtime/thread_pool.h"

namespace kiln::conv_ops {
namespace {

class GemmConvOp : public gemm_ops::GemmOp {
 public:
  GemmConvOp(const ConvGeom& g, const Tensor& w, const gemm_ops::GemmDesc& d, float lo, float hi) : g_(g) {
    const int64_t ckk = g.c * g.kh * g.kw;
    direct_ = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pt == 0 && g.pl == 0 && g.ho == g.h &&
              g.wo == g.w;
    weight_ = kernels::pack_a(g.co, ckk, w.data<float>(), ckk);
    epilogue_.init(d, g.co, lo, hi);
    if (d.input_scale >= 0) {
      scale_operand_ = d.input_scale;
      scale_per_image_ = d.operands[static_cast<size_t>(d.input_scale)].dims.size() == 4 &&
                         d.operands[static_cast<size_t>(d.input_scale)].dims[0] > 1;
      scaled_weight_ = weight_;
      if (g.kh * g.kw > 1) col_scale_.resize(static_cast<size_t>(ckk));
    }
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
    const kernels::ParallelFor par = gemm_ops::pool_parallel();
    const int threads = current_thread_pool().num_threads();
    const int64_t chw = g.c * g.h * g.w, ohw = g.ho * g.wo;
    const float* x = ins[0]->tensor.data<float>();
    float* out = y.data<float>();
    for (int64_t img = 0; img < g.n; ++img) {
      const float* xi = x + img * chw;
      float* yi = out + img * g.co * ohw;
      if (res) ep.residual = res + img * g.co * ohw;
      const kernels::PackedA& weight = scale_operand_ >= 0 ? scaled_weight(ins, img) : weight_;
      if (direct_) {
        kernels::sgemm_prepacked_a(weight, ohw, xi, ohw, yi, ohw, ep, par, threads);
      } else {
        kernels::sgemm_prepacked_a(
            weight, ohw,
            [&](int64_t k0, int64_t kc, int64_t j0, int64_t nc, int nr, float* dst) {
              kernels::im2col_pack_b(ig_, xi, k0, kc, j0, nc, nr, dst);
            },
            yi, ohw, ep, par, threads);
      }
    }
    return y;
  }

 private:
  // W * diag(s) for image `img`: conv(x * s, W) = conv(x, W * s) per input channel, and the
  // weights (Co * C * kh * kw) are fewer than the input (C * H * W) where the executor fuses.
  const kernels::PackedA& scaled_weight(const std::vector<const RtValue*>& ins, int64_t img) {
    const float* s = ins[static_cast<size_t>(scale_operand_)]->tensor.data<float>() + (scale_per_image_ ? img * g_.c : 0);
    if (!col_scale_.empty()) {  // one scale per channel, kh * kw weight columns each
      const int64_t taps = g_.kh * g_.kw;
      for (int64_t c = 0; c < g_.c; ++c) std::fill_n(col_scale_.data() + c * taps, taps, s[c]);
      s = col_scale_.data();
    }
    kernels::scale_packed_a_columns(weight_, s, scaled_weight_);
    return scaled_weight_;
  }

  ConvGeom g_;
  kernels::Im2colGeom ig_;
  bool direct_ = false;
  kernels::PackedA weight_;
  int32_t scale_operand_ = -1;   // GemmDesc::input_scale
  bool scale_per_image_ = false;  // [N,C,1,1] with N > 1
  kernels::PackedA scaled_weight_;
  std::vector<float> col_scale_;  // per weight column, for kernels wider than 1x1
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
