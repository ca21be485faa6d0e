// Winograd F(4x4, 3x3) conv op (see conv_winograd.h).
#include "runtime/conv_winograd.h"

#include <algorithm>
#include <vector>

#include "kernels/x86/f32_gemm_prepacked_a.h"
#include "kernels/x86/f32_winograd.h"
#include "runtime/conv_geom.h"
#include "runtime/gemm_epilogue.h"
#include "runtime/thread_pool.h"

namespace kiln::conv_ops {
namespace {

class WinogradConvOp : public gemm_ops::GemmOp {
 public:
  WinogradConvOp(const ConvGeom& g, const Tensor& w, bool has_bias, const Tensor* bias, float lo, float hi)
      : g_(g), has_bias_(has_bias), lo_(lo), hi_(hi) {
    wg_.c = g.c, wg_.co = g.co, wg_.h = g.h, wg_.w = g.w, wg_.ho = g.ho, wg_.wo = g.wo, wg_.pt = g.pt, wg_.pl = g.pl;
    std::vector<float> u(static_cast<size_t>(36 * g.co * g.c));
    kernels::winograd_f43_weights(g.co, g.c, w.data<float>(), u.data());
    for (int e = 0; e < 36; ++e) weights_.push_back(kernels::pack_a(g.co, g.c, u.data() + e * g.co * g.c, g.c));
    if (has_bias && bias) bias_.assign(bias->data<float>(), bias->data<float>() + g.co);
  }
  // Bias and clamp go in the output transform; a residual (then the clamp) in a pass after.
  bool take_epilogue(const gemm_ops::GemmDesc& d) override {
    return gemm_ops::fold_into_channel_kernel(d, g_.co, has_bias_, bias_, lo_, hi_, tail_);
  }
  Tensor run(const std::vector<const RtValue*>& ins) override {
    const ConvGeom& g = g_;
    Tensor y = Tensor::uninitialized(DType::kFloat32, {g.n, g.co, g.ho, g.wo});  // every element is written
    const float* bias = has_bias_ ? (bias_.empty() ? ins[2]->tensor.data<float>() : bias_.data()) : nullptr;
    const int64_t tiles = wg_.tiles();
    v_.resize(static_cast<size_t>(36 * g.c * tiles));
    m_.resize(static_cast<size_t>(36 * g.co * tiles));
    ThreadPool& pool = current_thread_pool();
    const float* x = ins[0]->tensor.data<float>();
    for (int64_t img = 0; img < g.n; ++img) {
      const float* xi = x + img * g.c * g.h * g.w;
      float* yi = y.data<float>() + img * g.co * g.ho * g.wo;
      pool.parallel_for(g.c, [&](int64_t c0, int64_t c1) { kernels::winograd_f43_input(wg_, xi, c0, c1, v_.data()); });
      pool.parallel_for(36, [&](int64_t e0, int64_t e1) {
        for (int64_t e = e0; e < e1; ++e)
          kernels::sgemm_prepacked_a(weights_[static_cast<size_t>(e)], tiles, v_.data() + e * g.c * tiles, tiles,
                                     m_.data() + e * g.co * tiles, tiles);
      });
      pool.parallel_for(g.co, [&](int64_t o0, int64_t o1) {
        kernels::winograd_f43_output(wg_, m_.data(), bias, lo_, hi_, o0, o1, yi);
      });
    }
    tail_.apply(y.data<float>(), y.numel(), ins);
    return y;
  }

 private:
  ConvGeom g_;
  kernels::WinogradGeom wg_;
  bool has_bias_;
  float lo_, hi_;
  std::vector<kernels::PackedA> weights_;  // 36 transformed, packed [co, c] matrices
  std::vector<float> bias_, v_, m_;        // constant bias; transformed input; GEMM outputs
  gemm_ops::EpilogueTail tail_;            // residual + clamp after the output transform
};

}  // namespace

std::unique_ptr<gemm_ops::GemmOp> make_winograd_conv_op(const gemm_ops::GemmDesc& d, float clamp_lo,
                                                        float clamp_hi) {
  std::optional<ConvGeom> g = conv_geom(d);
  if (!g || g->group != 1 || g->kh != 3 || g->kw != 3 || g->sh != 1 || g->sw != 1 || g->dh != 1 || g->dw != 1)
    return nullptr;
  const Tensor* w = d.operands[1].constant;
  if (!w || w->dtype() != DType::kFloat32 || w->numel() != g->co * g->c * 9) return nullptr;
  const bool has_bias = d.operands.size() > 2 && d.operands[2].present;
  const Tensor* b = has_bias ? d.operands[2].constant : nullptr;
  if (b && (b->dtype() != DType::kFloat32 || b->numel() != g->co)) return nullptr;
  return std::make_unique<WinogradConvOp>(*g, *w, has_bias, b, clamp_lo, clamp_hi);
}

}  // namespace kiln::conv_ops
