// Local helpers shared by the data-movement kernels (tensor.cc, pad.cc, indexing.cc, resize.cc):
// dispatch on storage width, strided copies and small shape-inference utilities.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ops/op_util.h"

namespace kiln {

// The [start, end) range of dims a Shape node returns for an input of rank `rank`.
std::pair<int64_t, int64_t> shape_range(const AttrReader& at, int64_t opset, int64_t rank);
// What a Shape node (its start/end attributes in `at`) returns for an input of `dims`.
Tensor shape_value(const AttrReader& at, int64_t opset, const std::vector<int64_t>& dims);

// Calls f(TypeTag<T>{}) with an unsigned integer type of the element's width (or std::string),
// so kernels that only move elements compile once per width instead of once per dtype.
template <class F>
decltype(auto) visit_storage(DType t, F&& f) {
  if (t == DType::kString) return f(TypeTag<std::string>{});
  switch (dtype_size(t)) {
    case 1:
      return f(TypeTag<uint8_t>{});
    case 2:
      return f(TypeTag<uint16_t>{});
    case 4:
      return f(TypeTag<uint32_t>{});
    case 8:
      return f(TypeTag<uint64_t>{});
    default:
      throw_unsupported_dtype(t, "this data-movement operation");
  }
}

// dst[i] = src[base + sum_k idx_k * strides[k]] for every element i of dst (row-major over
// dst.dims(), idx its multi-index). Strides may be zero (broadcast) or negative (reversal).
void strided_copy(const Tensor& src, Tensor& dst, int64_t base,
                  const std::vector<int64_t>& strides);

// "[1,-1,3]": like dims_to_string, but prints negative values instead of "?".
inline std::string ints_to_string(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

// "f32[2,3]": element type and shape, for messages.
inline std::string type_string(const Tensor& t) {
  return std::string(dtype_name(t.dtype())) + dims_to_string(t.dims());
}

// Reads an integer tensor (any integer dtype) as int64 values; fails unless it is 0-D or 1-D.
std::vector<int64_t> read_int_list(const AttrReader& at, const Tensor& t, const char* what);

// Static shape of input i as known/unknown dims; nullopt when the rank is unknown.
std::optional<Shape> input_shape(const InferContext& ctx, int i);

// Element type of input i for inference (kUndefined when not a tensor).
DType input_dtype(const InferContext& ctx, int i);

// The value of an int-list operand that is attribute `attr` before opset `input_since` and
// input `index` from then on; nullopt when it is absent or a non-constant input.
std::optional<std::vector<int64_t>> static_ints(const InferContext& ctx, const char* attr,
                                                int index, int64_t input_since);

}  // namespace kiln
