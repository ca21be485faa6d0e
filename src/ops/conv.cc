// Conv and ConvTranspose reference kernels: im2col / col2im around the shared blocked GEMM, with a
// direct loop for depthwise 2-D convolution. Any number of spatial dims, groups, dilations.
// Also kiln::NhwcConv (domain "kiln"), the channels-last 2-D Conv that the assign-layouts pass
// makes: X [N, H, W, C], W as Conv has it ([M, C/group, kh, kw]), B [M], Y [N, Ho, Wo, M]; the
// attributes and their meaning are Conv's. Its reference is Conv's between two permutes.
#include <algorithm>
#include <cstring>

#include "ops/gemm_ref.h"
#include "ops/op_util.h"
#include "ops/window_util.h"

namespace kiln {
namespace {

// For each spatial dim d, table[d][k * n_from + j] is the coordinate in the other tensor that
// kernel tap k and position j touch, or -1 when it falls into padding. Conv: j = output
// position, target = input coordinate; ConvTranspose: j = input position, target = output.
std::vector<std::vector<int64_t>> tap_tables(const Window& w, const std::vector<int64_t>& from,
                                             const std::vector<int64_t>& to) {
  std::vector<std::vector<int64_t>> tables(static_cast<size_t>(w.nsp));
  for (int d = 0; d < w.nsp; ++d) {
    auto& t = tables[d];
    t.resize(static_cast<size_t>(w.kernel[d] * from[d]));
    for (int64_t k = 0; k < w.kernel[d]; ++k)
      for (int64_t j = 0; j < from[d]; ++j) {
        const int64_t c = j * w.strides[d] - w.pads[d] + k * w.dilations[d];
        t[k * from[d] + j] = (c >= 0 && c < to[d]) ? c : -1;
      }
  }
  return tables;
}

// Walks rows (channel, kernel taps) and outer positions (all spatial dims but the last) of a
// column matrix [channels * taps, prod(from)], calling f(row_ptr_offset, target_base, last_table)
// for each run along the last spatial dim. target_base < 0 means the run is entirely padding.
template <class F>
void for_each_column_run(const Window& w, int64_t channels, const std::vector<int64_t>& from,
                         const std::vector<int64_t>& to,
                         const std::vector<std::vector<int64_t>>& tables, F&& f) {
  const int nsp = w.nsp;
  const int64_t from_sz = product(from), to_sz = product(to);
  const int64_t last_from = from[nsp - 1];
  std::vector<int64_t> to_strides = contiguous_strides(to);
  std::vector<int64_t> outer(from.begin(), from.end() - 1);
  int64_t row = 0;
  for (int64_t c = 0; c < channels; ++c) {
    for_each_index(w.kernel, [&](const std::vector<int64_t>& k) {
      const int64_t* last_table = tables[nsp - 1].data() + k[nsp - 1] * last_from;
      int64_t col = 0;
      for_each_index(outer.empty() ? std::vector<int64_t>{1} : outer,
                     [&](const std::vector<int64_t>& o) {
                       int64_t base = c * to_sz;
                       for (int d = 0; d + 1 < nsp; ++d) {
                         const int64_t t = tables[d][k[d] * from[d] + o[d]];
                         if (t < 0) {
                           base = -1;
                           break;
                         }
                         base += t * to_strides[d];
                       }
                       f(row * from_sz + col, base, last_table, last_from);
                       col += last_from;
                     });
      ++row;
    });
  }
}

template <class T>
void im2col(const T* x, int64_t channels, const Window& w, T* col) {
  auto tables = tap_tables(w, w.out, w.in);
  for_each_column_run(w, channels, w.out, w.in, tables,
                      [&](int64_t dst, int64_t base, const int64_t* tab, int64_t n) {
                        T* out = col + dst;
                        if (base < 0) {
                          std::fill(out, out + n, T(0));
                          return;
                        }
                        const T* src = x + base;
                        for (int64_t j = 0; j < n; ++j) out[j] = tab[j] < 0 ? T(0) : src[tab[j]];
                      });
}

// Scatter-adds a column matrix [channels * taps, prod(in)] into y [channels, prod(out)].
template <class T>
void col2im(const T* col, int64_t channels, const Window& w, T* y) {
  auto tables = tap_tables(w, w.in, w.out);
  for_each_column_run(w, channels, w.in, w.out, tables,
                      [&](int64_t src, int64_t base, const int64_t* tab, int64_t n) {
                        if (base < 0) return;
                        const T* in = col + src;
                        T* dst = y + base;
                        for (int64_t j = 0; j < n; ++j)
                          if (tab[j] >= 0) dst[tab[j]] += in[j];
                      });
}

// Depthwise 2-D conv of one channel: y[oh, ow] = sum_k w[kh, kw] * x[ih, iw].
template <class T>
void depthwise_2d(const T* x, const T* wt, const Window& w, T* y) {
  const int64_t ih_n = w.in[0], iw_n = w.in[1], oh_n = w.out[0], ow_n = w.out[1];
  std::fill(y, y + oh_n * ow_n, T(0));
  for (int64_t kh = 0; kh < w.kernel[0]; ++kh) {
    for (int64_t kw = 0; kw < w.kernel[1]; ++kw) {
      const T wv = wt[kh * w.kernel[1] + kw];
      const int64_t off_w = kw * w.dilations[1] - w.pads[1];
      // Output columns whose input column lands inside [0, iw_n).
      int64_t lo = 0, hi = ow_n;
      while (lo < hi && lo * w.strides[1] + off_w < 0) ++lo;
      while (hi > lo && (hi - 1) * w.strides[1] + off_w >= iw_n) --hi;
      for (int64_t oh = 0; oh < oh_n; ++oh) {
        const int64_t ih = oh * w.strides[0] - w.pads[0] + kh * w.dilations[0];
        if (ih < 0 || ih >= ih_n) continue;
        const T* xr = x + ih * iw_n + off_w;
        T* yr = y + oh * ow_n;
        const int64_t s = w.strides[1];
        if (s == 1) {
          for (int64_t ow = lo; ow < hi; ++ow) yr[ow] += wv * xr[ow];
        } else {
          for (int64_t ow = lo; ow < hi; ++ow) yr[ow] += wv * xr[ow * s];
        }
      }
    }
  }
}

struct ConvShapes {
  int64_t n, c, m, group, cg, mg;
  Window w;
};

std::vector<int64_t> kernel_from(const AttrReader& at, const std::vector<int64_t>& w_dims) {
  std::vector<int64_t> k(w_dims.begin() + 2, w_dims.end());
  std::vector<int64_t> attr = at.attr_ints("kernel_shape");
  if (!attr.empty() && attr != k)
    at.fail(ErrorKind::kBadInput, "kernel_shape " + dims_to_string(attr) +
                                      " does not match the weight's spatial dims " +
                                      dims_to_string(k));
  return k;
}

void check_conv_inputs(const KernelContext& ctx, const Tensor& x, const Tensor& wt) {
  if (x.rank() < 3)
    ctx.fail(ErrorKind::kBadInput, "input X should have rank >= 3 (N, C, spatial...), got " +
                                       dims_to_string(x.dims()));
  if (wt.rank() != x.rank())
    ctx.fail(ErrorKind::kBadInput, "weight W should have the rank of X (" +
                                       std::to_string(x.rank()) + "), got " +
                                       dims_to_string(wt.dims()));
  if (wt.dtype() != x.dtype())
    ctx.fail(ErrorKind::kBadInput, "X and W should have the same element type");
}

template <class T>
void add_bias(const KernelContext& ctx, T* y, int64_t n, int64_t m, int64_t spatial) {
  if (!ctx.has_input(2)) return;
  const Tensor& b = ctx.input(2);
  if (b.numel() != m || b.rank() != 1 || b.dtype() != ctx.input(0).dtype())
    ctx.fail(ErrorKind::kBadInput, "bias B should be a 1-D tensor of " + std::to_string(m) +
                                       " elements of X's type, got " + dims_to_string(b.dims()));
  const T* bp = b.data<T>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < m; ++c) {
      T* p = y + (i * m + c) * spatial;
      const T v = bp[c];
      for (int64_t j = 0; j < spatial; ++j) p[j] += v;
    }
}

template <class T>
void conv_typed(KernelContext& ctx, const Tensor& x, const Tensor& wt, const ConvShapes& s,
                Tensor& y) {
  const Window& w = s.w;
  const int64_t in_sz = product(w.in), out_sz = product(w.out), k_sz = product(w.kernel);
  const T* xp = x.data<T>();
  const T* wp = wt.data<T>();
  T* yp = y.data<T>();
  bool pointwise = true;
  for (int d = 0; d < w.nsp; ++d)
    pointwise = pointwise && w.kernel[d] == 1 && w.strides[d] == 1 && w.pads[d] == 0 &&
                w.pads[d + w.nsp] == 0;
  const bool depthwise = s.cg == 1 && w.nsp == 2;
  // im2col runs over slabs of the outermost output dim so that the column buffer stays bounded
  // (about 16M elements) for large images; a slab is the same window with shifted padding.
  const int64_t row_sz = out_sz / w.out[0];
  const int64_t col_rows = s.cg * k_sz;
  const int64_t slab = std::clamp<int64_t>((int64_t{1} << 24) / std::max<int64_t>(1, col_rows * row_sz),
                                           1, w.out[0]);
  std::vector<T> col;
  if (!pointwise && !depthwise) col.resize(static_cast<size_t>(col_rows * slab * row_sz));
  for (int64_t n = 0; n < s.n; ++n) {
    for (int64_t g = 0; g < s.group; ++g) {
      const T* xg = xp + (n * s.c + g * s.cg) * in_sz;
      const T* wg = wp + g * s.mg * s.cg * k_sz;
      T* yg = yp + (n * s.m + g * s.mg) * out_sz;
      if (depthwise) {
        for (int64_t m = 0; m < s.mg; ++m) depthwise_2d(xg, wg + m * k_sz, w, yg + m * out_sz);
        continue;
      }
      if (pointwise) {
        gemm_ref(false, false, s.mg, out_sz, col_rows, T(1), wg, col_rows, xg, out_sz, T(0), yg,
                 out_sz);
        continue;
      }
      for (int64_t r0 = 0; r0 < w.out[0]; r0 += slab) {
        Window part = w;
        part.out[0] = std::min(slab, w.out[0] - r0);
        part.pads[0] = w.pads[0] - r0 * w.strides[0];
        const int64_t cols = part.out[0] * row_sz;
        im2col(xg, s.cg, part, col.data());
        gemm_ref(false, false, s.mg, cols, col_rows, T(1), wg, col_rows, col.data(), cols, T(0),
                 yg + r0 * row_sz, out_sz);
      }
    }
  }
  add_bias(ctx, yp, s.n, s.m, out_sz);
}

// Conv of a channels-first X (bias included), as the Conv op computes it.
Tensor conv_channels_first(KernelContext& ctx, const Tensor& x, const Tensor& wt) {
  check_conv_inputs(ctx, x, wt);
  ConvShapes s;
  s.n = x.dim(0);
  s.c = x.dim(1);
  s.m = wt.dim(0);
  s.group = ctx.attr_int("group", 1);
  if (s.group <= 0) ctx.fail(ErrorKind::kInvalidModel, "group should be >= 1");
  if (s.c != wt.dim(1) * s.group || s.m % s.group != 0)
    ctx.fail(ErrorKind::kBadInput,
             "channels do not match: X " + dims_to_string(x.dims()) + ", W " +
                 dims_to_string(wt.dims()) + ", group " + std::to_string(s.group) +
                 " (need C == W[1] * group and W[0] divisible by group)");
  s.cg = s.c / s.group;
  s.mg = s.m / s.group;
  std::vector<int64_t> in(x.dims().begin() + 2, x.dims().end());
  s.w = resolve_window(ctx, in, kernel_from(ctx, wt.dims()), false);
  std::vector<int64_t> ydims = {s.n, s.m};
  ydims.insert(ydims.end(), s.w.out.begin(), s.w.out.end());
  Tensor y(x.dtype(), ydims);
  if (y.numel() > 0) {
    if (x.dtype() == DType::kFloat32) {
      conv_typed<float>(ctx, x, wt, s, y);
    } else if (x.dtype() == DType::kFloat64) {
      conv_typed<double>(ctx, x, wt, s, y);
    } else {
      ctx.fail(ErrorKind::kUnsupported,
               "Conv supports float types, got " + std::string(dtype_name(x.dtype())));
    }
  }
  return y;
}

void conv_kernel(KernelContext& ctx) { ctx.set_output(0, conv_channels_first(ctx, ctx.input(0), ctx.input(1))); }

// A 4-D tensor with its axes permuted: channels-last [N, H, W, C] to channels-first [N, C, H, W]
// (to_channels_first) or back. Elements are copied as bytes, so any dtype works.
Tensor permute_channels(const Tensor& t, bool to_channels_first) {
  const std::vector<int64_t>& d = t.dims();
  const int64_t n = d[0];
  const int64_t c = to_channels_first ? d[3] : d[1];
  const int64_t hw = to_channels_first ? d[1] * d[2] : d[2] * d[3];
  Tensor out(t.dtype(), to_channels_first ? std::vector<int64_t>{d[0], d[3], d[1], d[2]}
                                          : std::vector<int64_t>{d[0], d[2], d[3], d[1]});
  const size_t es = dtype_size(t.dtype());
  const auto* src = static_cast<const unsigned char*>(t.raw());
  auto* dst = static_cast<unsigned char*>(out.raw());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < hw; ++p) {
        const int64_t last = (i * hw + p) * c + ch, first = (i * c + ch) * hw + p;
        const int64_t from = to_channels_first ? last : first, to = to_channels_first ? first : last;
        std::memcpy(dst + static_cast<size_t>(to) * es, src + static_cast<size_t>(from) * es, es);
      }
  return out;
}

void nhwc_conv_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() != 4)
    ctx.fail(ErrorKind::kBadInput, "input X should be [N, H, W, C], got " + dims_to_string(x.dims()));
  ctx.set_output(0, permute_channels(conv_channels_first(ctx, permute_channels(x, true), ctx.input(1)), false));
}

// ---- ConvTranspose -------------------------------------------------------------------------

}  // namespace

Window resolve_transpose_window(const AttrReader& at, const std::vector<int64_t>& in,
                                const std::vector<int64_t>& kernel) {
  Window w;
  const int nsp = static_cast<int>(in.size());
  w.nsp = nsp;
  w.in = in;
  w.kernel = kernel;
  w.strides = spatial_attr(at, "strides", nsp, 1, 1);
  w.dilations = spatial_attr(at, "dilations", nsp, 1, 1);
  std::vector<int64_t> out_pad = spatial_attr(at, "output_padding", nsp, 0, 0);
  std::vector<int64_t> pads = at.attr_ints("pads");
  if (pads.empty()) pads.assign(static_cast<size_t>(2 * nsp), 0);
  if (static_cast<int>(pads.size()) != 2 * nsp)
    at.fail(ErrorKind::kInvalidModel, "attribute 'pads' should have " + std::to_string(2 * nsp) +
                                          " values, got " + std::to_string(pads.size()));
  w.pads = pads;
  std::vector<int64_t> out_shape = at.attr_ints("output_shape");
  if (static_cast<int>(out_shape.size()) == nsp + 2)
    out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
  if (!out_shape.empty() && static_cast<int>(out_shape.size()) != nsp)
    at.fail(ErrorKind::kInvalidModel, "attribute 'output_shape' should have " +
                                          std::to_string(nsp) + " values, got " +
                                          std::to_string(out_shape.size()));
  const std::string auto_pad = at.attr_string("auto_pad", "NOTSET");
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  if (same && out_shape.empty()) {
    out_shape.resize(static_cast<size_t>(nsp));
    for (int i = 0; i < nsp; ++i) out_shape[i] = in[i] < 0 ? -1 : in[i] * w.strides[i];
  }
  w.out.assign(static_cast<size_t>(nsp), -1);
  for (int i = 0; i < nsp; ++i) {
    if (in[i] < 0) continue;
    const int64_t full = w.strides[i] * (in[i] - 1) + out_pad[i] + w.eff_kernel(i);
    if (!out_shape.empty()) {
      if (out_shape[i] < 0)
        at.fail(ErrorKind::kInvalidModel, "output_shape values should be >= 0");
      // A negative total (output larger than the full result) pads the far end with zeros
      // (plus bias); floor division keeps the ONNX/ORT split for odd negative totals.
      const int64_t total = full - out_shape[i];
      const int64_t small = total >= 0 ? total / 2 : -((-total + 1) / 2), large = total - small;
      w.pads[i] = auto_pad == "SAME_UPPER" ? small : large;
      w.pads[i + nsp] = auto_pad == "SAME_UPPER" ? large : small;
      w.out[i] = out_shape[i];
    } else {
      if (auto_pad == "VALID") w.pads[i] = w.pads[i + nsp] = 0;
      w.out[i] = full - w.pads[i] - w.pads[i + nsp];
      if (w.out[i] < 0)
        at.fail(ErrorKind::kBadInput, "pads exceed the transposed conv output in spatial dim " +
                                          std::to_string(i));
    }
  }
  return w;
}

namespace {

template <class T>
void conv_transpose_typed(KernelContext& ctx, const Tensor& x, const Tensor& wt,
                          const ConvShapes& s, Tensor& y) {
  const Window& w = s.w;
  const int64_t in_sz = product(w.in), out_sz = product(w.out), k_sz = product(w.kernel);
  std::vector<T> col(static_cast<size_t>(s.mg * k_sz * in_sz));
  const T* xp = x.data<T>();
  const T* wp = wt.data<T>();
  T* yp = y.data<T>();
  for (int64_t n = 0; n < s.n; ++n) {
    for (int64_t g = 0; g < s.group; ++g) {
      const T* xg = xp + (n * s.c + g * s.cg) * in_sz;
      const T* wg = wp + g * s.cg * s.mg * k_sz;
      T* yg = yp + (n * s.m + g * s.mg) * out_sz;
      // col[mg * taps, in] = W_g^T [mg * taps, cg] * X_g [cg, in]
      gemm_ref(true, false, s.mg * k_sz, in_sz, s.cg, T(1), wg, s.mg * k_sz, xg, in_sz, T(0),
               col.data(), in_sz);
      col2im(col.data(), s.mg, w, yg);
    }
  }
  add_bias(ctx, yp, s.n, s.m, out_sz);
}

void conv_transpose_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& wt = ctx.input(1);
  check_conv_inputs(ctx, x, wt);
  ConvShapes s;
  s.n = x.dim(0);
  s.c = x.dim(1);
  s.group = ctx.attr_int("group", 1);
  if (s.group <= 0) ctx.fail(ErrorKind::kInvalidModel, "group should be >= 1");
  if (wt.dim(0) != s.c || s.c % s.group != 0)
    ctx.fail(ErrorKind::kBadInput, "channels do not match: X " + dims_to_string(x.dims()) +
                                       ", W " + dims_to_string(wt.dims()) + ", group " +
                                       std::to_string(s.group) +
                                       " (need W[0] == C and C divisible by group)");
  s.cg = s.c / s.group;
  s.mg = wt.dim(1);
  s.m = s.mg * s.group;
  std::vector<int64_t> in(x.dims().begin() + 2, x.dims().end());
  s.w = resolve_transpose_window(ctx, in, kernel_from(ctx, wt.dims()));
  std::vector<int64_t> ydims = {s.n, s.m};
  ydims.insert(ydims.end(), s.w.out.begin(), s.w.out.end());
  Tensor y(x.dtype(), ydims);
  if (y.numel() > 0) {
    if (x.dtype() == DType::kFloat32) {
      conv_transpose_typed<float>(ctx, x, wt, s, y);
    } else if (x.dtype() == DType::kFloat64) {
      conv_transpose_typed<double>(ctx, x, wt, s, y);
    } else {
      ctx.fail(ErrorKind::kUnsupported,
               "ConvTranspose supports float types, got " + std::string(dtype_name(x.dtype())));
    }
  }
  ctx.set_output(0, std::move(y));
}

// ---- Col2Im --------------------------------------------------------------------------------

void col2im_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> image = ctx.input(1).to_int64_vector();
  std::vector<int64_t> block = ctx.input(2).to_int64_vector();
  const int nsp = static_cast<int>(image.size());
  if (x.rank() != 3 || nsp == 0 || block.size() != image.size())
    ctx.fail(ErrorKind::kBadInput, "expected input [N, C*prod(block), L] and image_shape and "
                                   "block_shape of equal non-zero length, got input " +
                                       dims_to_string(x.dims()) + ", image_shape " +
                                       dims_to_string(image) + ", block_shape " +
                                       dims_to_string(block));
  for (int64_t d : image)
    if (d < 0) ctx.fail(ErrorKind::kBadInput, "image_shape should be >= 0");
  for (int64_t k : block)
    if (k <= 0) ctx.fail(ErrorKind::kBadInput, "block_shape should be > 0");
  // Col2Im scatters back what im2col of an `image`-sized input would gather.
  Window w = resolve_window(ctx, image, block, false);
  const int64_t k_sz = product(block);
  if (x.dim(1) % k_sz != 0 || x.dim(2) != product(w.out))
    ctx.fail(ErrorKind::kBadInput, "input " + dims_to_string(x.dims()) + " does not match " +
                                       std::to_string(k_sz) + " block elements and " +
                                       std::to_string(product(w.out)) + " block positions");
  const int64_t n = x.dim(0), c = x.dim(1) / k_sz;
  std::vector<int64_t> ydims = {n, c};
  ydims.insert(ydims.end(), image.begin(), image.end());
  Tensor y(x.dtype(), ydims);
  // col2im walks "from" positions (w.in) into "to" (w.out): swap roles for the transposed view.
  Window t = w;
  t.in = w.out;
  t.out = w.in;
  const int64_t img_sz = product(image), col_sz = x.dim(1) * x.dim(2);
  if (y.numel() > 0 && col_sz > 0) {
    if (x.dtype() == DType::kFloat32) {
      for (int64_t b = 0; b < n; ++b)
        col2im(x.data<float>() + b * col_sz, c, t, y.data<float>() + b * c * img_sz);
    } else if (x.dtype() == DType::kFloat64) {
      for (int64_t b = 0; b < n; ++b)
        col2im(x.data<double>() + b * col_sz, c, t, y.data<double>() + b * c * img_sz);
    } else {
      ctx.fail(ErrorKind::kUnsupported,
               "Col2Im supports float types, got " + std::string(dtype_name(x.dtype())));
    }
  }
  ctx.set_output(0, std::move(y));
}

// ---- shape inference -----------------------------------------------------------------------

void infer_conv_common(InferContext& ctx, bool transpose) {
  const Type& xt = ctx.input_type(0);
  const Type& wt = ctx.input_type(1);
  std::vector<int64_t> in;
  if (!spatial_dims_of(xt, &in)) {
    ctx.set_output_type(0, Type::tensor(xt.dtype));
    return;
  }
  Shape out;
  out.dims.push_back(xt.shape->dims[0]);
  Dim m;
  std::vector<int64_t> kernel = ctx.attr_ints("kernel_shape");
  if (wt.shape && wt.shape->rank() == in.size() + 2) {
    const int64_t group = ctx.attr_int("group", 1);
    // The kernels' channel check, so that a plan made from these shapes never runs a bad conv.
    const Dim &c = xt.shape->dims[1], &wc = wt.shape->dims[transpose ? 0 : 1];
    if (c.known() && wc.known() && (transpose ? wc.value != c.value : c.value != wc.value * group))
      ctx.fail(ErrorKind::kInvalidModel, "channels do not match: X " + to_string(*xt.shape) + ", W " +
                                             to_string(*wt.shape) + ", group " + std::to_string(group));
    const Dim& d = wt.shape->dims[transpose ? 1 : 0];
    if (d.known()) m = transpose ? Dim(d.value * group) : d;
    if (kernel.empty()) {
      for (size_t i = 2; i < wt.shape->rank(); ++i)
        kernel.push_back(wt.shape->dims[i].known() ? wt.shape->dims[i].value : -1);
    }
  }
  out.dims.push_back(m);
  bool kernel_known = kernel.size() == in.size();
  for (int64_t k : kernel) kernel_known = kernel_known && k > 0;
  if (!kernel_known) {
    for (size_t i = 0; i < in.size(); ++i) out.dims.push_back(Dim());
  } else {
    Window w = transpose ? resolve_transpose_window(ctx, in, kernel)
                         : resolve_window(ctx, in, kernel, false);
    for (int64_t o : w.out) out.dims.push_back(o >= 0 ? Dim(o) : Dim());
  }
  ctx.set_output_type(0, Type::tensor(xt.dtype, out));
}

void infer_conv(InferContext& ctx) { infer_conv_common(ctx, false); }

// Conv's inference over the channels-first view of X, its result permuted back.
void infer_nhwc_conv(InferContext& ctx) {
  const Type& xt = ctx.input_type(0);
  const Type& wt = ctx.input_type(1);
  if (!xt.shape || xt.shape->rank() != 4 || !wt.shape || wt.shape->rank() != 4) {
    ctx.set_output_type(0, Type::tensor(xt.dtype));
    return;
  }
  const std::vector<Dim>& d = xt.shape->dims;
  std::vector<int64_t> in;
  for (const Dim& s : {d[1], d[2]}) in.push_back(s.known() ? s.value : -1);
  std::vector<int64_t> kernel = ctx.attr_ints("kernel_shape");
  if (kernel.empty())
    for (size_t i = 2; i < 4; ++i) kernel.push_back(wt.shape->dims[i].known() ? wt.shape->dims[i].value : -1);
  std::vector<Dim> out{d[0], Dim(), Dim(), wt.shape->dims[0]};
  if (kernel.size() == 2 && kernel[0] > 0 && kernel[1] > 0 && in[0] >= 0 && in[1] >= 0) {
    const Window w = resolve_window(ctx, in, kernel, false);
    for (int k = 0; k < 2; ++k)
      if (w.out[k] >= 0) out[1 + k] = Dim(w.out[k]);
  }
  ctx.set_output_type(0, Type::tensor(xt.dtype, Shape(out)));
}
void infer_conv_transpose(InferContext& ctx) { infer_conv_common(ctx, true); }

}  // namespace

void register_conv_ops(OpRegistry& r) {
  for (int v : {1, 11})
    r.add("Conv").since(v).inputs(2, 3).outputs(1).kind(PatternKind::kOutFusable)
        .run(conv_kernel).shape(infer_conv).via_float();
  for (int v : {1, 11})
    r.add("ConvTranspose").since(v).inputs(2, 3).outputs(1).kind(PatternKind::kOutFusable)
        .run(conv_transpose_kernel).shape(infer_conv_transpose).via_float();
  r.add("NhwcConv", "kiln").since(1).inputs(2, 3).outputs(1).kind(PatternKind::kOutFusable)
      .run(nhwc_conv_kernel).shape(infer_nhwc_conv).via_float();
  r.add("Col2Im").since(18).inputs(3).outputs(1).kind(PatternKind::kOpaque).run(col2im_kernel)
      .via_float();
}

}  // namespace kiln
