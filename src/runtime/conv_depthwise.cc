// Depthwise Conv ops over kernels::depthwise_conv2d_f32 and depthwise_conv2d_nhwc_f32 (see
// conv_depthwise.h).
#include "runtime/conv_depthwise.h"

#include <algorithm>
#include <utility>

#include "runtime/conv_geom.h"
#include "runtime/gemm_epilogue.h"
#include "runtime/gemm_op_util.h"

namespace kiln::conv_ops {
namespace {

// channels_last: NHWC input and output, the (constant) weight repacked tap-major.
class DepthwiseConvOp : public gemm_ops::GemmOp {
 public:
  DepthwiseConvOp(const kernels::DepthwiseGeom& g, const Tensor* w, bool has_bias, const Tensor* b, float lo,
                  float hi, bool channels_last)
      : g_(g), has_bias_(has_bias), channels_last_(channels_last) {
    if (w && channels_last) {
      weight_.resize(static_cast<size_t>(g.c * g.kh * g.kw));
      kernels::depthwise_nhwc_taps(g, w->data<float>(), weight_.data());
    } else if (w) {
      weight_.assign(w->data<float>(), w->data<float>() + g.c * g.kh * g.kw);
    }
    if (has_bias && b) bias_.assign(b->data<float>(), b->data<float>() + g.c);
    ep_.lo = lo;
    ep_.hi = hi;
  }
  // Bias, clamp and activation go in the kernel; a residual (then the clamp and activation) in a
  // pass after.
  bool take_epilogue(const gemm_ops::GemmDesc& d) override {
    if (!gemm_ops::fold_into_channel_kernel(d, g_.c, has_bias_, bias_, ep_.lo, ep_.hi, tail_)) return false;
    // Without a residual the activation follows the (folded) clamp: the kernel applies it too.
    ep_.act = kernels::Activation::kNone;
    if (tail_.residual < 0) std::swap(ep_.act, tail_.act);
    return true;
  }
  Tensor run(const std::vector<const RtValue*>& ins) override {
    Tensor y = output_tensor(DType::kFloat32, channels_last_ ? std::vector<int64_t>{g_.n, g_.ho, g_.wo, g_.c}
                                                             : std::vector<int64_t>{g_.n, g_.c, g_.ho, g_.wo});
    const float* w = weight_.empty() ? ins[1]->tensor.data<float>() : weight_.data();
    kernels::DepthwiseEpilogue ep = ep_;
    if (has_bias_) ep.bias = bias_.empty() ? ins[2]->tensor.data<float>() : bias_.data();
    if (channels_last_)
      kernels::depthwise_conv2d_nhwc_f32(g_, ins[0]->tensor.data<float>(), w, y.data<float>(), ep,
                                         gemm_ops::pool_parallel());
    else
      kernels::depthwise_conv2d_f32(g_, ins[0]->tensor.data<float>(), w, y.data<float>(), ep,
                                    gemm_ops::pool_parallel());
    tail_.apply(y.data<float>(), y.numel(), ins);
    return y;
  }

 private:
  kernels::DepthwiseGeom g_;
  bool has_bias_, channels_last_;
  std::vector<float> weight_, bias_;  // constant operands, copied once (channels last: tap-major)
  kernels::DepthwiseEpilogue ep_;
  gemm_ops::EpilogueTail tail_;  // residual + clamp after the kernel, when there is a residual
};

// The op after the checks both layouts share; channels last needs the weight at plan time (its
// taps are repacked once).
std::unique_ptr<gemm_ops::GemmOp> checked_op(const kernels::DepthwiseGeom& g, const Tensor* weight, bool has_bias,
                                             const Tensor* bias, float clamp_lo, float clamp_hi, bool channels_last) {
  if (!kernels::depthwise_geom_ok(g) || (channels_last && !weight)) return nullptr;
  if (weight && (weight->dtype() != DType::kFloat32 || weight->numel() != g.c * g.kh * g.kw)) return nullptr;
  if (bias && (bias->dtype() != DType::kFloat32 || bias->numel() != g.c)) return nullptr;
  return std::make_unique<DepthwiseConvOp>(g, weight, has_bias, bias, clamp_lo, clamp_hi, channels_last);
}

// The depthwise geometry of a conv descriptor's (layout-free) geometry, or nullopt.
std::optional<kernels::DepthwiseGeom> depthwise_geom(const std::optional<ConvGeom>& cg) {
  if (!cg || cg->c <= 1 || cg->group != cg->c || cg->co != cg->c || cg->cg != 1) return std::nullopt;
  kernels::DepthwiseGeom g;
  g.n = cg->n, g.c = cg->c, g.h = cg->h, g.w = cg->w, g.kh = cg->kh, g.kw = cg->kw, g.ho = cg->ho, g.wo = cg->wo;
  g.sh = cg->sh, g.sw = cg->sw, g.dh = cg->dh, g.dw = cg->dw, g.pt = cg->pt, g.pl = cg->pl;
  return g;
}

std::unique_ptr<gemm_ops::GemmOp> op_for_desc(const gemm_ops::GemmDesc& d, const std::optional<ConvGeom>& cg,
                                              bool channels_last) {
  std::optional<kernels::DepthwiseGeom> g = depthwise_geom(cg);
  if (!g) return nullptr;
  const bool has_bias = d.operands.size() > 2 && d.operands[2].present;
  return checked_op(*g, d.operands[1].constant, has_bias, has_bias ? d.operands[2].constant : nullptr,
                    -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::infinity(), channels_last);
}

}  // namespace

std::unique_ptr<gemm_ops::GemmOp> make_depthwise_conv_op(const kernels::DepthwiseGeom& g, const Tensor* weight,
                                                         bool has_bias, const Tensor* bias, float clamp_lo,
                                                         float clamp_hi) {
  return checked_op(g, weight, has_bias, bias, clamp_lo, clamp_hi, false);
}

std::unique_ptr<gemm_ops::GemmOp> make_depthwise_conv_op(const gemm_ops::GemmDesc& d) {
  return op_for_desc(d, conv_geom(d), false);
}

std::unique_ptr<gemm_ops::GemmOp> make_depthwise_nhwc_conv_op(const gemm_ops::GemmDesc& d) {
  return op_for_desc(d, conv_geom_channels_last(d), true);
}

}  // namespace kiln::conv_ops
