// Pooling reference kernels: MaxPool (with indices), AveragePool, LpPool, their Global variants
// and MaxUnpool, for any number of spatial dims.
#include <cmath>
#include <limits>

#include "ops/op_util.h"
#include "ops/window_util.h"

namespace kiln {
namespace {

enum class PoolKind { kMax, kAverage, kLp };

// Input coordinates a window covers along one spatial dim, plus how many of its taps lie inside
// the explicitly padded range (count_include_pad counts those, but not ceil-mode overhang).
struct DimTaps {
  std::vector<int64_t> coords;
  int64_t padded_count = 0;
};

DimTaps taps_along(const Window& w, int d, int64_t o) {
  DimTaps t;
  const int64_t start = o * w.strides[d] - w.pads[d];
  for (int64_t k = 0; k < w.kernel[d]; ++k) {
    const int64_t c = start + k * w.dilations[d];
    if (c >= 0 && c < w.in[d]) t.coords.push_back(c);
    if (c < w.in[d] + w.pads[d + w.nsp]) ++t.padded_count;
  }
  return t;
}

// Visits every output position of one (n, c) plane with the list of input offsets (and the
// spatial coords' per-dim vectors) its window covers.
template <class F>
void for_each_window(const Window& w, F&& f) {
  std::vector<int64_t> in_strides = contiguous_strides(w.in);
  std::vector<DimTaps> taps(static_cast<size_t>(w.nsp));
  std::vector<int64_t> offsets;
  int64_t out_index = 0;
  for_each_index(w.out, [&](const std::vector<int64_t>& o) {
    int64_t padded = 1;
    size_t count = 1;
    for (int d = 0; d < w.nsp; ++d) {
      taps[d] = taps_along(w, d, o[d]);
      padded *= taps[d].padded_count;
      count *= taps[d].coords.size();
    }
    offsets.clear();
    if (count > 0) {
      std::vector<int64_t> sizes(static_cast<size_t>(w.nsp));
      for (int d = 0; d < w.nsp; ++d) sizes[d] = static_cast<int64_t>(taps[d].coords.size());
      for_each_index(sizes, [&](const std::vector<int64_t>& k) {
        int64_t off = 0;
        for (int d = 0; d < w.nsp; ++d) off += taps[d].coords[k[d]] * in_strides[d];
        offsets.push_back(off);
      });
    }
    f(out_index++, offsets, padded);
  });
}

// Flat spatial offset in column-major order (MaxPool storage_order = 1).
int64_t column_major_offset(int64_t row_major, const std::vector<int64_t>& dims) {
  int64_t result = 0, stride = 1;
  std::vector<int64_t> idx(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    idx[d] = row_major % dims[d];
    row_major /= dims[d];
  }
  for (size_t d = 0; d < dims.size(); ++d) {
    result += idx[d] * stride;
    stride *= dims[d];
  }
  return result;
}

Window pool_window(const KernelContext& ctx, const Tensor& x) {
  if (x.rank() < 3)
    ctx.fail(ErrorKind::kBadInput, "input X should have rank >= 3 (N, C, spatial...), got " +
                                       dims_to_string(x.dims()));
  std::vector<int64_t> in(x.dims().begin() + 2, x.dims().end());
  std::vector<int64_t> kernel = ctx.attr_ints("kernel_shape");
  if (kernel.empty()) ctx.fail(ErrorKind::kInvalidModel, "missing required attribute 'kernel_shape'");
  return resolve_window(ctx, in, kernel, ctx.attr_int("ceil_mode", 0) != 0);
}

template <class T>
void pool_typed(const KernelContext& ctx, PoolKind kind, const Tensor& x, const Window& w,
                Tensor& y, Tensor* indices) {
  const int64_t planes = x.dim(0) * x.dim(1);
  const int64_t in_sz = product(w.in), out_sz = product(w.out);
  const bool include_pad = ctx.attr_int("count_include_pad", 0) != 0;
  const double p = kind == PoolKind::kLp ? ctx.attr_float("p", 2.f) : 1.0;
  const bool col_major = ctx.attr_int("storage_order", 0) != 0;
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  int64_t* ip = indices ? indices->data<int64_t>() : nullptr;
  for (int64_t pl = 0; pl < planes; ++pl) {
    const T* xs = xp + pl * in_sz;
    T* ys = yp + pl * out_sz;
    for_each_window(w, [&](int64_t o, const std::vector<int64_t>& offs, int64_t padded) {
      if (kind == PoolKind::kMax) {
        T best = std::numeric_limits<T>::lowest();
        if constexpr (std::numeric_limits<T>::has_infinity) best = -std::numeric_limits<T>::infinity();
        int64_t arg = offs.empty() ? 0 : offs[0];
        for (int64_t off : offs)
          if (xs[off] > best) {
            best = xs[off];
            arg = off;
          }
        ys[o] = best;
        if (ip) ip[pl * out_sz + o] = pl * in_sz + (col_major ? column_major_offset(arg, w.in) : arg);
      } else if (kind == PoolKind::kAverage) {
        double sum = 0;
        for (int64_t off : offs) sum += static_cast<double>(xs[off]);
        const int64_t count = include_pad ? padded : static_cast<int64_t>(offs.size());
        ys[o] = count > 0 ? static_cast<T>(sum / static_cast<double>(count)) : T(0);
      } else {
        double sum = 0;
        for (int64_t off : offs) sum += std::pow(std::fabs(static_cast<double>(xs[off])), p);
        ys[o] = static_cast<T>(std::pow(sum, 1.0 / p));
      }
    });
  }
}

template <PoolKind kKind>
void pool_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Window w = pool_window(ctx, x);
  std::vector<int64_t> ydims = {x.dim(0), x.dim(1)};
  ydims.insert(ydims.end(), w.out.begin(), w.out.end());
  Tensor y(x.dtype(), ydims);
  const bool want_idx = kKind == PoolKind::kMax && ctx.num_outputs() > 1 && ctx.wants_output(1);
  Tensor idx;
  if (want_idx) idx = Tensor(DType::kInt64, ydims);
  auto run_float = [&](auto tag) {
    using T = typename decltype(tag)::type;
    pool_typed<T>(ctx, kKind, x, w, y, want_idx ? &idx : nullptr);
  };
  switch (x.dtype()) {
    case DType::kFloat32: run_float(TypeTag<float>{}); break;
    case DType::kFloat64: run_float(TypeTag<double>{}); break;
    case DType::kInt8:
      if (kKind == PoolKind::kMax) { run_float(TypeTag<int8_t>{}); break; }
      [[fallthrough]];
    case DType::kUInt8:
      if (kKind == PoolKind::kMax) { run_float(TypeTag<uint8_t>{}); break; }
      [[fallthrough]];
    default:
      ctx.fail(ErrorKind::kUnsupported, "pooling does not support element type " +
                                            std::string(dtype_name(x.dtype())));
  }
  ctx.set_output(0, std::move(y));
  if (want_idx) ctx.set_output(1, std::move(idx));
}

template <PoolKind kKind>
void global_pool_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 3)
    ctx.fail(ErrorKind::kBadInput, "input X should have rank >= 3 (N, C, spatial...), got " +
                                       dims_to_string(x.dims()));
  std::vector<int64_t> ydims(x.dims().size(), 1);
  ydims[0] = x.dim(0);
  ydims[1] = x.dim(1);
  Tensor y(x.dtype(), ydims);
  const int64_t planes = x.dim(0) * x.dim(1);
  const int64_t sz = planes == 0 ? 0 : x.numel() / planes;
  const double p = kKind == PoolKind::kLp ? ctx.attr_float("p", 2.f) : 1.0;
  auto run = [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    for (int64_t pl = 0; pl < planes; ++pl) {
      const T* xs = xp + pl * sz;
      if (kKind == PoolKind::kMax) {
        T best = -std::numeric_limits<T>::infinity();
        for (int64_t i = 0; i < sz; ++i) best = xs[i] > best ? xs[i] : best;
        yp[pl] = best;
      } else if (kKind == PoolKind::kAverage) {
        double sum = 0;
        for (int64_t i = 0; i < sz; ++i) sum += static_cast<double>(xs[i]);
        yp[pl] = static_cast<T>(sz > 0 ? sum / static_cast<double>(sz) : 0.0);
      } else {
        double sum = 0;
        for (int64_t i = 0; i < sz; ++i) sum += std::pow(std::fabs(static_cast<double>(xs[i])), p);
        yp[pl] = static_cast<T>(std::pow(sum, 1.0 / p));
      }
    }
  };
  if (x.dtype() == DType::kFloat32) {
    run(TypeTag<float>{});
  } else if (x.dtype() == DType::kFloat64) {
    run(TypeTag<double>{});
  } else {
    ctx.fail(ErrorKind::kUnsupported, "global pooling supports float types, got " +
                                          std::string(dtype_name(x.dtype())));
  }
  ctx.set_output(0, std::move(y));
}

void max_unpool_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  if (x.rank() < 3)
    ctx.fail(ErrorKind::kBadInput, "input X should have rank >= 3, got " + dims_to_string(x.dims()));
  if (ind.dims() != x.dims() || ind.dtype() != DType::kInt64)
    ctx.fail(ErrorKind::kBadInput, "indices I should be int64 with X's shape " +
                                       dims_to_string(x.dims()) + ", got " +
                                       dims_to_string(ind.dims()));
  const int nsp = x.rank() - 2;
  std::vector<int64_t> kernel = ctx.attr_ints("kernel_shape");
  if (static_cast<int>(kernel.size()) != nsp)
    ctx.fail(ErrorKind::kInvalidModel, "attribute 'kernel_shape' should have " +
                                           std::to_string(nsp) + " values");
  std::vector<int64_t> strides = spatial_attr(ctx, "strides", nsp, 1, 1);
  std::vector<int64_t> pads = ctx.attr_ints("pads");
  if (pads.empty()) pads.assign(static_cast<size_t>(2 * nsp), 0);
  if (static_cast<int>(pads.size()) != 2 * nsp)
    ctx.fail(ErrorKind::kInvalidModel, "attribute 'pads' should have " + std::to_string(2 * nsp) + " values");
  // Indices address the shape MaxPool's input had (inferred from the window); an explicit
  // output_shape only pads that result at the far end of each spatial dim.
  std::vector<int64_t> inferred = {x.dim(0), x.dim(1)};
  for (int i = 0; i < nsp; ++i)
    inferred.push_back((x.dim(i + 2) - 1) * strides[i] + kernel[i] - pads[i] - pads[i + nsp]);
  for (int64_t d : inferred)
    if (d < 0) ctx.fail(ErrorKind::kBadInput, "inferred output shape has a negative dim");
  std::vector<int64_t> ydims = inferred;
  if (ctx.has_input(2)) {
    ydims = ctx.input(2).to_int64_vector();
    if (static_cast<int>(ydims.size()) != x.rank())
      ctx.fail(ErrorKind::kBadInput, "output_shape " + dims_to_string(ydims) + " should have rank " +
                                         std::to_string(x.rank()));
    for (size_t i = 0; i < ydims.size(); ++i)
      if (ydims[i] < inferred[i])
        ctx.fail(ErrorKind::kBadInput, "output_shape " + dims_to_string(ydims) +
                                           " is smaller than the unpooled shape " +
                                           dims_to_string(inferred));
  }
  Tensor scattered(x.dtype(), inferred);
  const int64_t total = scattered.numel();
  const int64_t* ip = ind.data<int64_t>();
  Tensor y(x.dtype(), ydims);
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = x.data<T>();
    T* sp = scattered.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      if (ip[i] < 0 || ip[i] >= total)
        ctx.fail(ErrorKind::kBadInput, "index " + std::to_string(ip[i]) +
                                           " is out of range for output of " +
                                           std::to_string(total) + " elements");
      sp[ip[i]] = xp[i];
    }
    if (ydims == inferred) return;
    T* yp = y.data<T>();
    std::vector<int64_t> ystr = contiguous_strides(ydims);
    int64_t src = 0;
    for_each_index(inferred, [&](const std::vector<int64_t>& idx) {
      int64_t off = 0;
      for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * ystr[d];
      yp[off] = sp[src++];
    });
  });
  ctx.set_output(0, ydims == inferred ? std::move(scattered) : std::move(y));
}

// ---- shape inference -----------------------------------------------------------------------

void infer_pool(InferContext& ctx) {
  const Type& xt = ctx.input_type(0);
  std::vector<int64_t> in;
  std::vector<int64_t> kernel = ctx.attr_ints("kernel_shape");
  if (!spatial_dims_of(xt, &in) || kernel.size() != in.size()) {
    for (int i = 0; i < ctx.num_outputs(); ++i)
      ctx.set_output_type(i, Type::tensor(i == 0 ? xt.dtype : DType::kInt64));
    return;
  }
  Window w = resolve_window(ctx, in, kernel, ctx.attr_int("ceil_mode", 0) != 0);
  Shape out;
  out.dims = {xt.shape->dims[0], xt.shape->dims[1]};
  for (int64_t o : w.out) out.dims.push_back(o >= 0 ? Dim(o) : Dim());
  ctx.set_output_type(0, Type::tensor(xt.dtype, out));
  if (ctx.num_outputs() > 1) ctx.set_output_type(1, Type::tensor(DType::kInt64, out));
}

void infer_global_pool(InferContext& ctx) {
  const Type& xt = ctx.input_type(0);
  if (!xt.shape || xt.shape->rank() < 3) {
    ctx.set_output_type(0, Type::tensor(xt.dtype));
    return;
  }
  Shape out = *xt.shape;
  for (size_t i = 2; i < out.rank(); ++i) out.dims[i] = Dim(1);
  ctx.set_output_type(0, Type::tensor(xt.dtype, out));
}

}  // namespace

void register_pool_ops(OpRegistry& r) {
  for (int v : {1, 8, 10, 11, 12})
    r.add("MaxPool").since(v).inputs(1).outputs(1, 2).kind(PatternKind::kOpaque)
        .run(pool_kernel<PoolKind::kMax>).shape(infer_pool).via_float();
  for (int v : {1, 7, 10, 11, 19})
    r.add("AveragePool").since(v).inputs(1).outputs(1).kind(PatternKind::kOpaque)
        .run(pool_kernel<PoolKind::kAverage>).shape(infer_pool).via_float();
  for (int v : {1, 2, 11, 18})
    r.add("LpPool").since(v).inputs(1).outputs(1).kind(PatternKind::kOpaque)
        .run(pool_kernel<PoolKind::kLp>).shape(infer_pool).via_float();
  r.add("GlobalMaxPool").since(1).inputs(1).outputs(1).kind(PatternKind::kReduction)
      .run(global_pool_kernel<PoolKind::kMax>).shape(infer_global_pool).via_float();
  r.add("GlobalAveragePool").since(1).inputs(1).outputs(1).kind(PatternKind::kReduction)
      .run(global_pool_kernel<PoolKind::kAverage>).shape(infer_global_pool).via_float();
  for (int v : {1, 2})
    r.add("GlobalLpPool").since(v).inputs(1).outputs(1).kind(PatternKind::kReduction)
        .run(global_pool_kernel<PoolKind::kLp>).shape(infer_global_pool).via_float();
  for (int v : {9, 11})
    r.add("MaxUnpool").since(v).inputs(2, 3).outputs(1).kind(PatternKind::kOpaque)
        .run(max_unpool_kernel);
}

}  // namespace kiln
