// Helpers shared by the data-movement kernels (see tensor_util.h).
#include "ops/tensor_util.h"

#include <algorithm>

namespace kiln {

void strided_copy(const Tensor& src, Tensor& dst, int64_t base,
                  const std::vector<int64_t>& strides) {
  visit_storage(src.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* s = src.data<T>() + base;
    T* d = dst.data<T>();
    const auto& dims = dst.dims();
    if (dims.empty()) {
      if (dst.numel() == 1) d[0] = s[0];
      return;
    }
    // The innermost axis is copied in a tight loop; outer axes advance an odometer.
    const size_t rank = dims.size();
    const int64_t inner = dims[rank - 1], inner_stride = strides[rank - 1];
    if (dst.numel() == 0) return;
    const int64_t outer = dst.numel() / inner;
    std::vector<int64_t> idx(rank, 0);
    int64_t off = 0;
    for (int64_t o = 0; o < outer; ++o) {
      T* drow = d + o * inner;
      if (inner_stride == 1) {
        std::copy(s + off, s + off + inner, drow);
      } else {
        for (int64_t j = 0; j < inner; ++j) drow[j] = s[off + j * inner_stride];
      }
      for (size_t ax = rank - 1; ax-- > 0;) {
        if (++idx[ax] < dims[ax]) {
          off += strides[ax];
          break;
        }
        off -= strides[ax] * (dims[ax] - 1);
        idx[ax] = 0;
      }
    }
  });
}

std::vector<int64_t> read_int_list(const AttrReader& at, const Tensor& t, const char* what) {
  if (!is_integer(t.dtype()))
    at.fail(ErrorKind::kBadInput, std::string(what) + " should be an integer tensor, got " +
                                      std::string(dtype_name(t.dtype())));
  if (t.rank() > 1)
    at.fail(ErrorKind::kBadInput,
            std::string(what) + " should be 1-D, got shape " + dims_to_string(t.dims()));
  return t.to_int64_vector();
}

std::optional<Shape> input_shape(const InferContext& ctx, int i) {
  if (!ctx.has_input(i)) return std::nullopt;
  const Type& t = ctx.input_type(i);
  if (t.kind != Type::Kind::kTensor) return std::nullopt;
  return t.shape;
}

DType input_dtype(const InferContext& ctx, int i) {
  const Type& t = ctx.input_type(i);
  return t.kind == Type::Kind::kTensor ? t.dtype : DType::kUndefined;
}

std::optional<std::vector<int64_t>> static_ints(const InferContext& ctx, const char* attr,
                                                int index, int64_t input_since) {
  if (ctx.opset() < input_since) {
    if (!ctx.has_attr(attr)) return std::nullopt;
    return ctx.attr_ints(attr);
  }
  const Tensor* c = ctx.constant_input(index);
  if (!c || !is_integer(c->dtype()) || c->rank() > 1) return std::nullopt;
  return c->to_int64_vector();
}

// The [start, end) range of dims that Shape (opset 15 start/end attributes) returns.
std::pair<int64_t, int64_t> shape_range(const AttrReader& at, int64_t opset, int64_t rank) {
  int64_t start = 0, end = rank;
  if (opset >= 15) {
    start = at.attr_int("start", 0);
    end = at.attr_int("end", rank);
  }
  auto clamp = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
  start = clamp(start);
  end = clamp(end);
  return {start, std::max(start, end)};
}

Tensor shape_value(const AttrReader& at, int64_t opset, const std::vector<int64_t>& dims) {
  auto [start, end] = shape_range(at, opset, static_cast<int64_t>(dims.size()));
  Tensor y(DType::kInt64, {end - start});
  for (int64_t i = start; i < end; ++i) y.data<int64_t>()[i - start] = dims[static_cast<size_t>(i)];
  return y;
}

}  // namespace kiln
