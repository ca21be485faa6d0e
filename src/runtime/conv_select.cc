// Conv op selection (see conv_select.h).
#include "runtime/conv_select.h"

#include <cstdlib>
#include <limits>
#include <string>

#include "runtime/conv_depthwise.h"
#include "runtime/conv_gemm.h"
#include "runtime/conv_gemv.h"
#include "runtime/conv_stem.h"
#include "runtime/conv_geom.h"
#include "runtime/conv_winograd.h"
#include "runtime/tuning_space.h"

namespace kiln::conv_ops {
namespace {

// KILN_CONV_OPS, read once: "legacy", "direct", or anything else (the default choice).
const std::string& conv_ops_env() {
  static const std::string v = [] {
    const char* e = std::getenv("KILN_CONV_OPS");
    return std::string(e ? e : "");
  }();
  return v;
}

}  // namespace

bool winograd_preferred(const gemm_ops::GemmDesc& d) {
  std::optional<ConvGeom> g = conv_geom(d);
  if (!g) return false;
  // Measured per layer against the GEMM path (1 thread, AVX-512). F(4x4): 2.2-2.8x faster at
  // 56x56 and 28x28 with 64-128 channels, 2.7-4.3x with 4-32 channels, 1.5-2.1x at 12x12 to
  // 14x14 (16-column panels), 1.3x at 11x11. Below that F(2x2) (winograd_tile): 1.4-1.9x at
  // 6x6 to 10x10 (7x7 with 512 channels: 1.4x), no gain at 5x5 and 4x4. AVX2 (Zen 3, 6x16
  // kernel), the same rule: F(4x4) 2.3-5x at 56x56 to 12x12 with 64-256 channels, 1.1-2.9x with
  // 4-16; F(2x2) 1.5x at 6x6 and 1.8x at 7x7 x 512; 5x5 level (0.41 against 0.47 ms), 4x4 1.7x
  // slower.
  return g->ho * g->wo >= 36 && g->c >= 4 && g->co >= 4;
}

namespace {

// The op of a tuned choice, or null when its algorithm does not cover the descriptor (the
// default rules then decide, so a stale record never breaks a model).
std::unique_ptr<gemm_ops::GemmOp> make_chosen_conv_op(const gemm_ops::GemmDesc& d) {
  const float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  switch (d.choice.algo) {
    case gemm_ops::ConvAlgo::kWinograd2: return make_winograd_conv_op(d, lo, hi, 2);
    case gemm_ops::ConvAlgo::kWinograd4: return make_winograd_conv_op(d, lo, hi, 4);
    case gemm_ops::ConvAlgo::kGemm:
    case gemm_ops::ConvAlgo::kGemmPixelRows: return make_gemm_conv_op(d, lo, hi);
    case gemm_ops::ConvAlgo::kDefault: break;
  }
  return nullptr;
}

}  // namespace

std::unique_ptr<gemm_ops::GemmOp> make_conv_op(const gemm_ops::GemmDesc& d) {
  if (conv_ops_env() == "legacy") return nullptr;
  if (d.choice.algo != gemm_ops::ConvAlgo::kDefault && tune_space::tunable(d))
    if (auto op = make_chosen_conv_op(d)) return op;
  if (auto op = make_depthwise_conv_op(d)) return op;
  if (auto op = make_gemv_conv_op(d)) return op;
  // Stems (1-4 input channels, stride 2): direct, FMA-bound, instead of a GEMM with K = 27-147.
  if (auto op = make_stem_conv_op(d)) return op;
  // F(4x4, 3x3) rounds differently from the direct sum (ResNet-50 logits: max abs 6e-5 against
  // onnxruntime, whose own optimized-vs-unoptimized noise is 3.5e-5); "direct" opts out.
  if (conv_ops_env() != "direct" && winograd_preferred(d))
    if (auto op = make_winograd_conv_op(d)) return op;
  return make_gemm_conv_op(d);
}

}  // namespace kiln::conv_ops
