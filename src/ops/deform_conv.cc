// DeformConv (2-D): convolution whose kernel taps sample the input bilinearly at learned
// offsets, optionally modulated by a mask (registered from register_extra_ops).
#include <cmath>

#include "ops/op_util.h"
#include "ops/tensor_util.h"

namespace kiln {
namespace {

// Bilinear sample of a [h, w] plane at real pixel coordinates; taps outside read as zero.
template <class T>
double bilinear(const T* plane, int64_t h, int64_t w, double y, double x) {
  if (!(y > -1 && y < h && x > -1 && x < w)) return 0.0;
  const int64_t y0 = static_cast<int64_t>(std::floor(y)), x0 = static_cast<int64_t>(std::floor(x));
  const double ly = y - y0, lx = x - x0;
  double acc = 0;
  for (int dy = 0; dy < 2; ++dy)
    for (int dx = 0; dx < 2; ++dx) {
      const int64_t yy = y0 + dy, xx = x0 + dx;
      if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
      acc += (dy ? ly : 1 - ly) * (dx ? lx : 1 - lx) * static_cast<double>(plane[yy * w + xx]);
    }
  return acc;
}

void deform_conv_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor& off = ctx.input(2);
  if (x.rank() != 4)
    ctx.fail(ErrorKind::kUnsupported, "DeformConv supports 2-D inputs [N,C,H,W] only, got " +
                                          type_string(x));
  if (w.rank() != 4) ctx.fail(ErrorKind::kBadInput, "W should be 4-D, got " + type_string(w));
  const int64_t n = x.dim(0), ic = x.dim(1), ih = x.dim(2), iw = x.dim(3);
  const int64_t oc = w.dim(0), icg = w.dim(1);
  const std::vector<int64_t> ks = ctx.attr_ints("kernel_shape", {w.dim(2), w.dim(3)});
  const std::vector<int64_t> st = ctx.attr_ints("strides", {1, 1});
  const std::vector<int64_t> dl = ctx.attr_ints("dilations", {1, 1});
  const std::vector<int64_t> pd = ctx.attr_ints("pads", {0, 0, 0, 0});
  const int64_t group = ctx.attr_int("group", 1), og = ctx.attr_int("offset_group", 1);
  if (ks.size() != 2 || st.size() != 2 || dl.size() != 2 || pd.size() != 4 || group < 1 ||
      og < 1 || ks[0] != w.dim(2) || ks[1] != w.dim(3) || st[0] < 1 || st[1] < 1 || dl[0] < 1 ||
      dl[1] < 1)
    ctx.fail(ErrorKind::kInvalidModel, "bad kernel_shape/strides/dilations/pads/group attributes");
  if (ic != icg * group || oc % group != 0 || ic % og != 0)
    ctx.fail(ErrorKind::kBadInput, "channels do not fit: X " + type_string(x) + ", W " +
                                       type_string(w) + ", group " + std::to_string(group) +
                                       ", offset_group " + std::to_string(og));
  const int64_t kh = ks[0], kw = ks[1];
  const int64_t oh = (ih + pd[0] + pd[2] - ((kh - 1) * dl[0] + 1)) / st[0] + 1;
  const int64_t ow = (iw + pd[1] + pd[3] - ((kw - 1) * dl[1] + 1)) / st[1] + 1;
  if (oh <= 0 || ow <= 0) ctx.fail(ErrorKind::kBadInput, "the output would be empty");
  if (off.dims() != std::vector<int64_t>{n, og * kh * kw * 2, oh, ow})
    ctx.fail(ErrorKind::kBadInput, "offset should be " +
                                       ints_to_string({n, og * kh * kw * 2, oh, ow}) + ", got " +
                                       type_string(off));
  const Tensor* bias = ctx.has_input(3) ? &ctx.input(3) : nullptr;
  const Tensor* mask = ctx.has_input(4) ? &ctx.input(4) : nullptr;
  if (bias && bias->numel() != oc)
    ctx.fail(ErrorKind::kBadInput, "B should have " + std::to_string(oc) + " values");
  if (mask && mask->dims() != std::vector<int64_t>{n, og * kh * kw, oh, ow})
    ctx.fail(ErrorKind::kBadInput, "mask should be " + ints_to_string({n, og * kh * kw, oh, ow}) +
                                       ", got " + type_string(*mask));
  Tensor y(x.dtype(), {n, oc, oh, ow});
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      const T* xs = x.data<T>();
      const T* ws = w.data<T>();
      const T* os = off.data<T>();
      const T* ms = mask ? mask->data<T>() : nullptr;
      T* ys = y.data<T>();
      const int64_t ocg = oc / group, icog = ic / og, plane = oh * ow;
      // Sampled columns for one input channel: [kh*kw][oh*ow], built once and reused by every
      // output channel of the group.
      std::vector<double> col(static_cast<size_t>(kh * kw * plane));
      std::vector<double> acc(static_cast<size_t>(oc * plane));
      for (int64_t b = 0; b < n; ++b) {
        for (int64_t o = 0; o < oc; ++o)
          for (int64_t p = 0; p < plane; ++p)
            acc[static_cast<size_t>(o * plane + p)] = bias ? bias->get_double(o) : 0.0;
        for (int64_t c = 0; c < ic; ++c) {
          const int64_t g = c / icog;  // offset group
          const T* xp = xs + (b * ic + c) * ih * iw;
          for (int64_t i = 0; i < kh; ++i)
            for (int64_t j = 0; j < kw; ++j) {
              const int64_t k = i * kw + j;
              const T* dy = os + ((b * og + g) * kh * kw * 2 + k * 2) * plane;
              const T* dx = dy + plane;
              const T* mk = ms ? ms + ((b * og + g) * kh * kw + k) * plane : nullptr;
              for (int64_t r = 0; r < oh; ++r)
                for (int64_t q = 0; q < ow; ++q) {
                  const int64_t p = r * ow + q;
                  const double yy = static_cast<double>(r * st[0] - pd[0] + i * dl[0]) + dy[p];
                  const double xx = static_cast<double>(q * st[1] - pd[1] + j * dl[1]) + dx[p];
                  double v = bilinear(xp, ih, iw, yy, xx);
                  if (mk) v *= static_cast<double>(mk[p]);
                  col[static_cast<size_t>(k * plane + p)] = v;
                }
            }
          const int64_t grp = c / icg;
          for (int64_t o = grp * ocg; o < (grp + 1) * ocg; ++o) {
            const T* wk = ws + (o * icg + c % icg) * kh * kw;
            double* a = acc.data() + o * plane;
            for (int64_t k = 0; k < kh * kw; ++k) {
              const double wv = static_cast<double>(wk[k]);
              const double* cl = col.data() + k * plane;
              for (int64_t p = 0; p < plane; ++p) a[p] += wv * cl[p];
            }
          }
        }
        for (int64_t i = 0; i < oc * plane; ++i)
          ys[b * oc * plane + i] = static_cast<T>(acc[static_cast<size_t>(i)]);
      }
    } else {
      ctx.fail(ErrorKind::kUnsupported, "DeformConv needs float inputs");
    }
  });
  ctx.set_output(0, std::move(y));
}

}  // namespace

void register_deform_conv_ops(OpRegistry& r) {
  r.add("DeformConv").since(19).inputs(3, 5).outputs(1).kind(PatternKind::kOpaque)
      .run(deform_conv_kernel).via_float();
}

}  // namespace kiln
