// Shape-manipulation ops that move or generate data without arithmetic: Reshape, Flatten,
// Squeeze/Unsqueeze, Transpose, Concat, Split, Expand, Tile, Shape, Size, Constant(OfShape).
// Pad lives in ops/pad.cc.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <optional>

#include "ops/families.h"
#include "ops/op_util.h"
#include "ops/tensor_util.h"

namespace kiln {

void register_pad_ops(OpRegistry& r);  // ops/pad.cc

namespace {

Dim dim_mul(const Dim& a, const Dim& b) {
  if (a.known() && b.known()) return Dim(a.value * b.value);
  if ((a.known() && a.value == 0) || (b.known() && b.value == 0)) return Dim(0);
  return Dim();
}

// ---- Reshape ------------------------------------------------------------------------------

std::vector<int64_t> reshape_dims(const AttrReader& at, const std::vector<int64_t>& in,
                                  const std::vector<int64_t>& shape, bool allowzero) {
  std::vector<int64_t> out(shape.size());
  int infer_at = -1;
  bool has_zero = false;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t s = shape[i];
    if (s == -1) {
      if (infer_at >= 0) at.fail(ErrorKind::kBadInput, "Reshape shape has more than one -1");
      infer_at = static_cast<int>(i);
      continue;
    }
    if (s < -1)
      at.fail(ErrorKind::kBadInput, "Reshape shape has invalid value " + std::to_string(s));
    if (s == 0 && !allowzero) {
      if (i >= in.size())
        at.fail(ErrorKind::kBadInput, "Reshape shape " + ints_to_string(shape) + " copies dim " +
                                          std::to_string(i) + " which the input " +
                                          dims_to_string(in) + " lacks");
      s = in[i];
    }
    if (s == 0) has_zero = true;
    out[i] = s;
    if (s != 0 && known > (int64_t{1} << 62) / s)
      at.fail(ErrorKind::kBadInput, "Reshape shape " + ints_to_string(shape) + " is too large");
    known *= s;
  }
  const int64_t numel = checked_numel(in);
  if (infer_at >= 0) {
    if (has_zero && allowzero)
      at.fail(ErrorKind::kBadInput, "Reshape with allowzero=1 cannot have both 0 and -1");
    if (known == 0 || numel % known != 0)
      at.fail(ErrorKind::kBadInput,
              "cannot reshape " + dims_to_string(in) + " to " + ints_to_string(shape));
    out[static_cast<size_t>(infer_at)] = numel / known;
  } else if (known != numel) {
    at.fail(ErrorKind::kBadInput, "cannot reshape " + dims_to_string(in) + " (" +
                                      std::to_string(numel) + " elements) to " +
                                      ints_to_string(shape));
  }
  return out;
}

void reshape_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> shape =
      ctx.opset() < 5 ? ctx.attr_ints("shape") : read_int_list(ctx, ctx.input(1), "Reshape shape");
  bool allowzero = ctx.opset() >= 14 && ctx.attr_int("allowzero", 0) != 0;
  ctx.set_output(0, x.reshaped(reshape_dims(ctx, x.dims(), shape, allowzero)));
}

void reshape_infer(InferContext& ctx) {
  DType dt = input_dtype(ctx, 0);
  auto shape = static_ints(ctx, "shape", 1, 5);
  if (!shape) {
    std::optional<Shape> ss = input_shape(ctx, 1);
    if (ctx.opset() >= 5 && ss && ss->rank() == 1 && ss->dims[0].known())
      ctx.set_output_type(
          0, Type::tensor(dt, Shape(std::vector<Dim>(static_cast<size_t>(ss->dims[0].value)))));
    else
      ctx.set_output_type(0, Type::tensor(dt));
    return;
  }
  bool allowzero = ctx.opset() >= 14 && ctx.attr_int("allowzero", 0) != 0;
  std::optional<Shape> in = input_shape(ctx, 0);
  if (in && in->is_static()) {
    ctx.set_output_type(
        0, Type::tensor(dt, Shape::of(reshape_dims(ctx, in->sizes(), *shape, allowzero))));
    return;
  }
  Shape out;
  for (size_t i = 0; i < shape->size(); ++i) {
    int64_t s = (*shape)[i];
    if (s == 0 && !allowzero)
      out.dims.push_back(in && i < in->rank() ? in->dims[i] : Dim());
    else if (s >= 0)
      out.dims.push_back(Dim(s));
    else
      out.dims.push_back(Dim());
  }
  // A -1 is still computable when every symbolic input dim reappears in the output (e.g.
  // [B,S,768] -> [0,0,12,-1]): the symbols cancel out of the element count.
  auto neg = std::find(shape->begin(), shape->end(), -1);
  if (in && neg != shape->end()) {
    std::vector<std::string> syms;
    int64_t in_known = 1, out_known = 1;
    bool ok = true;
    for (const Dim& d : in->dims) {
      if (d.known())
        in_known *= d.value;
      else if (!d.symbol.empty())
        syms.push_back(d.symbol);
      else
        ok = false;
    }
    for (size_t i = 0; i < out.rank() && ok; ++i) {
      if (shape->begin() + static_cast<std::ptrdiff_t>(i) == neg) continue;
      const Dim& d = out.dims[i];
      if (d.known()) {
        out_known *= d.value;
      } else {
        auto it = std::find(syms.begin(), syms.end(), d.symbol);
        if (d.symbol.empty() || it == syms.end())
          ok = false;
        else
          syms.erase(it);
      }
    }
    if (ok && syms.empty() && out_known > 0 && in_known % out_known == 0)
      out.dims[static_cast<size_t>(neg - shape->begin())] = Dim(in_known / out_known);
  }
  ctx.set_output_type(0, Type::tensor(dt, out));
}

// ---- Flatten ------------------------------------------------------------------------------

int64_t flatten_axis(const AttrReader& at, int64_t rank) {
  int64_t axis = at.attr_int("axis", 1);
  if (axis < -rank || axis > rank)
    at.fail(ErrorKind::kInvalidModel, "Flatten axis " + std::to_string(axis) +
                                          " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

void flatten_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t axis = flatten_axis(ctx, x.rank());
  int64_t a = 1, b = 1;
  for (int i = 0; i < x.rank(); ++i) (i < axis ? a : b) *= x.dim(i);
  ctx.set_output(0, x.reshaped({a, b}));
}

void flatten_infer(InferContext& ctx) {
  DType dt = input_dtype(ctx, 0);
  std::optional<Shape> in = input_shape(ctx, 0);
  if (!in) {
    ctx.set_output_type(0, Type::tensor(dt, Shape({Dim(), Dim()})));
    return;
  }
  int64_t axis = flatten_axis(ctx, static_cast<int64_t>(in->rank()));
  Dim a(1), b(1);
  for (size_t i = 0; i < in->rank(); ++i) {
    Dim& t = static_cast<int64_t>(i) < axis ? a : b;
    t = dim_mul(t, in->dims[i]);
  }
  ctx.set_output_type(0, Type::tensor(dt, Shape({a, b})));
}

// ---- Squeeze / Unsqueeze --------------------------------------------------------------------

std::optional<std::vector<int64_t>> squeeze_axes_kernel(KernelContext& ctx) {
  if (ctx.opset() < 13) {
    if (!ctx.has_attr("axes")) return std::nullopt;
    return ctx.attr_ints("axes");
  }
  if (!ctx.has_input(1)) return std::nullopt;
  return read_int_list(ctx, ctx.input(1), "axes");
}

std::vector<int64_t> squeezed_dims(const AttrReader& at, const std::vector<int64_t>& in,
                                   const std::optional<std::vector<int64_t>>& axes_opt) {
  const int64_t rank = static_cast<int64_t>(in.size());
  std::vector<bool> drop(in.size(), false);
  if (!axes_opt) {
    for (size_t i = 0; i < in.size(); ++i) drop[i] = in[i] == 1;
  } else {
    for (int64_t a : normalize_axes(at, *axes_opt, rank)) {
      if (in[static_cast<size_t>(a)] != 1)
        at.fail(ErrorKind::kBadInput, "cannot squeeze axis " + std::to_string(a) + " of shape " +
                                          dims_to_string(in) + ": its size is not 1");
      drop[static_cast<size_t>(a)] = true;
    }
  }
  std::vector<int64_t> out;
  for (size_t i = 0; i < in.size(); ++i)
    if (!drop[i]) out.push_back(in[i]);
  return out;
}

void squeeze_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  ctx.set_output(0, x.reshaped(squeezed_dims(ctx, x.dims(), squeeze_axes_kernel(ctx))));
}

void squeeze_infer(InferContext& ctx) {
  DType dt = input_dtype(ctx, 0);
  std::optional<Shape> in = input_shape(ctx, 0);
  bool has_axes = ctx.opset() < 13 ? ctx.has_attr("axes") : ctx.has_input(1);
  auto axes = static_ints(ctx, "axes", 1, 13);
  if (!in || (has_axes && !axes)) {
    ctx.set_output_type(0, Type::tensor(dt));
    return;
  }
  const int64_t rank = static_cast<int64_t>(in->rank());
  std::vector<bool> drop(in->rank(), false);
  if (!has_axes) {
    for (size_t i = 0; i < in->rank(); ++i) {
      if (!in->dims[i].known()) {  // cannot tell whether it will be squeezed
        ctx.set_output_type(0, Type::tensor(dt));
        return;
      }
      drop[i] = in->dims[i].value == 1;
    }
  } else {
    for (int64_t a : normalize_axes(ctx, *axes, rank)) drop[static_cast<size_t>(a)] = true;
  }
  Shape out;
  for (size_t i = 0; i < in->rank(); ++i)
    if (!drop[i]) out.dims.push_back(in->dims[i]);
  ctx.set_output_type(0, Type::tensor(dt, out));
}

// Output rank = rank + |axes|; returns for each output axis whether it is a new unit dim.
std::vector<bool> unsqueeze_mask(const AttrReader& at, int64_t rank,
                                 const std::vector<int64_t>& axes) {
  const int64_t out_rank = rank + static_cast<int64_t>(axes.size());
  std::vector<bool> is_new(static_cast<size_t>(out_rank), false);
  for (int64_t a : normalize_axes(at, axes, out_rank)) {
    if (is_new[static_cast<size_t>(a)])
      at.fail(ErrorKind::kInvalidModel,
              "Unsqueeze axes contain a duplicate: " + ints_to_string(axes));
    is_new[static_cast<size_t>(a)] = true;
  }
  return is_new;
}

void unsqueeze_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> axes =
      ctx.opset() < 13 ? ctx.attr_ints("axes") : read_int_list(ctx, ctx.input(1), "axes");
  std::vector<bool> is_new = unsqueeze_mask(ctx, x.rank(), axes);
  std::vector<int64_t> out;
  size_t k = 0;
  for (bool n : is_new) out.push_back(n ? 1 : x.dims()[k++]);
  ctx.set_output(0, x.reshaped(out));
}

void unsqueeze_infer(InferContext& ctx) {
  DType dt = input_dtype(ctx, 0);
  std::optional<Shape> in = input_shape(ctx, 0);
  auto axes = static_ints(ctx, "axes", 1, 13);
  if (!in || !axes) {
    ctx.set_output_type(0, Type::tensor(dt));
    return;
  }
  std::vector<bool> is_new = unsqueeze_mask(ctx, static_cast<int64_t>(in->rank()), *axes);
  Shape out;
  size_t k = 0;
  for (bool n : is_new) out.dims.push_back(n ? Dim(1) : in->dims[k++]);
  ctx.set_output_type(0, Type::tensor(dt, out));
}

// ---- Transpose ------------------------------------------------------------------------------

std::vector<int64_t> transpose_perm(const AttrReader& at, int64_t rank) {
  std::vector<int64_t> perm = at.attr_ints("perm");
  if (!at.has_attr("perm")) {
    perm.resize(static_cast<size_t>(rank));
    for (int64_t i = 0; i < rank; ++i) perm[static_cast<size_t>(i)] = rank - 1 - i;
    return perm;
  }
  if (static_cast<int64_t>(perm.size()) != rank)
    at.fail(ErrorKind::kBadInput, "Transpose perm " + ints_to_string(perm) +
                                      " does not match input rank " + std::to_string(rank));
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t& p : perm) {
    p = normalize_axis(at, p, rank);
    if (seen[static_cast<size_t>(p)])
      at.fail(ErrorKind::kInvalidModel,
              "Transpose perm " + ints_to_string(perm) + " is not a permutation");
    seen[static_cast<size_t>(p)] = true;
  }
  return perm;
}

void transpose_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> perm = transpose_perm(ctx, x.rank());
  std::vector<int64_t> in_strides = contiguous_strides(x.dims());
  std::vector<int64_t> dims, strides;
  for (int64_t p : perm) {
    dims.push_back(x.dims()[static_cast<size_t>(p)]);
    strides.push_back(in_strides[static_cast<size_t>(p)]);
  }
  Tensor y(x.dtype(), dims);
  strided_copy(x, y, 0, strides);
  ctx.set_output(0, std::move(y));
}

void transpose_infer(InferContext& ctx) {
  DType dt = input_dtype(ctx, 0);
  std::optional<Shape> in = input_shape(ctx, 0);
  if (!in) {
    ctx.set_output_type(0, Type::tensor(dt));
    return;
  }
  Shape out;
  for (int64_t p : transpose_perm(ctx, static_cast<int64_t>(in->rank())))
    out.dims.push_back(in->dims[static_cast<size_t>(p)]);
  ctx.set_output_type(0, Type::tensor(dt, out));
}

// ---- Concat / Split -------------------------------------------------------------------------

// Copies `src` into the [offset, offset + src.dim(axis)) slab of `dst` along `axis` (or the
// reverse when `to_dst` is false: extracts the slab of `dst` into `src`).
void copy_slab(const Tensor& whole, Tensor& part, int64_t axis, int64_t offset, bool into_whole) {
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= whole.dim(static_cast<int>(i));
  for (int64_t i = axis + 1; i < whole.rank(); ++i) inner *= whole.dim(static_cast<int>(i));
  const int64_t whole_row = whole.dim(static_cast<int>(axis)) * inner;
  const int64_t part_row = part.dim(static_cast<int>(axis)) * inner;
  visit_storage(whole.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* w = whole.data<T>();
    T* p = part.data<T>();
    for (int64_t o = 0; o < outer; ++o) {
      T* wr = w + o * whole_row + offset * inner;
      T* pr = p + o * part_row;
      if (into_whole)
        std::copy(pr, pr + part_row, wr);
      else
        std::copy(wr, wr + part_row, pr);
    }
  });
}

void concat_kernel(KernelContext& ctx) {
  if (ctx.num_inputs() == 0) ctx.fail(ErrorKind::kInvalidModel, "Concat needs at least one input");
  const Tensor& first = ctx.input(0);
  const int64_t rank = first.rank();
  if (rank == 0) ctx.fail(ErrorKind::kBadInput, "Concat inputs must have rank >= 1");
  const int64_t axis = normalize_axis(ctx, ctx.attr_int("axis"), rank);
  std::vector<int64_t> out_dims = first.dims();
  out_dims[static_cast<size_t>(axis)] = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.input(i);
    bool ok = t.rank() == rank && t.dtype() == first.dtype();
    for (int64_t d = 0; ok && d < rank; ++d)
      ok = d == axis || t.dim(static_cast<int>(d)) == first.dim(static_cast<int>(d));
    if (!ok)
      ctx.fail(ErrorKind::kBadInput, "Concat input #" + std::to_string(i) + " " + type_string(t) +
                                         " does not match input #0 " + type_string(first) +
                                         " outside axis " + std::to_string(axis));
    out_dims[static_cast<size_t>(axis)] += t.dim(static_cast<int>(axis));
  }
  Tensor y(first.dtype(), out_dims);
  int64_t offset = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    Tensor part = ctx.input(i);
    copy_slab(y, part, axis, offset, true);
    offset += part.dim(static_cast<int>(axis));
  }
  ctx.set_output(0, std::move(y));
}

void concat_infer(InferContext& ctx) {
  DType dt = input_dtype(ctx, 0);
  std::optional<Shape> out;
  int64_t axis = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    std::optional<Shape> s = input_shape(ctx, i);
    if (!s) {
      continue;
    }
    if (!out) {
      out = s;
      if (s->rank() == 0) return;
      axis = normalize_axis(ctx, ctx.attr_int("axis"), static_cast<int64_t>(s->rank()));
      continue;
    }
    if (s->rank() != out->rank()) return;  // the kernel reports the mismatch
    for (size_t d = 0; d < s->rank(); ++d) {
      Dim& o = out->dims[d];
      const Dim& n = s->dims[d];
      if (static_cast<int64_t>(d) == axis)
        o = o.known() && n.known() ? Dim(o.value + n.value) : Dim();
      else if (!o.known() && n.known())
        o = n;
    }
  }
  bool all_known = true;
  for (int i = 0; i < ctx.num_inputs(); ++i) all_known = all_known && input_shape(ctx, i);
  if (out && !all_known) out->dims[static_cast<size_t>(axis)] = Dim();
  ctx.set_output_type(0, Type::tensor(dt, out));
}

// Split sizes for `n` outputs of an axis of size `len`.
std::vector<int64_t> split_sizes(const AttrReader& at, int64_t opset, int64_t len, int n,
                                 std::optional<std::vector<int64_t>> split) {
  if (split) {
    if (static_cast<int>(split->size()) != n)
      at.fail(ErrorKind::kBadInput,
              "Split has " + std::to_string(n) + " outputs but split " + ints_to_string(*split));
    int64_t sum = 0;
    for (int64_t s : *split) {
      if (s < 0)
        at.fail(ErrorKind::kBadInput, "Split sizes must be >= 0: " + ints_to_string(*split));
      sum += s;
    }
    if (sum != len)
      at.fail(ErrorKind::kBadInput,
              "Split sizes " + ints_to_string(*split) + " do not sum to " + std::to_string(len));
    return *split;
  }
  if (opset >= 18 && at.has_attr("num_outputs")) {
    int64_t k = at.attr_int("num_outputs");
    if (k != n || k <= 0)
      at.fail(ErrorKind::kInvalidModel, "Split num_outputs=" + std::to_string(k) +
                                            " but the node has " + std::to_string(n) + " outputs");
    int64_t chunk = (len + k - 1) / k;
    std::vector<int64_t> out;
    int64_t left = len;
    for (int64_t i = 0; i < k; ++i) {
      out.push_back(std::min(chunk, left));
      left -= out.back();
    }
    return out;
  }
  if (n <= 0 || len % n != 0)
    at.fail(ErrorKind::kBadInput, "cannot split an axis of size " + std::to_string(len) + " into " +
                                      std::to_string(n) + " equal parts");
  return std::vector<int64_t>(static_cast<size_t>(n), len / n);
}

void split_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() == 0) ctx.fail(ErrorKind::kBadInput, "Split input must have rank >= 1");
  const int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", 0), x.rank());
  std::optional<std::vector<int64_t>> split;
  if (ctx.opset() < 13) {
    if (ctx.has_attr("split")) split = ctx.attr_ints("split");
  } else if (ctx.has_input(1)) {
    split = read_int_list(ctx, ctx.input(1), "split");
  }
  std::vector<int64_t> sizes =
      split_sizes(ctx, ctx.opset(), x.dim(static_cast<int>(axis)), ctx.num_outputs(), split);
  int64_t offset = 0;
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    std::vector<int64_t> dims = x.dims();
    dims[static_cast<size_t>(axis)] = sizes[static_cast<size_t>(i)];
    Tensor part(x.dtype(), dims);
    copy_slab(x, part, axis, offset, false);
    offset += sizes[static_cast<size_t>(i)];
    ctx.set_output(i, std::move(part));
  }
}

void split_infer(InferContext& ctx) {
  DType dt = input_dtype(ctx, 0);
  std::optional<Shape> in = input_shape(ctx, 0);
  const int n = ctx.num_outputs();
  for (int i = 0; i < n; ++i) ctx.set_output_type(i, Type::tensor(dt));
  if (!in || in->rank() == 0) return;
  const int64_t axis =
      normalize_axis(ctx, ctx.attr_int("axis", 0), static_cast<int64_t>(in->rank()));
  const Dim& len = in->dims[static_cast<size_t>(axis)];
  bool has_split = ctx.opset() < 13 ? ctx.has_attr("split") : ctx.has_input(1);
  std::optional<std::vector<int64_t>> split;
  if (has_split) {
    split = static_ints(ctx, "split", 1, 13);
    if (!split) {
      for (int i = 0; i < n; ++i) {
        Shape s = *in;
        s.dims[static_cast<size_t>(axis)] = Dim();
        ctx.set_output_type(i, Type::tensor(dt, s));
      }
      return;
    }
  }
  std::vector<Dim> sizes(static_cast<size_t>(n));
  if (split && static_cast<int>(split->size()) == n) {
    for (int i = 0; i < n; ++i)
      sizes[static_cast<size_t>(i)] = Dim((*split)[static_cast<size_t>(i)]);
  } else if (len.known()) {
    std::vector<int64_t> s = split_sizes(ctx, ctx.opset(), len.value, n, split);
    for (int i = 0; i < n; ++i) sizes[static_cast<size_t>(i)] = Dim(s[static_cast<size_t>(i)]);
  }
  for (int i = 0; i < n; ++i) {
    Shape s = *in;
    s.dims[static_cast<size_t>(axis)] = sizes[static_cast<size_t>(i)];
    ctx.set_output_type(i, Type::tensor(dt, s));
  }
}

// ---- Expand / Tile --------------------------------------------------------------------------

void expand_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> shape = read_int_list(ctx, ctx.input(1), "Expand shape");
  for (int64_t d : shape)
    if (d < 0)
      ctx.fail(ErrorKind::kBadInput, "Expand shape has a negative dim: " + ints_to_string(shape));
  std::vector<int64_t> out = broadcast_dims(ctx, {x.dims(), shape});
  Tensor y(x.dtype(), out);
  strided_copy(x, y, 0, broadcast_strides(x.dims(), out));
  ctx.set_output(0, std::move(y));
}

void expand_infer(InferContext& ctx) {
  DType dt = input_dtype(ctx, 0);
  std::optional<Shape> in = input_shape(ctx, 0);
  const Tensor* c = ctx.constant_input(1);
  if (!in || !c || !is_integer(c->dtype())) {
    ctx.set_output_type(0, Type::tensor(dt));
    return;
  }
  std::vector<int64_t> shape = c->to_int64_vector();
  const size_t rank = std::max(in->rank(), shape.size());
  Shape out;
  for (size_t i = 0; i < rank; ++i) {
    Dim a = i + in->rank() >= rank ? in->dims[i + in->rank() - rank] : Dim(1);
    Dim b = i + shape.size() >= rank ? Dim(shape[i + shape.size() - rank]) : Dim(1);
    if (b.value == 1)
      out.dims.push_back(a);
    else if (a.known() && a.value == 1)
      out.dims.push_back(b);
    else if (a.known())
      out.dims.push_back(a);  // equal, or a mismatch the kernel reports
    else
      out.dims.push_back(b);
  }
  ctx.set_output_type(0, Type::tensor(dt, out));
}

void tile_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> reps = read_int_list(ctx, ctx.input(1), "Tile repeats");
  if (static_cast<int>(reps.size()) != x.rank())
    ctx.fail(ErrorKind::kBadInput, "Tile repeats " + ints_to_string(reps) +
                                       " should have one entry per input dim " +
                                       dims_to_string(x.dims()));
  // Output [r0*d0, r1*d1, ...] in row-major order is [r0, d0, r1, d1, ...] with zero strides on
  // the repeat axes.
  std::vector<int64_t> out_dims, view_dims, strides;
  std::vector<int64_t> in_strides = contiguous_strides(x.dims());
  for (int i = 0; i < x.rank(); ++i) {
    if (reps[static_cast<size_t>(i)] < 0)
      ctx.fail(ErrorKind::kBadInput, "Tile repeats must be >= 0: " + ints_to_string(reps));
    out_dims.push_back(x.dim(i) * reps[static_cast<size_t>(i)]);
    view_dims.insert(view_dims.end(), {reps[static_cast<size_t>(i)], x.dim(i)});
    strides.insert(strides.end(), {0, in_strides[static_cast<size_t>(i)]});
  }
  checked_numel(view_dims);
  Tensor y(x.dtype(), out_dims);
  Tensor view = y.reshaped(view_dims);
  strided_copy(x, view, 0, strides);
  ctx.set_output(0, std::move(y));
}

void tile_infer(InferContext& ctx) {
  DType dt = input_dtype(ctx, 0);
  std::optional<Shape> in = input_shape(ctx, 0);
  const Tensor* c = ctx.constant_input(1);
  if (!in) {
    ctx.set_output_type(0, Type::tensor(dt));
    return;
  }
  Shape out = *in;
  if (c && is_integer(c->dtype()) && c->numel() == static_cast<int64_t>(in->rank())) {
    for (size_t i = 0; i < in->rank(); ++i) {
      int64_t r = c->get_int(static_cast<int64_t>(i));
      out.dims[i] = r < 0 ? Dim() : dim_mul(in->dims[i], Dim(r));
    }
  } else {
    for (Dim& d : out.dims) d = Dim();
  }
  ctx.set_output_type(0, Type::tensor(dt, out));
}

// ---- Shape / Size / ConstantOfShape / Constant ------------------------------------------------

void shape_kernel(KernelContext& ctx) { ctx.set_output(0, shape_value(ctx, ctx.opset(), ctx.input(0).dims())); }

void shape_infer(InferContext& ctx) {
  std::optional<Shape> in = input_shape(ctx, 0);
  if (!in) {
    ctx.set_output_type(0, Type::tensor(DType::kInt64, Shape({Dim()})));
    return;
  }
  auto [start, end] = shape_range(ctx, ctx.opset(), static_cast<int64_t>(in->rank()));
  ctx.set_output_type(0, Type::tensor(DType::kInt64, Shape({Dim(end - start)})));
}

void size_kernel(KernelContext& ctx) {
  Tensor y(DType::kInt64, {});
  y.data<int64_t>()[0] = ctx.input(0).numel();
  ctx.set_output(0, std::move(y));
}

void size_infer(InferContext& ctx) { ctx.set_output_type(0, Type::tensor(DType::kInt64, Shape())); }

Tensor constant_of_shape_value(const AttrReader& at) {
  const Tensor* v = at.attr_tensor("value");
  if (!v) return Tensor::scalar(DType::kFloat32, 0.f);
  if (v->numel() != 1)
    at.fail(ErrorKind::kInvalidModel,
            "ConstantOfShape value should have one element, got " + type_string(*v));
  return *v;
}

void constant_of_shape_kernel(KernelContext& ctx) {
  std::vector<int64_t> shape = read_int_list(ctx, ctx.input(0), "ConstantOfShape shape");
  for (int64_t d : shape)
    if (d < 0)
      ctx.fail(ErrorKind::kBadInput,
               "ConstantOfShape shape has a negative dim: " + ints_to_string(shape));
  Tensor v = constant_of_shape_value(ctx);
  Tensor y(v.dtype(), shape);
  visit_storage(v.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::fill(y.data<T>(), y.data<T>() + y.numel(), v.data<T>()[0]);
  });
  ctx.set_output(0, std::move(y));
}

void constant_of_shape_infer(InferContext& ctx) {
  const Tensor* v = ctx.attr_tensor("value");
  DType dt = v ? v->dtype() : DType::kFloat32;
  auto shape = static_ints(ctx, "", 0, 0);
  if (shape) {
    ctx.set_output_type(0, Type::tensor(dt, Shape::of(*shape)));
    return;
  }
  std::optional<Shape> ss = input_shape(ctx, 0);
  if (ss && ss->rank() == 1 && ss->dims[0].known())
    ctx.set_output_type(
        0, Type::tensor(dt, Shape(std::vector<Dim>(static_cast<size_t>(ss->dims[0].value)))));
  else
    ctx.set_output_type(0, Type::tensor(dt));
}

Tensor constant_value(const AttrReader& at) {
  if (const Tensor* t = at.attr_tensor("value")) return *t;
  const Attribute* a = nullptr;
  if ((a = at.node().attr("value_float")))
    return Tensor::scalar(DType::kFloat32, at.attr_float("value_float", 0.f));
  if ((a = at.node().attr("value_int")))
    return Tensor::scalar(DType::kInt64, at.attr_int("value_int"));
  if ((a = at.node().attr("value_string"))) {
    Tensor t(DType::kString, {});
    t.data<std::string>()[0] = at.attr_string("value_string", "");
    return t;
  }
  if ((a = at.node().attr("value_floats"))) {
    std::vector<float> v = at.attr_floats("value_floats");
    Tensor t(DType::kFloat32, {static_cast<int64_t>(v.size())});
    std::copy(v.begin(), v.end(), t.data<float>());
    return t;
  }
  if ((a = at.node().attr("value_ints"))) {
    std::vector<int64_t> v = at.attr_ints("value_ints");
    Tensor t(DType::kInt64, {static_cast<int64_t>(v.size())});
    std::copy(v.begin(), v.end(), t.data<int64_t>());
    return t;
  }
  if ((a = at.node().attr("value_strings"))) {
    std::vector<std::string> v = at.attr_strings("value_strings");
    Tensor t(DType::kString, {static_cast<int64_t>(v.size())});
    std::copy(v.begin(), v.end(), t.data<std::string>());
    return t;
  }
  if (at.has_attr("sparse_value"))
    at.fail(ErrorKind::kUnsupported, "Constant with sparse_value is not supported");
  at.fail(ErrorKind::kInvalidModel, "Constant has none of the value attributes");
}

void constant_kernel(KernelContext& ctx) { ctx.set_output(0, constant_value(ctx)); }

void constant_infer(InferContext& ctx) {
  Tensor t = constant_value(ctx);
  ctx.set_output_type(0, Type::tensor(t.dtype(), Shape::of(t.dims())));
}

}  // namespace

void register_tensor_ops(OpRegistry& r) {
  const auto inj = PatternKind::kInjective;
  const auto opq = PatternKind::kOpaque;
  r.add("Reshape")
      .since(1)
      .inputs(1, 2)
      .outputs(1)
      .kind(inj)
      .run(reshape_kernel)
      .shape(reshape_infer);
  r.add("Flatten").since(1).inputs(1).outputs(1).kind(inj).run(flatten_kernel).shape(flatten_infer);
  r.add("Squeeze")
      .since(1)
      .inputs(1, 2)
      .outputs(1)
      .kind(inj)
      .run(squeeze_kernel)
      .shape(squeeze_infer);
  r.add("Unsqueeze")
      .since(1)
      .inputs(1, 2)
      .outputs(1)
      .kind(inj)
      .run(unsqueeze_kernel)
      .shape(unsqueeze_infer);
  r.add("Transpose")
      .since(1)
      .inputs(1)
      .outputs(1)
      .kind(inj)
      .run(transpose_kernel)
      .shape(transpose_infer);
  r.add("Concat")
      .since(1)
      .inputs(1, -1)
      .outputs(1)
      .kind(inj)
      .run(concat_kernel)
      .shape(concat_infer);
  r.add("Split")
      .since(1)
      .inputs(1, 2)
      .outputs(1, -1)
      .kind(inj)
      .run(split_kernel)
      .shape(split_infer);
  r.add("Expand").since(8).inputs(2).outputs(1).kind(inj).run(expand_kernel).shape(expand_infer);
  r.add("Tile").since(6).inputs(2).outputs(1).kind(inj).run(tile_kernel).shape(tile_infer);
  register_pad_ops(r);
  r.add("Shape").since(1).inputs(1).outputs(1).kind(opq).run(shape_kernel).shape(shape_infer);
  r.add("Size").since(1).inputs(1).outputs(1).kind(opq).run(size_kernel).shape(size_infer);
  r.add("ConstantOfShape")
      .since(9)
      .inputs(1)
      .outputs(1)
      .kind(opq)
      .run(constant_of_shape_kernel)
      .shape(constant_of_shape_infer);
  r.add("Constant")
      .since(1)
      .inputs(0)
      .outputs(1)
      .kind(opq)
      .run(constant_kernel)
      .shape(constant_infer);
}

}  // namespace kiln
