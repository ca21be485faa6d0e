// Single-pixel Conv as a GEMV (see conv_gemv.h).
#include "runtime/conv_gemv.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/x86/f32_gemv.h"
#include "runtime/conv_geom.h"
#include "runtime/gemm_epilogue.h"
#include "runtime/thread_pool.h"

namespace kiln::conv_ops {
namespace {

class GemvConvOp : public gemm_ops::GemmOp {
 public:
  GemvConvOp(const ConvGeom& g, const Tensor& w, const gemm_ops::Operand* bias) : g_(g) {
    // W [Co, C] is op(B) transposed: y[co] = sum_c x[c] * W[co][c].
    weight_ = kernels::pack_gemv_b(true, g.c, g.co, w.data<float>(), g.c);
    has_bias_ = bias && bias->present;
    if (has_bias_ && bias->constant) bias_.assign(bias->constant->data<float>(), bias->constant->data<float>() + g.co);
  }
  // Bias and clamp fold into the kernel's bias and a clamp over the output; the residual and the
  // activation run over the (small) output after it.
  bool take_epilogue(const gemm_ops::GemmDesc& d) override {
    return gemm_ops::fold_into_channel_kernel(d, g_.co, has_bias_, bias_, lo_, hi_, tail_);
  }
  Tensor run(const std::vector<const RtValue*>& ins) override {
    Tensor y = output_tensor(DType::kFloat32, {g_.n, g_.co, 1, 1});
    const float* x = ins[0]->tensor.data<float>();
    const float* b = has_bias_ ? (bias_.empty() ? ins[2]->tensor.data<float>() : bias_.data()) : nullptr;
    float* out = y.data<float>();
    const bool clamp = lo_ > -std::numeric_limits<float>::infinity() || hi_ < std::numeric_limits<float>::infinity();
    for (int64_t img = 0; img < g_.n; ++img) {
      float* yi = out + img * g_.co;
      kernels::gemv_packed(x + img * g_.c, 1.0f, weight_, b, false, yi,
                           [](int64_t n, std::function<void(int64_t, int64_t)> fn) {
                             current_thread_pool().parallel_for(n, fn);
                           });
      if (clamp)
        for (int64_t o = 0; o < g_.co; ++o) yi[o] = std::min(std::max(yi[o], lo_), hi_);
    }
    tail_.apply(out, y.numel(), ins);
    return y;
  }

 private:
  ConvGeom g_;
  kernels::PackedGemvB weight_;
  bool has_bias_ = false;
  std::vector<float> bias_;  // constant bias (node + epilogue), or empty for a run-time one
  float lo_ = -std::numeric_limits<float>::infinity(), hi_ = std::numeric_limits<float>::infinity();
  gemm_ops::EpilogueTail tail_;
};

}  // namespace

std::unique_ptr<gemm_ops::GemmOp> make_gemv_conv_op(const gemm_ops::GemmDesc& d) {
  std::optional<ConvGeom> g = conv_geom(d);
  if (!g || g->group != 1 || !d.operands[1].constant || d.input_scale >= 0) return nullptr;
  if (g->h != 1 || g->w != 1 || g->kh != 1 || g->kw != 1 || g->ho != 1 || g->wo != 1 || g->pt != 0 || g->pl != 0)
    return nullptr;
  const Tensor* w = d.operands[1].constant;
  if (w->dtype() != DType::kFloat32 || w->numel() != g->co * g->c) return nullptr;
  const gemm_ops::Operand* b = d.operands.size() > 2 && d.operands[2].present ? &d.operands[2] : nullptr;
  if (b && b->constant && (b->constant->dtype() != DType::kFloat32 || b->constant->numel() != g->co)) return nullptr;
  return std::make_unique<GemvConvOp>(*g, *w, b);
}

}  // namespace kiln::conv_ops
