// Winograd F(4x4, 3x3) / F(2x2, 3x3) conv op (see conv_winograd.h).
#include "runtime/conv_winograd.h"

#include <algorithm>
#include <vector>

#include "kernels/x86/f32_winograd.h"
#include "runtime/conv_geom.h"
#include "runtime/gemm_epilogue.h"
#include "runtime/thread_pool.h"

namespace kiln::conv_ops {
namespace {

class WinogradConvOp : public gemm_ops::GemmOp {
 public:
  WinogradConvOp(const ConvGeom& g, const Tensor& w, const gemm_ops::GemmDesc& d, float lo, float hi, int tile)
      : g_(g) {
    wg_.m = tile;
    wg_.c = g.c, wg_.co = g.co, wg_.h = g.h, wg_.w = g.w, wg_.ho = g.ho, wg_.wo = g.wo, wg_.pt = g.pt, wg_.pl = g.pl;
    blocking_ = kernels::winograd_blocking(wg_);
    schedule_ = d.choice.chunks;  // a tuned schedule (GemmDesc::choice): 1 whole blocks per task, 2+ shared blocks
    weights_ = kernels::winograd_pack_weights(wg_, w.data<float>(), blocking_);
    epilogue_.init(d, g.co, lo, hi);
  }
  // Bias, residual, clamp and activation all go in the output transform.
  bool take_epilogue(const gemm_ops::GemmDesc& d) override {
    epilogue_.take(d);
    return true;
  }
  Tensor run(const std::vector<const RtValue*>& ins) override {
    const ConvGeom& g = g_;
    Tensor y = output_tensor(DType::kFloat32, {g.n, g.co, g.ho, g.wo});  // every element is written
    kernels::RowEpilogue ep = epilogue_.bind(ins, g.ho * g.wo);
    const float* res = ep.residual;
    ThreadPool& pool = current_thread_pool();
    const int64_t threads = pool.num_threads();
    const int64_t blocks = blocking_.count(), panels = weights_.panels;
    const int64_t vfloats = kernels::winograd_block_floats(wg_, blocking_, weights_.kernels->isa);
    const float* x = ins[0]->tensor.data<float>();
    for (int64_t img = 0; img < g.n; ++img) {
      const float* xi = x + img * g.c * g.h * g.w;
      float* yi = y.data<float>() + img * g.co * g.ho * g.wo;
      if (res) ep.residual = res + img * g.co * g.ho * g.wo;
      // Whole blocks per task keep the transformed input in its core's L2: much faster than
      // sharing blocks when that balances the threads to within 3/4 (2 threads: 1, 2, 3, 4+).
      const bool whole_blocks =
          schedule_ == 0 ? 4 * blocks >= 3 * threads * ((blocks + threads - 1) / threads) : schedule_ == 1;
      if (whole_blocks) {
        pool.parallel_for(blocks, [&](int64_t b0, int64_t b1) {
          thread_local std::vector<float> v;
          if (v.size() < static_cast<size_t>(vfloats)) v.resize(static_cast<size_t>(vfloats));
          for (int64_t b = b0; b < b1; ++b) {
            kernels::winograd_input_block(wg_, blocking_, weights_, xi, b, 0, g.c, v.data());
            kernels::winograd_gemm_output_block(wg_, blocking_, weights_, v.data(), b, 0, panels, ep, yi);
          }
        });
        continue;
      }
      // Too few blocks to share: all blocks' inputs first, split over channels too, then
      // (block, output panel) tasks.
      if (v_.size() < static_cast<size_t>(blocks * vfloats)) v_.resize(static_cast<size_t>(blocks * vfloats));
      constexpr int64_t kChannelChunk = 16;
      const int64_t chunks = (g.c + kChannelChunk - 1) / kChannelChunk;
      pool.parallel_for(blocks * chunks, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          const int64_t b = t / chunks, c0 = (t % chunks) * kChannelChunk;
          kernels::winograd_input_block(wg_, blocking_, weights_, xi, b, c0, std::min(g.c, c0 + kChannelChunk),
                                        v_.data() + b * vfloats);
        }
      });
      // A task's consecutive panels of one block in one call: the AVX2 driver runs several
      // panels' GEMMs over each point's input while it is in L1.
      pool.parallel_for(blocks * panels, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1;) {
          const int64_t b = t / panels, p = t % panels, p_end = std::min(panels, p + (t1 - t));
          kernels::winograd_gemm_output_block(wg_, blocking_, weights_, v_.data() + b * vfloats, b, p, p_end, ep,
                                              yi);
          t += p_end - p;
        }
      });
    }
    return y;
  }

 private:
  ConvGeom g_;
  kernels::WinogradGeom wg_;
  kernels::WinogradBlocking blocking_;
  int32_t schedule_ = 0;
  kernels::WinogradWeights weights_;
  gemm_ops::ConvEpilogue epilogue_;
  std::vector<float> v_;  // all blocks' transformed input (shared-block schedule)
};

}  // namespace

int winograd_tile(const gemm_ops::GemmDesc& d) {
  std::optional<ConvGeom> g = conv_geom(d);
  if (!g) return 4;
  // F(4x4) from 11x11 outputs (9 tiles, little padding); F(2x2) below, where it fills a
  // 16-column panel (7x7: 16 tiles of 2x2, but only 4 of 4x4) and measured faster up to 10x10.
  return ((g->ho + 3) / 4) * ((g->wo + 3) / 4) >= 9 && g->ho * g->wo >= 120 ? 4 : 2;
}

std::unique_ptr<gemm_ops::GemmOp> make_winograd_conv_op(const gemm_ops::GemmDesc& d, float clamp_lo,
                                                        float clamp_hi, int tile) {
  if (!kernels::winograd_available()) return nullptr;
  std::optional<ConvGeom> g = conv_geom(d);
  if (!g || g->group != 1 || g->kh != 3 || g->kw != 3 || g->sh != 1 || g->sw != 1 || g->dh != 1 || g->dw != 1)
    return nullptr;
  const Tensor* w = d.operands[1].constant;
  if (!w || w->dtype() != DType::kFloat32 || w->numel() != g->co * g->c * 9) return nullptr;
  const bool has_bias = d.operands.size() > 2 && d.operands[2].present;
  const Tensor* b = has_bias ? d.operands[2].constant : nullptr;
  if (b && (b->dtype() != DType::kFloat32 || b->numel() != g->co)) return nullptr;
  if (tile != 2 && tile != 4) tile = winograd_tile(d);
  return std::make_unique<WinogradConvOp>(*g, *w, d, clamp_lo, clamp_hi, tile);
}

}  // namespace kiln::conv_ops
