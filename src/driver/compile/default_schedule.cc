// The default schedule rules of generated kernels (the target's rules; tuned records later):
// inlining, loop fusion, vectorization, parallel loops, row-wise materialization. See
// lower_with_default_schedule in plan_builder.h.
#include <cstdlib>
#include <algorithm>
#include <functional>
#include <unordered_set>

#include "driver/compile/plan_builder.h"
#include "tir/rewrite.h"

namespace kiln::compile {
namespace {

// Vector loads whose index is not a ramp or a broadcast (gathers: one load per lane).
int count_gathers(const tir::PrimFunc& f) {
  int n = 0;
  tir::visit_exprs(f.body, [&](const tir::Expr& e) {
    if (e->kind != tir::ExprKind::kLoad || e->type.lanes == 1 || e->operands.empty()) return;
    tir::ExprKind k = e->operands.back()->kind;
    if (k != tir::ExprKind::kRamp && k != tir::ExprKind::kBroadcast) ++n;
  });
  return n;
}

// An extent's size in this plan: constants, and dim variables at their hinted sizes (an
// expression the hints do not cover counts as 1).
int64_t hinted(const tir::Expr& e, const DimHints& hints) {
  int64_t v = 1;
  if (tir::is_const_int(e, &v)) return v;
  if (e->kind == tir::ExprKind::kVar) {
    auto it = hints.find(e.get());
    return it == hints.end() ? 1 : it->second;
  }
  if (e->operands.size() == 2) {
    const int64_t a = hinted(e->operands[0], hints), b = hinted(e->operands[1], hints);
    switch (e->kind) {
      case tir::ExprKind::kAdd: return a + b;
      case tir::ExprKind::kSub: return a - b;
      case tir::ExprKind::kMul: return a * b;
      case tir::ExprKind::kFloorDiv: return b != 0 ? a / b : 1;
      case tir::ExprKind::kMin: return std::min(a, b);
      case tir::ExprKind::kMax: return std::max(a, b);
      default: break;
    }
  }
  return 1;
}

// The product of the extents es[from, to) at their sizes in this plan.
int64_t const_product(const std::vector<tir::Expr>& es, const DimHints& hints, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t n = 1;
  for (size_t k = from; k < std::min(to, es.size()); ++k) n *= hinted(es[k], hints);
  return n;
}

// Spatial elements times reduce iterations of compute t: the work its loop nest does.
int64_t compute_work(const te::Tensor& t, const DimHints& hints) {
  std::vector<tir::Expr> extents;
  for (const auto& ax : t->reduce_axes) extents.push_back(ax->extent);
  return const_product(t->shape, hints) * const_product(extents, hints);
}

// Fuses the loops <prefix><from> .. <prefix><to - 1> of `stage` (adjacent, in order) into one and
// returns its name ("i0.i1.fused.i2.fused", ...; the loop itself when to == from + 1).
std::string fuse_axes(te::Schedule& s, const std::string& stage, const std::string& prefix, size_t from, size_t to) {
  std::string loop = prefix + std::to_string(from);
  for (size_t k = from + 1; k < to; ++k) {
    s.fuse(stage, loop, prefix + std::to_string(k));
    loop += "." + prefix + std::to_string(k) + ".fused";
  }
  return loop;
}

// Integer divisions and modulos in f's indices (a fused loop whose index does not recombine).
int count_divmods(const tir::PrimFunc& f) {
  int n = 0;
  tir::visit_exprs(f.body, [&](const tir::Expr& e) {
    n += e->kind == tir::ExprKind::kFloorDiv || e->kind == tir::ExprKind::kFloorMod;
  });
  return n;
}

// Divisions and modulos by a dim variable (a real division at run time, where one by a constant
// is a multiply) of an index that varies in the innermost loop around its store: one per
// vector, not hoisted out by LLVM.
int count_inner_variable_divmods(const tir::PrimFunc& f) {
  int n = 0;
  std::vector<const tir::ExprNode*> loops;
  std::function<void(const tir::Stmt&)> walk = [&](const tir::Stmt& s) {
    if (!s) return;
    if (s->kind == tir::StmtKind::kFor) {
      loops.push_back(s->var.get());
      walk(s->body);
      loops.pop_back();
      return;
    }
    if (s->kind == tir::StmtKind::kStore && !loops.empty()) {
      auto count = [&](const tir::Expr& e) {
        if ((e->kind == tir::ExprKind::kFloorDiv || e->kind == tir::ExprKind::kFloorMod) &&
            !tir::is_const_int(e->operands[1]) && tir::uses_var(e->operands[0], loops.back()))
          ++n;
      };
      for (const tir::Expr& i : s->indices) tir::visit_exprs(i, count);
      tir::visit_exprs(s->value, count);
      return;
    }
    tir::map_stmt(s, [](const tir::Expr& e) { return e; }, [&](const tir::Stmt& x) {
      walk(x);
      return x;
    });
  };
  walk(f.body);
  return n;
}

}  // namespace

// 16 on every target: 8 on AVX2 (one ymm per step) and 32 on AVX-512 (two zmm) measured no
// better (1 thread, kiln bench against ONNX Runtime on BERT-like, ViT-B/16, MobileNetV3-small,
// EfficientNet-B0, ShuffleNetV2: within +-4%, either way). KILN_SCHEDULE_LANES overrides it (A/B runs).
int schedule_lanes() {
  static const int lanes = [] {
    const char* e = std::getenv("KILN_SCHEDULE_LANES");
    return e && std::atoi(e) > 0 ? std::atoi(e) : 16;
  }();
  return lanes;
}

tir::PrimFunc lower_with_default_schedule(const std::vector<te::Tensor>& out_tensors,
                                          const std::vector<te::Tensor>& computes, const std::vector<te::Tensor>& args,
                                          const std::string& name, bool schedule, int lanes, const DimHints& hints) {
  // Default schedule rules. kFlat: fuse all loops of an elementwise/injective output,
  // vectorize by 16, parallel outer when large; reductions: fuse the spatial loops and run
  // them in parallel when there is work. kRows: fuse the outer loops into one parallel loop
  // and vectorize the trailing loops (at least 16 elements) with a tail; picked when the flat
  // vector loop would gather (Concat, Slice, Pad over small inner dims: per-lane index
  // division) and the rows form gathers less. Either way a small-window reduction (pooling)
  // vectorizes its last output axis with the reduce loops outside the vector loop, and
  // intermediate reductions (Softmax, LayerNorm) run their fused spatial loop in parallel.
  // fuse_reduce: a reduction over several axes runs them as one loop (GlobalAveragePool's
  // H x W: one vector accumulation over the plane instead of a reduction tree per row).
  enum class Rules { kNone, kFlat, kRows };
  // Intermediates with a transcendental call (exp, ...) read by two or more stages are computed
  // once into a buffer instead of inlined into each reader (Softmax's exp feeds both its sum
  // and its output): row-wise like the rows schedule, so that the per-row loops fuse.
  std::unordered_set<const te::TensorNode*> materialized;
  for (const auto& t : computes) {
    const bool is_out = std::any_of(out_tensors.begin(), out_tensors.end(),
                                    [&](const te::Tensor& o) { return o.get() == t.get(); });
    if (is_out || !t->reduce_axes.empty() || t->shape.size() < 2) continue;
    bool costly = false;
    tir::visit_exprs(t->body, [&](const tir::Expr& e) {
      costly |= e->kind == tir::ExprKind::kCall && (e->name == "exp" || e->name == "log" || e->name == "erf" ||
                                                    e->name == "tanh" || e->name == "pow");
    });
    int readers = 0;
    for (const auto& u : computes)
      for (const auto& in : u->inputs) readers += in.get() == t.get();
    if (costly && readers >= 2) materialized.insert(t.get());
  }
  auto build = [&](Rules rules, bool fuse_reduce = false) {
    te::Schedule s(out_tensors);
    std::unordered_set<const te::TensorNode*> outs;
    for (auto& t : out_tensors) outs.insert(t.get());
    for (const auto& t : computes)
      if (!outs.count(t.get()) && t->reduce_axes.empty() && !materialized.count(t.get())) s.compute_inline(t->name);
    if (rules != Rules::kNone)
      for (const auto& t : out_tensors) {
        size_t r = t->shape.size();
        if (r == 0) continue;
        std::vector<int64_t> dims;
        for (size_t k = 0; k < r; ++k) dims.push_back(const_product(t->shape, hints, k, k + 1));
        const int64_t n = const_product(t->shape, hints), work = compute_work(t, hints);
        bool par = work >= (1 << 15) && n >= 2;
        auto fuse_range = [&](size_t from, size_t to) { return fuse_axes(s, t->name, "i", from, to); };
        if (rules == Rules::kRows && t->reduce_axes.empty()) {
          size_t split = r;
          int64_t inner = 1;
          while (split > 1 && inner < lanes) inner *= dims[--split];
          if (split == 0 || inner < lanes) continue;
          std::string outer = fuse_range(0, split), row = fuse_range(split, r);
          s.split(t->name, row, lanes);
          s.vectorize(t->name, row + ".inner");
          if (par) s.parallel(t->name, outer);
          continue;
        }
        if (!t->reduce_axes.empty() && r >= 2 && dims[r - 1] >= 4 && work / n <= 64) {
          // A small-window reduction (pooling): the reduce loops go outside a vector loop
          // along the last output axis, so each tap is one vector op for up to 16 outputs.
          std::string outer = fuse_range(0, r - 1), last = "i" + std::to_string(r - 1);
          s.split(t->name, last, std::min<int64_t>(lanes, dims[r - 1]));
          std::vector<std::string> order{outer, last + ".outer"};
          for (size_t k = 0; k < t->reduce_axes.size(); ++k) order.push_back("r" + std::to_string(k));
          order.push_back(last + ".inner");
          s.reorder(t->name, order);
          s.vectorize(t->name, last + ".inner");
          if (par) s.parallel(t->name, outer);
          continue;
        }
        // (Not for the small windows above: their reduce loops stay apart.)
        if (fuse_reduce) fuse_axes(s, t->name, "r", 0, t->reduce_axes.size());
        std::string loop = fuse_range(0, r);
        if (t->reduce_axes.empty() && n >= lanes) {
          // A size that 16 does not divide runs its last vector as a guarded tail.
          s.split(t->name, loop, lanes);
          s.vectorize(t->name, loop + ".inner");
          if (par && n >= 32) s.parallel(t->name, loop + ".outer");
        } else if (par) {
          s.parallel(t->name, loop);
        }
      }
    if (rules != Rules::kNone)
      for (const auto& t : computes) {
        if (!materialized.count(t.get())) continue;
        const size_t r = t->shape.size();
        const int64_t last = const_product(t->shape, hints, r - 1), rows = const_product(t->shape, hints, 0, r - 1);
        const std::string loop = fuse_axes(s, t->name, "i", 0, r - 1), inner = "i" + std::to_string(r - 1);
        if (last >= lanes) {
          s.split(t->name, inner, lanes);
          s.vectorize(t->name, inner + ".inner");
        }
        if (rows * last >= (1 << 15) && rows >= 2) s.parallel(t->name, loop);
      }
    if (rules != Rules::kNone)
      for (const auto& t : computes) {
        // Intermediate reductions (Softmax's max and sum, LayerNorm's mean and variance):
        // their spatial loops fused and parallel when there is work.
        if (outs.count(t.get()) || t->reduce_axes.empty() || t->shape.size() < 2) continue;
        const int64_t n = const_product(t->shape, hints);
        const std::string loop = fuse_axes(s, t->name, "i", 0, t->shape.size());
        if (fuse_reduce) fuse_axes(s, t->name, "r", 0, t->reduce_axes.size());
        if (compute_work(t, hints) >= (1 << 15) && n >= 2) s.parallel(t->name, loop);
      }
    return te::lower(s, args, name);
  };
  tir::PrimFunc f;
  try {
    f = build(schedule ? Rules::kFlat : Rules::kNone);
    if (schedule && count_gathers(f) > 0) {
      tir::PrimFunc rows = build(Rules::kRows);
      if (count_gathers(rows) < count_gathers(f)) f = std::move(rows);
    } else if (schedule && count_inner_variable_divmods(f) > 0) {
      // A flat loop over symbolic dims whose index does not recombine divides by a dim variable
      // per vector (a transpose of [batch, seq, heads, 64]): rows divide once per row.
      tir::PrimFunc rows = build(Rules::kRows);
      if (count_gathers(rows) <= count_gathers(f) && count_inner_variable_divmods(rows) < count_inner_variable_divmods(f))
        f = std::move(rows);
    }
    // Multi-axis output reductions over contiguous axes: their fused reduce loop indexes
    // without division (the simplifier recombines it); others keep their loop nest.
    const bool multi_axis = std::any_of(computes.begin(), computes.end(),
                                        [](const te::Tensor& t) { return t->reduce_axes.size() > 1; });
    if (schedule && multi_axis) {
      try {
        tir::PrimFunc fused = build(Rules::kFlat, true);
        if (count_divmods(fused) <= count_divmods(f) && count_gathers(fused) <= count_gathers(f)) f = std::move(fused);
      } catch (const Error& e) {  // keep the schedule above
        log("fused-reduce schedule failed for " + name + ": " + e.what());
      }
    }
  } catch (const Error& e) {
    if (!schedule) throw;
    log("schedule rules failed for " + name + ": " + e.what());
    f = build(Rules::kNone);
  }
  return f;
}

}  // namespace kiln::compile
