// Pad (opset 2..19+): constant, reflect, edge and wrap modes, negative pads crop.
#include <optional>

#include "ops/families.h"
#include "ops/op_util.h"
#include "ops/tensor_util.h"

namespace kiln {

void register_pad_ops(OpRegistry& r);

namespace {

// ---- Pad ----------------------------------------------------------------------------------

// Pads per axis as (begin, end), from the attribute (opset < 11) or inputs (pads, axes).
std::vector<std::pair<int64_t, int64_t>> pad_widths(const AttrReader& at, int64_t opset,
                                                    int64_t rank, std::vector<int64_t> pads,
                                                    std::optional<std::vector<int64_t>> axes) {
  std::vector<int64_t> ax;
  if (opset >= 18 && axes) {
    ax = normalize_axes(at, *axes, rank);
  } else {
    for (int64_t i = 0; i < rank; ++i) ax.push_back(i);
  }
  if (pads.size() != 2 * ax.size())
    at.fail(ErrorKind::kBadInput, "Pad pads " + ints_to_string(pads) + " should have " +
                                      std::to_string(2 * ax.size()) + " entries");
  std::vector<std::pair<int64_t, int64_t>> w(static_cast<size_t>(rank), {0, 0});
  for (size_t i = 0; i < ax.size(); ++i)
    w[static_cast<size_t>(ax[i])] = {pads[i], pads[ax.size() + i]};
  return w;
}

void pad_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const std::string mode = ctx.attr_string("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    ctx.fail(ErrorKind::kInvalidModel,
             "Pad mode '" + mode + "' is not one of constant, reflect, edge, wrap");
  std::vector<int64_t> pads;
  std::optional<std::vector<int64_t>> axes;
  Tensor value;  // one element of x's dtype
  if (ctx.opset() < 11) {
    pads = ctx.attr_ints("pads");
    if (x.dtype() != DType::kString)
      value =
          convert_tensor(Tensor::scalar(DType::kFloat32, ctx.attr_float("value", 0.f)), x.dtype());
  } else {
    pads = read_int_list(ctx, ctx.input(1), "pads");
    if (ctx.has_input(2) && ctx.input(2).numel() > 0) {
      const Tensor& v = ctx.input(2);
      if (v.dtype() != x.dtype())
        ctx.fail(ErrorKind::kBadInput, "Pad constant_value should have the data's element type");
      value = v;
    }
    if (ctx.has_input(3)) axes = read_int_list(ctx, ctx.input(3), "axes");
  }
  if (!value.defined()) value = Tensor(x.dtype(), {});
  auto widths = pad_widths(ctx, ctx.opset(), x.rank(), pads, axes);
  // Per axis, a table from output coordinate to input coordinate (-1: the constant value).
  std::vector<int64_t> out_dims(static_cast<size_t>(x.rank()));
  std::vector<std::vector<int64_t>> src(static_cast<size_t>(x.rank()));
  for (int a = 0; a < x.rank(); ++a) {
    const int64_t n = x.dim(a);
    const auto [b, e] = widths[static_cast<size_t>(a)];
    int64_t len = 0;
    if (__builtin_add_overflow(n, b, &len) || __builtin_add_overflow(len, e, &len) ||
        len > (int64_t{1} << 40))
      ctx.fail(ErrorKind::kBadInput, "Pad pads " + ints_to_string(pads) + " give axis " +
                                         std::to_string(a) + " an absurd size");
    if (len < 0)
      ctx.fail(ErrorKind::kBadInput, "Pad pads " + ints_to_string(pads) + " remove more than the " +
                                         std::to_string(n) + " elements of axis " +
                                         std::to_string(a));
    out_dims[static_cast<size_t>(a)] = len;
    if (mode != "constant" && n == 0 && len > 0)
      ctx.fail(ErrorKind::kBadInput, "Pad mode '" + mode + "' cannot pad an empty axis");
    checked_numel(out_dims);
    auto& tab = src[static_cast<size_t>(a)];
    tab.resize(static_cast<size_t>(len));
    for (int64_t o = 0; o < len; ++o) {
      int64_t c = o - b;
      if (c < 0 || c >= n) {
        if (mode == "constant") {
          c = -1;
        } else if (mode == "edge") {
          c = c < 0 ? 0 : n - 1;
        } else if (mode == "wrap") {
          c = ((c % n) + n) % n;
        } else if (n == 1) {
          c = 0;
        } else {  // reflect without repeating the edge, period 2(n-1)
          const int64_t p = 2 * (n - 1);
          c = ((c % p) + p) % p;
          if (c >= n) c = p - c;
        }
      }
      tab[static_cast<size_t>(o)] = c;
    }
  }
  Tensor y(x.dtype(), out_dims);
  std::vector<int64_t> strides = contiguous_strides(x.dims());
  visit_storage(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xs = x.data<T>();
    const T fill = value.data<T>()[0];
    T* ys = y.data<T>();
    const int64_t total = y.numel();
    const size_t rank = out_dims.size();
    std::vector<int64_t> idx(rank, 0);
    for (int64_t i = 0; i < total; ++i) {
      int64_t off = 0;
      bool inside = true;
      for (size_t a = 0; a < rank && inside; ++a) {
        int64_t c = src[a][static_cast<size_t>(idx[a])];
        inside = c >= 0;
        off += c * strides[a];
      }
      ys[i] = inside ? xs[off] : fill;
      for (size_t a = rank; a-- > 0;) {
        if (++idx[a] < out_dims[a]) break;
        idx[a] = 0;
      }
    }
  });
  ctx.set_output(0, std::move(y));
}

void pad_infer(InferContext& ctx) {
  DType dt = input_dtype(ctx, 0);
  std::optional<Shape> in = input_shape(ctx, 0);
  auto pads = static_ints(ctx, "pads", 1, 11);
  std::optional<std::vector<int64_t>> axes;
  bool axes_ok = true;
  if (ctx.opset() >= 18 && ctx.has_input(3)) {
    axes = static_ints(ctx, "axes", 3, 18);
    axes_ok = axes.has_value();
  }
  if (!in || !pads || !axes_ok) {
    ctx.set_output_type(
        0, Type::tensor(
               dt, in ? std::optional<Shape>(Shape(std::vector<Dim>(in->rank()))) : std::nullopt));
    return;
  }
  auto widths = pad_widths(ctx, ctx.opset(), static_cast<int64_t>(in->rank()), *pads, axes);
  Shape out = *in;
  for (size_t i = 0; i < out.rank(); ++i) {
    auto [b, e] = widths[i];
    if (b == 0 && e == 0) continue;
    out.dims[i] =
        in->dims[i].known() ? Dim(std::max<int64_t>(0, in->dims[i].value + b + e)) : Dim();
  }
  ctx.set_output_type(0, Type::tensor(dt, out));
}

}  // namespace

void register_pad_ops(OpRegistry& r) {
  r.add("Pad")
      .since(2)
      .inputs(1, 4)
      .outputs(1)
      .kind(PatternKind::kInjective)
      .run(pad_kernel)
      .shape(pad_infer);
}

}  // namespace kiln
