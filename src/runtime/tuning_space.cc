// The tuner's search space per descriptor (see tuning_space.h).
#include "runtime/tuning_space.h"

#include <algorithm>

#include "kernels/x86/f32_gemm.h"
#include "kernels/x86/f32_winograd.h"
#include "runtime/conv_geom.h"
#include "runtime/conv_gemv.h"
#include "runtime/conv_stem.h"
#include "runtime/gemm_op_util.h"

namespace kiln::tune_space {
namespace {

using gemm_ops::ConvAlgo;
using gemm_ops::GemmKind;
using gemm_ops::KernelChoice;

bool tunable_conv(const gemm_ops::GemmDesc& d) {
  if (d.operands.size() < 2 || !d.operands[1].present) return false;
  std::optional<conv_ops::ConvGeom> g = conv_ops::conv_geom(d);
  if (!g || g->group != 1 || d.operands[1].dtype != DType::kFloat32) return false;
  // The single-pixel and stem convs have their own kernels (conv_select.cc picks them first).
  return !conv_ops::gemv_conv_covers(d) && !conv_ops::stem_conv_covers(d);
}

// MatMul [..., M, K] x [K, N] and Gemm with a constant 2-D B and M > 1 (the sgemm_packed path;
// GEMVs and batched MatMuls have their own ops).
bool tunable_gemm(const gemm_ops::GemmDesc& d) {
  if (d.operands.size() < 2 || !d.operands[0].present || !d.operands[1].present) return false;
  const gemm_ops::Operand &a = d.operands[0], &b = d.operands[1];
  if (a.dtype != DType::kFloat32 || b.dtype != DType::kFloat32 || b.dims.size() != 2 || a.dims.size() < 2) return false;
  if (d.kind == GemmKind::kGemm && a.dims.size() != 2) return false;
  const int64_t k = d.kind == GemmKind::kGemm && d.trans_a ? a.dims[0] : a.dims.back();
  const int64_t rows = k > 0 ? gemm_ops::numel(a.dims) / k : 0;
  return rows > 1;
}

// The micro-kernel heights that read the default kernel's packed B (0: the default's pick first).
std::vector<int32_t> heights() {
  const kernels::F32GemmUkernel& base = kernels::f32_gemm_default();
  std::vector<int32_t> out{0};
  for (const auto& k : kernels::f32_gemm_ukernels())
    if (k.isa == base.isa && k.nr == base.nr && k.kc == base.kc) out.push_back(k.mr);
  return out;
}

// Column chunks x row groups, powers of two up to 4 tasks per thread, at least one per thread
// ({0, 0}: choose_gemm_split's, first).
std::vector<std::pair<int32_t, int32_t>> splits(int threads) {
  std::vector<std::pair<int32_t, int32_t>> out{{0, 0}};
  const int t = std::max(1, threads);
  for (int32_t c = 1; c <= 4 * t; c *= 2)
    for (int32_t r = 1; r * c <= 4 * t; r *= 2)
      if (c * r >= t) out.push_back({c, r});
  return out;
}

void add_gemm_choices(ConvAlgo algo, int threads, std::vector<KernelChoice>& out) {
  for (int32_t mr : heights())
    for (const auto& [c, r] : splits(threads)) {
      const KernelChoice k{algo, mr, c, r};
      if (!k.is_default()) out.push_back(k);
    }
}

}  // namespace

bool tunable(const gemm_ops::GemmDesc& d) {
  switch (d.kind) {
    case GemmKind::kConv: return tunable_conv(d);
    case GemmKind::kMatMul:
    case GemmKind::kGemm: return tunable_gemm(d);
    default: return false;
  }
}

std::vector<KernelChoice> candidates(const gemm_ops::GemmDesc& d, int threads) {
  std::vector<KernelChoice> out;
  if (!tunable(d)) return out;
  out.push_back({});
  if (d.kind != GemmKind::kConv) {
    add_gemm_choices(ConvAlgo::kDefault, threads, out);
    return out;
  }
  const conv_ops::ConvGeom g = *conv_ops::conv_geom(d);
  // Either GEMM orientation: every height and split; Winograd: its own blocking.
  add_gemm_choices(ConvAlgo::kGemm, threads, out);
  add_gemm_choices(ConvAlgo::kGemmPixelRows, threads, out);
  // Winograd's thread schedule on several threads (split=1x1: whole blocks per task, 2x1: the
  // blocks' inputs first, then block x panel tasks; default: by how evenly blocks spread).
  if (kernels::winograd_available() && g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1)
    for (ConvAlgo a : {ConvAlgo::kWinograd2, ConvAlgo::kWinograd4}) {
      out.push_back({a, 0, 0, 0});
      if (threads > 1) {
        out.push_back({a, 0, 1, 1});
        out.push_back({a, 0, 2, 1});
      }
    }
  return out;
}

}  // namespace kiln::tune_space
