// The arithmetic simplifier and bound analysis (see simplify.h). One bottom-up rewrite: operands
// are simplified first, then the node's rules apply; statements carry the bounds of the loop and
// let vars in scope so that conditions on them can be proved.
#include "tir/simplify.h"

#include <algorithm>

#include "tir/passes.h"
#include "tir/rewrite.h"
#include "tir/scalar_ops.h"

namespace kiln::tir {
namespace {

constexpr int64_t kNegInf = IntBound::kNegInf;
constexpr int64_t kPosInf = IntBound::kPosInf;

IntBound everything() { return {}; }

int64_t clamp128(__int128 v) {
  if (v <= static_cast<__int128>(kNegInf)) return kNegInf;
  if (v >= static_cast<__int128>(kPosInf)) return kPosInf;
  return static_cast<int64_t>(v);
}

// Addition where the limits act as infinities (a finite sum that reaches them saturates).
int64_t add_sat(int64_t a, int64_t b) {
  if (a == kNegInf || b == kNegInf) return kNegInf;
  if (a == kPosInf || b == kPosInf) return kPosInf;
  return clamp128(static_cast<__int128>(a) + b);
}
int64_t neg_sat(int64_t a) {
  if (a == kNegInf) return kPosInf;
  if (a == kPosInf) return kNegInf;
  return -a;
}
int64_t mul_sat(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  bool inf = a == kNegInf || a == kPosInf || b == kNegInf || b == kPosInf;
  bool neg = (a < 0) != (b < 0);
  if (inf) return neg ? kNegInf : kPosInf;
  return clamp128(static_cast<__int128>(a) * b);
}

IntBound type_range(DataType t) {
  switch (t.dtype) {
    case DType::kBool: return {0, 1};
    case DType::kInt8: return {-128, 127};
    case DType::kUInt8: return {0, 255};
    case DType::kInt16: return {-32768, 32767};
    case DType::kUInt16: return {0, 65535};
    case DType::kInt32: return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    case DType::kUInt32: return {0, std::numeric_limits<uint32_t>::max()};
    default: return everything();
  }
}

IntBound intersect(IntBound a, IntBound b) { return {std::max(a.min, b.min), std::min(a.max, b.max)}; }
IntBound unite(IntBound a, IntBound b) { return {std::min(a.min, b.min), std::max(a.max, b.max)}; }

IntBound bound_add(IntBound a, IntBound b) { return {add_sat(a.min, b.min), add_sat(a.max, b.max)}; }
IntBound bound_neg(IntBound a) { return {neg_sat(a.max), neg_sat(a.min)}; }
IntBound bound_mul(IntBound a, IntBound b) {
  int64_t c[4] = {mul_sat(a.min, b.min), mul_sat(a.min, b.max), mul_sat(a.max, b.min),
                  mul_sat(a.max, b.max)};
  return {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
}
int64_t floordiv_sat(int64_t a, int64_t c) {  // c > 0
  if (a == kNegInf || a == kPosInf) return a;
  return scalar::floor_div(a, c);
}

// Bounds of the result of an op whose value is only known to fit its type.
IntBound bound_impl(const Expr& e, const VarBounds& vb);

IntBound bound_binary(const Expr& e, const VarBounds& vb) {
  IntBound a = bound_impl(e->operands[0], vb), b = bound_impl(e->operands[1], vb);
  int64_t c = 0;
  bool c_const = b.is_point() && (c = b.min, true);
  switch (e->kind) {
    case ExprKind::kAdd: return bound_add(a, b);
    case ExprKind::kSub: return bound_add(a, bound_neg(b));
    case ExprKind::kMul: return bound_mul(a, b);
    case ExprKind::kDiv:
      if (c_const && c > 0 && a.min >= 0) return {a.min / c, a.max == kPosInf ? kPosInf : a.max / c};
      if (c_const && c > 0) return {floordiv_sat(a.min, c), a.max == kPosInf ? kPosInf : (a.max >= 0 ? a.max / c : 0)};
      return everything();
    case ExprKind::kFloorDiv:
      if (c_const && c > 0) return {floordiv_sat(a.min, c), floordiv_sat(a.max, c)};
      return everything();
    case ExprKind::kFloorMod:
      if (b.min > 0) {
        if (b.is_point() && a.min != kNegInf && a.max != kPosInf &&
            scalar::floor_div(a.min, c) == scalar::floor_div(a.max, c)) {
          int64_t q = scalar::floor_div(a.min, c) * c;
          return {a.min - q, a.max - q};
        }
        if (a.min >= 0) return {0, std::min(a.max, b.max == kPosInf ? kPosInf : b.max - 1)};
        return {0, b.max == kPosInf ? kPosInf : b.max - 1};
      }
      return everything();
    case ExprKind::kMin: return {std::min(a.min, b.min), std::min(a.max, b.max)};
    case ExprKind::kMax: return {std::max(a.min, b.min), std::max(a.max, b.max)};
    default: return {0, 1};  // comparisons and logic
  }
}

IntBound bound_impl(const Expr& e, const VarBounds& vb) {
  if (e->type.is_bool()) {
    if (e->kind == ExprKind::kIntImm) return IntBound::point(e->int_value);
    return {0, 1};
  }
  if (!e->type.is_int()) return everything();
  IntBound r;
  switch (e->kind) {
    case ExprKind::kIntImm: return IntBound::point(e->int_value);
    case ExprKind::kVar: {
      auto it = vb.find(e.get());
      r = it == vb.end() ? everything() : it->second;
      break;
    }
    case ExprKind::kAdd:
    case ExprKind::kSub:
    case ExprKind::kMul:
    case ExprKind::kDiv:
    case ExprKind::kFloorDiv:
    case ExprKind::kFloorMod:
    case ExprKind::kMin:
    case ExprKind::kMax:
      r = bound_binary(e, vb);
      break;
    case ExprKind::kSelect:
      r = unite(bound_impl(e->operands[1], vb), bound_impl(e->operands[2], vb));
      break;
    case ExprKind::kCast:
      if (e->operands[0]->type.is_int() || e->operands[0]->type.is_bool()) {
        IntBound in = bound_impl(e->operands[0], vb);
        IntBound out = type_range(e->type);
        // Only when the value fits the target type (no wrap-around).
        if (in.min >= out.min && in.max <= out.max && e->type.dtype != DType::kUInt64) return in;
      }
      r = everything();
      break;
    case ExprKind::kRamp: {
      IntBound base = bound_impl(e->operands[0], vb), stride = bound_impl(e->operands[1], vb);
      IntBound last = bound_add(base, bound_mul(stride, IntBound::point(e->type.lanes - 1)));
      r = unite(base, last);
      break;
    }
    case ExprKind::kBroadcast: r = bound_impl(e->operands[0], vb); break;
    case ExprKind::kLet: {
      VarBounds inner = vb;
      inner[e->operands[0].get()] = bound_impl(e->operands[1], vb);
      r = bound_impl(e->operands[2], inner);
      break;
    }
    default: r = everything(); break;
  }
  if (e->type.dtype == DType::kUInt64) return r.min >= 0 ? r : everything();
  return intersect(r, type_range(e->type));
}

bool is_const(const Expr& e) {
  return e->kind == ExprKind::kIntImm || e->kind == ExprKind::kFloatImm;
}
bool is_const_value(const Expr& e, int64_t v) {
  if (e->kind == ExprKind::kIntImm) return e->int_value == v;
  if (e->kind == ExprKind::kFloatImm) return e->float_value == static_cast<double>(v);
  if (e->kind == ExprKind::kBroadcast) return is_const_value(e->operands[0], v);
  return false;
}
bool is_commutative(ExprKind k) {
  return k == ExprKind::kAdd || k == ExprKind::kMul || k == ExprKind::kMin || k == ExprKind::kMax ||
         k == ExprKind::kEQ || k == ExprKind::kNE || k == ExprKind::kAnd || k == ExprKind::kOr;
}
ExprKind flip_compare(ExprKind k) {
  switch (k) {
    case ExprKind::kLT: return ExprKind::kGT;
    case ExprKind::kLE: return ExprKind::kGE;
    case ExprKind::kGT: return ExprKind::kLT;
    case ExprKind::kGE: return ExprKind::kLE;
    default: return k;
  }
}
ExprKind negate_compare(ExprKind k) {
  switch (k) {
    case ExprKind::kEQ: return ExprKind::kNE;
    case ExprKind::kNE: return ExprKind::kEQ;
    case ExprKind::kLT: return ExprKind::kGE;
    case ExprKind::kLE: return ExprKind::kGT;
    case ExprKind::kGT: return ExprKind::kLE;
    case ExprKind::kGE: return ExprKind::kLT;
    default: return k;
  }
}

Expr int_const(int64_t v, DataType t) { return int_imm(scalar::wrap_int(v, t.dtype), t.with_lanes(1)); }
Expr bool_const(bool v) { return int_imm(v ? 1 : 0, boolean()); }

// Folds `k` on two scalar constants; nullptr when not foldable.
Expr fold_binary(ExprKind k, const Expr& a, const Expr& b) {
  DType t = a->type.dtype;
  if (a->kind == ExprKind::kIntImm && b->kind == ExprKind::kIntImm) {
    int64_t r = 0;
    if (!scalar::int_binary(k, t, a->int_value, b->int_value, &r)) return nullptr;
    if (scalar::is_compare(k) || k == ExprKind::kAnd || k == ExprKind::kOr) return bool_const(r != 0);
    return int_imm(r, a->type);
  }
  if (a->kind == ExprKind::kFloatImm && b->kind == ExprKind::kFloatImm) {
    if (t != DType::kFloat32 && t != DType::kFloat64) return nullptr;
    if (scalar::is_compare(k)) return bool_const(scalar::float_compare(k, a->float_value, b->float_value));
    return float_imm(scalar::float_binary(k, t, a->float_value, b->float_value), a->type);
  }
  return nullptr;
}

Expr fold_cast(DataType to, const Expr& v) {
  DType from = v->type.dtype;
  bool int_like = v->type.is_int() || v->type.is_bool();
  if (v->kind == ExprKind::kIntImm && int_like) {
    if (to.is_int() || to.is_bool()) return int_imm(scalar::wrap_int(v->int_value, to.dtype), to);
    if (to.dtype == DType::kFloat32 || to.dtype == DType::kFloat64)
      return float_imm(scalar::int_to_float(v->int_value, from, to.dtype), to);
  }
  if (v->kind == ExprKind::kFloatImm && (from == DType::kFloat32 || from == DType::kFloat64)) {
    if (to.is_bool()) return bool_const(v->float_value != 0);
    if (to.is_int()) return int_imm(scalar::float_to_int(v->float_value, to.dtype), to);
    if (to.dtype == DType::kFloat32 || to.dtype == DType::kFloat64)
      return float_imm(scalar::round_float(v->float_value, to.dtype), to);
  }
  return nullptr;
}

// Splits an integer sum into the part that is a multiple of c (returned divided by c, or
// nullptr) and the rest (nullptr when zero).
void split_multiples(const Expr& e, int64_t c, std::vector<Expr>* quotient, std::vector<Expr>* rest) {
  if (e->kind == ExprKind::kAdd) {
    split_multiples(e->operands[0], c, quotient, rest);
    split_multiples(e->operands[1], c, quotient, rest);
    return;
  }
  int64_t k = 0;
  if (is_const_int(e, &k) && k % c == 0) {
    if (k != 0) quotient->push_back(int_const(k / c, e->type));
    return;
  }
  if (e->kind == ExprKind::kMul && is_const_int(e->operands[1], &k) && k % c == 0) {
    quotient->push_back(k / c == 1 ? e->operands[0] : e->operands[0] * int_const(k / c, e->type));
    return;
  }
  rest->push_back(e);
}

// One term of an integer sum: coef * atom.
struct SumTerm {
  Expr atom;
  int64_t coef;
};
void flatten_sum(const Expr& e, int64_t coef, std::vector<SumTerm>* terms) {
  int64_t k = 0;
  if (e->kind == ExprKind::kAdd) {
    flatten_sum(e->operands[0], coef, terms);
    flatten_sum(e->operands[1], coef, terms);
  } else if (e->kind == ExprKind::kMul && is_const_int(e->operands[1], &k) && k != 0 &&
             k < (int64_t{1} << 31) && k > -(int64_t{1} << 31)) {
    flatten_sum(e->operands[0], coef * k, terms);
  } else {
    terms->push_back({e, coef});
  }
}

// x // (c*d) with y = x // d: the floordiv by a product that a fused loop of symbolic dims gives
// for its outer index (either order of the factors).
bool divides_as_product(const Expr& q, const Expr& y, const Expr& c) {
  if (y->kind != ExprKind::kFloorDiv || q->kind != ExprKind::kFloorDiv || q->operands[1]->kind != ExprKind::kMul)
    return false;
  const Expr& p = q->operands[1];
  const Expr& d = y->operands[1];
  const bool factors = (structural_equal(p->operands[0], c) && structural_equal(p->operands[1], d)) ||
                       (structural_equal(p->operands[0], d) && structural_equal(p->operands[1], c));
  return factors && structural_equal(q->operands[0], y->operands[0]);
}

// The same recombination with a symbolic divisor c (a dim variable): k*floormod(y, c) together
// with k*(floordiv(y, c)*c) (or k*(floordiv(x, c*d)*c) where y = x // d) is k*y. Marks the
// matched terms in `terms` as recombine_divmod does; true when one matched.
bool recombine_symbolic_divmod(std::vector<SumTerm>& terms) {
  bool changed = false;
  for (size_t i = 0; i < terms.size(); ++i) {
    const Expr m = terms[i].atom;
    if (!m || m->kind != ExprKind::kFloorMod || is_const_int(m->operands[1])) continue;
    const Expr& y = m->operands[0];
    const Expr& c = m->operands[1];
    for (size_t j = 0; j < terms.size(); ++j) {
      const Expr& q = terms[j].atom;
      if (j == i || !q || q->kind != ExprKind::kMul || terms[j].coef != terms[i].coef) continue;
      bool match = false;
      for (size_t side = 0; side < 2 && !match; ++side) {
        const Expr& div = q->operands[side];
        if (div->kind != ExprKind::kFloorDiv || !structural_equal(q->operands[1 - side], c)) continue;
        match = (structural_equal(div->operands[1], c) && structural_equal(div->operands[0], y)) ||
                divides_as_product(div, y, c);
      }
      if (!match) continue;
      terms[i].atom = y;
      terms[j].atom = nullptr;
      changed = true;
      break;
    }
  }
  return changed;
}

// Undoes the split of a fused or flattened index: in a sum, k*floormod(y, c) together with
// k*c*floordiv(x, c*d) where y = floordiv(x, d) (or y = x, d = 1) is k*y. Fused loops lower to
// (i // (H*W))*W*H + (i // W % H)*W + i % W, which this folds back to i so that the
// vectorizer sees a ramp. Returns nullptr when no pair matches.
Expr recombine_divmod(const Expr& a, const Expr& b) {
  std::vector<SumTerm> terms;
  flatten_sum(a, 1, &terms);
  flatten_sum(b, 1, &terms);
  if (terms.size() < 2 || terms.size() > 64) return nullptr;
  bool changed = false;
  for (size_t i = 0; i < terms.size(); ++i) {
    const Expr& m = terms[i].atom;
    int64_t c = 0;
    if (!m || m->kind != ExprKind::kFloorMod || !is_const_int(m->operands[1], &c) || c <= 0) continue;
    const Expr& y = m->operands[0];
    Expr x = y;
    int64_t d = 1;
    if (y->kind == ExprKind::kFloorDiv && is_const_int(y->operands[1], &d) && d > 0) x = y->operands[0];
    for (size_t j = 0; j < terms.size(); ++j) {
      const Expr& q = terms[j].atom;
      int64_t qc = 0;
      if (j == i || !q || q->kind != ExprKind::kFloorDiv || !is_const_int(q->operands[1], &qc)) continue;
      if (terms[j].coef != terms[i].coef * c) continue;
      bool match = (qc == c && structural_equal(q->operands[0], y)) ||
                   (d > 1 && qc == c * d && structural_equal(q->operands[0], x));
      if (!match) continue;
      terms[i].atom = y;
      terms[j].atom = nullptr;
      changed = true;
      break;
    }
  }
  changed |= recombine_symbolic_divmod(terms);
  if (!changed) return nullptr;
  Expr sum;
  for (const SumTerm& t : terms) {
    if (!t.atom) continue;
    Expr e = t.coef == 1 ? t.atom : binary(ExprKind::kMul, t.atom, int_const(t.coef, t.atom->type));
    sum = sum ? binary(ExprKind::kAdd, sum, e) : e;
  }
  return sum;
}

class Simplifier {
 public:
  explicit Simplifier(const VarBounds& vb) : bounds_(vb) {}

  IntBound bound(const Expr& e) { return bound_impl(e, bounds_); }

  Expr mutate(const Expr& e) {
    switch (e->kind) {
      case ExprKind::kIntImm:
      case ExprKind::kFloatImm:
      case ExprKind::kVar:
        return e;
      case ExprKind::kNot: return mutate_not(mutate(e->operands[0]));
      case ExprKind::kSelect: {
        Expr c = mutate(e->operands[0]), t = mutate(e->operands[1]), f = mutate(e->operands[2]);
        Expr cs = c->kind == ExprKind::kBroadcast ? c->operands[0] : c;
        if (cs->kind == ExprKind::kIntImm) return cs->int_value ? t : f;
        if (structural_equal(t, f)) return t;
        return with_operands(e, {c, t, f});
      }
      case ExprKind::kCast: {
        Expr v = mutate(e->operands[0]);
        if (v->type == e->type) return v;
        if (Expr r = fold_cast(e->type, v)) return r;
        if (v->kind == ExprKind::kBroadcast)
          if (Expr r = fold_cast(e->type.with_lanes(1), v->operands[0]))
            return broadcast(r, e->type.lanes);
        return with_operands(e, {v});
      }
      case ExprKind::kRamp: {
        Expr base = mutate(e->operands[0]), stride = mutate(e->operands[1]);
        if (is_const_value(stride, 0)) return broadcast(base, e->type.lanes);
        return with_operands(e, {base, stride});
      }
      case ExprKind::kLet: {
        Expr var = e->operands[0];
        Expr value = mutate(e->operands[1]);
        if (is_const(value) || value->kind == ExprKind::kVar)
          return mutate(substitute(e->operands[2], var, value));
        Expr body = with_bound(var, value, [&] { return mutate(e->operands[2]); });
        if (!uses_var(body, var.get())) return body;
        return with_operands(e, {var, value, body});
      }
      case ExprKind::kLoad:
      case ExprKind::kCall: {
        Expr m = map_operands(e, [&](const Expr& x) { return mutate(x); });
        // One element read for every lane, or a math call on lane-invariant arguments, is a
        // broadcast of the scalar form: it then combines with other broadcasts (LayerNorm's
        // sqrt(var[row] / n + eps) is computed once per vector, and divides as a reciprocal).
        if (m->type.lanes == 1 || m->operands.empty()) return m;
        std::vector<Expr> scalar;
        for (const Expr& x : m->operands) {
          if (x->type.lanes == 1) scalar.push_back(x);
          else if (x->kind == ExprKind::kBroadcast) scalar.push_back(x->operands[0]);
          else return m;
        }
        if (m->kind == ExprKind::kLoad) return broadcast(load(m->buffer, scalar), m->type.lanes);
        return broadcast(call(m->name, m->type.with_lanes(1), scalar), m->type.lanes);
      }
      case ExprKind::kBroadcast:
        return map_operands(e, [&](const Expr& x) { return mutate(x); });
      default:
        return mutate_binary(e->kind, mutate(e->operands[0]), mutate(e->operands[1]));
    }
  }

  Stmt mutate(const Stmt& s) {
    switch (s->kind) {
      case StmtKind::kFor: {
        Expr mn = mutate(s->min), ext = mutate(s->extent);
        int64_t n = 0;
        if (is_const_int(ext, &n)) {
          if (n <= 0) return nullptr;
          if (n == 1) return mutate(substitute(s->body, s->var, mn));
        }
        IntBound bm = bound(mn), be = bound(ext);
        IntBound vb{bm.min, be.max == kPosInf ? kPosInf : add_sat(bm.max, be.max - 1)};
        Stmt body = with_bound(s->var, vb, [&] { return mutate(s->body); });
        if (!body) return nullptr;
        if (mn == s->min && ext == s->extent && body == s->body) return s;
        return for_loop(s->var, mn, ext, s->for_kind, body);
      }
      case StmtKind::kLetStmt: {
        Expr value = mutate(s->value);
        if (is_const(value) || value->kind == ExprKind::kVar)
          return mutate(substitute(s->body, s->var, value));
        Stmt body = with_bound(s->var, value, [&] { return mutate(s->body); });
        if (!body) return nullptr;
        if (value == s->value && body == s->body) return s;
        return let_stmt(s->var, value, body);
      }
      case StmtKind::kIfThenElse: {
        Expr c = mutate(s->cond);
        if (c->kind == ExprKind::kIntImm) {
          if (c->int_value) return mutate(s->then_case);
          return s->else_case ? mutate(s->else_case) : nullptr;
        }
        Stmt t = mutate(s->then_case);
        Stmt f = s->else_case ? mutate(s->else_case) : nullptr;
        if (!t && !f) return nullptr;
        if (!t) return if_then_else(mutate_not(c), f);
        if (c == s->cond && t == s->then_case && f == s->else_case) return s;
        return if_then_else(c, t, f);
      }
      case StmtKind::kSeq: {
        std::vector<Stmt> out;
        for (const Stmt& x : s->seq)
          if (Stmt y = mutate(x)) out.push_back(y);
        if (out.empty()) return nullptr;
        return seq(std::move(out));
      }
      default:
        return map_stmt(
            s, [&](const Expr& x) { return mutate(x); }, [&](const Stmt& x) { return mutate(x); });
    }
  }

 private:
  template <typename F>
  auto with_bound(const Expr& var, IntBound b, F&& f) -> decltype(f()) {
    auto it = bounds_.find(var.get());
    std::optional<IntBound> old;
    if (it != bounds_.end()) old = it->second;
    bounds_[var.get()] = b;
    auto r = f();
    if (old) {
      bounds_[var.get()] = *old;
    } else {
      bounds_.erase(var.get());
    }
    return r;
  }
  template <typename F>
  auto with_bound(const Expr& var, const Expr& value, F&& f) -> decltype(f()) {
    return with_bound(var, value->type.is_int() ? bound(value) : everything(), std::forward<F>(f));
  }

  Expr mutate_not(const Expr& a) {
    if (a->kind == ExprKind::kIntImm) return bool_const(a->int_value == 0);
    if (a->kind == ExprKind::kNot) return a->operands[0];
    if (scalar::is_compare(a->kind) && a->operands[0]->type.is_int())
      return mutate_binary(negate_compare(a->kind), a->operands[0], a->operands[1]);
    return logical_not(a);
  }

  // Decides an integer comparison from the bounds of a - b.
  Expr prove_compare(ExprKind k, const Expr& a, const Expr& b) {
    if (!a->type.is_int()) return nullptr;
    if (a->type.lanes > 1) {  // all lanes decided alike
      Expr r = prove_compare(k, a, b, /*vector=*/true);
      return r ? broadcast(r, a->type.lanes) : nullptr;
    }
    return prove_compare(k, a, b, false);
  }

  Expr prove_compare(ExprKind k, const Expr& a, const Expr& b, bool vector) {
    IntBound d;
    if (structural_equal(a, b)) {
      d = IntBound::point(0);
    } else {
      IntBound ba = bound(a), bb = bound(b);
      d = bound_add(ba, bound_neg(bb));
      if (!vector && (d.min == kNegInf || d.max == kPosInf)) {
        // Shared terms cancel in the simplified difference (i + 1 < i + 5).
        IntBound dd = bound(mutate_binary(ExprKind::kSub, a, b, /*depth=*/1));
        d = intersect(d, dd);
      }
    }
    // Unsigned 64-bit comparisons are only decided from non-negative bounds.
    if (a->type.dtype == DType::kUInt64) return nullptr;
    switch (k) {
      case ExprKind::kEQ:
        if (d.is_point() && d.min == 0) return bool_const(true);
        if (d.min > 0 || d.max < 0) return bool_const(false);
        break;
      case ExprKind::kNE:
        if (d.is_point() && d.min == 0) return bool_const(false);
        if (d.min > 0 || d.max < 0) return bool_const(true);
        break;
      case ExprKind::kLT:
        if (d.max < 0) return bool_const(true);
        if (d.min >= 0 && d.min != kNegInf) return bool_const(false);
        break;
      case ExprKind::kLE:
        if (d.max <= 0) return bool_const(true);
        if (d.min > 0 && d.min != kNegInf) return bool_const(false);
        break;
      case ExprKind::kGT:
        if (d.min > 0 && d.min != kNegInf) return bool_const(true);
        if (d.max <= 0) return bool_const(false);
        break;
      case ExprKind::kGE:
        if (d.min >= 0 && d.min != kNegInf) return bool_const(true);
        if (d.max < 0) return bool_const(false);
        break;
      default: break;
    }
    return nullptr;
  }

  Expr mutate_binary(ExprKind k, Expr a, Expr b, int depth = 0) {
    DataType t = a->type;
    const bool is_int = t.is_int();
    const int lanes = std::max(a->type.lanes, b->type.lanes);
    // Vector forms.
    if (lanes > 1) {
      if (Expr r = vector_rule(k, a, b, depth)) return r;
      return binary(k, a, b);
    }
    if (Expr r = fold_binary(k, a, b)) return r;
    if (is_commutative(k) && is_const(a) && !is_const(b)) std::swap(a, b);
    if (scalar::is_compare(k) && is_const(a) && !is_const(b)) {
      std::swap(a, b);
      k = flip_compare(k);
    }
    int64_t c = 0;
    const bool b_int = is_const_int(b, &c);
    switch (k) {
      case ExprKind::kAdd:
        if (is_const_value(b, 0)) return a;
        if (is_int && !b_int)
          if (Expr r = recombine_divmod(a, b)) return mutate(r);
        if (is_int && b_int) {
          int64_t c1 = 0;
          // (x + c1) + c2 -> x + (c1 + c2)
          if (a->kind == ExprKind::kAdd && is_const_int(a->operands[1], &c1))
            return mutate_binary(ExprKind::kAdd, a->operands[0], int_const(c1 + c, t), depth);
        }
        if (is_int && b->kind == ExprKind::kAdd)  // a + (b0 + b1) -> (a + b0) + b1
          return mutate_binary(ExprKind::kAdd, mutate_binary(ExprKind::kAdd, a, b->operands[0], depth),
                               b->operands[1], depth);
        if (is_int && !b_int && a->kind == ExprKind::kAdd && is_const(a->operands[1]))
          // (x + c) + y -> (x + y) + c: constants move outward.
          return mutate_binary(ExprKind::kAdd, mutate_binary(ExprKind::kAdd, a->operands[0], b, depth),
                               a->operands[1], depth);
        break;
      case ExprKind::kSub:
        if (is_const_value(b, 0)) return a;
        if (is_int) {
          if (structural_equal(a, b)) return int_const(0, t);
          if (b_int && c != kNegInf) return mutate_binary(ExprKind::kAdd, a, int_const(-c, t), depth);
          if (b->kind == ExprKind::kAdd)  // a - (b0 + b1) -> (a - b0) - b1
            return mutate_binary(ExprKind::kSub, mutate_binary(ExprKind::kSub, a, b->operands[0], depth),
                                 b->operands[1], depth);
          if (a->kind == ExprKind::kAdd) {
            if (structural_equal(a->operands[0], b)) return a->operands[1];
            if (structural_equal(a->operands[1], b)) return a->operands[0];
            int64_t c1 = 0;
            if (is_const_int(a->operands[1], &c1))  // (x + c) - y -> (x - y) + c
              return mutate_binary(ExprKind::kAdd, mutate_binary(ExprKind::kSub, a->operands[0], b, depth),
                                   a->operands[1], depth);
            if (b->kind == ExprKind::kAdd && structural_equal(a->operands[0], b->operands[0]))
              return mutate_binary(ExprKind::kSub, a->operands[1], b->operands[1], depth);
          }
        }
        break;
      case ExprKind::kMul:
        if (is_const_value(b, 1)) return a;
        if (is_int && b_int) {
          if (c == 0) return int_const(0, t);
          int64_t c1 = 0;
          if (a->kind == ExprKind::kMul && is_const_int(a->operands[1], &c1))
            return mutate_binary(ExprKind::kMul, a->operands[0], int_const(c1 * c, t), depth);
          if (a->kind == ExprKind::kAdd && is_const_int(a->operands[1], &c1))  // (x + c1)*c
            return mutate_binary(ExprKind::kAdd, mutate_binary(ExprKind::kMul, a->operands[0], b, depth),
                                 int_const(c1 * c, t), depth);
        }
        break;
      case ExprKind::kDiv:
        if (is_const_value(b, 1)) return a;
        if (is_int && b_int && c > 0 && bound(a).min >= 0)
          return mutate_binary(ExprKind::kFloorDiv, a, b, depth);
        break;
      case ExprKind::kFloorDiv:
      case ExprKind::kFloorMod:
        if (b_int && c > 0) {
          if (Expr r = divmod_rule(k, a, c, t, depth)) return r;
        }
        break;
      case ExprKind::kMin:
      case ExprKind::kMax: {
        if (structural_equal(a, b)) return a;
        if (!is_int) break;
        IntBound ba = bound(a), bb = bound(b);
        bool a_le_b = ba.max <= bb.min && ba.max != kPosInf;
        bool b_le_a = bb.max <= ba.min && bb.max != kPosInf;
        if (a_le_b) return k == ExprKind::kMin ? a : b;
        if (b_le_a) return k == ExprKind::kMin ? b : a;
        break;
      }
      case ExprKind::kEQ:
      case ExprKind::kNE:
      case ExprKind::kLT:
      case ExprKind::kLE:
      case ExprKind::kGT:
      case ExprKind::kGE:
        if (depth == 0)
          if (Expr r = prove_compare(k, a, b)) return r;
        break;
      case ExprKind::kAnd:
        if (b->kind == ExprKind::kIntImm) return b->int_value ? a : b;
        if (structural_equal(a, b)) return a;
        break;
      case ExprKind::kOr:
        if (b->kind == ExprKind::kIntImm) return b->int_value ? b : a;
        if (structural_equal(a, b)) return a;
        break;
      default: break;
    }
    return binary(k, a, b);
  }

  Expr divmod_rule(ExprKind k, const Expr& a, int64_t c, DataType t, int depth) {
    if (c == 1) return k == ExprKind::kFloorDiv ? a : int_const(0, t);
    int64_t c1 = 0;
    // floordiv(floordiv(x, c1), c) -> floordiv(x, c1*c); floormod(floormod(x, c1), c) with c | c1.
    if (k == ExprKind::kFloorDiv && a->kind == ExprKind::kFloorDiv &&
        is_const_int(a->operands[1], &c1) && c1 > 0 && c1 < (int64_t{1} << 31) && c < (int64_t{1} << 31))
      return mutate_binary(k, a->operands[0], int_const(c1 * c, t), depth);
    if (k == ExprKind::kFloorMod && a->kind == ExprKind::kFloorMod &&
        is_const_int(a->operands[1], &c1) && c1 > 0 && c1 % c == 0)
      return mutate_binary(k, a->operands[0], int_const(c, t), depth);
    // floordiv(x*g + r, c) with g | c and 0 <= r < g is floordiv(x, c/g); floormod is
    // floormod(x, c/g)*g + r. Rows of a reshaped axis split by 16 rely on it: (o*16 + 15) // 64
    // and (o*16) // 64 are both o // 4, so the whole vector reads one group.
    {
      int64_t g = 0, rr = 0;
      Expr base = a;
      if (a->kind == ExprKind::kAdd && is_const_int(a->operands[1], &rr)) base = a->operands[0];
      else rr = 0;
      if (base->kind == ExprKind::kMul && base->type.lanes == 1 && is_const_int(base->operands[1], &g) && g > 1 &&
          g < c && c % g == 0 && rr >= 0 && rr < g) {
        const Expr& x = base->operands[0];
        Expr q = mutate_binary(k, x, int_const(c / g, t), depth);
        if (k == ExprKind::kFloorDiv) return q;
        Expr m = mutate_binary(ExprKind::kMul, q, int_const(g, t), depth);
        return rr == 0 ? m : mutate_binary(ExprKind::kAdd, m, int_const(rr, t), depth);
      }
    }
    std::vector<Expr> quotient, rest;
    split_multiples(a, c, &quotient, &rest);
    Expr r;
    for (const Expr& x : rest) r = r ? mutate_binary(ExprKind::kAdd, r, x, depth) : x;
    Expr q;
    for (const Expr& x : quotient) q = q ? mutate_binary(ExprKind::kAdd, q, x, depth) : x;
    // The rest's own quotient when its bounds fit one multiple of c.
    std::optional<int64_t> rq;
    if (!r) {
      rq = 0;
    } else {
      IntBound br = bound(r);
      if (br.min != kNegInf && br.max != kPosInf &&
          scalar::floor_div(br.min, c) == scalar::floor_div(br.max, c))
        rq = scalar::floor_div(br.min, c);
    }
    if (k == ExprKind::kFloorMod) {
      if (rq) return r ? mutate_binary(ExprKind::kAdd, r, int_const(-*rq * c, t), depth) : int_const(0, t);
      if (quotient.empty()) return nullptr;
      return binary(ExprKind::kFloorMod, r, int_const(c, t));
    }
    Expr rest_q = rq ? int_const(*rq, t) : nullptr;
    if (!rq) {
      if (quotient.empty()) return nullptr;
      rest_q = binary(ExprKind::kFloorDiv, r, int_const(c, t));
    }
    if (!q) return rest_q;
    return mutate_binary(ExprKind::kAdd, q, rest_q, depth);
  }

  // Rules on vector operands; nullptr when none applies.
  Expr vector_rule(ExprKind k, const Expr& a, const Expr& b, int depth) {
    const int lanes = std::max(a->type.lanes, b->type.lanes);
    auto is_bc = [](const Expr& e) { return e->kind == ExprKind::kBroadcast; };
    auto is_ramp = [](const Expr& e) { return e->kind == ExprKind::kRamp; };
    if (a->type.lanes == 1 || b->type.lanes == 1) {
      // A scalar meets a vector: broadcast it and retry.
      Expr va = a->type.lanes == 1 ? broadcast(a, lanes) : a;
      Expr vb = b->type.lanes == 1 ? broadcast(b, lanes) : b;
      return mutate_binary(k, va, vb, depth);
    }
    if (is_bc(a) && is_bc(b))
      return broadcast(mutate_binary(k, a->operands[0], b->operands[0], depth), lanes);
    if (!a->type.is_int()) return nullptr;
    switch (k) {
      case ExprKind::kAdd:
      case ExprKind::kSub: {
        if ((is_ramp(a) || is_bc(a)) && (is_ramp(b) || is_bc(b))) {
          DataType st = a->type.with_lanes(1);
          Expr sa = is_ramp(a) ? a->operands[1] : int_const(0, st);
          Expr sb = is_ramp(b) ? b->operands[1] : int_const(0, st);
          Expr base = mutate_binary(k, a->operands[0], b->operands[0], depth);
          Expr stride = mutate_binary(k, sa, sb, depth);
          if (is_const_value(stride, 0)) return broadcast(base, lanes);
          return ramp(base, stride, lanes);
        }
        break;
      }
      case ExprKind::kMul: {
        Expr r = is_ramp(a) ? a : is_ramp(b) ? b : nullptr;
        Expr s = is_bc(a) ? a : is_bc(b) ? b : nullptr;
        if (r && s) {
          Expr base = mutate_binary(k, r->operands[0], s->operands[0], depth);
          Expr stride = mutate_binary(k, r->operands[1], s->operands[0], depth);
          if (is_const_value(stride, 0)) return broadcast(base, lanes);
          return ramp(base, stride, lanes);
        }
        break;
      }
      case ExprKind::kFloorDiv:
      case ExprKind::kFloorMod: {
        int64_t c = 0, s = 0;
        if (is_ramp(a) && is_bc(b) && is_const_int(b->operands[0], &c) && c > 0 &&
            is_const_int(a->operands[1], &s) && s >= 0) {
          // All lanes in one multiple of c: floordiv is a broadcast, floormod a ramp.
          DataType st = a->type.with_lanes(1);
          Expr base = a->operands[0];
          Expr bq = mutate_binary(ExprKind::kFloorDiv, base, b->operands[0], depth);
          Expr last = mutate_binary(ExprKind::kAdd, base, int_const(s * (lanes - 1), st), depth);
          Expr lq = mutate_binary(ExprKind::kFloorDiv, last, b->operands[0], depth);
          if (structural_equal(bq, lq)) {
            if (k == ExprKind::kFloorDiv) return broadcast(bq, lanes);
            return ramp(mutate_binary(ExprKind::kFloorMod, base, b->operands[0], depth), a->operands[1], lanes);
          }
        }
        break;
      }
      default:
        if (scalar::is_compare(k) && depth == 0) return prove_compare(k, a, b);
        break;
    }
    return nullptr;
  }

  VarBounds bounds_;
};

}  // namespace

IntBound bound_of(const Expr& e, const VarBounds& var_bounds) { return bound_impl(e, var_bounds); }

std::optional<bool> prove(const Expr& cond, const VarBounds& var_bounds) {
  Expr r = Simplifier(var_bounds).mutate(cond);
  if (r->kind == ExprKind::kIntImm) return r->int_value != 0;
  return std::nullopt;
}

Expr simplify(const Expr& e, const VarBounds& var_bounds) { return Simplifier(var_bounds).mutate(e); }

Stmt simplify(const Stmt& s, const VarBounds& var_bounds) {
  Stmt r = Simplifier(var_bounds).mutate(s);
  return r ? r : seq({});
}

PrimFunc simplify(const PrimFunc& f) {
  PrimFunc out = f;
  out.body = simplify(f.body);
  return out;
}

}  // namespace kiln::tir
