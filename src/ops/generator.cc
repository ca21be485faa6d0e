// Generators and small tensor ops added late: Range, EyeLike, OneHot, Trilu, CumProd, BitCast,
// CenterCropPad, Swish, TensorScatter, AffineGrid, ImageDecoder; also register_extra_ops.
#include <cmath>
#include <cstring>

#include "ops/families.h"
#include "ops/op_util.h"
#include "ops/tensor_util.h"

namespace kiln {

void register_loss_ops(OpRegistry& r);      // ops/loss.cc
void register_string_ops(OpRegistry& r);    // ops/string_ops.cc
void register_image_ops(OpRegistry& r);     // ops/image_decoder.cc
void register_training_ops(OpRegistry& r);  // ops/training.cc
void register_ml_ops(OpRegistry& r);        // ops/ml.cc
void register_deform_conv_ops(OpRegistry& r);  // ops/deform_conv.cc

namespace {

double scalar_input(const KernelContext& ctx, int i, const char* what) {
  const Tensor& t = ctx.input(i);
  if (t.numel() != 1)
    ctx.fail(ErrorKind::kBadInput, std::string(what) + " should be a scalar, got " +
                                       type_string(t));
  return t.get_double(0);
}

// ---- Range ------------------------------------------------------------------------------------

void range_kernel(KernelContext& ctx) {
  const Tensor& s = ctx.input(0);
  const DType dt = s.dtype();
  if (ctx.input(1).dtype() != dt || ctx.input(2).dtype() != dt)
    ctx.fail(ErrorKind::kBadInput, "start, limit and delta should have the same type");
  for (int i = 0; i < 3; ++i)
    if (ctx.input(i).numel() != 1)
      ctx.fail(ErrorKind::kBadInput, "Range inputs should be scalars, got input #" +
                                         std::to_string(i) + " " + type_string(ctx.input(i)));
  Tensor y;
  visit_dtype(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, int32_t> ||
                  std::is_same_v<T, int16_t>) {
      const int64_t start = s.get_int(0), limit = ctx.input(1).get_int(0);
      const int64_t delta = ctx.input(2).get_int(0);
      if (delta == 0) ctx.fail(ErrorKind::kBadInput, "Range delta must not be zero");
      const int64_t span = limit - start;
      int64_t n = span / delta + ((span % delta != 0) && ((span < 0) == (delta < 0)) ? 1 : 0);
      if (n < 0) n = 0;
      if (n > (int64_t{1} << 40))
        ctx.fail(ErrorKind::kBadInput, "Range would produce too many elements");
      y = Tensor(dt, {n});
      T* d = y.data<T>();
      for (int64_t i = 0; i < n; ++i) d[i] = static_cast<T>(start + i * delta);
    } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      const T start = s.data<T>()[0], limit = ctx.input(1).data<T>()[0];
      const T delta = ctx.input(2).data<T>()[0];
      if (delta == 0) ctx.fail(ErrorKind::kBadInput, "Range delta must not be zero");
      const double cnt = std::ceil((static_cast<double>(limit) - start) / delta);
      if (!std::isfinite(cnt) || cnt > static_cast<double>(int64_t{1} << 40))
        ctx.fail(ErrorKind::kBadInput, "Range would produce too many elements");
      const int64_t n = cnt > 0 ? static_cast<int64_t>(cnt) : 0;
      y = Tensor(dt, {n});
      T* d = y.data<T>();
      for (int64_t i = 0; i < n; ++i) d[i] = static_cast<T>(start + static_cast<T>(i) * delta);
    } else {
      ctx.fail(ErrorKind::kUnsupported,
               "Range does not support " + std::string(dtype_name(dt)));
    }
  });
  ctx.set_output(0, std::move(y));
}

void infer_range(InferContext& ctx) {
  ctx.set_output_type(0, Type::tensor(input_dtype(ctx, 0), Shape({Dim()})));
}

// ---- EyeLike ----------------------------------------------------------------------------------

void eyelike_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() != 2) ctx.fail(ErrorKind::kBadInput, "EyeLike input should be 2-D, got " +
                                                        type_string(x));
  const int64_t code = ctx.attr_int("dtype", static_cast<int64_t>(x.dtype()));
  if (!dtype_is_valid(static_cast<int32_t>(code)) || code == static_cast<int64_t>(DType::kString))
    ctx.fail(ErrorKind::kInvalidModel, "EyeLike dtype " + std::to_string(code) + " is not valid");
  const DType dt = static_cast<DType>(code);
  const int64_t k = ctx.attr_int("k", 0);
  Tensor y(dt, x.dims());
  const int64_t rows = x.dim(0), cols = x.dim(1);
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t j = i + k;
    if (j >= 0 && j < cols) y.set_double(i * cols + j, 1.0);
  }
  ctx.set_output(0, std::move(y));
}

void infer_eyelike(InferContext& ctx) {
  const int64_t code = ctx.attr_int("dtype", static_cast<int64_t>(input_dtype(ctx, 0)));
  ctx.set_output_type(0, Type::tensor(static_cast<DType>(code), input_shape(ctx, 0)));
}

// ---- OneHot -----------------------------------------------------------------------------------

void onehot_kernel(KernelContext& ctx) {
  const Tensor& ind = ctx.input(0);
  const double depth_d = scalar_input(ctx, 1, "depth");
  const Tensor& values = ctx.input(2);
  if (values.numel() != 2)
    ctx.fail(ErrorKind::kBadInput, "values should hold [off_value, on_value], got " +
                                       type_string(values));
  if (!(depth_d >= 1) || depth_d > 1e12)
    ctx.fail(ErrorKind::kBadInput, "depth should be positive, got " + std::to_string(depth_d));
  const int64_t depth = static_cast<int64_t>(depth_d);
  if (static_cast<double>(ind.numel()) * depth_d > static_cast<double>(int64_t{1} << 40))
    ctx.fail(ErrorKind::kBadInput, "OneHot output would be too large (depth " +
                                       std::to_string(depth) + ")");
  const int64_t rank = ind.rank();
  const int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", -1), rank + 1);
  std::vector<int64_t> out_dims(ind.dims());
  out_dims.insert(out_dims.begin() + axis, depth);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= ind.dim(static_cast<int>(i));
  for (int64_t i = axis; i < rank; ++i) inner *= ind.dim(static_cast<int>(i));
  Tensor y(values.dtype(), out_dims);
  visit_storage(values.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T off = values.data<T>()[0], on = values.data<T>()[1];
    T* d = y.data<T>();
    const int64_t total = y.numel();
    for (int64_t i = 0; i < total; ++i) d[i] = off;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t in = 0; in < inner; ++in) {
        int64_t v = static_cast<int64_t>(ind.get_double(o * inner + in));
        if (v < 0) v += depth;
        if (v < 0 || v >= depth) continue;
        d[(o * depth + v) * inner + in] = on;
      }
  });
  ctx.set_output(0, std::move(y));
}

// ---- Trilu ------------------------------------------------------------------------------------

void trilu_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) ctx.fail(ErrorKind::kBadInput, "Trilu input should have rank >= 2, got " +
                                                       type_string(x));
  const int64_t k = ctx.has_input(1) ? static_cast<int64_t>(scalar_input(ctx, 1, "k")) : 0;
  const bool upper = ctx.attr_int("upper", 1) != 0;
  const int64_t rows = x.dim(x.rank() - 2), cols = x.dim(x.rank() - 1);
  const int64_t mats = rows * cols == 0 ? 0 : x.numel() / (rows * cols);
  Tensor y(x.dtype(), x.dims());
  visit_storage(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* s = x.data<T>();
    T* d = y.data<T>();
    for (int64_t m = 0; m < mats; ++m)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
          const bool keep = upper ? (j - i >= k) : (j - i <= k);
          const int64_t off = (m * rows + i) * cols + j;
          if (keep) d[off] = s[off];
        }
  });
  ctx.set_output(0, std::move(y));
}

// ---- CumProd ----------------------------------------------------------------------------------

void cumprod_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& at = ctx.input(1);
  if (at.numel() != 1 || (at.dtype() != DType::kInt64 && at.dtype() != DType::kInt32))
    ctx.fail(ErrorKind::kBadInput, "axis must be a scalar int32/int64 tensor, got " +
                                       type_string(at));
  if (x.rank() == 0) ctx.fail(ErrorKind::kBadInput, "input must have rank >= 1, got a scalar");
  const int64_t axis = normalize_axis(ctx, at.get_int(0), x.rank());
  const bool exclusive = ctx.attr_int("exclusive", 0) != 0;
  const bool reverse = ctx.attr_int("reverse", 0) != 0;
  int64_t outer = 1, inner = 1;
  const int64_t len = x.dim(static_cast<int>(axis));
  for (int64_t i = 0; i < axis; ++i) outer *= x.dim(static_cast<int>(i));
  for (int64_t i = axis + 1; i < x.rank(); ++i) inner *= x.dim(static_cast<int>(i));
  Tensor y(x.dtype(), x.dims());
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16> ||
                  std::is_same_v<T, bool>) {
      ctx.fail(ErrorKind::kUnsupported, "CumProd does not support " +
                                            std::string(dtype_name(x.dtype())));
    } else {
      const T* src = x.data<T>();
      T* dst = y.data<T>();
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t in = 0; in < inner; ++in) {
          const int64_t base = o * len * inner + in;
          T acc = T(1);
          for (int64_t j = 0; j < len; ++j) {
            const int64_t off = base + (reverse ? len - 1 - j : j) * inner;
            if (exclusive) {
              dst[off] = acc;
              acc = static_cast<T>(acc * src[off]);
            } else {
              acc = static_cast<T>(acc * src[off]);
              dst[off] = acc;
            }
          }
        }
    }
  });
  ctx.set_output(0, std::move(y));
}

// ---- BitCast ----------------------------------------------------------------------------------

bool is_4bit(DType t) { return t == DType::kInt4 || t == DType::kUInt4; }

void bitcast_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t code = ctx.attr_int("to");
  if (!dtype_is_valid(static_cast<int32_t>(code)))
    ctx.fail(ErrorKind::kInvalidModel, "BitCast 'to' " + std::to_string(code) + " is not valid");
  const DType to = static_cast<DType>(code);
  if (to == DType::kString || x.dtype() == DType::kString)
    ctx.fail(ErrorKind::kInvalidModel, "BitCast does not accept string tensors");
  // 4-bit types are stored unpacked (one per byte), so their bits cannot be reinterpreted
  // against 8-bit types; kiln does not implement 4-bit<->4-bit either.
  if (is_4bit(to) || is_4bit(x.dtype()))
    ctx.fail(ErrorKind::kUnsupported, "BitCast of 4-bit types is not supported");
  if (dtype_size(to) != dtype_size(x.dtype()))
    ctx.fail(ErrorKind::kInvalidModel, "BitCast needs types of equal width, got " +
                                           std::string(dtype_name(x.dtype())) + " -> " +
                                           std::string(dtype_name(to)));
  Tensor y(to, x.dims());
  if (x.numel() > 0) std::memcpy(y.raw(), x.raw(), x.nbytes());
  // A C++ bool must hold 0 or 1; any non-zero byte is true, as the bit pattern says.
  if (to == DType::kBool) {
    uint8_t* b = static_cast<uint8_t*>(y.raw());
    for (int64_t i = 0; i < y.numel(); ++i) b[i] = b[i] != 0 ? 1 : 0;
  }
  ctx.set_output(0, std::move(y));
}

void infer_bitcast(InferContext& ctx) {
  ctx.set_output_type(0, Type::tensor(static_cast<DType>(ctx.attr_int("to")),
                                      input_shape(ctx, 0)));
}

// ---- CenterCropPad ----------------------------------------------------------------------------

void center_crop_pad_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const std::vector<int64_t> shape = read_int_list(ctx, ctx.input(1), "shape");
  const int64_t rank = x.rank();
  std::vector<int64_t> axes;
  if (ctx.has_attr("axes")) {
    axes = normalize_axes(ctx, ctx.attr_ints("axes"), rank);
  } else {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  if (shape.size() != axes.size())
    ctx.fail(ErrorKind::kBadInput, "shape has " + std::to_string(shape.size()) +
                                       " entries but there are " + std::to_string(axes.size()) +
                                       " axes");
  std::vector<int64_t> out_dims(x.dims());
  // Per axis: output index o reads input index o + shift when inside [0, in_dim).
  std::vector<int64_t> shift(static_cast<size_t>(rank), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    const size_t a = static_cast<size_t>(axes[i]);
    const int64_t dim = x.dims()[a], sh = shape[i];
    if (sh < 0) ctx.fail(ErrorKind::kBadInput, "shape entries must be >= 0");
    out_dims[a] = sh;
    shift[a] = sh <= dim ? (dim - sh) / 2 : -((sh - dim) / 2);
  }
  Tensor y(x.dtype(), out_dims);
  const std::vector<int64_t> in_strides = contiguous_strides(x.dims());
  visit_storage(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* s = x.data<T>();
    T* d = y.data<T>();
    std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
    for (int64_t i = 0; i < y.numel(); ++i) {
      int64_t off = 0;
      bool inside = true;
      for (size_t a = 0; a < idx.size(); ++a) {
        const int64_t src = idx[a] + shift[a];
        if (src < 0 || src >= x.dims()[a]) {
          inside = false;
          break;
        }
        off += src * in_strides[a];
      }
      if (inside) d[i] = s[off];
      for (size_t a = idx.size(); a-- > 0;) {
        if (++idx[a] < out_dims[a]) break;
        idx[a] = 0;
      }
    }
  });
  ctx.set_output(0, std::move(y));
}

// ---- Swish ------------------------------------------------------------------------------------

void swish_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const double alpha = ctx.attr_float("alpha", 1.0f);
  Tensor y(x.dtype(), x.dims());
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      const T* s = x.data<T>();
      T* d = y.data<T>();
      const T a = static_cast<T>(alpha);
      for (int64_t i = 0; i < x.numel(); ++i) d[i] = s[i] / (T(1) + std::exp(-a * s[i]));
    } else {
      ctx.fail(ErrorKind::kUnsupported, "Swish needs a float input, got " +
                                            std::string(dtype_name(x.dtype())));
    }
  });
  ctx.set_output(0, std::move(y));
}

// ---- TensorScatter ----------------------------------------------------------------------------

void tensor_scatter_kernel(KernelContext& ctx) {
  const Tensor& past = ctx.input(0);
  const Tensor& upd = ctx.input(1);
  const std::string mode = ctx.attr_string("mode", "linear");
  if (mode != "linear" && mode != "circular")
    ctx.fail(ErrorKind::kInvalidModel, "mode should be 'linear' or 'circular', got '" + mode + "'");
  if (upd.dtype() != past.dtype() || upd.rank() != past.rank())
    ctx.fail(ErrorKind::kBadInput, "update " + type_string(upd) + " does not match past_cache " +
                                       type_string(past));
  const int64_t rank = past.rank();
  if (rank < 2) ctx.fail(ErrorKind::kBadInput, "past_cache should have rank >= 2");
  const int64_t axis = normalize_axis(ctx, ctx.attr_int("axis", -2), rank);
  if (axis == 0) ctx.fail(ErrorKind::kInvalidModel, "axis must not be the batch axis 0");
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t p = past.dim(static_cast<int>(i)), u = upd.dim(static_cast<int>(i));
    if ((i != axis && p != u) || (i == axis && u > p))
      ctx.fail(ErrorKind::kBadInput, "update " + type_string(upd) +
                                         " does not fit past_cache " + type_string(past));
  }
  const int64_t batch = past.dim(0);
  std::vector<int64_t> write(static_cast<size_t>(batch), 0);
  if (ctx.has_input(2)) {
    const Tensor& wi = ctx.input(2);
    if (wi.numel() != batch)
      ctx.fail(ErrorKind::kBadInput, "write_indices should have batch_size = " +
                                         std::to_string(batch) + " entries, got " +
                                         type_string(wi));
    write = wi.to_int64_vector();
  }
  const int64_t max_len = past.dim(static_cast<int>(axis));
  const int64_t seq = upd.dim(static_cast<int>(axis));
  int64_t outer = 1, inner = 1;  // outer excludes the batch dim
  for (int64_t i = 1; i < axis; ++i) outer *= past.dim(static_cast<int>(i));
  for (int64_t i = axis + 1; i < rank; ++i) inner *= past.dim(static_cast<int>(i));
  const bool circular = mode == "circular";
  Tensor y = past.clone();
  visit_storage(past.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* u = upd.data<T>();
    T* d = y.data<T>();
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t s = 0; s < seq; ++s) {
        int64_t pos = write[static_cast<size_t>(b)] + s;
        if (circular) pos = ((pos % max_len) + max_len) % max_len;
        if (pos < 0 || pos >= max_len)
          ctx.fail(ErrorKind::kBadInput, "write index " + std::to_string(pos) +
                                             " is outside the cache length " +
                                             std::to_string(max_len));
        for (int64_t o = 0; o < outer; ++o) {
          const int64_t src = ((b * outer + o) * seq + s) * inner;
          const int64_t dst = ((b * outer + o) * max_len + pos) * inner;
          for (int64_t i = 0; i < inner; ++i) d[dst + i] = u[src + i];
        }
      }
  });
  ctx.set_output(0, std::move(y));
}

// ---- AffineGrid -------------------------------------------------------------------------------

void affine_grid_kernel(KernelContext& ctx) {
  const Tensor& theta = ctx.input(0);
  const std::vector<int64_t> size = read_int_list(ctx, ctx.input(1), "size");
  const bool align = ctx.attr_int("align_corners", 0) != 0;
  if (size.size() != 4 && size.size() != 5)
    ctx.fail(ErrorKind::kBadInput, "size should be [N,C,H,W] or [N,C,D,H,W], got " +
                                       ints_to_string(size));
  const int64_t nd = static_cast<int64_t>(size.size()) - 2;  // 2 or 3 spatial dims
  const int64_t n = size[0];
  if (theta.rank() != 3 || theta.dim(0) != n || theta.dim(1) != nd || theta.dim(2) != nd + 1)
    ctx.fail(ErrorKind::kBadInput, "theta should be [" + std::to_string(n) + "," +
                                       std::to_string(nd) + "," + std::to_string(nd + 1) +
                                       "], got " + type_string(theta));
  std::vector<int64_t> sp(size.begin() + 2, size.end());  // (D,) H, W
  for (int64_t s : sp)
    if (s < 0) ctx.fail(ErrorKind::kBadInput, "size entries must be >= 0");
  std::vector<int64_t> out_dims{n};
  for (int64_t s : sp) out_dims.push_back(s);
  out_dims.push_back(nd);
  Tensor y(theta.dtype(), out_dims);
  // Normalized coordinate of index i along a dimension of `len` pixels.
  auto coord = [&](int64_t i, int64_t len) -> double {
    if (align) return len == 1 ? -1.0 : -1.0 + 2.0 * static_cast<double>(i) / (len - 1);
    return (2.0 * static_cast<double>(i) + 1.0) / static_cast<double>(len) - 1.0;
  };
  const int64_t D = nd == 3 ? sp[0] : 1, H = sp[nd - 2], W = sp[nd - 1];
  visit_dtype(theta.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      const T* th = theta.data<T>();
      T* d = y.data<T>();
      int64_t o = 0;
      for (int64_t b = 0; b < n; ++b) {
        const T* m = th + b * nd * (nd + 1);
        for (int64_t z = 0; z < D; ++z)
          for (int64_t yy = 0; yy < H; ++yy)
            for (int64_t xx = 0; xx < W; ++xx) {
              // Homogeneous position (x, y, [z,] 1), x along W.
              const double p[4] = {coord(xx, W), coord(yy, H), nd == 3 ? coord(z, D) : 1.0, 1.0};
              for (int64_t r = 0; r < nd; ++r) {
                double acc = 0;
                for (int64_t c = 0; c <= nd; ++c)
                  acc += static_cast<double>(m[r * (nd + 1) + c]) * p[c == nd ? 3 : c];
                d[o++] = static_cast<T>(acc);
              }
            }
      }
    } else {
      ctx.fail(ErrorKind::kUnsupported, "AffineGrid needs float theta");
    }
  });
  ctx.set_output(0, std::move(y));
}

}  // namespace

void register_extra_ops(OpRegistry& r) {
  r.add("Range").since(11).inputs(3).outputs(1).run(range_kernel).shape(infer_range).via_float();
  r.add("EyeLike").since(9).inputs(1).outputs(1).run(eyelike_kernel).shape(infer_eyelike);
  r.add("OneHot").since(9).inputs(3).outputs(1).run(onehot_kernel);
  r.add("Trilu").since(14).inputs(1, 2).outputs(1).run(trilu_kernel).shape(infer_same_as_input0);
  r.add("CumProd").since(26).inputs(2).outputs(1).run(cumprod_kernel)
      .shape(infer_same_as_input0).via_float();
  r.add("BitCast").since(26).inputs(1).outputs(1).kind(PatternKind::kElementwise)
      .run(bitcast_kernel).shape(infer_bitcast);
  r.add("CenterCropPad").since(18).inputs(2).outputs(1).kind(PatternKind::kInjective)
      .run(center_crop_pad_kernel);
  r.add("Swish").since(24).inputs(1).outputs(1).kind(PatternKind::kElementwise)
      .run(swish_kernel).shape(infer_same_as_input0).via_float();
  r.add("TensorScatter").since(24).inputs(2, 3).outputs(1).run(tensor_scatter_kernel)
      .shape(infer_same_as_input0);
  r.add("AffineGrid").since(20).inputs(2).outputs(1).run(affine_grid_kernel).via_float();
  register_image_ops(r);
  register_deform_conv_ops(r);
  register_loss_ops(r);
  register_string_ops(r);
  register_training_ops(r);
  register_ml_ops(r);
}

}  // namespace kiln
