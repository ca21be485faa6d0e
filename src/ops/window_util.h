// Sliding-window geometry shared by Conv, ConvTranspose and the pooling ops: attribute parsing,
// auto_pad resolution and output sizes, for any number of spatial dims.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ops/registry.h"

namespace kiln {

struct Window {
  int nsp = 0;                     // number of spatial dims
  std::vector<int64_t> in;         // input spatial sizes (-1 unknown, static inference only)
  std::vector<int64_t> kernel;
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> pads;       // nsp begins, then nsp ends
  std::vector<int64_t> out;        // output spatial sizes (-1 unknown)

  int64_t eff_kernel(int i) const { return (kernel[i] - 1) * dilations[i] + 1; }
};

// Reads strides/dilations/pads/auto_pad (and ceil_mode for pools) and computes output sizes of a
// forward window op (Conv, pools). `kernel` is already known (attribute or weight shape). Fails
// with kInvalidModel on malformed attributes and kBadInput when the window does not fit.
// Unknown input sizes (-1) give unknown output sizes.
Window resolve_window(const AttrReader& at, const std::vector<int64_t>& in_spatial,
                      const std::vector<int64_t>& kernel, bool ceil_mode);

// The window of a transposed conv (ConvTranspose): `in` is X's spatial size, `out` Y's; pads from
// the attributes, or derived from output_shape / auto_pad (with output_padding) as the ONNX spec
// describes, so that pads[0..nsp) are where Y's first element sits in the full result. Fails
// like resolve_window.
Window resolve_transpose_window(const AttrReader& at, const std::vector<int64_t>& in,
                                const std::vector<int64_t>& kernel);

// Reads a per-spatial-dim int list attribute, defaulting to `fill`; checks its length and that
// every value is >= `min_value`.
std::vector<int64_t> spatial_attr(const AttrReader& at, const std::string& name, int nsp,
                                  int64_t fill, int64_t min_value);

// Calls f(index) for every multi-index of `dims` in row-major order.
template <class F>
void for_each_index(const std::vector<int64_t>& dims, F&& f) {
  int64_t total = 1;
  for (int64_t d : dims) total *= d;
  if (total == 0) return;
  std::vector<int64_t> idx(dims.size(), 0);
  for (int64_t i = 0; i < total; ++i) {
    f(static_cast<const std::vector<int64_t>&>(idx));
    for (size_t ax = dims.size(); ax-- > 0;) {
      if (++idx[ax] < dims[ax]) break;
      idx[ax] = 0;
    }
  }
}

int64_t product(const std::vector<int64_t>& v);

// Static inference helper: spatial sizes of input `i` (rank >= 3), -1 for unknown dims; false when
// the rank is unknown.
bool spatial_dims_of(const Type& t, std::vector<int64_t>* spatial);

}  // namespace kiln
