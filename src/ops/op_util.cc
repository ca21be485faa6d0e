// Broadcasting, axes and conversions shared by kernels.
#include "ops/op_util.h"

#include <cmath>
#include <limits>
#include <type_traits>

namespace kiln {

std::vector<int64_t> broadcast_dims(const AttrReader& at,
                                    const std::vector<std::vector<int64_t>>& shapes) {
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  std::vector<int64_t> out(rank, 1);
  for (const auto& s : shapes) {
    size_t off = rank - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t d = s[i];
      int64_t& o = out[off + i];
      if (d == o || d == 1) continue;
      if (o == 1) {
        o = d;
        continue;
      }
      std::string msg = "shapes cannot be broadcast together:";
      for (const auto& x : shapes) msg += " " + dims_to_string(x);
      at.fail(ErrorKind::kBadInput, msg);
    }
  }
  // A zero-size dim only broadcasts against 1 (handled above when d == o == 0 or d == 1).
  return out;
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& in,
                                       const std::vector<int64_t>& out) {
  std::vector<int64_t> s(out.size(), 0);
  auto cs = contiguous_strides(in);
  size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) s[off + i] = in[i] == 1 ? 0 : cs[i];
  return s;
}

int64_t normalize_axis(const AttrReader& at, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
    at.fail(ErrorKind::kInvalidModel, "axis " + std::to_string(axis) + " is out of range for rank " +
                                          std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> normalize_axes(const AttrReader& at, std::vector<int64_t> axes, int64_t rank) {
  for (auto& a : axes) a = normalize_axis(at, a, rank);
  return axes;
}

namespace {

template <class To, class From>
To convert_value(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return static_cast<float>(v) != 0.f || static_cast<double>(v) != 0.0;
  } else if constexpr (std::is_same_v<To, Float16> || std::is_same_v<To, BFloat16>) {
    return To(static_cast<float>(v));
  } else if constexpr (std::is_integral_v<To> && (std::is_floating_point_v<From> ||
                                                  std::is_same_v<From, Float16> ||
                                                  std::is_same_v<From, BFloat16>)) {
    double d = static_cast<double>(static_cast<float>(v));
    if constexpr (std::is_same_v<From, double>) d = v;
    if (std::isnan(d)) return To(0);
    // Saturate out-of-range values instead of invoking undefined behaviour.
    if (d <= static_cast<double>(std::numeric_limits<To>::lowest())) return std::numeric_limits<To>::lowest();
    if (d >= static_cast<double>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(d);
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace

Tensor convert_tensor(const Tensor& t, DType to) {
  if (t.dtype() == to) return t;
  Tensor out(to, t.dims());
  const int64_t n = t.numel();
  visit_dtype(t.dtype(), [&](auto from_tag) {
    using From = typename decltype(from_tag)::type;
    visit_dtype(to, [&](auto to_tag) {
      using To = typename decltype(to_tag)::type;
      const From* src = t.data<From>();
      To* dst = out.data<To>();
      for (int64_t i = 0; i < n; ++i) dst[i] = convert_value<To>(src[i]);
    });
  });
  return out;
}

namespace {

std::optional<Shape> broadcast_static(const std::vector<const Type*>& types) {
  size_t rank = 0;
  for (const Type* t : types) {
    if (!t->shape) return std::nullopt;
    rank = std::max(rank, t->shape->rank());
  }
  Shape out;
  out.dims.assign(rank, Dim(1));
  for (const Type* t : types) {
    size_t off = rank - t->shape->rank();
    for (size_t i = 0; i < t->shape->rank(); ++i) {
      const Dim& d = t->shape->dims[i];
      Dim& o = out.dims[off + i];
      if (d.known() && d.value == 1) continue;
      if (o.known() && o.value == 1) {
        o = d;
      } else if (!(o == d)) {
        o = Dim();  // unknown: either mismatch (caught at run time) or unknown symbols
      }
    }
  }
  return out;
}

}  // namespace

void infer_same_as_input0(InferContext& ctx) { ctx.set_output_type(0, ctx.input_type(0)); }

void infer_broadcast(InferContext& ctx) {
  std::vector<const Type*> types;
  for (int i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i)) types.push_back(&ctx.input_type(i));
  if (types.empty()) return;
  ctx.set_output_type(0, Type::tensor(types[0]->dtype, broadcast_static(types)));
}

void infer_broadcast_bool(InferContext& ctx) {
  infer_broadcast(ctx);
  if (ctx.output_types().empty()) return;
  Type t = ctx.output_types()[0];
  t.dtype = DType::kBool;
  ctx.set_output_type(0, t);
}

}  // namespace kiln
