// Resize (opset 10..19) and the deprecated Upsample (7, 9): nearest / linear / cubic
// interpolation, computed separably one axis at a time in double precision like the ONNX
// reference implementation.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>

#include "ops/families.h"
#include "ops/op_util.h"
#include "ops/resize_plan.h"
#include "ops/tensor_util.h"

namespace kiln {

void register_resize_ops(OpRegistry& r);

namespace {

struct ResizeSetup {
  std::vector<int64_t> out;   // output dims
  std::vector<double> scale;  // per-axis scale factor (output / input)
  std::vector<double> roi;    // [starts..., ends...] over all axes; empty when unused
  std::vector<bool> resized;  // axes listed in `axes` (all by default)
};

bool legacy_resize(const AttrReader& at, int64_t opset) {
  return at.node().op_type == "Upsample" || opset < 11;
}

std::vector<double> read_floats(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.get_double(i);
  return v;
}

// Computes output dims and scales from scales/sizes (given per listed axis), roi and axes.
ResizeSetup resize_setup(const AttrReader& at, int64_t opset, const std::vector<int64_t>& in,
                         std::optional<std::vector<double>> scales,
                         std::optional<std::vector<int64_t>> sizes, std::vector<double> roi) {
  const int64_t rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> axes;
  if (opset >= 18 && at.node().op_type == "Resize" && at.has_attr("axes")) {
    axes = normalize_axes(at, at.attr_ints("axes"), rank);
  } else {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  ResizeSetup s;
  s.out = in;
  s.scale.assign(in.size(), 1.0);
  s.resized.assign(in.size(), false);
  for (int64_t a : axes) s.resized[static_cast<size_t>(a)] = true;
  const size_t na = axes.size();
  if (scales && sizes)
    at.fail(ErrorKind::kInvalidModel, "Resize takes either scales or sizes, not both");
  if (!scales && !sizes) at.fail(ErrorKind::kInvalidModel, "Resize needs scales or sizes");
  if (scales) {
    if (scales->size() != na)
      at.fail(ErrorKind::kBadInput, "Resize scales has " + std::to_string(scales->size()) +
                                        " entries, expected " + std::to_string(na));
    for (size_t i = 0; i < na; ++i) {
      const double sc = (*scales)[i];
      if (!(sc > 0) || !std::isfinite(sc))
        at.fail(ErrorKind::kBadInput, "Resize scales must be positive, got " + std::to_string(sc));
      const size_t a = static_cast<size_t>(axes[i]);
      const double o = std::floor(static_cast<double>(in[a]) * sc);
      if (o > static_cast<double>(int64_t{1} << 40))
        at.fail(ErrorKind::kBadInput, "Resize output is too large");
      s.scale[a] = sc;
      s.out[a] = static_cast<int64_t>(o);
    }
  } else {
    if (sizes->size() != na)
      at.fail(ErrorKind::kBadInput, "Resize sizes has " + std::to_string(sizes->size()) +
                                        " entries, expected " + std::to_string(na));
    for (size_t i = 0; i < na; ++i) {
      const size_t a = static_cast<size_t>(axes[i]);
      if ((*sizes)[i] < 0) at.fail(ErrorKind::kBadInput, "Resize sizes must be >= 0");
      s.out[a] = (*sizes)[i];
      s.scale[a] = in[a] == 0 ? 1.0 : static_cast<double>(s.out[a]) / static_cast<double>(in[a]);
    }
    const std::string policy =
        opset >= 18 ? at.attr_string("keep_aspect_ratio_policy", "stretch") : "stretch";
    if (policy != "stretch") {
      if (policy != "not_larger" && policy != "not_smaller")
        at.fail(ErrorKind::kInvalidModel, "keep_aspect_ratio_policy '" + policy + "' is unknown");
      double sc = policy == "not_larger" ? std::numeric_limits<double>::infinity() : 0.0;
      for (int64_t a : axes)
        sc = policy == "not_larger" ? std::min(sc, s.scale[static_cast<size_t>(a)])
                                    : std::max(sc, s.scale[static_cast<size_t>(a)]);
      for (int64_t a : axes) {
        s.scale[static_cast<size_t>(a)] = sc;
        s.out[static_cast<size_t>(a)] =
            static_cast<int64_t>(sc * static_cast<double>(in[static_cast<size_t>(a)]) + 0.5);
      }
    }
  }
  if (!roi.empty()) {
    if (roi.size() != 2 * na)
      at.fail(ErrorKind::kBadInput, "Resize roi has " + std::to_string(roi.size()) +
                                        " entries, expected " + std::to_string(2 * na));
    s.roi.assign(2 * in.size(), 0.0);
    for (size_t i = 0; i < in.size(); ++i) s.roi[in.size() + i] = 1.0;
    for (size_t i = 0; i < na; ++i) {
      s.roi[static_cast<size_t>(axes[i])] = roi[i];
      s.roi[in.size() + static_cast<size_t>(axes[i])] = roi[na + i];
    }
  }
  return s;
}

// Reads the resize operands (input i, or null when absent) for every opset / op variant.
ResizeSetup operand_setup(const AttrReader& at, int64_t opset, const std::vector<int64_t>& in,
                          const std::vector<const Tensor*>& operands) {
  auto operand = [&](size_t i) { return i < operands.size() ? operands[i] : nullptr; };
  std::optional<std::vector<double>> scales;
  std::optional<std::vector<int64_t>> sizes;
  std::vector<double> roi;
  if (at.node().op_type == "Upsample" && opset < 9) {
    std::vector<float> f = at.attr_floats("scales");
    scales = std::vector<double>(f.begin(), f.end());
  } else if (legacy_resize(at, opset)) {
    if (!operand(1)) at.fail(ErrorKind::kInvalidModel, "Upsample needs its scales input");
    scales = read_floats(*operand(1));
  } else {
    if (operand(1)) roi = read_floats(*operand(1));
    if (operand(2) && operand(2)->numel() > 0) scales = read_floats(*operand(2));
    if (operand(3) && operand(3)->numel() > 0) sizes = read_int_list(at, *operand(3), "Resize sizes");
  }
  return resize_setup(at, opset, in, scales, sizes, roi);
}

// Source coordinate of output index y along one axis; sets *extrapolated for tf_crop_and_resize.
double source_coord(const AttrReader& at, const std::string& mode, double y, double scale,
                    int64_t in_len, int64_t out_len, const std::vector<double>& roi, size_t axis,
                    size_t rank, bool* extrapolated) {
  const double in_w = static_cast<double>(in_len);
  const double out_w = scale * in_w;  // the reference uses the unrounded output length
  *extrapolated = false;
  if (mode == "half_pixel") return (y + 0.5) / scale - 0.5;
  if (mode == "asymmetric") return y / scale;
  if (mode == "tf_half_pixel_for_nn") return (y + 0.5) / scale;  // opset 11 only
  if (mode == "align_corners") return out_w == 1 ? 0.0 : y * (in_w - 1) / (out_w - 1);
  if (mode == "pytorch_half_pixel") return out_w == 1 ? -0.5 : (y + 0.5) / scale - 0.5;
  if (mode == "half_pixel_symmetric") {
    const double adjustment = static_cast<double>(out_len) / out_w;
    const double offset = in_w / 2 * (1 - adjustment);
    return offset + (y + 0.5) / scale - 0.5;
  }
  if (mode == "tf_crop_and_resize") {
    if (roi.empty()) at.fail(ErrorKind::kBadInput, "tf_crop_and_resize needs a roi input");
    const double r0 = roi[axis], r1 = roi[rank + axis];
    double x = out_w == 1 ? (r1 - r0) * (in_w - 1) / 2 : y * (r1 - r0) * (in_w - 1) / (out_w - 1);
    x += r0 * (in_w - 1);
    *extrapolated = x < 0 || x > in_w - 1;
    return x;
  }
  at.fail(ErrorKind::kInvalidModel, "coordinate_transformation_mode '" + mode + "' is unknown");
}

struct Taps {
  std::vector<int64_t> idx;  // per output position: n source indices (clamped)
  std::vector<double> w;     // matching weights
  std::vector<bool> extrap;  // per output position
  int n = 0;
};

double cubic_kernel(double x, double a) {
  x = std::abs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0;
}

// Interpolation taps along one axis, mirroring the reference's neighbour/coefficient rules.
Taps make_taps(const AttrReader& at, int64_t opset, const std::string& mode, const std::string& ctm,
               const std::string& nearest_mode, double cubic_a, bool exclude_outside,
               bool antialias, double scale, int64_t in_len, int64_t out_len,
               const std::vector<double>& roi, size_t axis, size_t rank) {
  Taps t;
  const bool legacy = legacy_resize(at, opset);
  int64_t lo = 0;
  double s_eff = 1.0;
  if (mode == "nearest") {
    t.n = 1;
  } else if (mode == "linear") {
    s_eff = antialias ? std::min(scale, 1.0) : 1.0;
    lo = static_cast<int64_t>(std::floor(-1 / s_eff)) + 1;
    t.n = static_cast<int>(2 - 2 * lo);
  } else if (mode == "cubic" && !legacy) {
    s_eff = antialias ? std::min(scale, 1.0) : 1.0;
    lo = static_cast<int64_t>(std::floor(-2 / s_eff)) + 1;
    t.n = static_cast<int>(2 - 2 * lo);
  } else {
    at.fail(ErrorKind::kInvalidModel, "Resize mode '" + mode + "' is not nearest, linear or cubic");
  }
  t.idx.resize(static_cast<size_t>(out_len * t.n));
  t.w.resize(static_cast<size_t>(out_len * t.n));
  t.extrap.resize(static_cast<size_t>(out_len));
  for (int64_t o = 0; o < out_len; ++o) {
    bool ex = false;
    const double x = legacy ? static_cast<double>(o) / scale
                            : source_coord(at, ctm, static_cast<double>(o), scale, in_len, out_len,
                                           roi, axis, rank, &ex);
    t.extrap[static_cast<size_t>(o)] = ex;
    int64_t* idx = &t.idx[static_cast<size_t>(o * t.n)];
    double* w = &t.w[static_cast<size_t>(o * t.n)];
    const double fl = std::floor(x);
    const bool integral = x == fl;
    if (mode == "nearest") {
      int64_t k;
      if (legacy) {
        k = scale < 1 ? static_cast<int64_t>(std::ceil(x)) : static_cast<int64_t>(fl);
      } else if (integral) {
        k = static_cast<int64_t>(fl);
      } else {
        const double r = x - fl;
        bool up;
        if (nearest_mode == "round_prefer_floor")
          up = r > 0.5;
        else if (nearest_mode == "round_prefer_ceil")
          up = r >= 0.5;
        else if (nearest_mode == "floor")
          up = false;
        else if (nearest_mode == "ceil")
          up = true;
        else
          at.fail(ErrorKind::kInvalidModel, "nearest_mode '" + nearest_mode + "' is unknown");
        k = static_cast<int64_t>(fl) + (up ? 1 : 0);
      }
      idx[0] = std::clamp<int64_t>(k, 0, in_len - 1);
      w[0] = 1;
      continue;
    }
    // Integral coordinates use the window one to the left with ratio 1, like the reference.
    const int64_t base = integral ? static_cast<int64_t>(fl) - 1 : static_cast<int64_t>(fl);
    const double ratio = integral ? 1.0 : x - fl;
    double sum = 0;
    for (int j = 0; j < t.n; ++j) {
      const int64_t i = lo + j;
      const double d = s_eff * (static_cast<double>(i) - ratio);
      double c =
          mode == "linear" ? std::clamp(1 - std::abs(d), 0.0, 1.0) : cubic_kernel(d, cubic_a);
      const int64_t src = base + i;
      if (exclude_outside && (src < 0 || src >= in_len)) c = 0;
      idx[j] = std::clamp<int64_t>(src, 0, in_len - 1);
      w[j] = c;
      sum += c;
    }
    if ((antialias || exclude_outside) && sum != 0)
      for (int j = 0; j < t.n; ++j) w[j] /= sum;
  }
  return t;
}

void resize_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() == DType::kString) ctx.fail(ErrorKind::kBadInput, "Resize does not accept strings");
  std::vector<const Tensor*> operands;
  for (int i = 0; i < ctx.num_inputs(); ++i) operands.push_back(ctx.has_input(i) ? &ctx.input(i) : nullptr);
  const ResizePlan plan = resize_plan(ctx, ctx.opset(), x.dims(), operands);

  // Separable passes over a double buffer laid out as [outer, len, inner] per axis.
  std::vector<int64_t> cur_dims = x.dims();
  Tensor xd = convert_tensor(x, DType::kFloat64);
  std::vector<double> cur(xd.data<double>(), xd.data<double>() + xd.numel());
  const size_t rank = cur_dims.size();
  for (const ResizeAxis& t : plan.axes) {
    const size_t a = t.axis;
    const int64_t in_len = t.in_len, out_len = t.out_len;
    std::vector<int64_t> next_dims = cur_dims;
    next_dims[a] = out_len;
    if (checked_numel(next_dims) > (int64_t{1} << 37))  // 1 TiB of doubles, as Tensor allows
      ctx.fail(ErrorKind::kBadInput,
               "Resize intermediate " + dims_to_string(next_dims) + " is too large");
    int64_t outer = 1, inner = 1;
    for (size_t i = 0; i < a; ++i) outer *= cur_dims[i];
    for (size_t i = a + 1; i < rank; ++i) inner *= cur_dims[i];
    std::vector<double> next(static_cast<size_t>(outer * out_len * inner), 0.0);
    for (int64_t o = 0; o < outer; ++o) {
      const double* src = cur.data() + o * in_len * inner;
      for (int64_t y = 0; y < out_len; ++y) {
        double* dst = next.data() + (o * out_len + y) * inner;
        if (t.extrap[static_cast<size_t>(y)]) {
          std::fill(dst, dst + inner, plan.extrapolation);
          continue;
        }
        for (int j = 0; j < t.taps; ++j) {
          const double w = t.w[static_cast<size_t>(y * t.taps + j)];
          if (w == 0 && t.taps > 1) continue;
          const double* row = src + t.idx[static_cast<size_t>(y * t.taps + j)] * inner;
          for (int64_t e = 0; e < inner; ++e) dst[e] += w * row[e];
        }
      }
    }
    cur = std::move(next);
    cur_dims[a] = out_len;
  }
  Tensor yd(DType::kFloat64, cur_dims);
  std::copy(cur.begin(), cur.end(), yd.data<double>());
  if (is_integer(x.dtype())) {
    // Round to nearest before the saturating integer conversion.
    double* p = yd.data<double>();
    for (int64_t i = 0; i < yd.numel(); ++i) p[i] = std::nearbyint(p[i]);
  }
  ctx.set_output(0, convert_tensor(yd, x.dtype()));
}

void resize_infer(InferContext& ctx) {
  const Type& xt = ctx.input_type(0);
  DType dt = xt.kind == Type::Kind::kTensor ? xt.dtype : DType::kUndefined;
  std::optional<Shape> in = input_shape(ctx, 0);
  if (!in) {
    ctx.set_output_type(0, Type::tensor(dt));
    return;
  }
  Shape unknown(std::vector<Dim>(in->rank()));
  std::optional<std::vector<double>> scales;
  std::optional<std::vector<int64_t>> sizes;
  bool ok = true;
  if (ctx.node().op_type == "Upsample" && ctx.opset() < 9) {
    std::vector<float> f = ctx.attr_floats("scales");
    scales = std::vector<double>(f.begin(), f.end());
  } else {
    const bool legacy = legacy_resize(ctx, ctx.opset());
    const int si = legacy ? 1 : 2;
    const Tensor* sc = ctx.constant_input(si);
    const Tensor* sz = legacy ? nullptr : ctx.constant_input(3);
    if (sc && sc->numel() > 0 && is_float(sc->dtype()))
      scales = read_floats(*sc);
    else if (sz && sz->numel() > 0 && is_integer(sz->dtype()))
      sizes = sz->to_int64_vector();
    else
      ok = false;
  }
  if (!ok) {
    ctx.set_output_type(0, Type::tensor(dt, unknown));
    return;
  }
  if (in->is_static()) {
    ResizeSetup s = resize_setup(ctx, ctx.opset(), in->sizes(), scales, sizes, {});
    ctx.set_output_type(0, Type::tensor(dt, Shape::of(s.out)));
    return;
  }
  // Symbolic input: resolve with placeholder sizes; axes whose scale is 1 keep their dim, other
  // axes are known only when their input dim is (or when sizes fix them, without aspect policy).
  std::vector<int64_t> probe;
  for (const Dim& d : in->dims) probe.push_back(d.known() ? d.value : 1);
  ResizeSetup s = resize_setup(ctx, ctx.opset(), probe, scales, sizes, {});
  const bool policy =
      ctx.opset() >= 18 && ctx.attr_string("keep_aspect_ratio_policy", "stretch") != "stretch";
  Shape out = unknown;
  for (size_t i = 0; i < in->rank(); ++i) {
    if (!s.resized[i] || (scales && s.scale[i] == 1.0))
      out.dims[i] = in->dims[i];
    else if (in->dims[i].known() && (scales || !policy))
      out.dims[i] = Dim(s.out[i]);
    else if (sizes && !policy)
      out.dims[i] = Dim(s.out[i]);
  }
  ctx.set_output_type(0, Type::tensor(dt, out));
}

}  // namespace

ResizePlan resize_plan(const AttrReader& at, int64_t opset, const std::vector<int64_t>& in,
                       const std::vector<const Tensor*>& operands) {
  ResizeSetup s = operand_setup(at, opset, in, operands);
  const bool legacy = legacy_resize(at, opset);
  ResizePlan plan;
  plan.mode = at.attr_string("mode", "nearest");
  const std::string ctm = legacy ? "asymmetric" : at.attr_string("coordinate_transformation_mode", "half_pixel");
  const std::string nearest_mode = at.attr_string("nearest_mode", "round_prefer_floor");
  const double cubic_a = at.attr_float("cubic_coeff_a", -0.75f);
  const bool exclude_outside = !legacy && at.attr_int("exclude_outside", 0) != 0;
  const bool antialias = opset >= 18 && !legacy && at.attr_int("antialias", 0) != 0;
  plan.extrapolation = at.attr_float("extrapolation_value", 0.f);
  for (size_t a = 0; a < s.out.size(); ++a)
    if (in[a] == 0 && s.out[a] > 0) at.fail(ErrorKind::kBadInput, "Resize cannot enlarge an empty axis");
  checked_numel(s.out);
  if (!s.roi.empty() && ctm != "tf_crop_and_resize") s.roi.clear();
  const size_t rank = in.size();
  for (size_t a = 0; a < rank; ++a) {
    if (!s.resized[a]) continue;
    const int64_t in_len = in[a], out_len = s.out[a];
    bool roi_trivial = s.roi.empty() || (std::abs(s.roi[a]) < 1e-9 && std::abs(s.roi[rank + a] - 1) < 1e-9);
    if (std::abs(s.scale[a] - 1) < 1e-9 && out_len == in_len && roi_trivial) continue;
    Taps t = make_taps(at, opset, plan.mode, ctm, nearest_mode, cubic_a, exclude_outside, antialias, s.scale[a],
                       in_len, out_len, s.roi, a, rank);
    ResizeAxis ax;
    ax.axis = a, ax.in_len = in_len, ax.out_len = out_len, ax.taps = t.n;
    ax.idx = std::move(t.idx), ax.w = std::move(t.w), ax.extrap = std::move(t.extrap);
    plan.axes.push_back(std::move(ax));
  }
  plan.out = s.out;
  return plan;
}

void register_resize_ops(OpRegistry& r) {
  r.add("Resize")
      .since(10)
      .inputs(2, 4)
      .outputs(1)
      .kind(PatternKind::kInjective)
      .run(resize_kernel)
      .shape(resize_infer);
  r.add("Upsample")
      .since(7)
      .inputs(1, 2)
      .outputs(1)
      .kind(PatternKind::kInjective)
      .run(resize_kernel)
      .shape(resize_infer);
}

}  // namespace kiln
