// simplify rules, identity family: nodes that return their input unchanged.
//   Identity(x) -> x;  Dropout(x) in inference with its mask unused -> x;
//   Cast(x, to=dtype(x)) -> x;  CastLike(x, like) with like's dtype = x's -> x;
//   Cast(Cast(x, T1), dtype(x)) -> x when T1 holds every value of dtype(x) exactly;
//   x*1, 1*x, x/1, x^1, x-0, x+(-0), (-0)+x -> x when the constant (any shape) broadcasts into
//   x without growing it. Float x+(+0) is kept: it turns -0 into +0.
// Part of the simplify pass (algebraic_simplify.cc); tests: tests/pass/golden/simplify/.
#include <cmath>

#include "pass/simplify.h"

namespace kiln::simplify {
namespace {

bool identity(Node& n, Rewriter& rw) { return rw.replace(n.outputs[0], n.inputs[0]); }

// Before opset 12 Dropout is an identity in inference (the reference kernel agrees); from 12 on
// it is one unless training_mode is given and not a constant false.
bool dropout(Node& n, Rewriter& rw) {
  if (n.outputs.size() > 1 && n.outputs[1] && rw.used(n.outputs[1])) return false;
  if (rw.opset() >= 12 && n.inputs.size() > 2 && n.inputs[2]) {
    const Tensor* t = constant_value(n.inputs[2]);
    if (!t || t->numel() != 1 || t->dtype() != DType::kBool || t->get_double(0) != 0)
      return false;
  }
  return rw.replace(n.outputs[0], n.inputs[0]);
}

DType cast_target(const Node& n) {
  int64_t to = int_attr(n, "to", 0);
  return dtype_is_valid(static_cast<int32_t>(to)) ? static_cast<DType>(to) : DType::kUndefined;
}

bool cast_same(Node& n, Rewriter& rw) {
  DType from = n.inputs[0]->type.dtype;
  if (n.inputs[0]->type.kind != Type::Kind::kTensor || from == DType::kUndefined) return false;
  return from == cast_target(n) && rw.replace(n.outputs[0], n.inputs[0]);
}

bool castlike_same(Node& n, Rewriter& rw) {
  const Type& x = n.inputs[0]->type;
  const Type& like = n.inputs[1]->type;
  if (x.kind != Type::Kind::kTensor || like.kind != Type::Kind::kTensor) return false;
  if (x.dtype == DType::kUndefined || x.dtype != like.dtype) return false;
  return rw.replace(n.outputs[0], n.inputs[0]);
}

int int_bits(DType t) {  // value bits without the sign
  switch (t) {
    case DType::kBool: return 1;
    case DType::kUInt8: return 8;
    case DType::kInt8: return 7;
    case DType::kUInt16: return 16;
    case DType::kInt16: return 15;
    case DType::kUInt32: return 32;
    case DType::kInt32: return 31;
    case DType::kUInt64: return 64;
    case DType::kInt64: return 63;
    default: return 0;
  }
}

int float_mantissa(DType t) {  // significand bits including the implicit one
  switch (t) {
    case DType::kFloat16: return 11;
    case DType::kBFloat16: return 8;
    case DType::kFloat32: return 24;
    case DType::kFloat64: return 53;
    default: return 0;
  }
}

// True when every value of `from` converts to `to` and back exactly.
bool lossless(DType from, DType to) {
  if (from == to) return true;
  const int fb = int_bits(from), tb = int_bits(to);
  const int fm = float_mantissa(from), tm = float_mantissa(to);
  if (fb && tb) {  // integers (and bool): the target covers the range and the sign
    if (to == DType::kBool) return false;
    return tb >= fb && (is_signed(to) || !is_signed(from));
  }
  if (fb && tm) return fb <= tm;  // integer -> float: fits in the significand
  if (fm && tm) {                 // float -> float: f16/bf16 -> f32 -> f64 (exponent range grows)
    if (from == DType::kFloat16 || from == DType::kBFloat16)
      return to == DType::kFloat32 || to == DType::kFloat64;
    return from == DType::kFloat32 && to == DType::kFloat64;
  }
  return false;
}

bool cast_round_trip(Node& n, Rewriter& rw) {
  Node* inner = producer_of(n.inputs[0], "Cast");
  if (!inner) return false;
  Value* x = inner->inputs[0];
  DType from = x->type.dtype;
  if (x->type.kind != Type::Kind::kTensor || from == DType::kUndefined) return false;
  if (cast_target(n) != from || !lossless(from, cast_target(*inner))) return false;
  return rw.replace(n.outputs[0], x);
}

enum class Zero { kAny, kPositive, kNegative };

// All elements of `t` equal `value`; float zeros must have the sign `zero` asks for.
bool all_equal(const Tensor& t, double value, Zero zero) {
  const DType dt = t.dtype();
  const bool fl = float_mantissa(dt) != 0;
  if (!fl && (int_bits(dt) == 0 || dt == DType::kBool)) return false;
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = t.get_double(i);
    if (v != value) return false;
    if (fl && value == 0 && zero != Zero::kAny && std::signbit(v) != (zero == Zero::kNegative))
      return false;
  }
  return true;
}

// y = op(x, c) (x at `xi`) returns x when c is all `value` and broadcasting keeps x's shape.
bool neutral(Node& n, Rewriter& rw, int xi, double value, Zero zero) {
  if (rw.opset() < 7 || n.inputs.size() != 2) return false;  // legacy broadcast attributes
  Value* x = n.inputs[xi];
  const Tensor* c = constant_value(n.inputs[1 - xi]);
  const Shape* xs = static_shape(x);
  if (!c || !xs || x->type.dtype == DType::kUndefined) return false;
  const DType out = n.outputs[0]->type.dtype;
  if (out != DType::kUndefined && out != x->type.dtype) return false;
  if (!broadcasts_into(c->dims(), *xs) || !all_equal(*c, value, zero)) return false;
  return rw.replace(n.outputs[0], x);
}

bool mul_one(Node& n, Rewriter& rw) {
  return neutral(n, rw, 0, 1, Zero::kAny) || neutral(n, rw, 1, 1, Zero::kAny);
}
bool div_one(Node& n, Rewriter& rw) { return neutral(n, rw, 0, 1, Zero::kAny); }
// -0 + x == x for every x; +0 + (-0) == +0 but -0 + (+0) == +0, so float +0 is not neutral.
bool add_zero(Node& n, Rewriter& rw) {
  return neutral(n, rw, 0, 0, Zero::kNegative) || neutral(n, rw, 1, 0, Zero::kNegative);
}
// x - (+0) == x for every x, including -0.
bool sub_zero(Node& n, Rewriter& rw) { return neutral(n, rw, 0, 0, Zero::kPositive); }
// The reference Pow of an integer base by a float exponent goes through double, which rounds
// int64 values past 2^53, so integer bases need an integer exponent.
bool pow_one(Node& n, Rewriter& rw) {
  const Tensor* e = constant_value(n.inputs[1]);
  if (!e) return false;
  if (int_bits(n.inputs[0]->type.dtype) && !int_bits(e->dtype())) return false;
  return neutral(n, rw, 0, 1, Zero::kAny);
}

}  // namespace

void add_identity_rules(std::vector<Rule>& rules) {
  rules.insert(rules.end(), {
                                {"Identity", "identity", identity},
                                {"Dropout", "dropout-inference", dropout},
                                {"Cast", "cast-same-dtype", cast_same},
                                {"Cast", "cast-round-trip", cast_round_trip},
                                {"CastLike", "castlike-same-dtype", castlike_same},
                                {"Mul", "mul-one", mul_one},
                                {"Div", "div-one", div_one},
                                {"Add", "add-zero", add_zero},
                                {"Sub", "sub-zero", sub_zero},
                                {"Pow", "pow-one", pow_one},
                            });
}

}  // namespace kiln::simplify
