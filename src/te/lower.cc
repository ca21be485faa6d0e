// lower(): a Schedule to one TIR PrimFunc. Stages are emitted producers first; each stage's loop
// nest follows its leaf order, root axes are recovered from the leaves through the split/fuse
// relations (split: i = outer*factor + inner, guarded by `i < extent` when the factor does not
// divide), reductions become an init nest (over the spatial loops under the first reduction
// loop) and an accumulate nest. compute_at stages are emitted inside their consumer's loop over
// the region the consumer reads per iteration (interval bounds of its index expressions), into a
// buffer shrunk to that region. Then the tir passes run. Tests: tests/te/test_te.cc.
#include <algorithm>
#include <set>

#include "core/error.h"
#include "te/te_internal.h"
#include "tir/passes.h"
#include "tir/rewrite.h"
#include "tir/simplify.h"

namespace kiln::te {
namespace {

using detail::Interval;
using detail::simplify_expr;
using tir::ExprNode;

[[noreturn]] void fail(const std::string& msg) { throw Error(ErrorKind::kUsage, "te lower: " + msg); }

// a / f when a is provably a multiple of f: a constant multiple, or a product with such a
// factor (a fused symbolic dim times 768 split by 16). nullptr otherwise.
Expr exact_div(const Expr& a, int64_t f) {
  int64_t c = 0;
  if (tir::is_const_int(a, &c)) return c % f == 0 ? tir::int_imm(c / f) : nullptr;
  if (a->kind != tir::ExprKind::kMul) return nullptr;
  for (int side : {1, 0}) {
    if (Expr q = exact_div(a->operands[static_cast<size_t>(side)], f)) {
      int64_t one = 0;
      if (tir::is_const_int(q, &one) && one == 1) return a->operands[static_cast<size_t>(1 - side)];
      return side == 1 ? a->operands[0] * q : q * a->operands[1];
    }
  }
  return nullptr;
}

Expr ceil_div(const Expr& a, int64_t f) {
  if (Expr q = exact_div(a, f)) return simplify_expr(q);
  return simplify_expr(tir::floordiv(a + (f - 1), tir::int_imm(f)));
}

// A stage's buffer replaced by a region-sized one: access index d becomes idx[d] - offset[d].
struct Shrunk {
  tir::Buffer buffer;
  std::vector<Expr> offsets;
};

struct Lowerer {
  Schedule::Impl& impl;
  std::vector<Stage*> order;  // non-inlined stages, producers first
  std::map<const tir::BufferNode*, Shrunk> shrunk;

  // The buffer `s` writes (before shrinking).
  static tir::Buffer buffer(const Stage& s) { return detail::buffer_of(s.tensor); }

  Expr rewrite_shrunk(const Expr& e) const {
    return detail::rewrite_loads(e, [&](const Expr& load) -> Expr {
      auto it = shrunk.find(load->buffer.get());
      if (it == shrunk.end()) return load;
      std::vector<Expr> idx;
      for (size_t d = 0; d < load->operands.size(); ++d)
        idx.push_back(simplify_expr(load->operands[d] - it->second.offsets[d]));
      return tir::load(it->second.buffer, idx);
    });
  }

  tir::Stmt make_store(const tir::Buffer& b, const std::vector<Expr>& idx, const Expr& v) const {
    auto it = shrunk.find(b.get());
    if (it == shrunk.end()) return tir::store(b, idx, rewrite_shrunk(v));
    std::vector<Expr> li;
    for (size_t d = 0; d < idx.size(); ++d) li.push_back(simplify_expr(idx[d] - it->second.offsets[d]));
    return tir::store(it->second.buffer, li, rewrite_shrunk(v));
  }

  std::vector<Stage*> consumers(const Stage& p) const {
    std::vector<Stage*> out;
    for (Stage* s : order) {
      if (s == &p) continue;
      for (const Tensor& t : detail::tensors_read(s->body))
        if (t == p.tensor) out.push_back(s);
    }
    return out;
  }

  std::vector<Stage*> attached_at(const Stage& c, const std::string& loop) const {
    std::vector<Stage*> out;
    for (Stage* s : order)
      if (s->attach_stage == c.name && s->attach_loop == loop) out.push_back(s);
    return out;
  }

  // Emits stage `s`; `region_min`/`region_ext` are set when it is computed at a consumer loop.
  tir::Stmt emit(Stage& s, const std::vector<Expr>* region_min, const std::vector<Expr>* region_ext);
};

tir::Stmt Lowerer::emit(Stage& s, const std::vector<Expr>* region_min, const std::vector<Expr>* region_ext) {
  // S1: extents of every loop, from the root axes through the relations.
  std::map<std::string, Expr> ext;
  for (size_t d = 0; d < s.axes.size(); ++d)
    ext["i" + std::to_string(d)] = region_ext ? (*region_ext)[d] : s.axes[d]->extent;
  for (size_t d = 0; d < s.reduce_axes.size(); ++d) ext["r" + std::to_string(d)] = s.reduce_axes[d]->extent;
  for (const Relation& r : s.relations) {
    if (r.kind == Relation::kSplit) {
      ext[r.outer] = ceil_div(ext[r.parent], r.factor);
      ext[r.inner] = tir::int_imm(r.factor);
    } else if (r.kind == Relation::kFuse) {
      ext[r.fused] = simplify_expr(ext[r.outer] * ext[r.inner]);
    }
  }
  // S2: values of every loop from the leaves, plus guards for non-dividing splits.
  std::map<std::string, Expr> val;
  for (const std::string& l : s.leaves) val[l] = s.loops.at(l).var;
  std::vector<Expr> spatial_guards, reduce_guards;
  for (auto it = s.relations.rbegin(); it != s.relations.rend(); ++it) {
    const Relation& r = *it;
    if (r.kind == Relation::kSplit) {
      val[r.parent] = simplify_expr(val[r.outer] * tir::int_imm(r.factor) + val[r.inner]);
      if (!exact_div(ext[r.parent], r.factor)) {
        Expr g = tir::binary(tir::ExprKind::kLT, val[r.parent], ext[r.parent]);
        (s.loops.at(r.parent).reduce ? reduce_guards : spatial_guards).push_back(g);
      }
    } else if (r.kind == Relation::kFuse) {
      val[r.outer] = tir::floordiv(val[r.fused], ext[r.inner]);
      val[r.inner] = tir::floormod(val[r.fused], ext[r.inner]);
    }
  }
  // S3: the body at the root axes' values.
  detail::VarMap root;
  std::vector<Expr> out_idx;
  for (size_t d = 0; d < s.axes.size(); ++d) {
    Expr v = val.at("i" + std::to_string(d));
    if (region_min) v = simplify_expr((*region_min)[d] + v);
    root[s.axes[d]->var.get()] = v;
    out_idx.push_back(v);
  }
  for (size_t d = 0; d < s.reduce_axes.size(); ++d)
    root[s.reduce_axes[d]->var.get()] = val.at("r" + std::to_string(d));
  const bool reducing = detail::is_reduce(s.body);
  Expr value = detail::substitute(reducing ? s.body->operands[0] : s.body, root);
  const tir::Buffer out = buffer(s);

  auto guarded = [](tir::Stmt st, const std::vector<Expr>& gs) {
    Expr c;
    for (const Expr& g : gs) c = c ? tir::binary(tir::ExprKind::kAnd, c, g) : g;
    return c ? tir::if_then_else(c, st) : st;
  };
  // Built at the innermost level, after compute_at stages above it registered their buffers.
  const ReduceOp op = reducing ? detail::reduce_op_of(s.body) : ReduceOp::kSum;
  auto make_init = [&]() {
    return guarded(make_store(out, out_idx, detail::reduce_identity(op, value->type)), spatial_guards);
  };
  auto make_update = [&]() {
    if (!reducing) return guarded(make_store(out, out_idx, value), spatial_guards);
    std::vector<Expr> all = spatial_guards;
    all.insert(all.end(), reduce_guards.begin(), reduce_guards.end());
    Expr acc = tir::load(out, out_idx);
    return guarded(make_store(out, out_idx, detail::reduce_combine(op, acc, value)), all);
  };

  const size_t n = s.leaves.size();
  size_t first_reduce = n;
  for (size_t k = 0; k < n; ++k)
    if (s.loops.at(s.leaves[k]).reduce) {
      first_reduce = k;
      break;
    }
  auto loop = [&](size_t k, tir::Stmt body) {
    const LoopInfo& li = s.loops.at(s.leaves[k]);
    return tir::for_loop(li.var, tir::int_imm(0), ext.at(li.name), li.kind, std::move(body));
  };

  // S4: tensorize replaces the nest under its loop by one microkernel call.
  auto tensorized = [&](size_t k) -> tir::Stmt {
    const TensorIntrinsic* in = find_tensor_intrinsic(s.tensorize_intrinsic);
    if (!in) fail("tensorize: no tensor intrinsic named '" + s.tensorize_intrinsic + "'");
    std::vector<int64_t> got;
    std::string got_text;
    for (size_t j = k; j < n; ++j) {
      int64_t e = -1;
      tir::is_const_int(simplify_expr(ext.at(s.leaves[j])), &e);
      got.push_back(e);
      got_text += (got_text.empty() ? "" : ", ") + (e < 0 ? std::string("?") : std::to_string(e));
    }
    if (got != in->extents) {
      std::string want;
      for (int64_t e : in->extents) want += (want.empty() ? "" : ", ") + std::to_string(e);
      fail("tensorize " + s.name + " at " + s.leaves[k] + ": intrinsic '" + s.tensorize_intrinsic +
           "' expects loop extents [" + want + "] but the loops under " + s.leaves[k] + " have [" +
           got_text + "]");
    }
    if (!spatial_guards.empty() || !reduce_guards.empty())
      fail("tensorize " + s.name + ": the loops under " + s.leaves[k] + " need bound guards");
    std::map<const ExprNode*, Interval> inner;
    for (size_t j = k; j < n; ++j) {
      const LoopInfo& li = s.loops.at(s.leaves[j]);
      inner[li.var.get()] = Interval{tir::int_imm(0), tir::int_imm(got[j - k] - 1)};
    }
    auto address = [&](const tir::Buffer& b, const std::vector<Expr>& idx) {
      std::vector<Expr> mins;
      for (const Expr& i : idx) {
        auto r = detail::bound(i, inner);
        if (!r) fail("tensorize " + s.name + ": index of " + b->name + " is not analyzable");
        mins.push_back(simplify_expr(r->lo));
      }
      return tir::call("tir.address_of", tir::i64(), {rewrite_shrunk(tir::load(b, mins))});
    };
    std::vector<Expr> args{address(out, out_idx)};
    std::set<const tir::BufferNode*> seen;
    std::vector<Expr> loads;
    detail::collect_loads(value, &loads);
    for (const Expr& l : loads) {
      if (!seen.insert(l->buffer.get()).second) continue;
      args.push_back(address(l->buffer, l->operands));
    }
    for (int64_t e : got) args.push_back(tir::int_imm(e));
    // Row strides (elements) of each buffer, in the same order: its last dim's extent.
    args.push_back(simplify_expr(out->shape.back()));
    seen.clear();
    for (const Expr& l : loads)
      if (seen.insert(l->buffer.get()).second) args.push_back(simplify_expr(l->buffer->shape.back()));
    return tir::evaluate(tir::call(s.tensorize_intrinsic, tir::i32(), args));
  };

  // S5: the loop nests, with compute_at stages inside their loop.
  auto attach_here = [&](size_t k, const std::function<tir::Stmt()>& inner_fn) -> tir::Stmt {
    std::vector<Stage*> ps = attached_at(s, s.leaves[k]);
    if (ps.empty()) return inner_fn();
    std::map<const ExprNode*, Interval> below, all;
    for (size_t j = 0; j < n; ++j) {
      const LoopInfo& li = s.loops.at(s.leaves[j]);
      Interval r{tir::int_imm(0), simplify_expr(ext.at(li.name) - 1)};
      all[li.var.get()] = r;
      if (j > k) below[li.var.get()] = r;
    }
    std::vector<const tir::BufferNode*> added;
    std::vector<tir::Stmt> nests;
    std::vector<tir::Buffer> allocs;
    for (Stage* p : ps) {
      const tir::Buffer pb = buffer(*p);
      std::vector<Expr> loads;
      detail::collect_loads(value, &loads);
      std::vector<Expr> lo(pb->shape.size()), hi(pb->shape.size());
      for (const Expr& l : loads) {
        if (l->buffer != pb) continue;
        for (size_t d = 0; d < lo.size(); ++d) {
          auto r = detail::bound(l->operands[d], below);
          Interval iv = r ? *r : Interval{tir::int_imm(0), simplify_expr(pb->shape[d] - 1)};
          lo[d] = lo[d] ? tir::min(lo[d], iv.lo) : iv.lo;
          hi[d] = hi[d] ? tir::max(hi[d], iv.hi) : iv.hi;
        }
      }
      if (!lo.empty() && !lo[0]) fail("compute_at: " + s.name + " does not read " + p->name);
      std::vector<Expr> mins, exts, shape;
      for (size_t d = 0; d < lo.size(); ++d) {
        Expr l = simplify_expr(lo[d]), h = simplify_expr(hi[d]);
        const Expr last = simplify_expr(pb->shape[d] - 1);
        auto diff = detail::const_difference(h, l);
        shape.push_back(diff ? tir::int_imm(*diff + 1) : pb->shape[d]);
        // Clamp to the producer's extent unless the bound over all consumer loops stays inside.
        int64_t c = 0;
        auto lall = detail::bound(l, all);
        if (!(lall && tir::is_const_int(simplify_expr(lall->lo), &c) && c >= 0)) l = tir::max(l, tir::int_imm(0));
        auto hall = detail::bound(h, all);
        int64_t e = 0;
        if (!(hall && tir::is_const_int(simplify_expr(hall->hi), &c) && tir::is_const_int(last, &e) && c <= e))
          h = tir::min(h, last);
        mins.push_back(simplify_expr(l));
        exts.push_back(simplify_expr(h - l + 1));
      }
      bool const_shape = true;
      for (const Expr& d : shape) const_shape = const_shape && tir::is_const_int(d);
      const tir::Buffer nb = tir::make_buffer(pb->name, pb->dtype, shape, const_shape ? "local" : pb->scope);
      shrunk[pb.get()] = Shrunk{nb, mins};
      added.push_back(pb.get());
      allocs.push_back(nb);
      nests.push_back(emit(*p, &mins, &exts));
    }
    nests.push_back(inner_fn());
    tir::Stmt body = tir::seq(nests);
    for (auto it = allocs.rbegin(); it != allocs.rend(); ++it) body = tir::allocate(*it, body);
    for (const tir::BufferNode* b : added) shrunk.erase(b);
    return body;
  };

  std::function<tir::Stmt(size_t)> build_init = [&](size_t k) -> tir::Stmt {
    if (k == n) return make_init();
    if (s.loops.at(s.leaves[k]).reduce) return build_init(k + 1);
    return loop(k, build_init(k + 1));
  };
  std::function<tir::Stmt(size_t)> build_update = [&](size_t k) -> tir::Stmt {
    if (k == n) return make_update();
    if (!s.tensorize_loop.empty() && s.leaves[k] == s.tensorize_loop) return tensorized(k);
    return loop(k, attach_here(k, [&] { return build_update(k + 1); }));
  };
  std::function<tir::Stmt(size_t)> build = [&](size_t k) -> tir::Stmt {
    if (k == first_reduce && reducing) {
      if (!s.tensorize_loop.empty()) {
        // A microkernel that covers the start of the reduction initializes its output itself.
        for (size_t j = 0; j <= k; ++j)
          if (s.leaves[j] == s.tensorize_loop) return build_update(k);
      }
      return tir::seq({build_init(k), build_update(k)});
    }
    if (k == n) return make_update();
    if (!s.tensorize_loop.empty() && s.leaves[k] == s.tensorize_loop) return tensorized(k);
    return loop(k, attach_here(k, [&] { return build(k + 1); }));
  };
  return build(0);
}

void collect_shape_vars(const std::vector<Expr>& shape, std::vector<Expr>* out) {
  for (const Expr& d : shape) detail::collect_vars(d, out);
}

}  // namespace

tir::PrimFunc lower(const Schedule& sched, const std::vector<Tensor>& args, const std::string& name) {
  return lower(sched, args, name, LowerOptions{});
}

tir::PrimFunc lower(const Schedule& sched, const std::vector<Tensor>& args, const std::string& name,
                    const LowerOptions& options) {
  Schedule::Impl& impl = sched.impl();
  Lowerer lw{impl, {}, {}};

  // S1: the stages to emit, producers first.
  std::map<const TensorNode*, Stage*> by_tensor;
  for (Stage& s : impl.stages)
    if (!s.inlined) by_tensor[s.tensor.get()] = &s;
  std::set<Stage*> done, visiting;
  std::function<void(Stage*)> visit = [&](Stage* s) {
    if (done.count(s)) return;
    if (!visiting.insert(s).second) fail("cyclic dependency at stage " + s->name);
    for (const Tensor& t : detail::tensors_read(s->body)) {
      auto it = by_tensor.find(t.get());
      if (it != by_tensor.end()) visit(it->second);
    }
    done.insert(s);
    lw.order.push_back(s);
  };
  for (Stage& s : impl.stages)
    if (!s.inlined) visit(&s);

  // S2: check compute_at targets.
  for (Stage* s : lw.order) {
    if (s->attach_stage.empty()) continue;
    Stage* target = nullptr;
    for (Stage* t : lw.order)
      if (t->name == s->attach_stage) target = t;
    if (!target) fail(s->name + " is computed at " + s->attach_stage + ", which is inlined");
    if (std::find(target->leaves.begin(), target->leaves.end(), s->attach_loop) == target->leaves.end())
      fail(s->name + " is computed at loop " + s->attach_loop + " of " + target->name +
           ", which is no longer a loop of its nest");
    std::vector<Stage*> cs = lw.consumers(*s);
    if (cs.size() != 1 || cs[0] != target)
      fail("compute_at: " + s->name + " must be read only by " + target->name);
  }

  // S3: buffers and params.
  tir::PrimFunc f;
  f.name = name;
  std::set<const TensorNode*> in_args;
  for (const Tensor& t : args) {
    f.buffer_params.push_back(detail::buffer_of(t));
    in_args.insert(t.get());
  }
  for (Stage* s : lw.order)
    for (const Tensor& t : detail::tensors_read(s->body))
      if (t->kind == OpKind::kPlaceholder && !in_args.count(t.get()))
        fail("placeholder " + t->name + " read by " + s->name + " is not in the args");
  std::vector<Expr> vars;
  for (const Tensor& t : args) collect_shape_vars(t->shape, &vars);
  for (Stage* s : lw.order) {
    collect_shape_vars(s->tensor->shape, &vars);
    for (const IterVar& r : s->reduce_axes) detail::collect_vars(r->extent, &vars);
  }
  f.scalar_params = vars;

  // S4: the body, root stages in dependency order; intermediates allocated around it all.
  std::vector<tir::Stmt> stmts;
  std::vector<tir::Buffer> allocs;
  for (Stage* s : lw.order) {
    if (!s->attach_stage.empty()) continue;
    stmts.push_back(lw.emit(*s, nullptr, nullptr));
    if (!in_args.count(s->tensor.get())) allocs.push_back(Lowerer::buffer(*s));
  }
  tir::Stmt body = tir::seq(stmts);
  for (auto it = allocs.rbegin(); it != allocs.rend(); ++it) body = tir::allocate(*it, body);
  f.body = body;
  if (!options.run_passes) return f;
  // S5: the tir pipeline (order from tir/passes.h).
  f = tir::flatten_storage(f);
  f = tir::simplify(f);
  f = tir::localize_accumulators(f);
  f = tir::vectorize_reductions(f);
  f = tir::partition_loops(f);
  f = tir::vectorize_loops(f);
  f = tir::localize_accumulators(f, /*vectors_only=*/true);  // the vector accumulations vectorizing made
  f = tir::unroll_loops(f);
  f = tir::fuse_loops(f);
  f = tir::localize_row_buffers(f);
  f = tir::simplify(f);
  return f;
}

}  // namespace kiln::te
