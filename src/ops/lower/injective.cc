// TE lowerings of injective ops: each output element reads one input element (or a constant):
// Reshape/Flatten/Squeeze/Unsqueeze (per group of equal-size dims), Transpose, Expand, Tile, Concat, Slice and Pad (constant, edge, reflect and wrap)
// with constant parameters, Gather (constant or runtime indices, wrapped and clamped).
// Output shapes come from the context, so shape-only parameters need not be constant.
#include "ops/lowering.h"

namespace kiln {
namespace {

using tir::Expr;
using tir::ExprKind;

bool data_ok(const LowerContext& ctx) {
  return ctx.has_input(0) && lower::supported_dtype(ctx.in_dtype(0)) && ctx.out_dtype() == ctx.in_dtype(0);
}

te::Tensor make(const LowerContext& ctx, const std::function<Expr(const std::vector<Expr>&)>& f) {
  return te::compute(ctx.name("out"), ctx.out_dims(), f);
}

// a + b for offsets along an axis, folded where both are constants (a symbolic size stays symbolic).
Expr plus(const Expr& a, const Expr& b) {
  int64_t x = 0, y = 0;
  if (tir::is_const_int(a, &x) && tir::is_const_int(b, &y)) return tir::int_imm(x + y);
  if (tir::is_const_int(a, &x) && x == 0) return b;
  return a + b;
}

// Input index of a reshape for output index i. The dims are split into consecutive groups of
// equal size (e.g. [58,2 | 28 | 28] -> [116 | 28 | 28]) and each group's input index comes from
// its own output indices only: a dim kept as is maps straight through, so the schedule sees a
// contiguous inner row instead of a flat index divided per element.
// The group boundaries come from the concrete sizes, the index arithmetic from the dims as
// expressions (in_e, out_e), so that symbolic dims stay symbolic.
std::vector<Expr> reshape_index(const std::vector<int64_t>& in, const std::vector<int64_t>& out,
                                const std::vector<Expr>& in_e, const std::vector<Expr>& out_e,
                                const std::vector<Expr>& i) {
  std::vector<Expr> j(in.size());
  size_t a = 0, b = 0;
  while (a < in.size() || b < out.size()) {
    const size_t a0 = a, b0 = b;
    int64_t pi = 1, po = 1;
    if (a < in.size()) pi *= in[a++];
    if (b < out.size()) po *= out[b++];
    while (pi != po) {
      if (pi < po && a < in.size()) pi *= in[a++];
      else if (po < pi && b < out.size()) po *= out[b++];
      else break;
    }
    if (pi != po) {  // no group boundary found (zero-size dims): one group for the rest
      while (a < in.size()) ++a;
      while (b < out.size()) ++b;
    }
    if (a - a0 == 1 && b - b0 == 1 && in[a0] == out[b0]) {
      j[a0] = i[b0];
      continue;
    }
    Expr flat = tir::int_imm(0);
    Expr stride = tir::int_imm(1);
    for (size_t k = b; k-- > b0;) {
      if (out[k] != 1) flat = flat + lower::mul(i[k], stride);
      stride = lower::mul(stride, out_e[k]);
    }
    size_t outermost = a0;  // the group's outermost non-1 input dim needs no modulo
    while (outermost + 1 < a && in[outermost] == 1) ++outermost;
    stride = tir::int_imm(1);
    for (size_t k = a; k-- > a0;) {
      Expr v = flat;
      int64_t c = 0;
      if (!tir::is_const_int(stride, &c) || c != 1) v = tir::floordiv(v, stride);
      if (k != outermost) v = tir::floormod(v, in_e[k]);
      j[k] = in[k] == 1 ? tir::int_imm(0) : v;
      stride = lower::mul(stride, in_e[k]);
    }
  }
  return j;
}

LowerResult reshape_lower(const LowerContext& ctx) {
  if (!data_ok(ctx)) return std::nullopt;
  const auto& in = ctx.in_shape(0);
  const auto& out = ctx.out_shape();
  if (lower::numel_of(in) != lower::numel_of(out)) return std::nullopt;
  te::Tensor x = ctx.input(0);
  return std::vector<te::Tensor>{make(ctx, [&](const std::vector<Expr>& i) {
    if (in == out) return te::access(x, i);
    return te::access(x, reshape_index(in, out, ctx.in_dims(0), ctx.out_dims(), i));
  })};
}

LowerResult transpose_lower(const LowerContext& ctx) {
  if (!data_ok(ctx)) return std::nullopt;
  size_t r = ctx.in_shape(0).size();
  std::vector<int64_t> perm = ctx.attr_ints("perm");
  if (perm.empty())
    for (size_t k = 0; k < r; ++k) perm.push_back(static_cast<int64_t>(r - 1 - k));
  if (perm.size() != r) return std::nullopt;
  te::Tensor x = ctx.input(0);
  return std::vector<te::Tensor>{make(ctx, [&](const std::vector<Expr>& i) {
    std::vector<Expr> j(r);
    for (size_t k = 0; k < r; ++k) j[static_cast<size_t>(lower::norm_axis(perm[k], static_cast<int64_t>(r)))] = i[k];
    return te::access(x, j);
  })};
}

LowerResult expand_lower(const LowerContext& ctx) {
  if (!data_ok(ctx) || ctx.in_shape(0).size() > ctx.out_shape().size()) return std::nullopt;
  te::Tensor x = ctx.input(0);
  return std::vector<te::Tensor>{make(ctx, [&](const std::vector<Expr>& i) {
    return te::access(x, lower::broadcast_index(ctx.in_shape(0), ctx.out_shape(), i));
  })};
}

LowerResult tile_lower(const LowerContext& ctx) {
  if (!data_ok(ctx) || ctx.in_shape(0).size() != ctx.out_shape().size()) return std::nullopt;
  te::Tensor x = ctx.input(0);
  const auto& in = ctx.in_shape(0);
  const std::vector<Expr> in_e = ctx.in_dims(0);
  for (int64_t d : in)
    if (d == 0) return std::nullopt;
  return std::vector<te::Tensor>{make(ctx, [&](const std::vector<Expr>& i) {
    std::vector<Expr> j;
    for (size_t k = 0; k < in.size(); ++k)
      j.push_back(in[k] == ctx.out_shape()[k] ? i[k] : tir::floormod(i[k], in_e[k]));
    return te::access(x, j);
  })};
}

LowerResult concat_lower(const LowerContext& ctx) {
  if (!data_ok(ctx)) return std::nullopt;
  int64_t r = static_cast<int64_t>(ctx.out_shape().size());
  int64_t axis = lower::norm_axis(ctx.attr_int("axis"), r);
  if (axis < 0) return std::nullopt;
  std::vector<int> parts;  // non-empty inputs
  for (int k = 0; k < ctx.num_inputs(); ++k) {
    if (!ctx.has_input(k) || ctx.in_dtype(k) != ctx.in_dtype(0)) return std::nullopt;
    if (static_cast<int64_t>(ctx.in_shape(k).size()) != r) return std::nullopt;
    if (ctx.in_shape(k)[static_cast<size_t>(axis)] > 0) parts.push_back(k);
  }
  if (parts.empty()) return std::nullopt;
  return std::vector<te::Tensor>{make(ctx, [&](const std::vector<Expr>& i) {
    // The last part is the default; earlier parts are chosen by the axis index. Indices are
    // clamped so that the loads of the parts not chosen stay in bounds.
    // Offsets and lengths along the axis as expressions (a symbolic axis stays symbolic).
    std::vector<Expr> offsets;
    Expr off = tir::int_imm(0);
    for (int k : parts) {
      offsets.push_back(off);
      off = plus(off, ctx.in_dims(k)[static_cast<size_t>(axis)]);
    }
    Expr ia = i[static_cast<size_t>(axis)];
    Expr value;
    for (size_t p = parts.size(); p-- > 0;) {
      Expr len = ctx.in_dims(parts[p])[static_cast<size_t>(axis)];
      std::vector<Expr> j = i;
      Expr local = tir::is_const_int(offsets[p]) && offsets[p]->int_value == 0 ? ia : ia - offsets[p];
      if (parts.size() > 1) local = tir::max(tir::min(local, plus(len, tir::int_imm(-1))), tir::int_imm(0));
      j[static_cast<size_t>(axis)] = local;
      Expr v = te::access(ctx.input(parts[p]), j);
      value = value ? tir::select(tir::binary(ExprKind::kLT, ia, plus(offsets[p], len)), v, value) : v;
    }
    return value;
  })};
}

// Slice with constant starts (steps and axes constant too); ends only shape the output.
// Output k of a Split reads the input from the axis offset the outputs before it cover. Their
// sizes are the bound output shapes, so the `split` input or attribute, num_outputs and the equal
// split all come to the same. An omitted output declines (the reference kernel runs it).
LowerResult split_lower(const LowerContext& ctx) {
  if (!data_ok(ctx)) return std::nullopt;
  const size_t r = ctx.in_shape(0).size();
  const int64_t axis = lower::norm_axis(ctx.attr_int("axis", 0), static_cast<int64_t>(r));
  if (axis < 0) return std::nullopt;
  const te::Tensor& x = ctx.input(0);
  std::vector<te::Tensor> outs;
  Expr offset = tir::int_imm(0);
  for (size_t k = 0; k < ctx.output_shapes.size(); ++k) {
    const int out = static_cast<int>(k);
    if (ctx.out_shape(out).size() != r || ctx.out_dtype(out) != ctx.in_dtype(0)) return std::nullopt;
    outs.push_back(te::compute(ctx.name("out" + std::to_string(k)), ctx.out_dims(out), [&](const std::vector<Expr>& i) {
      std::vector<Expr> j = i;
      if (!tir::is_const_int(offset) || offset->int_value != 0) j[static_cast<size_t>(axis)] = i[static_cast<size_t>(axis)] + offset;
      return te::access(x, j);
    }));
    offset = plus(offset, ctx.out_dims(out)[static_cast<size_t>(axis)]);
  }
  return outs;
}

LowerResult slice_lower(const LowerContext& ctx) {
  if (!data_ok(ctx)) return std::nullopt;
  const auto& in = ctx.in_shape(0);
  int64_t r = static_cast<int64_t>(in.size());
  std::vector<int64_t> starts, axes, steps;
  if (ctx.opset() < 10) {
    starts = ctx.attr_ints("starts");
    axes = ctx.attr_ints("axes");
  } else {
    auto s = ctx.constant_ints(1);
    if (!s) return std::nullopt;
    starts = *s;
    if (ctx.has_input(3)) {
      auto a = ctx.constant_ints(3);
      if (!a) return std::nullopt;
      axes = *a;
    }
    if (ctx.has_input(4)) {
      auto st = ctx.constant_ints(4);
      if (!st) return std::nullopt;
      steps = *st;
    }
  }
  if (axes.empty())
    for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size()) return std::nullopt;
  std::vector<int64_t> begin(static_cast<size_t>(r), 0), step(static_cast<size_t>(r), 1);
  for (size_t k = 0; k < axes.size(); ++k) {
    int64_t a = lower::norm_axis(axes[k], r);
    if (a < 0 || steps[k] == 0) return std::nullopt;
    int64_t d = in[static_cast<size_t>(a)], s = starts[k];
    if (s < 0) s += d;
    s = steps[k] > 0 ? std::clamp<int64_t>(s, 0, d) : std::clamp<int64_t>(s, 0, d - 1);
    begin[static_cast<size_t>(a)] = s;
    step[static_cast<size_t>(a)] = steps[k];
  }
  te::Tensor x = ctx.input(0);
  return std::vector<te::Tensor>{make(ctx, [&](const std::vector<Expr>& i) {
    std::vector<Expr> j;
    for (size_t k = 0; k < in.size(); ++k) {
      Expr e = i[k];
      if (step[k] != 1) e = e * step[k];
      if (begin[k] != 0) e = e + begin[k];
      j.push_back(e);
    }
    return te::access(x, j);
  })};
}

LowerResult gather_lower(const LowerContext& ctx) {
  if (!data_ok(ctx) || !ctx.has_input(1)) return std::nullopt;
  DType it = ctx.in_dtype(1);
  if (it != DType::kInt64 && it != DType::kInt32) return std::nullopt;
  const auto& in = ctx.in_shape(0);
  int64_t axis = lower::norm_axis(ctx.attr_int("axis", 0), static_cast<int64_t>(in.size()));
  if (axis < 0 || in[static_cast<size_t>(axis)] == 0) return std::nullopt;
  size_t q = ctx.in_shape(1).size();
  int64_t d = in[static_cast<size_t>(axis)];
  // Rank-0 indices arrive as shape [1] (see LowerContext): the output then has rank in - 1.
  bool scalar_index = ctx.out_shape().size() + 1 == in.size() && lower::numel_of(ctx.in_shape(1)) == 1;
  if (scalar_index) q = 0;
  else if (ctx.out_shape().size() != in.size() - 1 + q) return std::nullopt;
  te::Tensor x = ctx.input(0), idx = ctx.input(1);
  return std::vector<te::Tensor>{make(ctx, [&](const std::vector<Expr>& i) {
    std::vector<Expr> ii(i.begin() + axis, i.begin() + axis + static_cast<int64_t>(q));
    if (scalar_index) ii.assign(ctx.in_shape(1).size(), tir::int_imm(0));
    Expr g = te::access(idx, ii);
    if (it != DType::kInt64) g = tir::cast(tir::i64(), g);
    const Expr d_e = ctx.in_dims(0)[static_cast<size_t>(axis)];
    g = tir::select(tir::binary(ExprKind::kLT, g, tir::int_imm(0)), g + d_e, g);
    g = tir::max(tir::min(g, tir::is_const_int(d_e) ? tir::int_imm(d - 1) : d_e - 1), tir::int_imm(0));
    std::vector<Expr> j(i.begin(), i.begin() + axis);
    j.push_back(g);
    j.insert(j.end(), i.begin() + axis + static_cast<int64_t>(q), i.end());
    return te::access(x, j);
  })};
}

// The source index along an axis of size n for the out-of-range position e of a non-constant
// Pad mode (the reference kernel's rules, ops/pad.cc).
Expr pad_source(const std::string& mode, Expr e, int64_t n) {
  if (mode == "edge" || n == 1) return tir::max(tir::min(e, tir::int_imm(n - 1)), tir::int_imm(0));
  if (mode == "wrap") return tir::floormod(e, tir::int_imm(n));
  // reflect without repeating the edge: period 2(n-1)
  const int64_t period = 2 * (n - 1);
  Expr c = tir::floormod(e, tir::int_imm(period));
  return tir::select(tir::binary(ExprKind::kGE, c, tir::int_imm(n)), tir::int_imm(period) - c, c);
}

LowerResult pad_lower(const LowerContext& ctx) {
  const std::string mode = ctx.attr_string("mode", "constant");
  if (!data_ok(ctx) || (mode != "constant" && mode != "edge" && mode != "reflect" && mode != "wrap"))
    return std::nullopt;
  const auto& in = ctx.in_shape(0);
  int64_t r = static_cast<int64_t>(in.size());
  std::vector<int64_t> pads;
  double value = 0;
  std::vector<int64_t> axes;
  if (ctx.opset() < 11) {
    pads = ctx.attr_ints("pads");
    value = ctx.attr_float("value", 0.f);
  } else {
    auto p = ctx.constant_ints(1);
    if (!p) return std::nullopt;
    pads = *p;
    if (ctx.has_input(2)) {
      const Tensor* v = ctx.constant(2);
      if (!v || v->numel() != 1) return std::nullopt;
      value = v->get_double(0);
    }
    if (ctx.has_input(3)) {
      auto a = ctx.constant_ints(3);
      if (!a) return std::nullopt;
      axes = *a;
    }
  }
  if (axes.empty())
    for (int64_t k = 0; k < r; ++k) axes.push_back(k);
  if (pads.size() != 2 * axes.size()) return std::nullopt;
  std::vector<int64_t> before(static_cast<size_t>(r), 0);
  for (size_t k = 0; k < axes.size(); ++k) {
    int64_t a = lower::norm_axis(axes[k], r);
    if (a < 0) return std::nullopt;
    before[static_cast<size_t>(a)] = pads[k];
  }
  for (int64_t d : in)
    if (d == 0) return std::nullopt;
  DType dt = ctx.in_dtype(0);
  te::Tensor x = ctx.input(0);
  return std::vector<te::Tensor>{make(ctx, [&](const std::vector<Expr>& i) {
    Expr inside;
    std::vector<Expr> j;
    for (size_t k = 0; k < in.size(); ++k) {
      Expr e = before[k] != 0 ? i[k] - before[k] : i[k];
      bool may_leave = before[k] > 0 || ctx.out_shape()[k] - before[k] > in[k];
      if (may_leave && mode != "constant") {
        e = pad_source(mode, e, in[k]);
      } else if (may_leave) {
        Expr ok = tir::binary(ExprKind::kAnd, tir::binary(ExprKind::kGE, e, tir::int_imm(0)),
                              tir::binary(ExprKind::kLT, e, tir::int_imm(in[k])));
        inside = inside ? tir::binary(ExprKind::kAnd, inside, ok) : ok;
        e = tir::max(tir::min(e, tir::int_imm(in[k] - 1)), tir::int_imm(0));
      }
      j.push_back(e);
    }
    Expr v = te::access(x, j);
    return inside ? tir::select(inside, v, lower::constant(dt, value)) : v;
  })};
}

}  // namespace

void add_injective_lowerings(std::vector<LoweringEntry>& t) {
  for (const char* op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze"}) t.push_back({"", op, reshape_lower});
  t.push_back({"", "Transpose", transpose_lower});
  t.push_back({"", "Expand", expand_lower});
  t.push_back({"", "Tile", tile_lower});
  t.push_back({"", "Concat", concat_lower});
  t.push_back({"", "Slice", slice_lower});
  t.push_back({"", "Split", split_lower});
  t.push_back({"", "Gather", gather_lower});
  t.push_back({"", "Pad", pad_lower});
}

}  // namespace kiln
