// Conv 2-D geometry from a GemmDesc (see conv_geom.h).
#include "runtime/conv_geom.h"

#include <algorithm>

namespace kiln::conv_ops {

std::optional<ConvGeom> conv_geom(const gemm_ops::GemmDesc& d) {
  if (d.kind != gemm_ops::GemmKind::kConv || d.out_dtype != DType::kFloat32) return std::nullopt;
  if (d.operands.size() < 2 || !d.operands[0].present || !d.operands[1].present) return std::nullopt;
  for (const auto& o : d.operands)
    if (o.present && o.dtype != DType::kFloat32) return std::nullopt;
  const auto& x = d.operands[0].dims;
  const auto& w = d.operands[1].dims;
  const auto& y = d.out_dims;
  if (x.size() != 4 || w.size() != 4 || y.size() != 4) return std::nullopt;
  ConvGeom g;
  g.n = x[0], g.c = x[1], g.h = x[2], g.w = x[3];
  g.co = w[0], g.cg = w[1], g.kh = w[2], g.kw = w[3], g.ho = y[2], g.wo = y[3];
  g.group = d.group;
  if (g.n <= 0 || g.c <= 0 || g.h <= 0 || g.w <= 0 || g.co <= 0 || g.kh <= 0 || g.kw <= 0 || g.ho <= 0 || g.wo <= 0)
    return std::nullopt;
  if (g.group <= 0 || g.c % g.group != 0 || g.co % g.group != 0 || g.cg != g.c / g.group) return std::nullopt;
  if (y[0] != g.n || y[1] != g.co) return std::nullopt;
  if (d.strides.size() != 2 || d.dilations.size() != 2 || d.pads.size() != 4) return std::nullopt;
  g.sh = d.strides[0], g.sw = d.strides[1], g.dh = d.dilations[0], g.dw = d.dilations[1];
  if (g.sh <= 0 || g.sw <= 0 || g.dh <= 0 || g.dw <= 0) return std::nullopt;
  const int64_t span_h = (g.kh - 1) * g.dh + 1, span_w = (g.kw - 1) * g.dw + 1;
  int64_t pt = 0, pl = 0, pb = 0, pr = 0;
  if (d.auto_pad == "NOTSET") {
    pt = d.pads[0], pl = d.pads[1], pb = d.pads[2], pr = d.pads[3];
  } else if (d.auto_pad == "SAME_UPPER" || d.auto_pad == "SAME_LOWER") {
    if (g.ho != (g.h + g.sh - 1) / g.sh || g.wo != (g.w + g.sw - 1) / g.sw) return std::nullopt;
    const int64_t th = std::max<int64_t>(0, (g.ho - 1) * g.sh + span_h - g.h);
    const int64_t tw = std::max<int64_t>(0, (g.wo - 1) * g.sw + span_w - g.w);
    const bool upper = d.auto_pad == "SAME_UPPER";
    pt = upper ? th / 2 : th - th / 2, pb = th - pt;
    pl = upper ? tw / 2 : tw - tw / 2, pr = tw - pl;
  } else if (d.auto_pad != "VALID") {
    return std::nullopt;
  }
  if (pt < 0 || pl < 0 || pb < 0 || pr < 0) return std::nullopt;
  if (g.h + pt + pb < span_h || g.w + pl + pr < span_w) return std::nullopt;
  if ((g.h + pt + pb - span_h) / g.sh + 1 != g.ho || (g.w + pl + pr - span_w) / g.sw + 1 != g.wo) return std::nullopt;
  g.pt = pt, g.pl = pl;
  if (d.operands.size() > 2 && d.operands[2].present &&
      (d.operands[2].dims.size() != 1 || d.operands[2].dims[0] != g.co))
    return std::nullopt;
  return g;
}

std::optional<ConvGeom> conv_geom_channels_last(const gemm_ops::GemmDesc& d) {
  if (d.kind != gemm_ops::GemmKind::kConvNhwc || d.operands.empty()) return std::nullopt;
  gemm_ops::GemmDesc first = d;
  first.kind = gemm_ops::GemmKind::kConv;
  for (std::vector<int64_t>* v : {&first.operands[0].dims, &first.out_dims})
    if (v->size() == 4) *v = {(*v)[0], (*v)[3], (*v)[1], (*v)[2]};
  return conv_geom(first);
}

std::optional<ConvGeom> conv_integer_geom(const gemm_ops::GemmDesc& d) {
  const auto& o = d.operands;
  if (d.kind != gemm_ops::GemmKind::kConvInteger || d.out_dtype != DType::kInt32 || o.size() < 2 ||
      o[0].dtype != DType::kUInt8 || o[1].dtype != DType::kInt8)
    return std::nullopt;
  gemm_ops::GemmDesc f = d;  // the same geometry as a float Conv without bias
  f.kind = gemm_ops::GemmKind::kConv;
  f.out_dtype = DType::kFloat32;
  f.operands.resize(2);
  for (auto& x : f.operands) x.dtype = DType::kFloat32;
  return conv_geom(f);
}

}  // namespace kiln::conv_ops
