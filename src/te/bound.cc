// Index arithmetic for lowering: affine normalization of integer expressions, a small
// constant-folding simplifier, and interval bounds used by compute_at's bound inference.
#include <optional>

#include "te/te_internal.h"

namespace kiln::te::detail {
namespace {

using tir::ExprKind;
using tir::ExprNode;

// sum(coef * var) + constant, vars in first-appearance order (deterministic printing).
struct Affine {
  std::vector<std::pair<Expr, int64_t>> terms;
  int64_t constant = 0;
  void add(const Expr& v, int64_t c) {
    for (auto& [var, coef] : terms) {
      if (var == v) {
        coef += c;
        return;
      }
    }
    terms.emplace_back(v, c);
  }
};

bool is_index(const Expr& e) { return e->type.is_int() && e->type.lanes == 1; }

std::optional<Affine> linearize(const Expr& e) {
  if (!is_index(e)) return std::nullopt;
  switch (e->kind) {
    case ExprKind::kIntImm: {
      Affine a;
      a.constant = e->int_value;
      return a;
    }
    case ExprKind::kVar: {
      Affine a;
      a.add(e, 1);
      return a;
    }
    case ExprKind::kAdd:
    case ExprKind::kSub: {
      auto a = linearize(e->operands[0]);
      auto b = linearize(e->operands[1]);
      if (!a || !b) return std::nullopt;
      const int64_t s = e->kind == ExprKind::kAdd ? 1 : -1;
      for (auto& [v, c] : b->terms) a->add(v, s * c);
      a->constant += s * b->constant;
      return a;
    }
    case ExprKind::kMul: {
      auto a = linearize(e->operands[0]);
      auto b = linearize(e->operands[1]);
      if (!a || !b) return std::nullopt;
      if (!a->terms.empty() && !b->terms.empty()) return std::nullopt;
      if (a->terms.empty()) std::swap(a, b);
      for (auto& t : a->terms) t.second *= b->constant;
      a->constant *= b->constant;
      return a;
    }
    default:
      return std::nullopt;
  }
}

Expr from_affine(const Affine& a, tir::DataType t) {
  Expr r;
  for (const auto& [v, c] : a.terms) {
    if (c == 0) continue;
    Expr term = c == 1 ? v : v * tir::int_imm(c, t);
    r = r ? r + term : term;
  }
  if (!r) return tir::int_imm(a.constant, t);
  if (a.constant > 0) r = r + tir::int_imm(a.constant, t);
  if (a.constant < 0) r = r - tir::int_imm(-a.constant, t);
  return r;
}

int64_t floordiv_i(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

Interval point(const Expr& e) { return {e, e}; }

}  // namespace

Expr simplify_expr(const Expr& e) {
  if (!e || e->operands.empty()) return e;
  if (is_index(e)) {
    if (auto a = linearize(e)) return from_affine(*a, e->type);
  }
  std::vector<Expr> ops;
  for (const Expr& o : e->operands) ops.push_back(simplify_expr(o));
  int64_t x = 0, y = 0;
  if (ops.size() == 2 && tir::is_const_int(ops[0], &x) && tir::is_const_int(ops[1], &y) && is_index(e)) {
    switch (e->kind) {
      case ExprKind::kMin: return tir::int_imm(std::min(x, y), e->type);
      case ExprKind::kMax: return tir::int_imm(std::max(x, y), e->type);
      case ExprKind::kFloorDiv:
        if (y != 0) return tir::int_imm(floordiv_i(x, y), e->type);
        break;
      case ExprKind::kFloorMod:
        if (y != 0) return tir::int_imm(x - floordiv_i(x, y) * y, e->type);
        break;
      default: break;
    }
  }
  if ((e->kind == ExprKind::kMin || e->kind == ExprKind::kMax) && is_index(e)) {
    if (auto d = const_difference(ops[0], ops[1])) {
      const bool first = e->kind == ExprKind::kMin ? *d <= 0 : *d >= 0;
      return first ? ops[0] : ops[1];
    }
  }
  if (e->kind == ExprKind::kFloorDiv && tir::is_const_int(ops[1], &y) && y == 1) return ops[0];
  auto n = std::make_shared<ExprNode>(*e);
  n->operands = std::move(ops);
  return n;
}

std::optional<int64_t> const_difference(const Expr& a, const Expr& b) {
  auto la = linearize(a);
  auto lb = linearize(b);
  if (!la || !lb) return std::nullopt;
  for (auto& [v, c] : lb->terms) la->add(v, -c);
  for (auto& [v, c] : la->terms)
    if (c != 0) return std::nullopt;
  return la->constant - lb->constant;
}

std::optional<Interval> bound(const Expr& e, const std::map<const ExprNode*, Interval>& ranges) {
  if (!is_index(e)) return std::nullopt;
  auto sub = [&](int i) { return bound(e->operands[i], ranges); };
  switch (e->kind) {
    case ExprKind::kIntImm: return point(e);
    case ExprKind::kVar: {
      auto it = ranges.find(e.get());
      return it == ranges.end() ? point(e) : it->second;
    }
    case ExprKind::kCast: {
      // Index casts between integer types: keep the bounds, cast them.
      auto a = bound(e->operands[0], ranges);
      if (!a) return std::nullopt;
      return Interval{tir::cast(e->type, a->lo), tir::cast(e->type, a->hi)};
    }
    case ExprKind::kAdd: {
      auto a = sub(0), b = sub(1);
      if (!a || !b) return std::nullopt;
      return Interval{a->lo + b->lo, a->hi + b->hi};
    }
    case ExprKind::kSub: {
      auto a = sub(0), b = sub(1);
      if (!a || !b) return std::nullopt;
      return Interval{a->lo - b->hi, a->hi - b->lo};
    }
    case ExprKind::kMul: {
      auto a = sub(0), b = sub(1);
      if (!a || !b) return std::nullopt;
      int64_t c = 0;
      if (!tir::is_const_int(simplify_expr(b->lo), &c) || b->lo != b->hi) {
        std::swap(a, b);
        if (!tir::is_const_int(simplify_expr(b->lo), &c) || b->lo != b->hi) {
          if (a->lo == a->hi && b->lo == b->hi) return point(e);
          return std::nullopt;
        }
      }
      Expr k = tir::int_imm(c, e->type);
      if (c >= 0) return Interval{a->lo * k, a->hi * k};
      return Interval{a->hi * k, a->lo * k};
    }
    case ExprKind::kFloorDiv: {
      auto a = sub(0);
      int64_t c = 0;
      if (!a || !tir::is_const_int(e->operands[1], &c) || c <= 0) return std::nullopt;
      return Interval{tir::floordiv(a->lo, e->operands[1]), tir::floordiv(a->hi, e->operands[1])};
    }
    case ExprKind::kFloorMod: {
      auto a = sub(0);
      int64_t c = 0;
      if (!a || !tir::is_const_int(e->operands[1], &c) || c <= 0) return std::nullopt;
      if (a->lo == a->hi) return point(tir::floormod(a->lo, e->operands[1]));
      return Interval{tir::int_imm(0, e->type), tir::int_imm(c - 1, e->type)};
    }
    case ExprKind::kMin:
    case ExprKind::kMax: {
      auto a = sub(0), b = sub(1);
      if (!a || !b) return std::nullopt;
      if (e->kind == ExprKind::kMin) return Interval{tir::min(a->lo, b->lo), tir::min(a->hi, b->hi)};
      return Interval{tir::max(a->lo, b->lo), tir::max(a->hi, b->hi)};
    }
    default:
      return std::nullopt;
  }
}

}  // namespace kiln::te::detail
