// Helpers shared by the reference kernels: broadcasting, axes, strided iteration, common
// shape-inference functions and dtype conversion.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/registry.h"

namespace kiln {

// ONNX multidirectional (numpy) broadcasting of two or more shapes; throws kBadInput located at
// the node on mismatch.
std::vector<int64_t> broadcast_dims(const AttrReader& at, const std::vector<std::vector<int64_t>>& shapes);
// Row-major strides of `dims`.
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& dims);
// Strides of `in` viewed as broadcast to `out` (0 on broadcast dims); `in` is right-aligned.
std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& in, const std::vector<int64_t>& out);
// Maps a possibly negative axis into [0, rank); throws kInvalidModel when out of range.
int64_t normalize_axis(const AttrReader& at, int64_t axis, int64_t rank);
std::vector<int64_t> normalize_axes(const AttrReader& at, std::vector<int64_t> axes, int64_t rank);

// Calls f(out_index, offsets) for each element of `out_dims` in row-major order, where
// offsets[k] is the element offset into input k given its (broadcast) strides.
template <class F>
void for_each_broadcast(const std::vector<int64_t>& out_dims,
                        const std::vector<std::vector<int64_t>>& in_strides, F&& f) {
  const size_t rank = out_dims.size();
  const size_t n_in = in_strides.size();
  int64_t total = 1;
  for (int64_t d : out_dims) total *= d;
  if (total == 0) return;
  std::vector<int64_t> idx(rank, 0);
  std::vector<int64_t> off(n_in, 0);
  for (int64_t i = 0; i < total; ++i) {
    f(i, off.data());
    for (size_t ax = rank; ax-- > 0;) {
      if (++idx[ax] < out_dims[ax]) {
        for (size_t k = 0; k < n_in; ++k) off[k] += in_strides[k][ax];
        break;
      }
      for (size_t k = 0; k < n_in; ++k) off[k] -= in_strides[k][ax] * (out_dims[ax] - 1);
      idx[ax] = 0;
    }
  }
}

// Converts a tensor to another element type (numeric, bool, f16/bf16; strings via Cast only).
Tensor convert_tensor(const Tensor& t, DType to);

// Shape inference helpers usable as OpSchema::infer.
void infer_same_as_input0(InferContext& ctx);  // output 0 has input 0's type
void infer_broadcast(InferContext& ctx);        // output 0: broadcast of all inputs, dtype of input 0
void infer_broadcast_bool(InferContext& ctx);   // like infer_broadcast but bool output

}  // namespace kiln
