// Stem conv op over kernels::conv_stem_f32 (see conv_stem.h).
#include "runtime/conv_stem.h"

#include <utility>
#include <vector>

#include "kernels/x86/f32_conv_stem.h"
#include "runtime/conv_geom.h"
#include "runtime/gemm_epilogue.h"
#include "runtime/gemm_op_util.h"

namespace kiln::conv_ops {
namespace {

class StemConvOp : public gemm_ops::GemmOp {
 public:
  StemConvOp(const kernels::StemConvGeom& g, const Tensor& w, const Tensor* b, bool pool) : g_(g) {
    pool_.on = pool;
    out_dims_ = {g.n, g.co, pool ? kernels::StemMaxPool::pooled(g.ho) : g.ho,
                 pool ? kernels::StemMaxPool::pooled(g.wo) : g.wo};
    weight_ = kernels::pack_conv_stem_weights(g, w.data<float>());
    has_bias_ = b != nullptr;
    if (b) bias_.assign(b->data<float>(), b->data<float>() + g.co);
  }
  // Bias, clamp and activation go in the kernel; a residual (then the clamp and activation) in a
  // pass after, as for the depthwise op.
  bool take_epilogue(const gemm_ops::GemmDesc& d) override {
    if (pool_.on && d.epilogue_residual >= 0) return false;  // the pool comes after the whole epilogue
    if (!gemm_ops::fold_into_channel_kernel(d, g_.co, has_bias_, bias_, ep_.lo, ep_.hi, tail_)) return false;
    ep_.act = kernels::Activation::kNone;
    if (tail_.residual < 0) std::swap(ep_.act, tail_.act);
    return true;
  }
  Tensor run(const std::vector<const RtValue*>& ins) override {
    Tensor y = output_tensor(DType::kFloat32, out_dims_);
    kernels::DepthwiseEpilogue ep = ep_;
    if (has_bias_) ep.bias = bias_.data();
    kernels::conv_stem_f32(g_, ins[0]->tensor.data<float>(), weight_.data(), y.data<float>(), ep,
                           gemm_ops::pool_parallel(),
                           pool_);
    tail_.apply(y.data<float>(), y.numel(), ins);
    return y;
  }

 private:
  kernels::StemConvGeom g_;
  kernels::StemMaxPool pool_;
  std::vector<int64_t> out_dims_;  // pooled with the pool
  std::vector<float> weight_;  // packed per block of output channels
  bool has_bias_ = false;
  std::vector<float> bias_;
  kernels::DepthwiseEpilogue ep_;
  gemm_ops::EpilogueTail tail_;
};

}  // namespace

namespace {

// The stem kernel's geometry of `d`, when the kernel covers it.
std::optional<kernels::StemConvGeom> stem_geom(const gemm_ops::GemmDesc& d) {
  std::optional<ConvGeom> cg = conv_geom(d);
  if (!cg || cg->group != 1 || d.input_scale >= 0) return std::nullopt;
  if (cg->sh != 2 || cg->sw != 2 || cg->dh != 1 || cg->dw != 1) return std::nullopt;
  kernels::StemConvGeom g;
  g.n = cg->n, g.c = cg->c, g.h = cg->h, g.w = cg->w, g.co = cg->co, g.kh = cg->kh, g.kw = cg->kw;
  g.ho = cg->ho, g.wo = cg->wo, g.pt = cg->pt, g.pl = cg->pl;
  if (!kernels::conv_stem_supported(g)) return std::nullopt;
  return g;
}

}  // namespace

bool stem_conv_covers(const gemm_ops::GemmDesc& d) { return stem_geom(d).has_value(); }

std::unique_ptr<gemm_ops::GemmOp> make_stem_conv_op(const gemm_ops::GemmDesc& d) {
  const std::optional<kernels::StemConvGeom> sg = stem_geom(d);
  if (!sg || !d.operands[1].constant) return nullptr;
  const kernels::StemConvGeom& g = *sg;
  const Tensor* w = d.operands[1].constant;
  if (w->dtype() != DType::kFloat32 || w->numel() != g.co * g.c * g.kh * g.kw) return nullptr;
  const Tensor* b = nullptr;
  if (d.operands.size() > 2 && d.operands[2].present) {
    b = d.operands[2].constant;
    if (!b || b->dtype() != DType::kFloat32 || b->numel() != g.co) return nullptr;  // run-time bias: GEMM path
  }
  return std::make_unique<StemConvOp>(g, *w, b, d.epilogue_max_pool == 1);
}

}  // namespace kiln::conv_ops
