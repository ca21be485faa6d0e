// ConvTranspose op: GEMM into a per-thread column buffer, then col2im (see conv_transpose.h).
#include "runtime/conv_transpose.h"

#include <algorithm>
#include <limits>

#include "kernels/x86/f32_col2im.h"
#include "kernels/x86/f32_gemm_prepacked_a.h"
#include "runtime/gemm_epilogue.h"
#include "runtime/gemm_op_util.h"
#include "runtime/thread_pool.h"

namespace kiln::conv_ops {
namespace {

using kernels::ceil_div;

struct TransposeGeom {
  int64_t n = 0, ci = 0, co = 0;      // input [n, ci, win.h, win.w], output [n, co, win.ho, win.wo]
  int64_t group = 1, cg = 0, mg = 0;  // input / output channels per group
  kernels::Col2imGeom win;            // planes, filter, strides, dilations, pads
};

std::optional<TransposeGeom> transpose_geom(const gemm_ops::GemmDesc& d) {
  using gemm_ops::Operand;
  if (d.kind != gemm_ops::GemmKind::kConvTranspose || d.out_dtype != DType::kFloat32 || d.operands.size() < 2)
    return std::nullopt;
  const Operand &x = d.operands[0], &wt = d.operands[1];
  if (!x.present || !wt.present || x.dtype != DType::kFloat32 || wt.dtype != DType::kFloat32) return std::nullopt;
  if (x.dims.size() != 4 || wt.dims.size() != 4 || d.out_dims.size() != 4) return std::nullopt;
  if (d.strides.size() != 2 || d.dilations.size() != 2 || d.pads.size() != 4 || d.auto_pad != "NOTSET")
    return std::nullopt;
  TransposeGeom g;
  g.n = x.dims[0], g.ci = x.dims[1], g.win.h = x.dims[2], g.win.w = x.dims[3];
  g.group = d.group;
  g.win.kh = wt.dims[2], g.win.kw = wt.dims[3];
  g.co = d.out_dims[1], g.win.ho = d.out_dims[2], g.win.wo = d.out_dims[3];
  g.win.sh = d.strides[0], g.win.sw = d.strides[1], g.win.dh = d.dilations[0], g.win.dw = d.dilations[1];
  g.win.pt = d.pads[0], g.win.pl = d.pads[1];
  if (g.group <= 0 || g.ci <= 0 || g.ci % g.group != 0 || wt.dims[0] != g.ci) return std::nullopt;
  g.cg = g.ci / g.group;
  g.mg = wt.dims[1];
  if (g.mg <= 0 || g.mg * g.group != g.co || d.out_dims[0] != g.n) return std::nullopt;
  const kernels::Col2imGeom& c = g.win;
  if (g.n <= 0 || c.h <= 0 || c.w <= 0 || c.kh <= 0 || c.kw <= 0 || c.ho <= 0 || c.wo <= 0) return std::nullopt;
  if (c.sh <= 0 || c.sw <= 0 || c.dh <= 0 || c.dw <= 0) return std::nullopt;
  return g;
}

class ConvTransposeOp : public gemm_ops::GemmOp {
 public:
  // weight: the constant weight, or null when it arrives at run time (packed per run).
  ConvTransposeOp(const TransposeGeom& g, const Tensor* weight, const gemm_ops::Operand& bias) : g_(g) {
    has_bias_ = bias.present;
    if (bias.constant) bias_.assign(bias.constant->data<float>(), bias.constant->data<float>() + g.co);
    // Blocks of output channels whose columns (block * kh * kw rows of H * W) fit in a quarter of
    // L2, and at least 8 blocks per group when there are that many channels, so that threads
    // get work at batch 1.
    const int64_t taps = g.win.kh * g.win.kw, plane = g.win.h * g.win.w;
    const int64_t fit = std::max<int64_t>(1, kernels::l2_cache_bytes() / 4 / (taps * plane * 4));
    block_ = std::clamp<int64_t>(std::min(fit, ceil_div(g.mg, 8)), 1, g.mg);
    blocks_ = ceil_div(g.mg, block_);
    constant_weight_ = weight != nullptr;
    if (weight) pack_weights(weight->data<float>());
  }

  bool take_epilogue(const gemm_ops::GemmDesc& d) override {
    if (!gemm_ops::fold_into_channel_kernel(d, g_.co, has_bias_, bias_, lo_, hi_, tail_)) return false;
    if (tail_.residual >= 0) {  // applied per plane here, in the graph's order: residual, clamp
      lo_ = tail_.lo;
      hi_ = tail_.hi;
    }
    return true;
  }

  Tensor run(const std::vector<const RtValue*>& ins) override {
    Tensor y = output_tensor(DType::kFloat32, {g_.n, g_.co, g_.win.ho, g_.win.wo});
    const float* x = gemm_ops::fdata(ins[0]);
    const float* bias = !has_bias_ ? nullptr : !bias_.empty() ? bias_.data() : gemm_ops::fdata(ins[2]);
    const float* residual = tail_.residual_data(ins);
    float* out = y.data<float>();
    if (!constant_weight_) pack_weights(gemm_ops::fdata(ins[1]));
    const int64_t tasks = g_.n * g_.group * blocks_;
    // One task: its own GEMM serially; a single task (one output channel per group) gets the pool.
    const kernels::ParallelFor gemm_par = tasks == 1 ? gemm_ops::pool_parallel() : nullptr;
    const int threads = tasks == 1 ? current_thread_pool().num_threads() : 1;
    auto body = [&](int64_t t0, int64_t t1) {
      thread_local std::vector<float> col;
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t img = t / (g_.group * blocks_), grp = t / blocks_ % g_.group, b = t % blocks_;
        const kernels::PackedA& a = packed_[static_cast<size_t>(grp * blocks_ + b)];
        const int64_t plane = g_.win.h * g_.win.w;
        if (col.size() < static_cast<size_t>(a.m * plane)) col.resize(static_cast<size_t>(a.m * plane));
        kernels::sgemm_prepacked_a(a, plane, x + (img * g_.ci + grp * g_.cg) * plane, plane, col.data(), plane, {},
                                   gemm_par, threads);
        const int64_t c0 = grp * g_.mg + b * block_, channels = a.m / (g_.win.kh * g_.win.kw);
        for (int64_t c = 0; c < channels; ++c) {
          const int64_t at = (img * g_.co + c0 + c) * g_.win.ho * g_.win.wo;
          std::fill(out + at, out + at + g_.win.ho * g_.win.wo, bias ? bias[c0 + c] : 0.0f);
          kernels::col2im_add_plane(g_.win, col.data() + c * g_.win.kh * g_.win.kw * plane, out + at);
          finish_plane(out + at, residual ? residual + at : nullptr);
        }
      }
    };
    // (One task runs here: a parallel_for around it would serialize the GEMM's own.)
    if (tasks == 1) body(0, 1);
    else current_thread_pool().parallel_for(tasks, body);
    return y;
  }

 private:
  // Per group and block, A = W_g^T restricted to the block's channels: row (channel, tap), column
  // input channel; packed for the microkernels.
  void pack_weights(const float* w) {
    const int64_t taps = g_.win.kh * g_.win.kw;
    packed_.clear();
    for (int64_t grp = 0; grp < g_.group; ++grp)
      for (int64_t b = 0; b < blocks_; ++b) {
        const int64_t c0 = b * block_, rows = (std::min(g_.mg, c0 + block_) - c0) * taps;
        a_.assign(static_cast<size_t>(rows * g_.cg), 0.0f);
        for (int64_t k = 0; k < g_.cg; ++k) {
          const float* src = w + ((grp * g_.cg + k) * g_.mg + c0) * taps;
          for (int64_t r = 0; r < rows; ++r) a_[static_cast<size_t>(r * g_.cg + k)] = src[r];
        }
        packed_.push_back(kernels::pack_a(rows, g_.cg, a_.data(), g_.cg));
      }
  }

  // The fused epilogue on a complete plane: + residual, clamp, activation.
  void finish_plane(float* plane, const float* residual) const {
    const int64_t n = g_.win.ho * g_.win.wo;
    if (residual)
      for (int64_t k = 0; k < n; ++k) plane[k] += residual[k];
    if (lo_ > -std::numeric_limits<float>::infinity() || hi_ < std::numeric_limits<float>::infinity())
      for (int64_t k = 0; k < n; ++k) plane[k] = std::min(std::max(plane[k], lo_), hi_);
    kernels::apply_activation_inplace(tail_.act, plane, n);
  }

  TransposeGeom g_;
  int64_t block_ = 1, blocks_ = 1;          // output channels per block, blocks per group
  bool constant_weight_ = false;
  std::vector<kernels::PackedA> packed_;    // [group][block]
  std::vector<float> a_;                    // one block's W_g^T, before packing
  bool has_bias_ = false;
  std::vector<float> bias_;                 // the constant bias (empty: none, or run-time)
  float lo_ = -std::numeric_limits<float>::infinity(), hi_ = std::numeric_limits<float>::infinity();
  gemm_ops::EpilogueTail tail_;             // residual and activation (applied per plane)
};

}  // namespace

std::unique_ptr<gemm_ops::GemmOp> make_conv_transpose_op(const gemm_ops::GemmDesc& d) {
  const std::optional<TransposeGeom> g = transpose_geom(d);
  if (!g) return nullptr;
  const Tensor* w = d.operands[1].constant;
  if (w && (w->dtype() != DType::kFloat32 || w->numel() != g->ci * g->mg * g->win.kh * g->win.kw)) return nullptr;
  gemm_ops::Operand bias = d.operands.size() > 2 ? d.operands[2] : gemm_ops::Operand();
  if (bias.present && (bias.dtype != DType::kFloat32 || bias.dims != std::vector<int64_t>{g->co})) return nullptr;
  if (bias.constant && (bias.constant->dtype() != DType::kFloat32 || bias.constant->numel() != g->co)) return nullptr;
  return std::make_unique<ConvTransposeOp>(*g, w, bias);
}

}  // namespace kiln::conv_ops
