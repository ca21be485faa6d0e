// Conv op selection (see conv_select.h).
#include "runtime/conv_select.h"

#include "kernels/x86/f32_gemm.h"
#include "kernels/x86/f32_winograd.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>

#include "runtime/conv_depthwise.h"
#include "runtime/conv_gemm.h"
#include "runtime/conv_gemv.h"
#include "runtime/conv_stem.h"
#include "runtime/conv_geom.h"
#include "runtime/conv_winograd.h"

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

bool tunable_conv(const gemm_ops::GemmDesc& d) {
  if (d.kind != gemm_ops::GemmKind::kConv || d.operands.size() < 2 || !d.operands[1].present) return false;
  std::optional<ConvGeom> g = conv_geom(d);
  if (!g || g->group != 1 || d.operands[1].dtype != DType::kFloat32) return false;
  if (g->ho * g->wo <= 1) return false;                         // the GEMV op
  if (g->c <= 4 && g->sh == 2 && g->sw == 2 && d.input_scale < 0) return false;  // a stem (direct kernel)
  return true;
}

std::vector<gemm_ops::KernelChoice> tuning_candidates(const gemm_ops::GemmDesc& d, int threads) {
  std::vector<gemm_ops::KernelChoice> out;
  if (!tunable_conv(d)) return out;
  const ConvGeom g = *conv_geom(d);
  out.push_back({});
  std::vector<gemm_ops::ConvAlgo> algos{gemm_ops::ConvAlgo::kGemm, gemm_ops::ConvAlgo::kGemmPixelRows};
  const bool winograd = kernels::winograd_available() && g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 &&
                        g.dh == 1 && g.dw == 1;
  if (winograd) {
    algos.push_back(gemm_ops::ConvAlgo::kWinograd2);
    algos.push_back(gemm_ops::ConvAlgo::kWinograd4);
  }
  const kernels::F32GemmUkernel& base = kernels::f32_gemm_default();
  std::vector<int32_t> heights{0};
  for (const auto& k : kernels::f32_gemm_ukernels())
    if (k.isa == base.isa && k.nr == base.nr && k.kc == base.kc) heights.push_back(k.mr);
  // Thread splits of the weights-as-rows GEMM: column chunks x row groups, up to 4 tasks per thread.
  std::vector<std::pair<int32_t, int32_t>> splits{{0, 0}};
  const int t = std::max(1, threads);
  for (int32_t c = 1; c <= 4 * t; c *= 2)
    for (int32_t r = 1; r * c <= 4 * t; r *= 2)
      if (c * r >= t) splits.push_back({c, r});
  for (gemm_ops::ConvAlgo a : algos) {
    const bool rows_gemm = a == gemm_ops::ConvAlgo::kGemm;
    for (int32_t mr : heights) {
      if (a == gemm_ops::ConvAlgo::kWinograd2 || a == gemm_ops::ConvAlgo::kWinograd4) {
        if (mr != 0) continue;  // Winograd picks its own kernel per transformed GEMM
      }
      for (const auto& [c, r] : splits) {
        if (!rows_gemm && c != 0) continue;
        gemm_ops::KernelChoice k;
        k.algo = a;
        k.mr = mr;
        k.chunks = c;
        k.groups = r;
        out.push_back(k);
      }
    }
  }
  return out;
}

std::unique_ptr<gemm_ops::GemmOp> make_conv_op(const gemm_ops::GemmDesc& d) {
  if (conv_ops_env() == "legacy") return nullptr;
  if (d.choice.algo != gemm_ops::ConvAlgo::kDefault && tunable_conv(d))
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
