// Indexing ops: Slice, Gather/GatherElements/GatherND, Scatter/ScatterElements/ScatterND,
// NonZero, Compress, ReverseSequence, Unique. Resize/Upsample live in ops/resize.cc.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <type_traits>

#include "ops/families.h"
#include "ops/op_util.h"
#include "ops/tensor_util.h"

namespace kiln {

void register_resize_ops(OpRegistry& r);  // ops/resize.cc

namespace {

// Wraps a negative index and checks the range; out-of-range indices are bad input data.
int64_t wrap_index(const AttrReader& at, int64_t i, int64_t dim, const char* what) {
  int64_t w = i < 0 ? i + dim : i;
  if (w < 0 || w >= dim)
    at.fail(ErrorKind::kBadInput, std::string(what) + " index " + std::to_string(i) +
                                      " is out of range for a dimension of size " +
                                      std::to_string(dim));
  return w;
}

std::vector<int64_t> read_indices(const AttrReader& at, const Tensor& t) {
  if (t.dtype() != DType::kInt64 && t.dtype() != DType::kInt32)
    at.fail(ErrorKind::kBadInput,
            "indices should be int32 or int64, got " + std::string(dtype_name(t.dtype())));
  return t.to_int64_vector();
}

// ---- Slice --------------------------------------------------------------------------------

struct SliceParams {
  std::vector<int64_t> starts, ends, axes, steps;
};

// Per-axis (start, step, length) after ONNX clamping rules.
struct AxisSlice {
  int64_t start = 0, step = 1, len = 0;
};

std::vector<AxisSlice> resolve_slice(const AttrReader& at, const std::vector<int64_t>& dims,
                                     const SliceParams& p) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  std::vector<AxisSlice> out(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) out[i] = {0, 1, dims[i]};
  const size_t n = p.starts.size();
  if (p.ends.size() != n || (!p.axes.empty() && p.axes.size() != n) ||
      (!p.steps.empty() && p.steps.size() != n))
    at.fail(ErrorKind::kBadInput, "Slice starts/ends/axes/steps have different lengths");
  std::vector<bool> seen(dims.size(), false);
  for (size_t k = 0; k < n; ++k) {
    int64_t axis = p.axes.empty() ? static_cast<int64_t>(k) : p.axes[k];
    if (axis < -rank || axis >= rank)
      at.fail(ErrorKind::kBadInput, "Slice axis " + std::to_string(axis) +
                                        " is out of range for rank " + std::to_string(rank));
    if (axis < 0) axis += rank;
    if (seen[static_cast<size_t>(axis)])
      at.fail(ErrorKind::kBadInput, "Slice axes repeat axis " + std::to_string(axis));
    seen[static_cast<size_t>(axis)] = true;
    const int64_t dim = dims[static_cast<size_t>(axis)];
    const int64_t step = p.steps.empty() ? 1 : p.steps[k];
    if (step == 0) at.fail(ErrorKind::kBadInput, "Slice step cannot be 0");
    if (dim == 0) {
      out[static_cast<size_t>(axis)] = {0, step, 0};
      continue;
    }
    // ONNX clamping (as in onnxruntime): starts into [0, dim] (or [0, dim-1] when stepping
    // backwards), ends into [0, dim] (or [-1, dim-1]).
    int64_t s = p.starts[k], e = p.ends[k];
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
    }
    int64_t len = 0;
    // Divide before adding to stay clear of overflow with steps near INT64_MAX.
    if (step > 0 && e > s) len = (e - s - 1) / step + 1;
    const int64_t back =
        step == std::numeric_limits<int64_t>::min() ? std::numeric_limits<int64_t>::max() : -step;
    if (step < 0 && s > e) len = (s - e - 1) / back + 1;
    out[static_cast<size_t>(axis)] = {len > 0 ? s : 0, step, len};
  }
  return out;
}

SliceParams slice_params_kernel(KernelContext& ctx) {
  SliceParams p;
  if (ctx.opset() < 10) {
    p.starts = ctx.attr_ints("starts");
    p.ends = ctx.attr_ints("ends");
    p.axes = ctx.attr_ints("axes");
    return p;
  }
  p.starts = read_int_list(ctx, ctx.input(1), "Slice starts");
  p.ends = read_int_list(ctx, ctx.input(2), "Slice ends");
  if (ctx.has_input(3)) p.axes = read_int_list(ctx, ctx.input(3), "Slice axes");
  if (ctx.has_input(4)) p.steps = read_int_list(ctx, ctx.input(4), "Slice steps");
  return p;
}

void slice_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<AxisSlice> sl = resolve_slice(ctx, x.dims(), slice_params_kernel(ctx));
  std::vector<int64_t> in_strides = contiguous_strides(x.dims());
  std::vector<int64_t> dims, strides;
  int64_t base = 0;
  for (size_t i = 0; i < sl.size(); ++i) {
    dims.push_back(sl[i].len);
    strides.push_back(in_strides[i] * sl[i].step);
    base += sl[i].start * in_strides[i];
  }
  Tensor y(x.dtype(), dims);
  if (y.numel() > 0) strided_copy(x, y, base, strides);
  ctx.set_output(0, std::move(y));
}

void slice_infer(InferContext& ctx) {
  DType dt = input_dtype(ctx, 0);
  std::optional<Shape> in = input_shape(ctx, 0);
  if (!in) {
    ctx.set_output_type(0, Type::tensor(dt));
    return;
  }
  SliceParams p;
  bool known = true;
  if (ctx.opset() < 10) {
    p.starts = ctx.attr_ints("starts");
    p.ends = ctx.attr_ints("ends");
    p.axes = ctx.attr_ints("axes");
  } else {
    auto get = [&](int i, std::vector<int64_t>& v) {
      if (!ctx.has_input(i)) return;
      const Tensor* c = ctx.constant_input(i);
      if (!c || !is_integer(c->dtype()) || c->rank() > 1)
        known = false;
      else
        v = c->to_int64_vector();
    };
    get(1, p.starts);
    get(2, p.ends);
    get(3, p.axes);
    get(4, p.steps);
  }
  Shape out = *in;
  if (!known) {
    // Only the axes that are certainly untouched keep their dims.
    std::vector<bool> touched(in->rank(), true);
    const Tensor* axes = ctx.has_input(3) ? ctx.constant_input(3) : nullptr;
    if (axes && is_integer(axes->dtype())) {
      std::fill(touched.begin(), touched.end(), false);
      for (int64_t a : axes->to_int64_vector()) {
        int64_t r = static_cast<int64_t>(in->rank());
        if (a < -r || a >= r) return ctx.set_output_type(0, Type::tensor(dt));
        touched[static_cast<size_t>(a < 0 ? a + r : a)] = true;
      }
    }
    for (size_t i = 0; i < out.rank(); ++i)
      if (touched[i]) out.dims[i] = Dim();
    ctx.set_output_type(0, Type::tensor(dt, out));
    return;
  }
  // Resolve with unknown dims treated as huge, then keep only dims that do not depend on them.
  std::vector<int64_t> dims;
  for (const Dim& d : in->dims) dims.push_back(d.known() ? d.value : -1);
  std::vector<bool> touched(in->rank(), false);
  const int64_t r = static_cast<int64_t>(in->rank());
  for (size_t k = 0; k < p.starts.size(); ++k) {
    int64_t a = p.axes.empty() ? static_cast<int64_t>(k) : (k < p.axes.size() ? p.axes[k] : 0);
    if (a >= -r && a < r) touched[static_cast<size_t>(a < 0 ? a + r : a)] = true;
  }
  bool all_known = true;
  for (size_t i = 0; i < dims.size(); ++i) all_known = all_known && (dims[i] >= 0 || !touched[i]);
  if (!all_known) {
    for (size_t i = 0; i < out.rank(); ++i)
      if (touched[i] && dims[i] < 0) out.dims[i] = Dim();
    for (size_t i = 0; i < dims.size(); ++i)
      if (dims[i] < 0) dims[i] = 0;
    std::vector<AxisSlice> sl = resolve_slice(ctx, dims, p);
    for (size_t i = 0; i < out.rank(); ++i)
      if (touched[i] && in->dims[i].known()) out.dims[i] = Dim(sl[i].len);
  } else {
    for (size_t i = 0; i < dims.size(); ++i)
      if (dims[i] < 0) dims[i] = 0;
    std::vector<AxisSlice> sl = resolve_slice(ctx, dims, p);
    for (size_t i = 0; i < out.rank(); ++i)
      if (touched[i]) out.dims[i] = Dim(sl[i].len);
  }
  ctx.set_output_type(0, Type::tensor(dt, out));
}

// ---- Gather family ------------------------------------------------------------------------

void gather_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  if (x.rank() == 0) ctx.fail(ErrorKind::kBadInput, "Gather data must have rank >= 1");
  const int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", 0), x.rank());
  std::vector<int64_t> idx = read_indices(ctx, ind);
  const int64_t dim = x.dim(static_cast<int>(axis));
  for (int64_t& i : idx) i = wrap_index(ctx, i, dim, "Gather");
  std::vector<int64_t> out_dims(x.dims().begin(), x.dims().begin() + axis);
  out_dims.insert(out_dims.end(), ind.dims().begin(), ind.dims().end());
  out_dims.insert(out_dims.end(), x.dims().begin() + axis + 1, x.dims().end());
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= x.dim(static_cast<int>(i));
  for (int64_t i = axis + 1; i < x.rank(); ++i) inner *= x.dim(static_cast<int>(i));
  Tensor y(x.dtype(), out_dims);
  visit_storage(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xs = x.data<T>();
    T* ys = y.data<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (size_t k = 0; k < idx.size(); ++k) {
        const T* src = xs + (o * dim + idx[k]) * inner;
        std::copy(src, src + inner,
                  ys + (o * static_cast<int64_t>(idx.size()) + static_cast<int64_t>(k)) * inner);
      }
  });
  ctx.set_output(0, std::move(y));
}

void gather_infer(InferContext& ctx) {
  DType dt = input_dtype(ctx, 0);
  std::optional<Shape> x = input_shape(ctx, 0), ind = input_shape(ctx, 1);
  if (!x || !ind || x->rank() == 0) {
    ctx.set_output_type(0, Type::tensor(dt));
    return;
  }
  const int64_t axis =
      normalize_axis(ctx, ctx.attr_int("axis", 0), static_cast<int64_t>(x->rank()));
  // Constant indices are checked here (the generated kernel clamps run-time ones).
  const Dim& extent = x->dims[static_cast<size_t>(axis)];
  if (const Tensor* idx = ctx.constant_input(1); idx && extent.known() && is_integer(idx->dtype()))
    for (int64_t k = 0; k < idx->numel(); ++k) wrap_index(ctx, idx->get_int(k), extent.value, "Gather");
  Shape out;
  out.dims.assign(x->dims.begin(), x->dims.begin() + axis);
  out.dims.insert(out.dims.end(), ind->dims.begin(), ind->dims.end());
  out.dims.insert(out.dims.end(), x->dims.begin() + axis + 1, x->dims.end());
  ctx.set_output_type(0, Type::tensor(dt, out));
}

// Checks that `ind` has data's rank and fits inside data on every axis but `axis`.
void check_elements_shape(const AttrReader& at, const Tensor& x, const Tensor& ind, int64_t axis,
                          const char* op) {
  bool ok = ind.rank() == x.rank();
  for (int i = 0; ok && i < x.rank(); ++i) ok = i == axis || ind.dim(i) <= x.dim(i);
  if (!ok)
    at.fail(ErrorKind::kBadInput, std::string(op) + " indices shape " + dims_to_string(ind.dims()) +
                                      " does not fit data shape " + dims_to_string(x.dims()));
}

// For each element of `ind` (row-major), calls f(element_index, data_offset) where data_offset
// addresses data at the element's coordinates with the axis coordinate replaced by the index.
template <class F>
void for_each_element_index(const AttrReader& at, const Tensor& x, const Tensor& ind, int64_t axis,
                            const char* op, F&& f) {
  std::vector<int64_t> idx = read_indices(at, ind);
  std::vector<int64_t> xs = contiguous_strides(x.dims());
  const size_t rank = static_cast<size_t>(x.rank());
  std::vector<int64_t> pos(rank, 0);
  const int64_t dim = x.dim(static_cast<int>(axis));
  int64_t base = 0;  // offset of pos with the axis coordinate at 0
  for (int64_t i = 0; i < ind.numel(); ++i) {
    int64_t k = wrap_index(at, idx[static_cast<size_t>(i)], dim, op);
    f(i, base + k * xs[static_cast<size_t>(axis)]);
    for (size_t a = rank; a-- > 0;) {
      if (++pos[a] < ind.dim(static_cast<int>(a))) {
        if (a != static_cast<size_t>(axis)) base += xs[a];
        break;
      }
      if (a != static_cast<size_t>(axis)) base -= xs[a] * (pos[a] - 1);
      pos[a] = 0;
    }
  }
}

void gather_elements_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  if (x.rank() == 0) ctx.fail(ErrorKind::kBadInput, "GatherElements data must have rank >= 1");
  const int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", 0), x.rank());
  check_elements_shape(ctx, x, ind, axis, "GatherElements");
  Tensor y(x.dtype(), ind.dims());
  visit_storage(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xs = x.data<T>();
    T* ys = y.data<T>();
    for_each_element_index(ctx, x, ind, axis, "GatherElements",
                           [&](int64_t i, int64_t off) { ys[i] = xs[off]; });
  });
  ctx.set_output(0, std::move(y));
}

void infer_like_input1(InferContext& ctx) {
  ctx.set_output_type(0, Type::tensor(input_dtype(ctx, 0), input_shape(ctx, 1)));
}

void gather_nd_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  const int64_t b = ctx.opset() >= 12 ? ctx.attr_int("batch_dims", 0) : 0;
  const int64_t r = x.rank(), q = ind.rank();
  if (r < 1 || q < 1 || b < 0 || b >= std::min(r, q))
    ctx.fail(ErrorKind::kBadInput,
             "GatherND needs data and indices of rank >= 1 and batch_dims < both ranks");
  const int64_t k = ind.dim(static_cast<int>(q - 1));
  if (k < 1 || k > r - b)
    ctx.fail(ErrorKind::kBadInput, "GatherND indices last dim " + std::to_string(k) +
                                       " must be in [1, " + std::to_string(r - b) + "]");
  for (int64_t i = 0; i < b; ++i)
    if (x.dim(static_cast<int>(i)) != ind.dim(static_cast<int>(i)))
      ctx.fail(ErrorKind::kBadInput, "GatherND batch dims of data " + dims_to_string(x.dims()) +
                                         " and indices " + dims_to_string(ind.dims()) + " differ");
  std::vector<int64_t> out_dims(ind.dims().begin(), ind.dims().end() - 1);
  out_dims.insert(out_dims.end(), x.dims().begin() + b + k, x.dims().end());
  int64_t batch = 1, slice = 1;
  for (int64_t i = 0; i < b; ++i) batch *= x.dim(static_cast<int>(i));
  for (int64_t i = b + k; i < r; ++i) slice *= x.dim(static_cast<int>(i));
  const std::vector<int64_t> xs = contiguous_strides(x.dims());
  const int64_t batch_stride = b > 0 ? xs[static_cast<size_t>(b - 1)] : 0;
  std::vector<int64_t> idx = read_indices(ctx, ind);
  const int64_t tuples = ind.numel() / k;
  const int64_t per_batch = batch > 0 ? tuples / batch : 1;
  Tensor y(x.dtype(), out_dims);
  visit_storage(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xd = x.data<T>();
    T* yd = y.data<T>();
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t off = (t / per_batch) * batch_stride;
      for (int64_t j = 0; j < k; ++j) {
        int64_t ax = b + j;
        off += wrap_index(ctx, idx[static_cast<size_t>(t * k + j)], x.dim(static_cast<int>(ax)),
                          "GatherND") *
               xs[static_cast<size_t>(ax)];
      }
      std::copy(xd + off, xd + off + slice, yd + t * slice);
    }
  });
  ctx.set_output(0, std::move(y));
}

void gather_nd_infer(InferContext& ctx) {
  DType dt = input_dtype(ctx, 0);
  std::optional<Shape> x = input_shape(ctx, 0), ind = input_shape(ctx, 1);
  const int64_t b = ctx.opset() >= 12 ? ctx.attr_int("batch_dims", 0) : 0;
  if (!x || !ind || ind->rank() == 0 || !ind->dims.back().known()) {
    ctx.set_output_type(0, Type::tensor(dt));
    return;
  }
  const int64_t k = ind->dims.back().value;
  if (b + k > static_cast<int64_t>(x->rank()) || b < 0)
    return ctx.set_output_type(0, Type::tensor(dt));
  Shape out;
  out.dims.assign(ind->dims.begin(), ind->dims.end() - 1);
  out.dims.insert(out.dims.end(), x->dims.begin() + b + k, x->dims.end());
  ctx.set_output_type(0, Type::tensor(dt, out));
}

// ---- Scatter family -----------------------------------------------------------------------

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

Reduction read_reduction(const AttrReader& at) {
  std::string s = at.attr_string("reduction", "none");
  if (s == "none") return Reduction::kNone;
  if (s == "add") return Reduction::kAdd;
  if (s == "mul") return Reduction::kMul;
  if (s == "max") return Reduction::kMax;
  if (s == "min") return Reduction::kMin;
  at.fail(ErrorKind::kInvalidModel, "reduction '" + s + "' is not one of none, add, mul, max, min");
}

template <class T>
T reduce_pair(T a, T b, Reduction r) {
  if constexpr (std::is_same_v<T, std::string>) {
    return b;
  } else if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    float fa = a, fb = b;
    switch (r) {
      case Reduction::kAdd:
        return T(fa + fb);
      case Reduction::kMul:
        return T(fa * fb);
      case Reduction::kMax:
        return T(std::max(fa, fb));
      case Reduction::kMin:
        return T(std::min(fa, fb));
      default:
        return b;
    }
  } else if constexpr (std::is_same_v<T, bool>) {
    switch (r) {
      case Reduction::kAdd:
      case Reduction::kMax:
        return a || b;
      case Reduction::kMul:
      case Reduction::kMin:
        return a && b;
      default:
        return b;
    }
  } else {
    switch (r) {
      case Reduction::kAdd:
        return static_cast<T>(a + b);
      case Reduction::kMul:
        return static_cast<T>(a * b);
      case Reduction::kMax:
        return std::max(a, b);
      case Reduction::kMin:
        return std::min(a, b);
      default:
        return b;
    }
  }
}

// Runs f(TypeTag<T>) with value types when a reduction needs arithmetic, width types otherwise.
template <class F>
void visit_for_reduction(const AttrReader& at, DType dt, Reduction r, F&& f) {
  if (r == Reduction::kNone) return visit_storage(dt, f);
  if (dt == DType::kString)
    at.fail(ErrorKind::kBadInput, "scatter reductions do not apply to strings");
  visit_dtype(dt, f);
}

void scatter_elements_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  const Tensor& upd = ctx.input(2);
  if (x.rank() == 0) ctx.fail(ErrorKind::kBadInput, "ScatterElements data must have rank >= 1");
  if (upd.dims() != ind.dims() || upd.dtype() != x.dtype())
    ctx.fail(ErrorKind::kBadInput, "ScatterElements updates " + type_string(upd) +
                                       " should match the indices shape " +
                                       dims_to_string(ind.dims()) + " and the data type");
  const int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", 0), x.rank());
  check_elements_shape(ctx, x, ind, axis, "ScatterElements");
  const Reduction red =
      ctx.node().op_type == "Scatter" || ctx.opset() < 16 ? Reduction::kNone : read_reduction(ctx);
  Tensor y = x.clone();
  visit_for_reduction(ctx, x.dtype(), red, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* yd = y.data<T>();
    const T* ud = upd.data<T>();
    for_each_element_index(ctx, x, ind, axis, "ScatterElements", [&](int64_t i, int64_t off) {
      yd[off] = red == Reduction::kNone ? ud[i] : reduce_pair<T>(yd[off], ud[i], red);
    });
  });
  ctx.set_output(0, std::move(y));
}

void scatter_nd_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  const Tensor& upd = ctx.input(2);
  const int64_t r = x.rank(), q = ind.rank();
  if (r < 1 || q < 1)
    ctx.fail(ErrorKind::kBadInput, "ScatterND needs data and indices of rank >= 1");
  const int64_t k = ind.dim(static_cast<int>(q - 1));
  if (k < 1 || k > r)
    ctx.fail(ErrorKind::kBadInput, "ScatterND indices last dim " + std::to_string(k) +
                                       " must be in [1, " + std::to_string(r) + "]");
  std::vector<int64_t> want(ind.dims().begin(), ind.dims().end() - 1);
  want.insert(want.end(), x.dims().begin() + k, x.dims().end());
  if (upd.dims() != want || upd.dtype() != x.dtype())
    ctx.fail(ErrorKind::kBadInput, "ScatterND updates " + type_string(upd) + " should have shape " +
                                       dims_to_string(want) + " and the data type");
  const Reduction red = ctx.opset() >= 16 ? read_reduction(ctx) : Reduction::kNone;
  int64_t slice = 1;
  for (int64_t i = k; i < r; ++i) slice *= x.dim(static_cast<int>(i));
  const std::vector<int64_t> xs = contiguous_strides(x.dims());
  std::vector<int64_t> idx = read_indices(ctx, ind);
  const int64_t tuples = ind.numel() / k;
  Tensor y = x.clone();
  visit_for_reduction(ctx, x.dtype(), red, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* yd = y.data<T>();
    const T* ud = upd.data<T>();
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t off = 0;
      for (int64_t j = 0; j < k; ++j)
        off += wrap_index(ctx, idx[static_cast<size_t>(t * k + j)], x.dim(static_cast<int>(j)),
                          "ScatterND") *
               xs[static_cast<size_t>(j)];
      for (int64_t e = 0; e < slice; ++e) {
        T& dst = yd[off + e];
        dst = red == Reduction::kNone ? ud[t * slice + e]
                                      : reduce_pair<T>(dst, ud[t * slice + e], red);
      }
    }
  });
  ctx.set_output(0, std::move(y));
}

// ---- NonZero / Compress / ReverseSequence ---------------------------------------------------

template <class T>
bool is_nonzero(const T& v) {
  if constexpr (std::is_same_v<T, std::string>)
    return !v.empty();
  else if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>)
    return static_cast<float>(v) != 0.f;
  else
    return v != T(0);
}

void nonzero_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> flat;
  visit_dtype_any(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xd = x.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i)
      if (is_nonzero(xd[i])) flat.push_back(i);
  });
  const int64_t n = static_cast<int64_t>(flat.size());
  // A scalar behaves as a 1-element vector (numpy's atleast_1d), as onnxruntime does.
  std::vector<int64_t> dims = x.rank() == 0 ? std::vector<int64_t>{1} : x.dims();
  const int64_t rank = static_cast<int64_t>(dims.size());
  Tensor y(DType::kInt64, {rank, n});
  std::vector<int64_t> strides = contiguous_strides(dims);
  int64_t* yd = y.data<int64_t>();
  for (int64_t j = 0; j < n; ++j) {
    int64_t rem = flat[static_cast<size_t>(j)];
    for (int64_t a = 0; a < rank; ++a) {
      yd[a * n + j] = rem / strides[static_cast<size_t>(a)];
      rem %= strides[static_cast<size_t>(a)];
    }
  }
  ctx.set_output(0, std::move(y));
}

void nonzero_infer(InferContext& ctx) {
  std::optional<Shape> x = input_shape(ctx, 0);
  Dim rank = x ? Dim(std::max<int64_t>(1, static_cast<int64_t>(x->rank()))) : Dim();
  ctx.set_output_type(0, Type::tensor(DType::kInt64, Shape({rank, Dim()})));
}

void compress_kernel(KernelContext& ctx) {
  Tensor x = ctx.input(0);
  const Tensor& cond = ctx.input(1);
  if (cond.rank() != 1)
    ctx.fail(ErrorKind::kBadInput,
             "Compress condition must be 1-D, got " + dims_to_string(cond.dims()));
  int64_t axis = 0;
  if (ctx.has_attr("axis")) {
    if (x.rank() == 0) ctx.fail(ErrorKind::kBadInput, "Compress with axis needs input rank >= 1");
    axis = normalize_axis(ctx, ctx.attr_int("axis"), x.rank());
  } else {
    x = x.reshaped({x.numel()});
  }
  const int64_t dim = x.dim(static_cast<int>(axis));
  if (cond.numel() > dim)
    ctx.fail(ErrorKind::kBadInput, "Compress condition has " + std::to_string(cond.numel()) +
                                       " entries for an axis of size " + std::to_string(dim));
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < cond.numel(); ++i)
    if (cond.get_double(i) != 0) keep.push_back(i);
  std::vector<int64_t> out_dims = x.dims();
  out_dims[static_cast<size_t>(axis)] = static_cast<int64_t>(keep.size());
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= x.dim(static_cast<int>(i));
  for (int64_t i = axis + 1; i < x.rank(); ++i) inner *= x.dim(static_cast<int>(i));
  Tensor y(x.dtype(), out_dims);
  visit_storage(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xd = x.data<T>();
    T* yd = y.data<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k : keep) {
        const T* s = xd + (o * dim + k) * inner;
        yd = std::copy(s, s + inner, yd);
      }
  });
  ctx.set_output(0, std::move(y));
}

void reverse_sequence_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& lens_t = ctx.input(1);
  if (x.rank() < 2) ctx.fail(ErrorKind::kBadInput, "ReverseSequence input must have rank >= 2");
  const int64_t batch_axis = ctx.attr_int("batch_axis", 1),
                time_axis = ctx.attr_int("time_axis", 0);
  if (!((batch_axis == 0 && time_axis == 1) || (batch_axis == 1 && time_axis == 0)))
    ctx.fail(ErrorKind::kInvalidModel, "ReverseSequence batch_axis/time_axis must be 0/1 or 1/0");
  std::vector<int64_t> lens = read_int_list(ctx, lens_t, "sequence_lens");
  const int64_t nb = x.dim(static_cast<int>(batch_axis)), nt = x.dim(static_cast<int>(time_axis));
  if (static_cast<int64_t>(lens.size()) != nb)
    ctx.fail(ErrorKind::kBadInput, "sequence_lens has " + std::to_string(lens.size()) +
                                       " entries for a batch of " + std::to_string(nb));
  for (int64_t l : lens)
    if (l < 0 || l > nt)
      ctx.fail(ErrorKind::kBadInput, "sequence_lens value " + std::to_string(l) +
                                         " is outside [0, " + std::to_string(nt) + "]");
  const std::vector<int64_t> xs = contiguous_strides(x.dims());
  const int64_t inner = xs[1];  // elements per (dim0, dim1) pair
  Tensor y = x.clone();
  visit_storage(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xd = x.data<T>();
    T* yd = y.data<T>();
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t t = 0; t < lens[static_cast<size_t>(b)]; ++t) {
        int64_t src_t = lens[static_cast<size_t>(b)] - 1 - t;
        auto off = [&](int64_t tt) {
          return (batch_axis == 0 ? b * xs[0] + tt * xs[1] : tt * xs[0] + b * xs[1]);
        };
        std::copy(xd + off(src_t), xd + off(src_t) + inner, yd + off(t));
      }
  });
  ctx.set_output(0, std::move(y));
}

// ---- Unique -------------------------------------------------------------------------------

template <class T>
int compare_values(const T& a, const T& b) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    float fa = a, fb = b;
    return fa < fb ? -1 : (fb < fa ? 1 : 0);
  } else {
    return a < b ? -1 : (b < a ? 1 : 0);
  }
}

void unique_kernel(KernelContext& ctx) {
  const Tensor& x_in = ctx.input(0);
  const bool sorted = ctx.attr_int("sorted", 1) != 0;
  const bool has_axis = ctx.has_attr("axis");
  Tensor x = x_in;
  int64_t axis = 0;
  if (has_axis) {
    if (x.rank() == 0) ctx.fail(ErrorKind::kBadInput, "Unique with axis needs input rank >= 1");
    axis = normalize_axis(ctx, ctx.attr_int("axis"), x.rank());
  } else {
    x = x.reshaped({x.numel()});
  }
  // View x as [outer, n, inner]: an item is the [outer, inner] slice at one position along axis.
  const int64_t n = x.dim(static_cast<int>(axis));
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= x.dim(static_cast<int>(i));
  for (int64_t i = axis + 1; i < x.rank(); ++i) inner *= x.dim(static_cast<int>(i));
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::vector<int64_t> first, inverse(static_cast<size_t>(n)), counts;
  visit_dtype_any(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xd = x.data<T>();
    auto cmp = [&](int64_t a, int64_t b) {
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t e = 0; e < inner; ++e) {
          int c = compare_values(xd[(o * n + a) * inner + e], xd[(o * n + b) * inner + e]);
          if (c) return c;
        }
      return 0;
    };
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return cmp(a, b) < 0; });
    // Groups of equal items in sorted order; stable sort keeps each group's first occurrence first.
    std::vector<int64_t> group_of(static_cast<size_t>(n));
    for (size_t i = 0; i < order.size(); ++i) {
      if (i == 0 || cmp(order[i - 1], order[i]) != 0) {
        first.push_back(order[i]);
        counts.push_back(0);
      }
      group_of[static_cast<size_t>(order[i])] = static_cast<int64_t>(first.size()) - 1;
      ++counts.back();
    }
    std::vector<int64_t> rank_of(first.size());
    std::iota(rank_of.begin(), rank_of.end(), 0);
    if (!sorted) {
      // Reorder groups by first occurrence.
      std::vector<int64_t> g(first.size());
      std::iota(g.begin(), g.end(), 0);
      std::sort(g.begin(), g.end(), [&](int64_t a, int64_t b) {
        return first[static_cast<size_t>(a)] < first[static_cast<size_t>(b)];
      });
      std::vector<int64_t> f2, c2;
      for (size_t i = 0; i < g.size(); ++i) {
        rank_of[static_cast<size_t>(g[i])] = static_cast<int64_t>(i);
        f2.push_back(first[static_cast<size_t>(g[i])]);
        c2.push_back(counts[static_cast<size_t>(g[i])]);
      }
      first = std::move(f2);
      counts = std::move(c2);
    }
    for (int64_t i = 0; i < n; ++i)
      inverse[static_cast<size_t>(i)] =
          rank_of[static_cast<size_t>(group_of[static_cast<size_t>(i)])];
  });
  const int64_t u = static_cast<int64_t>(first.size());
  std::vector<int64_t> ydims = x.dims();
  ydims[static_cast<size_t>(axis)] = u;
  Tensor y(x.dtype(), ydims);
  visit_storage(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xd = x.data<T>();
    T* yd = y.data<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < u; ++j) {
        const T* s = xd + (o * n + first[static_cast<size_t>(j)]) * inner;
        std::copy(s, s + inner, yd + (o * u + j) * inner);
      }
  });
  ctx.set_output(0, std::move(y));
  auto vec = [](const std::vector<int64_t>& v) {
    Tensor t(DType::kInt64, {static_cast<int64_t>(v.size())});
    std::copy(v.begin(), v.end(), t.data<int64_t>());
    return t;
  };
  if (ctx.num_outputs() > 1) ctx.set_output(1, vec(first));
  if (ctx.num_outputs() > 2) ctx.set_output(2, vec(inverse));
  if (ctx.num_outputs() > 3) ctx.set_output(3, vec(counts));
}

void unique_infer(InferContext& ctx) {
  DType dt = input_dtype(ctx, 0);
  std::optional<Shape> x = input_shape(ctx, 0);
  if (ctx.has_attr("axis") && x && x->rank() > 0) {
    Shape s = *x;
    s.dims[static_cast<size_t>(
        normalize_axis(ctx, ctx.attr_int("axis"), static_cast<int64_t>(x->rank())))] = Dim();
    ctx.set_output_type(0, Type::tensor(dt, s));
  } else if (!ctx.has_attr("axis")) {
    ctx.set_output_type(0, Type::tensor(dt, Shape({Dim()})));
  } else {
    ctx.set_output_type(0, Type::tensor(dt));
  }
  for (int i = 1; i < ctx.num_outputs(); ++i)
    ctx.set_output_type(i, Type::tensor(DType::kInt64, Shape({Dim()})));
}

}  // namespace

void register_indexing_ops(OpRegistry& r) {
  const auto inj = PatternKind::kInjective;
  const auto opq = PatternKind::kOpaque;
  r.add("Slice").since(1).inputs(1, 5).outputs(1).kind(inj).run(slice_kernel).shape(slice_infer);
  r.add("Gather").since(1).inputs(2).outputs(1).kind(inj).run(gather_kernel).shape(gather_infer);
  r.add("GatherElements")
      .since(11)
      .inputs(2)
      .outputs(1)
      .kind(inj)
      .run(gather_elements_kernel)
      .shape(infer_like_input1);
  r.add("GatherND")
      .since(11)
      .inputs(2)
      .outputs(1)
      .kind(inj)
      .run(gather_nd_kernel)
      .shape(gather_nd_infer);
  r.add("ScatterND")
      .since(11)
      .inputs(3)
      .outputs(1)
      .kind(opq)
      .run(scatter_nd_kernel)
      .shape(infer_same_as_input0);
  r.add("ScatterElements")
      .since(11)
      .inputs(3)
      .outputs(1)
      .kind(opq)
      .run(scatter_elements_kernel)
      .shape(infer_same_as_input0);
  r.add("Scatter")
      .since(9)
      .inputs(3)
      .outputs(1)
      .kind(opq)
      .run(scatter_elements_kernel)
      .shape(infer_same_as_input0);
  r.add("NonZero").since(9).inputs(1).outputs(1).kind(opq).run(nonzero_kernel).shape(nonzero_infer).dynamic_shape();
  r.add("Compress").since(9).inputs(2).outputs(1).kind(opq).run(compress_kernel).dynamic_shape();
  r.add("ReverseSequence")
      .since(10)
      .inputs(2)
      .outputs(1)
      .kind(inj)
      .run(reverse_sequence_kernel)
      .shape(infer_same_as_input0);
  r.add("Unique")
      .since(11)
      .inputs(1)
      .outputs(1, 4)
      .kind(opq)
      .run(unique_kernel)
      .shape(unique_infer)
      .dynamic_shape();
  register_resize_ops(r);
}

}  // namespace kiln
