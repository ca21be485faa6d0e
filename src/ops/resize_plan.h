// The interpolation plan of a Resize/Upsample node (ops/resize.cc): per resized axis, for every
// output position its source indices (clamped) and weights, exactly as the reference kernel
// applies them (separably, one axis after another). Shared by the reference kernel and the
// generated-kernel lowering (ops/lower/resize.cc), so that both pick the same sources.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ops/registry.h"

namespace kiln {

struct ResizeAxis {
  size_t axis = 0;
  int64_t in_len = 0, out_len = 0;
  int taps = 0;                // sources per output position
  std::vector<int64_t> idx;    // [out_len][taps] source indices, clamped into [0, in_len)
  std::vector<double> w;       // [out_len][taps] weights
  std::vector<bool> extrap;    // [out_len] tf_crop_and_resize positions outside the input
};

struct ResizePlan {
  std::vector<int64_t> out;      // output dims
  std::string mode;              // nearest, linear, cubic
  std::vector<ResizeAxis> axes;  // the axes that change, in order (identity axes left out)
  double extrapolation = 0.0;    // the value of extrapolated positions
};

// operands[i]: input i of the node (null when absent or, for the lowering, not constant; the
// scales/sizes/roi it reads must be present). Fails (kInvalidModel/kBadInput) like the kernel on
// bad attributes or operands.
ResizePlan resize_plan(const AttrReader& at, int64_t opset, const std::vector<int64_t>& in,
                       const std::vector<const Tensor*>& operands);

}  // namespace kiln
