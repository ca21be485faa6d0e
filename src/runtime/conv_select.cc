// Conv op selection (see conv_select.h).
#include "runtime/conv_select.h"

#include <cstdlib>
#include <string>

#include "runtime/conv_depthwise.h"
#include "runtime/conv_gemm.h"
#include "runtime/conv_geom.h"
#include "runtime/conv_winograd.h"

namespace kiln::conv_ops {
namespace {

// KILN_CONV_OPS, read once: "legacy", "winograd" or unset.
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
  // Measured per layer (1 thread, AVX-512): 15-25% faster than the GEMM path from 28x28 outputs
  // with >= 32 channels; slower on 14x14 and below (too few tiles per GEMM) and on thin layers.
  // (Whole ResNet-18/50 runs showed no clear gain yet: the transforms are not tuned.)
  const int64_t tiles = ((g->ho + 3) / 4) * ((g->wo + 3) / 4);
  return tiles >= 49 && g->c >= 32 && g->co >= 32;
}

std::unique_ptr<gemm_ops::GemmOp> make_conv_op(const gemm_ops::GemmDesc& d) {
  if (conv_ops_env() == "legacy") return nullptr;
  if (auto op = make_depthwise_conv_op(d)) return op;
  // Winograd is opt-in: on ResNet-50 its F(4x4) rounding (max abs 8e-5 on the logits) exceeds
  // the models_vs_onnxruntime tolerance (rtol 1e-4, atol 1e-5; onnxruntime's own noise 3.5e-5).
  if (conv_ops_env() == "winograd" && winograd_preferred(d))
    if (auto op = make_winograd_conv_op(d)) return op;
  return make_gemm_conv_op(d);
}

}  // namespace kiln::conv_ops
