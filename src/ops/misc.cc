// Detection and sampling ops: NonMaxSuppression, RoiAlign, GridSample (opset 16 2-D and the
// opset 20 N-D form).
#include <algorithm>
#include <cmath>

#include "ops/families.h"
#include "ops/op_util.h"

namespace kiln {
namespace {

// ---- NonMaxSuppression -----------------------------------------------------------------------

struct Box {
  double x_min, y_min, x_max, y_max;
};

Box read_box(const Tensor& boxes, int64_t base, bool center_point) {
  const double a = boxes.get_double(base), b = boxes.get_double(base + 1);
  const double c = boxes.get_double(base + 2), d = boxes.get_double(base + 3);
  if (center_point)  // [x_center, y_center, width, height]
    return {a - c / 2, b - d / 2, a + c / 2, b + d / 2};
  // [y1, x1, y2, x2] with either diagonal pair of corners.
  return {std::min(b, d), std::min(a, c), std::max(b, d), std::max(a, c)};
}

bool suppresses(const Box& p, const Box& q, double iou_threshold) {
  const double ix_min = std::max(p.x_min, q.x_min), ix_max = std::min(p.x_max, q.x_max);
  if (ix_max <= ix_min) return false;
  const double iy_min = std::max(p.y_min, q.y_min), iy_max = std::min(p.y_max, q.y_max);
  if (iy_max <= iy_min) return false;
  const double inter = (ix_max - ix_min) * (iy_max - iy_min);
  const double area_p = (p.x_max - p.x_min) * (p.y_max - p.y_min);
  const double area_q = (q.x_max - q.x_min) * (q.y_max - q.y_min);
  const double uni = area_p + area_q - inter;
  if (inter <= 0 || area_p <= 0 || area_q <= 0 || uni <= 0) return false;
  return inter / uni > iou_threshold;
}

double optional_scalar(const KernelContext& ctx, int i, double fallback) {
  if (!ctx.has_input(i)) return fallback;
  const Tensor& t = ctx.input(i);
  if (t.numel() == 0) return fallback;
  if (t.numel() != 1)
    ctx.fail(ErrorKind::kBadInput, "input #" + std::to_string(i) + " should be a scalar, got " +
                                       dims_to_string(t.dims()));
  return t.get_double(0);
}

void nms_kernel(KernelContext& ctx) {
  const Tensor& boxes = ctx.input(0);
  const Tensor& scores = ctx.input(1);
  if (boxes.rank() != 3 || boxes.dim(2) != 4)
    ctx.fail(ErrorKind::kBadInput,
             "boxes should be [batch, boxes, 4], got " + dims_to_string(boxes.dims()));
  if (scores.rank() != 3 || scores.dim(0) != boxes.dim(0) || scores.dim(2) != boxes.dim(1))
    ctx.fail(ErrorKind::kBadInput, "scores should be [batch, classes, boxes] matching boxes " +
                                       dims_to_string(boxes.dims()) + ", got " +
                                       dims_to_string(scores.dims()));
  const int64_t center = ctx.attr_int("center_point_box", 0);
  if (center != 0 && center != 1)
    ctx.fail(ErrorKind::kInvalidModel, "center_point_box should be 0 or 1");
  int64_t max_out = 0;
  if (ctx.has_input(2) && ctx.input(2).numel() > 0) {
    if (ctx.input(2).numel() != 1 || !is_integer(ctx.input(2).dtype()))
      ctx.fail(ErrorKind::kBadInput, "max_output_boxes_per_class should be an integer scalar");
    max_out = std::max<int64_t>(ctx.input(2).get_int(0), 0);
  }
  const double iou = optional_scalar(ctx, 3, 0.0);
  const bool has_score_th = ctx.has_input(4) && ctx.input(4).numel() > 0;
  const double score_th = optional_scalar(ctx, 4, 0.0);
  const int64_t batches = boxes.dim(0), n_boxes = boxes.dim(1), classes = scores.dim(1);

  std::vector<int64_t> selected;  // triples (batch, class, box)
  std::vector<Box> all(static_cast<size_t>(n_boxes));
  std::vector<std::pair<double, int64_t>> cand;
  std::vector<int64_t> kept;
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t i = 0; i < n_boxes; ++i)
      all[static_cast<size_t>(i)] = read_box(boxes, (b * n_boxes + i) * 4, center == 1);
    for (int64_t c = 0; c < classes; ++c) {
      cand.clear();
      for (int64_t i = 0; i < n_boxes; ++i) {
        const double s = scores.get_double((b * classes + c) * n_boxes + i);
        if (!has_score_th || s > score_th) cand.emplace_back(s, i);
      }
      // Highest score first; equal scores keep the lower box index first.
      std::stable_sort(cand.begin(), cand.end(),
                       [](const auto& p, const auto& q) { return p.first > q.first; });
      kept.clear();
      for (const auto& [s, i] : cand) {
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
        bool keep = true;
        for (int64_t k : kept)
          if (suppresses(all[static_cast<size_t>(i)], all[static_cast<size_t>(k)], iou)) {
            keep = false;
            break;
          }
        if (!keep) continue;
        kept.push_back(i);
        selected.insert(selected.end(), {b, c, i});
      }
    }
  }
  Tensor out(DType::kInt64, {static_cast<int64_t>(selected.size() / 3), 3});
  std::copy(selected.begin(), selected.end(), out.data<int64_t>());
  ctx.set_output(0, std::move(out));
}

// ---- RoiAlign --------------------------------------------------------------------------------

template <class T>
void roi_align_impl(KernelContext& ctx, const Tensor& x, const Tensor& rois,
                    const Tensor& batch_idx, Tensor& out, bool half_pixel, bool max_mode) {
  const int64_t n = x.dim(0), channels = x.dim(1), height = x.dim(2), width = x.dim(3);
  const int64_t num_rois = rois.dim(0), ph_n = out.dim(2), pw_n = out.dim(3);
  const int64_t sampling = ctx.attr_int("sampling_ratio", 0);
  const T scale = static_cast<T>(ctx.attr_float("spatial_scale", 1.f));
  const T* xd = x.data<T>();
  const T* rd = rois.data<T>();
  T* od = out.data<T>();
  const T offset = half_pixel ? T(0.5) : T(0);
  struct Tap {
    int64_t p1, p2, p3, p4;
    T w1, w2, w3, w4;
  };
  std::vector<Tap> taps;
  for (int64_t r = 0; r < num_rois; ++r) {
    const int64_t b = batch_idx.get_int(r);
    if (b < 0 || b >= n)
      ctx.fail(ErrorKind::kBadInput, "batch index " + std::to_string(b) + " is out of range [0, " +
                                         std::to_string(n) + ")");
    const T* roi = rd + r * 4;
    const T start_w = roi[0] * scale - offset, start_h = roi[1] * scale - offset;
    const T end_w = roi[2] * scale - offset, end_h = roi[3] * scale - offset;
    T roi_w = end_w - start_w, roi_h = end_h - start_h;
    if (!half_pixel) {  // legacy mode forces malformed RoIs to 1x1
      roi_w = std::max(roi_w, T(1));
      roi_h = std::max(roi_h, T(1));
    }
    const T bin_h = roi_h / static_cast<T>(ph_n), bin_w = roi_w / static_cast<T>(pw_n);
    const int64_t grid_h =
        sampling > 0 ? sampling : static_cast<int64_t>(std::ceil(roi_h / static_cast<T>(ph_n)));
    const int64_t grid_w =
        sampling > 0 ? sampling : static_cast<int64_t>(std::ceil(roi_w / static_cast<T>(pw_n)));
    const int64_t count = std::max<int64_t>(grid_h * grid_w, 1);
    for (int64_t ph = 0; ph < ph_n; ++ph) {
      for (int64_t pw = 0; pw < pw_n; ++pw) {
        taps.clear();
        for (int64_t iy = 0; iy < grid_h; ++iy) {
          const T yy = start_h + static_cast<T>(ph) * bin_h +
                       (static_cast<T>(iy) + T(0.5)) * bin_h / static_cast<T>(grid_h);
          for (int64_t ix = 0; ix < grid_w; ++ix) {
            const T xx = start_w + static_cast<T>(pw) * bin_w +
                         (static_cast<T>(ix) + T(0.5)) * bin_w / static_cast<T>(grid_w);
            T y = yy, xv = xx;
            if (y < T(-1) || y > static_cast<T>(height) || xv < T(-1) ||
                xv > static_cast<T>(width)) {
              taps.push_back({0, 0, 0, 0, T(0), T(0), T(0), T(0)});
              continue;
            }
            y = std::max(y, T(0));
            xv = std::max(xv, T(0));
            int64_t y_lo = static_cast<int64_t>(y), x_lo = static_cast<int64_t>(xv), y_hi, x_hi;
            if (y_lo >= height - 1) {
              y_hi = y_lo = height - 1;
              y = static_cast<T>(y_lo);
            } else {
              y_hi = y_lo + 1;
            }
            if (x_lo >= width - 1) {
              x_hi = x_lo = width - 1;
              xv = static_cast<T>(x_lo);
            } else {
              x_hi = x_lo + 1;
            }
            const T ly = y - static_cast<T>(y_lo), lx = xv - static_cast<T>(x_lo);
            const T hy = T(1) - ly, hx = T(1) - lx;
            taps.push_back({y_lo * width + x_lo, y_lo * width + x_hi, y_hi * width + x_lo,
                            y_hi * width + x_hi, hy * hx, hy * lx, ly * hx, ly * lx});
          }
        }
        for (int64_t c = 0; c < channels; ++c) {
          const T* plane = xd + (b * channels + c) * height * width;
          T acc = 0;
          bool first = true;
          for (const Tap& t : taps) {
            if (max_mode) {
              const T v = std::max(
                  std::max(std::max(t.w1 * plane[t.p1], t.w2 * plane[t.p2]), t.w3 * plane[t.p3]),
                  t.w4 * plane[t.p4]);
              acc = first ? v : std::max(acc, v);
              first = false;
            } else {
              acc +=
                  t.w1 * plane[t.p1] + t.w2 * plane[t.p2] + t.w3 * plane[t.p3] + t.w4 * plane[t.p4];
            }
          }
          od[((r * channels + c) * ph_n + ph) * pw_n + pw] =
              max_mode ? acc : acc / static_cast<T>(count);
        }
      }
    }
  }
}

void roi_align_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& rois = ctx.input(1);
  const Tensor& batch_idx = ctx.input(2);
  if (x.rank() != 4)
    ctx.fail(ErrorKind::kBadInput, "X should be [N, C, H, W], got " + dims_to_string(x.dims()));
  if (rois.rank() != 2 || rois.dim(1) != 4 || rois.dtype() != x.dtype())
    ctx.fail(ErrorKind::kBadInput, "rois should be [num_rois, 4] of X's dtype, got " +
                                       std::string(dtype_name(rois.dtype())) +
                                       dims_to_string(rois.dims()));
  if (batch_idx.rank() != 1 || batch_idx.dim(0) != rois.dim(0) || !is_integer(batch_idx.dtype()))
    ctx.fail(ErrorKind::kBadInput, "batch_indices should be [num_rois] integers, got " +
                                       dims_to_string(batch_idx.dims()));
  const std::string mode = ctx.attr_string("mode", "avg");
  if (mode != "avg" && mode != "max")
    ctx.fail(ErrorKind::kInvalidModel, "mode should be 'avg' or 'max', got '" + mode + "'");
  const std::string ctm = ctx.attr_string("coordinate_transformation_mode", "half_pixel");
  if (ctm != "half_pixel" && ctm != "output_half_pixel")
    ctx.fail(ErrorKind::kInvalidModel, "unknown coordinate_transformation_mode '" + ctm + "'");
  // Opset 10 had no attribute and behaved like output_half_pixel.
  const bool half_pixel = ctx.opset() >= 16 && ctm == "half_pixel";
  const int64_t oh = ctx.attr_int("output_height", 1), ow = ctx.attr_int("output_width", 1);
  if (oh <= 0 || ow <= 0) ctx.fail(ErrorKind::kInvalidModel, "output size must be positive");
  Tensor out(x.dtype(), {rois.dim(0), x.dim(1), oh, ow});
  if (x.dtype() == DType::kFloat32) {
    roi_align_impl<float>(ctx, x, rois, batch_idx, out, half_pixel, mode == "max");
  } else if (x.dtype() == DType::kFloat64) {
    roi_align_impl<double>(ctx, x, rois, batch_idx, out, half_pixel, mode == "max");
  } else {
    ctx.fail(ErrorKind::kUnsupported, "RoiAlign supports float tensors only");
  }
  ctx.set_output(0, std::move(out));
}

// ---- GridSample ------------------------------------------------------------------------------

double reflect(double x, double lo, double hi) {
  const double range = hi - lo;
  if (range <= 0) return lo;
  if (x < lo) {
    const double dx = lo - x;
    const auto k = static_cast<int64_t>(dx / range);
    const double r = dx - static_cast<double>(k) * range;
    return k % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const double dx = x - hi;
    const auto k = static_cast<int64_t>(dx / range);
    const double r = dx - static_cast<double>(k) * range;
    return k % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

void cubic_coeffs(double t, double c[4]) {
  constexpr double a = -0.75;
  const double x = std::abs(t);
  c[0] = ((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a;
  c[1] = ((a + 2) * x - (a + 3)) * x * x + 1;
  c[2] = ((a + 2) * (1 - x) - (a + 3)) * (1 - x) * (1 - x) + 1;
  c[3] = ((a * (2 - x) - 5 * a) * (2 - x) + 8 * a) * (2 - x) - 4 * a;
}

enum class Padding { kZeros, kBorder, kReflection };
enum class Interp { kNearest, kLinear, kCubic };

template <class T>
void grid_sample_impl(KernelContext& ctx, const Tensor& x, const Tensor& grid, Tensor& y,
                      Interp mode, Padding pad, bool align) {
  const int64_t batch = x.dim(0), channels = x.dim(1);
  const size_t nd = static_cast<size_t>(x.rank() - 2);
  std::vector<int64_t> in_sp(x.dims().begin() + 2, x.dims().end());
  int64_t in_size = 1, out_size = 1;
  for (int64_t d : in_sp) in_size *= d;
  for (int i = 1; i + 1 < grid.rank(); ++i) out_size *= grid.dim(i);
  const std::vector<int64_t> in_strides = contiguous_strides(in_sp);
  std::vector<double> lo(nd), hi(nd);
  for (size_t i = 0; i < nd; ++i) {
    lo[i] = align ? 0.0 : -0.5;
    hi[i] = align ? static_cast<double>(in_sp[i] - 1) : static_cast<double>(in_sp[i]) - 0.5;
  }
  // Maps a tap index along dim i to an element index, or -1 for a zero (padding) value.
  auto map_index = [&](int64_t idx, size_t i) -> int64_t {
    const int64_t d = in_sp[i];
    switch (pad) {
      case Padding::kZeros:
        return idx >= 0 && idx < d ? idx : -1;
      case Padding::kBorder:
        return std::clamp<int64_t>(idx, 0, d - 1);
      case Padding::kReflection: {
        const auto r = static_cast<int64_t>(reflect(static_cast<double>(idx), lo[i], hi[i]));
        return std::clamp<int64_t>(r, 0, d - 1);
      }
    }
    return -1;
  };
  const T* xd = x.data<T>();
  T* yd = y.data<T>();
  std::vector<std::vector<std::pair<int64_t, double>>> per_dim(nd);
  std::vector<std::pair<int64_t, double>> combos, next;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t p = 0; p < out_size; ++p) {
      const int64_t gbase = (b * out_size + p) * static_cast<int64_t>(nd);
      for (size_t i = 0; i < nd; ++i) {
        // The grid's last axis lists coordinates innermost dim first (x, y, ...).
        const double g = grid.get_double(gbase + static_cast<int64_t>(nd - 1 - i));
        const auto len = static_cast<double>(in_sp[i]);
        double v =
            static_cast<float>(align ? (g + 1) / 2.0 * (len - 1) : ((g + 1) * len - 1) / 2.0);
        if (mode == Interp::kNearest) v = std::nearbyint(v);
        if (v < lo[i] || v > hi[i]) {
          if (pad == Padding::kBorder) v = std::clamp(v, 0.0, len - 1);
          if (pad == Padding::kReflection) v = reflect(v, lo[i], hi[i]);
        }
        auto& taps = per_dim[i];
        taps.clear();
        if (mode == Interp::kNearest) {
          taps.emplace_back(map_index(static_cast<int64_t>(v), i), 1.0);
        } else if (mode == Interp::kLinear) {
          const double f = std::floor(v), t = v - f;
          const auto x0 = static_cast<int64_t>(f);
          taps.emplace_back(map_index(x0, i), 1 - t);
          taps.emplace_back(map_index(x0 + 1, i), t);
        } else {
          const double f = std::floor(v);
          const auto x0 = static_cast<int64_t>(f);
          double c[4];
          cubic_coeffs(v - f, c);
          for (int k = 0; k < 4; ++k) taps.emplace_back(map_index(x0 - 1 + k, i), c[k]);
        }
      }
      combos.assign(1, {0, 1.0});
      for (size_t i = 0; i < nd; ++i) {
        next.clear();
        for (const auto& [off, w] : combos)
          for (const auto& [idx, tw] : per_dim[i])
            if (idx >= 0) next.emplace_back(off + idx * in_strides[i], w * tw);
        combos.swap(next);
      }
      for (int64_t c = 0; c < channels; ++c) {
        const T* plane = xd + (b * channels + c) * in_size;
        double acc = 0;
        for (const auto& [off, w] : combos) acc += w * static_cast<double>(plane[off]);
        yd[(b * channels + c) * out_size + p] = static_cast<T>(acc);
      }
    }
  }
  (void)ctx;
}

void grid_sample_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& grid = ctx.input(1);
  const bool v16 = ctx.opset() < 20;
  if (x.rank() < 3 || (v16 && x.rank() != 4))
    ctx.fail(ErrorKind::kBadInput, std::string("X should be ") +
                                       (v16 ? "[N, C, H, W]" : "[N, C, D1, ..., Dr]") + ", got " +
                                       dims_to_string(x.dims()));
  if (grid.rank() != x.rank() || grid.dim(0) != x.dim(0) ||
      grid.dim(grid.rank() - 1) != x.rank() - 2)
    ctx.fail(ErrorKind::kBadInput, "grid should be [N, ..., " + std::to_string(x.rank() - 2) +
                                       "] for X " + dims_to_string(x.dims()) + ", got " +
                                       dims_to_string(grid.dims()));
  const std::string m = ctx.attr_string("mode", v16 ? "bilinear" : "linear");
  Interp mode;
  if (m == "nearest") {
    mode = Interp::kNearest;
  } else if (m == (v16 ? "bilinear" : "linear")) {
    mode = Interp::kLinear;
  } else if (m == (v16 ? "bicubic" : "cubic")) {
    mode = Interp::kCubic;
  } else {
    ctx.fail(ErrorKind::kInvalidModel, "unknown GridSample mode '" + m + "'");
  }
  if (mode == Interp::kCubic && x.rank() != 4)
    ctx.fail(ErrorKind::kUnsupported, "cubic GridSample supports 2-D images only");
  const std::string pm = ctx.attr_string("padding_mode", "zeros");
  Padding pad;
  if (pm == "zeros") {
    pad = Padding::kZeros;
  } else if (pm == "border") {
    pad = Padding::kBorder;
  } else if (pm == "reflection") {
    pad = Padding::kReflection;
  } else {
    ctx.fail(ErrorKind::kInvalidModel, "unknown padding_mode '" + pm + "'");
  }
  const bool align = ctx.attr_int("align_corners", 0) != 0;
  std::vector<int64_t> od = {x.dim(0), x.dim(1)};
  for (int i = 1; i + 1 < grid.rank(); ++i) od.push_back(grid.dim(i));
  Tensor y(x.dtype(), od);
  if (x.dtype() == DType::kFloat32) {
    grid_sample_impl<float>(ctx, x, grid, y, mode, pad, align);
  } else if (x.dtype() == DType::kFloat64) {
    grid_sample_impl<double>(ctx, x, grid, y, mode, pad, align);
  } else {
    ctx.fail(ErrorKind::kUnsupported, "GridSample supports float tensors only");
  }
  ctx.set_output(0, std::move(y));
}

// ---- Static inference ------------------------------------------------------------------------

void infer_nms(InferContext& ctx) {
  ctx.set_output_type(0, Type::tensor(DType::kInt64, Shape({Dim(), Dim(3)})));
}

void infer_roi_align(InferContext& ctx) {
  const Type& x = ctx.input_type(0);
  const Type& rois = ctx.input_type(1);
  Shape s(
      {Dim(), Dim(), Dim(ctx.attr_int("output_height", 1)), Dim(ctx.attr_int("output_width", 1))});
  if (rois.shape && rois.shape->rank() == 2) s.dims[0] = rois.shape->dims[0];
  if (x.shape && x.shape->rank() == 4) s.dims[1] = x.shape->dims[1];
  ctx.set_output_type(0, Type::tensor(x.dtype, s));
}

void infer_grid_sample(InferContext& ctx) {
  const Type& x = ctx.input_type(0);
  const Type& g = ctx.input_type(1);
  Type out = Type::tensor(x.dtype);
  if (x.shape && g.shape && x.shape->rank() >= 2 && g.shape->rank() >= 2) {
    Shape s({g.shape->dims[0], x.shape->dims[1]});
    for (size_t i = 1; i + 1 < g.shape->rank(); ++i) s.dims.push_back(g.shape->dims[i]);
    out.shape = s;
  }
  ctx.set_output_type(0, out);
}

}  // namespace

void register_misc_ops(OpRegistry& r) {
  r.add("NonMaxSuppression").since(10).inputs(2, 5).outputs(1).run(nms_kernel).shape(infer_nms).dynamic_shape();
  r.add("RoiAlign")
      .since(10)
      .inputs(3)
      .outputs(1)
      .run(roi_align_kernel)
      .shape(infer_roi_align)
      .via_float();
  r.add("RoiAlign")
      .since(16)
      .inputs(3)
      .outputs(1)
      .run(roi_align_kernel)
      .shape(infer_roi_align)
      .via_float();
  r.add("GridSample")
      .since(16)
      .inputs(2)
      .outputs(1)
      .run(grid_sample_kernel)
      .shape(infer_grid_sample)
      .via_float();
  r.add("GridSample")
      .since(20)
      .inputs(2)
      .outputs(1)
      .run(grid_sample_kernel)
      .shape(infer_grid_sample)
      .via_float();
}

}  // namespace kiln
