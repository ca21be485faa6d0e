// TE lowering of Resize/Upsample (f32/f64, constant scales/sizes/roi): every resized axis whose
// sources repeat with a short period (out / in = p / q in lowest terms, p <= 8: integer up- and
// downsampling and the like) maps output index o to sources floordiv(o, p) * q + base[o mod p],
// clamped, with weights w[o mod p]. The form is taken from the reference kernel's own plan
// (ops/resize_plan.h) and checked against it at every output position: the lowering applies only
// where it picks the same sources with the same weights. Other resizes run the reference kernel.
#include <cmath>
#include <map>

#include "core/error.h"
#include "ops/lowering.h"
#include "ops/resize_plan.h"

namespace kiln {
namespace {

using tir::Expr;
using tir::ExprKind;

constexpr int64_t kMaxPeriod = 8;

// One tap of one axis in periodic form.
struct PeriodicTap {
  std::vector<int64_t> base;  // per residue o mod p
  std::vector<double> w;      // per residue
};

struct PeriodicAxis {
  size_t axis = 0;
  int64_t in_len = 0, p = 1, q = 1;
  std::vector<PeriodicTap> taps;  // taps whose weight is not zero for every residue
};

int64_t gcd(int64_t a, int64_t b) { return b == 0 ? a : gcd(b, a % b); }

// The periodic form of a planned axis, or nullopt when it does not reproduce the plan exactly
// (sources and summed weights per source, at every output position).
std::optional<PeriodicAxis> periodic_axis(const ResizeAxis& a) {
  for (bool e : a.extrap)
    if (e) return std::nullopt;
  if (a.in_len <= 0 || a.out_len <= 0) return std::nullopt;
  PeriodicAxis pa;
  pa.axis = a.axis;
  pa.in_len = a.in_len;
  const int64_t g = gcd(a.out_len, a.in_len);
  pa.p = a.out_len / g;
  pa.q = a.in_len / g;
  if (pa.p > kMaxPeriod) return std::nullopt;
  // The pattern is read off the positions of each residue nearest the middle of the axis: the
  // weights from one, each base from one whose source is not at a border (where it may be clamped).
  const int64_t periods = a.out_len / pa.p, mid = periods / 2;
  if (periods == 0) return std::nullopt;
  for (int j = 0; j < a.taps; ++j) {
    PeriodicTap t;
    bool nonzero = false;
    for (int64_t r = 0; r < pa.p; ++r) {
      auto at = [&](int64_t period) { return static_cast<size_t>((period * pa.p + r) * a.taps + j); };
      int64_t pick = mid;
      for (int64_t d = 0; d < periods; ++d) {
        const int64_t lo = mid - d, hi = mid + d;
        if (lo >= 0 && a.idx[at(lo)] > 0 && a.idx[at(lo)] < a.in_len - 1) { pick = lo; break; }
        if (hi < periods && a.idx[at(hi)] > 0 && a.idx[at(hi)] < a.in_len - 1) { pick = hi; break; }
      }
      t.base.push_back(a.idx[at(pick)] - pick * pa.q);
      t.w.push_back(a.w[at(mid)]);
      nonzero = nonzero || a.w[at(mid)] != 0;
    }
    if (nonzero) pa.taps.push_back(std::move(t));
  }
  for (int64_t o = 0; o < a.out_len; ++o) {
    std::map<int64_t, double> want, got;
    for (int j = 0; j < a.taps; ++j) {
      const size_t k = static_cast<size_t>(o * a.taps + j);
      if (a.w[k] != 0) want[a.idx[k]] += a.w[k];
    }
    const int64_t r = o % pa.p;
    for (const PeriodicTap& t : pa.taps) {
      const int64_t src = std::clamp<int64_t>(o / pa.p * pa.q + t.base[static_cast<size_t>(r)], 0, a.in_len - 1);
      if (t.w[static_cast<size_t>(r)] != 0) got[src] += t.w[static_cast<size_t>(r)];
    }
    if (want.size() != got.size()) return std::nullopt;
    for (auto wi = want.begin(), gi = got.begin(); wi != want.end(); ++wi, ++gi)
      if (wi->first != gi->first || std::abs(wi->second - gi->second) > 1e-12) return std::nullopt;
  }
  return pa;
}

// values[o mod p] as an expression of o (a constant when all residues agree).
template <class T, class MakeConst>
Expr per_residue(const std::vector<T>& values, const Expr& o, int64_t p, MakeConst make_const) {
  bool same = true;
  for (const T& v : values) same = same && v == values[0];
  if (same) return make_const(values[0]);
  const Expr r = tir::floormod(o, tir::int_imm(p));
  Expr e = make_const(values.back());
  for (size_t k = values.size() - 1; k-- > 0;)
    e = tir::select(tir::binary(ExprKind::kEQ, r, tir::int_imm(static_cast<int64_t>(k))), make_const(values[k]), e);
  return e;
}

LowerResult resize_lower(const LowerContext& ctx) {
  if (!ctx.has_input(0)) return std::nullopt;
  const DType dt = ctx.in_dtype(0);
  if ((dt != DType::kFloat32 && dt != DType::kFloat64) || ctx.out_dtype() != dt) return std::nullopt;
  std::vector<const Tensor*> operands{nullptr};
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    if (ctx.has_input(i) && !ctx.constant(i)) return std::nullopt;
    operands.push_back(ctx.has_input(i) ? ctx.constant(i) : nullptr);
  }
  ResizePlan plan;
  try {
    plan = resize_plan(ctx, ctx.opset(), ctx.in_shape(0), operands);
  } catch (const Error&) {
    return std::nullopt;  // the reference kernel reports it
  }
  if (plan.out != ctx.out_shape()) return std::nullopt;
  std::vector<PeriodicAxis> axes;
  int64_t combos = 1;
  for (const ResizeAxis& a : plan.axes) {
    std::optional<PeriodicAxis> pa = periodic_axis(a);
    if (!pa || pa->taps.empty()) return std::nullopt;
    combos *= static_cast<int64_t>(pa->taps.size());
    axes.push_back(std::move(*pa));
  }
  if (combos > 16) return std::nullopt;
  const te::Tensor x = ctx.input(0);
  return std::vector<te::Tensor>{te::compute(ctx.name("out"), ctx.out_dims(), [&](const std::vector<Expr>& i) {
    // Per axis and tap: the clamped source index and the weight.
    std::vector<std::vector<std::pair<Expr, Expr>>> terms;
    for (const PeriodicAxis& a : axes) {
      const Expr& o = i[a.axis];
      std::vector<std::pair<Expr, Expr>> t;
      for (const PeriodicTap& tap : a.taps) {
        const Expr start = a.p == 1 ? o * a.q : tir::floordiv(o, tir::int_imm(a.p)) * a.q;
        Expr src = start + per_residue(tap.base, o, a.p, [](int64_t v) { return tir::int_imm(v); });
        src = tir::max(tir::min(src, tir::int_imm(a.in_len - 1)), tir::int_imm(0));
        t.emplace_back(src, per_residue(tap.w, o, a.p, [&](double v) { return lower::constant(dt, v); }));
      }
      terms.push_back(std::move(t));
    }
    // The sum over every combination of taps (one per axis) of the weights' product times the source.
    Expr sum;
    std::vector<size_t> pick(axes.size(), 0);
    for (int64_t c = 0; c < combos; ++c) {
      std::vector<Expr> j = i;
      Expr w;
      bool unit = true;
      for (size_t a = 0; a < axes.size(); ++a) {
        const auto& [src, weight] = terms[a][pick[a]];
        j[axes[a].axis] = src;
        const bool one = axes[a].taps[pick[a]].w == std::vector<double>(axes[a].taps[pick[a]].w.size(), 1.0);
        if (!one) w = unit ? weight : w * weight;
        unit = unit && one;
      }
      Expr v = te::access(x, j);
      if (!unit) v = w * v;
      sum = c == 0 ? v : sum + v;
      for (size_t a = axes.size(); a-- > 0;) {  // next combination
        if (++pick[a] < axes[a].taps.size()) break;
        pick[a] = 0;
      }
    }
    return sum;
  })};
}

}  // namespace

void add_resize_lowerings(std::vector<LoweringEntry>& t) {
  t.push_back({"", "Resize", resize_lower});
  t.push_back({"", "Upsample", resize_lower});
}

}  // namespace kiln
