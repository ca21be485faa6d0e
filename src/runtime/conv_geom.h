// Conv 2-D geometry from a gemm_ops::GemmDesc: shapes, strides, dilations and the resolved
// top/left padding (explicit pads or auto_pad SAME_UPPER/SAME_LOWER/VALID, as ONNX defines),
// checked against the planned output dims. Shared by the conv ops in runtime/conv_*.cc.
#pragma once

#include <cstdint>
#include <optional>

#include "runtime/gemm_ops.h"

namespace kiln::conv_ops {

struct ConvGeom {
  int64_t n = 0, c = 0, h = 0, w = 0;   // input [n, c, h, w]
  int64_t co = 0, cg = 0;               // output channels; input channels per group (weight dim 1)
  int64_t group = 1;
  int64_t kh = 0, kw = 0, ho = 0, wo = 0;
  int64_t sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0;
};

// The geometry of a float32 Conv 2-D descriptor with 4-D input, weight and output, or nullopt
// when the descriptor is not one (other dtypes, ranks, bad attributes, dims that disagree).
std::optional<ConvGeom> conv_geom(const gemm_ops::GemmDesc& d);

// The same for a channels-last descriptor (GemmKind::kConvNhwc: input [n, h, w, c], output
// [n, ho, wo, co]); the geometry is layout-free.
std::optional<ConvGeom> conv_geom_channels_last(const gemm_ops::GemmDesc& d);

// The same for a ConvInteger descriptor (GemmKind::kConvInteger: uint8 input, int8 weight,
// int32 output).
std::optional<ConvGeom> conv_integer_geom(const gemm_ops::GemmDesc& d);

}  // namespace kiln::conv_ops
