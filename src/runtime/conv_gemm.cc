// Conv 2-D through sgemm_prepacked_a with implicit im2col (see conv_gemm.h).
#include "runtime/conv_gemm.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/x86/f32_gemm_prepacked_a.h"
#include "kernels/x86/f32_im2col.h"
#include "kernels/x86/f32_transpose.h"
#include "runtime/conv_geom.h"
#include "runtime/gemm_epilogue.h"
#include "runtime/gemm_op_util.h"
#include "runtime/pack_cache.h"
#include "runtime/thread_pool.h"

namespace kiln::conv_ops {
namespace {

// A 1x1 conv pads its pixels to 32-column panels in the NCHW orientation (Co rows x pixel
// columns; a narrow last panel may run on the column-tail kernel); with the pixels as rows
// instead they pad to 8-14-row micro-panels and Co (the output channels) fills the panels. The
// swap pays where it pads much less (7x7 planes: 49 of 64 columns against 49 of 50 rows) and the
// input channels are enough to hide the transpose back to NCHW (measured at 7x7, MobileNetV2 /
// EfficientNet / ResNet-50 shapes: 7-14% faster at 1 thread from 160 input channels, mostly
// 11-24% at 2; level at 128; 5% slower at 96). AVX2 (6x16 kernel, 49 pixels in 54 rows): 7-12%
// faster at 1 thread on ResNet-50's and MobileNetV3's 7x7 shapes (160-2048 input channels); there
// other convs (strided, wider filters) take it too, the column matrix materialized first: 5-8%
// faster on ResNet's downsampling convs to 7x7 (3x3/s2 256->512 and 512->512, 1x1/s2 256->512
// and 1024->2048).
bool pixel_rows_pay(const ConvGeom& g, bool direct) {
  const kernels::F32GemmUkernel& uk = kernels::f32_gemm_default();
  if ((uk.isa != kernels::Isa::kAvx512 && uk.isa != kernels::Isa::kAvx2) || g.c < 128 || g.co < 32) return false;
  if (!direct && uk.isa != kernels::Isa::kAvx2) return false;  // not measured on AVX-512
  const int64_t P = g.ho * g.wo, nr = uk.nr, tail = P % nr;
  const double cols = tail == 0 || kernels::f32_gemm_coltail_pays(uk, tail) ? double(P) : double(kernels::ceil_div(P, nr) * nr);
  const kernels::F32GemmUkernel& rk = kernels::f32_gemm_for_rows(P, uk);
  const double rows = double(kernels::ceil_div(P, rk.mr) * rk.mr);
  return double(P) / rows > double(P) / cols + 0.1;
}

class GemmConvOp : public gemm_ops::GemmOp {
 public:
  GemmConvOp(const ConvGeom& g, const Tensor& w, const gemm_ops::GemmDesc& d, float lo, float hi) : g_(g) {
    const int64_t ckk = g.c * g.kh * g.kw;
    direct_ = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pt == 0 && g.pl == 0 && g.ho == g.h &&
              g.wo == g.w;
    // A tuned choice (GemmDesc::choice) overrides the orientation, the micro-kernel and the split.
    const gemm_ops::KernelChoice& ch = d.choice;
    pixel_rows_ = ch.algo == gemm_ops::ConvAlgo::kGemmPixelRows ? true
                  : ch.algo == gemm_ops::ConvAlgo::kGemm     ? false
                                                             : pixel_rows_pay(g, direct_);
    const kernels::F32GemmUkernel* kernel = ch.mr > 0 ? kernels::f32_gemm_with_rows(ch.mr) : nullptr;
    if (ch.chunks > 0 && ch.groups > 0) split_ = kernels::GemmSplit{ch.chunks, ch.groups};
    // Packed once for every plan that runs this weight (runtime/pack_cache.h).
    const std::string how = std::to_string(g.co) + "x" + std::to_string(ckk) + (kernel ? " mr" + std::to_string(kernel->mr) : "");
    if (pixel_rows_)
      weight_t_ = PackCache<kernels::PackedB>::global().get(
          w, "conv b " + how, [&] { return kernels::pack_b(true, ckk, g.co, w.data<float>(), ckk, kernel); });
    else
      weight_ = PackCache<kernels::PackedA>::global().get(
          w, "conv a " + how, [&] { return kernels::pack_a(g.co, ckk, w.data<float>(), ckk, kernel); });
    epilogue_.init(d, g.co, lo, hi);
    if (d.input_scale >= 0) {
      scale_operand_ = d.input_scale;
      scale_per_image_ = d.operands[static_cast<size_t>(d.input_scale)].dims.size() == 4 &&
                         d.operands[static_cast<size_t>(d.input_scale)].dims[0] > 1;
      if (!pixel_rows_) scaled_weight_ = *weight_;
      if (g.kh * g.kw > 1) col_scale_.resize(static_cast<size_t>(ckk));
    }
    ig_.c = g.c, ig_.h = g.h, ig_.w = g.w, ig_.kh = g.kh, ig_.kw = g.kw, ig_.ho = g.ho, ig_.wo = g.wo;
    ig_.sh = g.sh, ig_.sw = g.sw, ig_.dh = g.dh, ig_.dw = g.dw, ig_.pt = g.pt, ig_.pl = g.pl;
    // Stride-2 filters wider than 1x1 (1 thread: ResNet's 3x3/s2 convs 5-11% faster; 1x1/s2
    // level, so they keep the per-panel packers and no split buffer).
    phased_ = !direct_ && !pixel_rows_ && g.kh * g.kw > 1 && kernels::im2col_phases_supported(ig_);
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
      if (pixel_rows_) {
        run_pixel_rows(ins, img, xi, yi, ep, par, threads);
        continue;
      }
      const kernels::PackedA& weight = scale_operand_ >= 0 ? scaled_weight(ins, img, par) : *weight_;
      if (direct_) {
        kernels::sgemm_prepacked_a(weight, ohw, xi, ohw, yi, ohw, ep, par, threads, split());
      } else if (phased_) {
        // Stride 2 (AVX2): the image split into its polyphase planes once, the panels packed
        // from them (the packer falls back to the image for panels other than 16 columns).
        phases_.resize(static_cast<size_t>(kernels::im2col_phase_floats(ig_)));
        float* phases = phases_.data();
        kernels::run_parallel(par, g.c, [&](int64_t c0, int64_t c1) { kernels::im2col_split_phases(ig_, xi, c0, c1, phases); });
        kernels::sgemm_prepacked_a(
            weight, ohw,
            [&](int64_t k0, int64_t kc, int64_t j0, int64_t nc, int nr, float* dst) {
              if (!kernels::im2col_pack_b_phased(ig_, phases, k0, kc, j0, nc, nr, dst))
                kernels::im2col_pack_b(ig_, xi, k0, kc, j0, nc, nr, dst);
            },
            yi, ohw, ep, par, threads, split());
      } else {
        kernels::sgemm_prepacked_a(
            weight, ohw,
            [&](int64_t k0, int64_t kc, int64_t j0, int64_t nc, int nr, float* dst) {
              kernels::im2col_pack_b(ig_, xi, k0, kc, j0, nc, nr, dst);
            },
            yi, ohw, ep, par, threads, split());
      }
    }
    return y;
  }

 private:
  const kernels::GemmSplit* split() const { return split_ ? &*split_ : nullptr; }

  // W * diag(s) for image `img`: conv(x * s, W) = conv(x, W * s) per input channel, and the
  // weights (Co * C * kh * kw) are fewer than the input (C * H * W) where the executor fuses.
  const kernels::PackedA& scaled_weight(const std::vector<const RtValue*>& ins, int64_t img,
                                        const kernels::ParallelFor& par) {
    const float* s = ins[static_cast<size_t>(scale_operand_)]->tensor.data<float>() + (scale_per_image_ ? img * g_.c : 0);
    if (!col_scale_.empty()) {  // one scale per channel, kh * kw weight columns each
      const int64_t taps = g_.kh * g_.kw;
      for (int64_t c = 0; c < g_.c; ++c) std::fill_n(col_scale_.data() + c * taps, taps, s[c]);
      s = col_scale_.data();
    }
    kernels::scale_packed_a_columns(*weight_, s, scaled_weight_, par);
    return scaled_weight_;
  }

  // Y^T[pixels, Co] = X^T W^T (X: the image, or its column matrix) into a buffer (bias, and the
  // clamp and activation when there is no residual, in the GEMM's store), then transposed into
  // the NCHW planes, the residual, clamp and activation following per block of channels.
  void run_pixel_rows(const std::vector<const RtValue*>& ins, int64_t img, const float* xi, float* yi,
                      const kernels::RowEpilogue& ep, const kernels::ParallelFor& par, int threads) {
    const int64_t P = g_.ho * g_.wo, co = g_.co;
    const kernels::PackedB* wt = weight_t_.get();
    if (scale_operand_ >= 0) {
      const float* s =
          ins[static_cast<size_t>(scale_operand_)]->tensor.data<float>() + (scale_per_image_ ? img * g_.c : 0);
      if (!col_scale_.empty()) {  // one scale per channel, kh * kw weight rows each
        const int64_t taps = g_.kh * g_.kw;
        for (int64_t c = 0; c < g_.c; ++c) std::fill_n(col_scale_.data() + c * taps, taps, s[c]);
        s = col_scale_.data();
      }
      kernels::scale_packed_b_rows(*weight_t_, s, scaled_weight_t_);
      wt = &scaled_weight_t_;
    }
    // Not a plain 1x1 conv: the GEMM's A^T is the column matrix, materialized.
    if (!direct_) {
      const int64_t ckk = g_.c * g_.kh * g_.kw;
      col_.resize(static_cast<size_t>(ckk * P));
      float* col = col_.data();
      kernels::run_parallel(par, kernels::ceil_div(ckk, 64), [&](int64_t begin, int64_t end) {
        kernels::im2col_rows(ig_, xi, col, begin * 64, std::min(ckk, end * 64));
      });
      xi = col;
    }
    const bool clamp = ep.lo > -std::numeric_limits<float>::infinity() || ep.hi < std::numeric_limits<float>::infinity();
    kernels::GemmEpilogue ge;
    ge.bias = ep.bias;
    if (!ep.residual) {
      ge.clamp = clamp;
      ge.lo = ep.lo;
      ge.hi = ep.hi;
      ge.act = ep.act;
    }
    rows_.resize(static_cast<size_t>(P * co));
    kernels::sgemm_packed(true, P, xi, P, 1.0f, *wt, 0.0f, rows_.data(), co, par, ge, threads, nullptr, split());
    const float* t = rows_.data();
    kernels::run_parallel(par, kernels::ceil_div(co, 16), [&](int64_t begin, int64_t end) {
      const int64_t c0 = begin * 16, c1 = std::min(co, end * 16);
      kernels::transpose_f32(P, c1 - c0, t + c0, co, yi + c0 * P, P);
      if (ep.residual)
        gemm_ops::add_residual_clamp_activate(yi + c0 * P, ep.residual + c0 * P, (c1 - c0) * P, clamp, ep.lo, ep.hi,
                                              ep.act);
    });
  }

  ConvGeom g_;
  kernels::Im2colGeom ig_;
  bool direct_ = false;
  bool pixel_rows_ = false;     // computed with the pixels as GEMM rows (pixel_rows_pay)
  bool phased_ = false;         // im2col from the polyphase split (kernels::im2col_phases_supported)
  std::optional<kernels::GemmSplit> split_;  // a tuned thread split (else choose_gemm_split's)
  std::vector<float> phases_;   // the split image
  std::shared_ptr<const kernels::PackedB> weight_t_;  // W^T [C kh kw, Co] for pixel rows
  kernels::PackedB scaled_weight_t_;
  std::vector<float> rows_;     // Y^T [pixels, Co] of one image
  std::vector<float> col_;      // pixel rows of a conv that is no plain 1x1: the column matrix [C kh kw, pixels]
  std::shared_ptr<const kernels::PackedA> weight_;
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
