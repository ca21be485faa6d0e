// Conv 2-D through sgemm_prepacked_a with implicit im2col (see conv_gemm.h).
#include "runtime/conv_gemm.h"

#include <algorithm>

#include "kernels/x86/f32_gemm_prepacked_a.h"
#include "kernels/x86/f32_im2col.h"
#include "runtime/conv_geom.h"
#include "runtime/gemm_epilogue.h"
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
  ConvGeom g_;
  kernels::Im2colGeom ig_;
  bool direct_ = false;
  kernels::PackedA weight_;
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
