// TIR expressions -> LLVM values. Signedness comes from the operand dtype (u8..u64 and bool are
// unsigned); FloorDiv/FloorMod round toward negative infinity; float Min/Max are minnum/maxnum;
// math calls map to LLVM intrinsics where LLVM has one and to libm (expf, tanhf, erff, ...)
// otherwise; vector math calls glibc's libmvec (vector_math.h) when the target allows it (an odd
// lane count padded to the next variant), else one call per lane; float32 vector exp (and sigmoid)
// is inline code (inline_exp); a vector divided by a broadcast value multiplies by its reciprocal,
// and div_exact by a constant multiplies with a correction that rounds like the division.
// bf16 and other narrow floats are rejected.
#include <cmath>
#include <optional>
#include <string>

#include <llvm/Analysis/VectorUtils.h>
#include <llvm/IR/Intrinsics.h>

#include "codegen/llvm/emitter.h"
#include "codegen/llvm/vector_math.h"
#include "core/error.h"

namespace kiln::codegen {

using tir::DataType;
using tir::Expr;
using tir::ExprKind;
using tir::ExprNode;

void Emitter::fail(const std::string& what) const {
  throw Error(ErrorKind::kUnsupported, "codegen/llvm: kernel '" + func_.name + "': " + what);
}

llvm::Type* Emitter::memory_type(DType t) {
  switch (t) {
    case DType::kFloat32: return b_.getFloatTy();
    case DType::kFloat64: return b_.getDoubleTy();
    case DType::kFloat16: return b_.getHalfTy();
    case DType::kBool:
    case DType::kInt8:
    case DType::kUInt8: return b_.getInt8Ty();
    case DType::kInt16:
    case DType::kUInt16: return b_.getInt16Ty();
    case DType::kInt32:
    case DType::kUInt32: return b_.getInt32Ty();
    case DType::kInt64:
    case DType::kUInt64: return b_.getInt64Ty();
    default:
      fail("element type " + std::string(dtype_name(t)) +
           " is not supported by the LLVM backend (convert bf16/float8/sub-byte types first)");
  }
}

llvm::Type* Emitter::llvm_type(DataType t) {
  llvm::Type* scalar = t.is_bool() ? b_.getInt1Ty() : memory_type(t.dtype);
  if (t.lanes == 1) return scalar;
  return llvm::FixedVectorType::get(scalar, t.lanes);
}

llvm::Value* Emitter::to_lanes(llvm::Value* v, int lanes) {
  if (lanes <= 1 || v->getType()->isVectorTy()) return v;
  return b_.CreateVectorSplat(lanes, v);
}

llvm::Value* Emitter::as_i64(llvm::Value* v, bool is_signed) {
  llvm::Type* t = b_.getInt64Ty();
  if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(v->getType()))
    t = llvm::FixedVectorType::get(t, vt->getNumElements());
  return b_.CreateIntCast(v, t, is_signed);
}

llvm::Value* Emitter::emit(const Expr& e) {
  if (!e) fail("null expression");
  const ExprNode& n = *e;
  const int lanes = n.type.lanes;
  switch (n.kind) {
    case ExprKind::kIntImm: {
      llvm::Type* t = llvm_type(n.type);
      if (n.type.is_float()) return llvm::ConstantFP::get(t, static_cast<double>(n.int_value));
      return llvm::ConstantInt::get(t, static_cast<uint64_t>(n.int_value), /*isSigned=*/true);
    }
    case ExprKind::kFloatImm: {
      llvm::Type* t = llvm_type(n.type);
      if (!n.type.is_float()) return llvm::ConstantInt::get(t, static_cast<int64_t>(n.float_value));
      return llvm::ConstantFP::get(t, n.float_value);
    }
    case ExprKind::kVar: {
      auto it = vars_.find(&n);
      if (it == vars_.end()) fail("variable '" + n.name + "' is used but not bound");
      return it->second;
    }
    case ExprKind::kAdd:
    case ExprKind::kSub:
    case ExprKind::kMul:
    case ExprKind::kDiv:
    case ExprKind::kFloorDiv:
    case ExprKind::kFloorMod:
    case ExprKind::kMin:
    case ExprKind::kMax: return emit_binary(n);
    case ExprKind::kEQ:
    case ExprKind::kNE:
    case ExprKind::kLT:
    case ExprKind::kLE:
    case ExprKind::kGT:
    case ExprKind::kGE: return emit_compare(n);
    case ExprKind::kAnd:
      return b_.CreateAnd(to_lanes(emit(n.operands[0]), lanes), to_lanes(emit(n.operands[1]), lanes));
    case ExprKind::kOr:
      return b_.CreateOr(to_lanes(emit(n.operands[0]), lanes), to_lanes(emit(n.operands[1]), lanes));
    case ExprKind::kNot: return b_.CreateNot(emit(n.operands[0]));
    case ExprKind::kSelect: {
      llvm::Value* c = emit(n.operands[0]);
      if (!c->getType()->isIntOrIntVectorTy(1)) c = b_.CreateICmpNE(c, llvm::Constant::getNullValue(c->getType()));
      return b_.CreateSelect(c, to_lanes(emit(n.operands[1]), lanes),
                             to_lanes(emit(n.operands[2]), lanes));
    }
    case ExprKind::kCast: return emit_cast(n.type, n.operands[0]);
    case ExprKind::kLoad: return emit_load(n);
    case ExprKind::kCall: return emit_call(n);
    case ExprKind::kRamp: {
      llvm::Value* base = emit(n.operands[0]);
      llvm::Value* stride = emit(n.operands[1]);
      std::vector<llvm::Constant*> steps;
      for (int i = 0; i < lanes; ++i) steps.push_back(llvm::ConstantInt::get(base->getType(), i));
      llvm::Value* offs = b_.CreateMul(to_lanes(stride, lanes), llvm::ConstantVector::get(steps));
      return b_.CreateAdd(to_lanes(base, lanes), offs);
    }
    case ExprKind::kBroadcast: return to_lanes(emit(n.operands[0]), lanes);
    case ExprKind::kLet: {
      const ExprNode* var = n.operands[0].get();
      llvm::Value* value = emit(n.operands[1]);
      auto old = vars_.find(var) == vars_.end() ? nullptr : vars_[var];
      vars_[var] = value;
      llvm::Value* r = emit(n.operands[2]);
      if (old) vars_[var] = old; else vars_.erase(var);
      return r;
    }
  }
  fail("unknown expression kind");
}

llvm::Value* Emitter::emit_binary(const ExprNode& n) {
  const int lanes = n.type.lanes;
  if (n.kind == ExprKind::kDiv && lanes > 1 && is_float(n.operands[0]->type.dtype) &&
      n.operands[1]->kind == ExprKind::kBroadcast) {
    // A vector divided by one value (Softmax's row sum, LayerNorm's deviation, GELU's sqrt(2)):
    // multiply by its reciprocal, computed once (hoisted out of the row loop) instead of a
    // vector division per vector, at most an ulp apart from the quotient.
    llvm::Value* d = emit(n.operands[1]->operands[0]);
    llvm::Value* inv = b_.CreateFDiv(llvm::ConstantFP::get(d->getType(), 1.0), d);
    return b_.CreateFMul(to_lanes(emit(n.operands[0]), lanes), to_lanes(inv, lanes));
  }
  llvm::Value* a = to_lanes(emit(n.operands[0]), lanes);
  llvm::Value* b = to_lanes(emit(n.operands[1]), lanes);
  DType t = n.operands[0]->type.dtype;
  const bool fp = is_float(t);
  const bool sgn = is_signed(t) && t != DType::kBool;
  switch (n.kind) {
    case ExprKind::kAdd: return fp ? b_.CreateFAdd(a, b) : b_.CreateAdd(a, b);
    case ExprKind::kSub: return fp ? b_.CreateFSub(a, b) : b_.CreateSub(a, b);
    case ExprKind::kMul: return fp ? b_.CreateFMul(a, b) : b_.CreateMul(a, b);
    case ExprKind::kDiv: return fp ? b_.CreateFDiv(a, b) : sgn ? b_.CreateSDiv(a, b) : b_.CreateUDiv(a, b);
    case ExprKind::kFloorDiv:
    case ExprKind::kFloorMod: {
      const bool div = n.kind == ExprKind::kFloorDiv;
      if (fp) {
        llvm::Value* q = b_.CreateUnaryIntrinsic(llvm::Intrinsic::floor, b_.CreateFDiv(a, b));
        return div ? q : b_.CreateFSub(a, b_.CreateFMul(q, b));
      }
      if (!sgn) return div ? b_.CreateUDiv(a, b) : b_.CreateURem(a, b);
      // Truncating division, corrected by one when the remainder is non-zero and its sign
      // differs from the divisor's.
      llvm::Value* r = b_.CreateSRem(a, b);
      llvm::Value* zero = llvm::Constant::getNullValue(a->getType());
      llvm::Value* fix = b_.CreateAnd(b_.CreateICmpNE(r, zero),
                                      b_.CreateICmpSLT(b_.CreateXor(r, b), zero));
      if (div) return b_.CreateSub(b_.CreateSDiv(a, b), b_.CreateZExt(fix, a->getType()));
      return b_.CreateAdd(r, b_.CreateSelect(fix, b, zero));
    }
    case ExprKind::kMin:
      if (fp) return b_.CreateMinNum(a, b);
      return b_.CreateBinaryIntrinsic(sgn ? llvm::Intrinsic::smin : llvm::Intrinsic::umin, a, b);
    case ExprKind::kMax:
      if (fp) return b_.CreateMaxNum(a, b);
      return b_.CreateBinaryIntrinsic(sgn ? llvm::Intrinsic::smax : llvm::Intrinsic::umax, a, b);
    default: break;
  }
  fail("not a binary expression");
}

llvm::Value* Emitter::emit_compare(const ExprNode& n) {
  const int lanes = n.type.lanes;
  llvm::Value* a = to_lanes(emit(n.operands[0]), lanes);
  llvm::Value* b = to_lanes(emit(n.operands[1]), lanes);
  DType t = n.operands[0]->type.dtype;
  if (is_float(t)) {
    switch (n.kind) {
      case ExprKind::kEQ: return b_.CreateFCmpOEQ(a, b);
      case ExprKind::kNE: return b_.CreateFCmpUNE(a, b);
      case ExprKind::kLT: return b_.CreateFCmpOLT(a, b);
      case ExprKind::kLE: return b_.CreateFCmpOLE(a, b);
      case ExprKind::kGT: return b_.CreateFCmpOGT(a, b);
      default: return b_.CreateFCmpOGE(a, b);
    }
  }
  const bool sgn = is_signed(t) && t != DType::kBool;
  switch (n.kind) {
    case ExprKind::kEQ: return b_.CreateICmpEQ(a, b);
    case ExprKind::kNE: return b_.CreateICmpNE(a, b);
    case ExprKind::kLT: return sgn ? b_.CreateICmpSLT(a, b) : b_.CreateICmpULT(a, b);
    case ExprKind::kLE: return sgn ? b_.CreateICmpSLE(a, b) : b_.CreateICmpULE(a, b);
    case ExprKind::kGT: return sgn ? b_.CreateICmpSGT(a, b) : b_.CreateICmpUGT(a, b);
    default: return sgn ? b_.CreateICmpSGE(a, b) : b_.CreateICmpUGE(a, b);
  }
}

namespace {
// The constant of e (a float immediate, or a broadcast of one), if it is one.
std::optional<double> float_constant(const Expr& e) {
  const Expr& c = e->kind == ExprKind::kBroadcast ? e->operands[0] : e;
  if (c->kind == ExprKind::kFloatImm) return c->float_value;
  return std::nullopt;
}

// True when float expression e is max(lo, min(hi, x)) or min(hi, max(lo, x)) (either operand
// order) with constants inside the int32 range, a constant in it, or a select of two such (a NaN
// guard): its conversion to int32 cannot overflow.
bool clamped_to_int32(const Expr& e) {
  auto in_range = [](std::optional<double> c) { return c && *c >= -2147483648.0 && *c <= 2147483520.0; };
  if (in_range(float_constant(e))) return true;
  if (e->kind == ExprKind::kSelect) return clamped_to_int32(e->operands[1]) && clamped_to_int32(e->operands[2]);
  if (e->kind != ExprKind::kMax && e->kind != ExprKind::kMin) return false;
  const ExprKind inner_kind = e->kind == ExprKind::kMax ? ExprKind::kMin : ExprKind::kMax;
  for (int k = 0; k < 2; ++k) {
    const Expr& bound = e->operands[static_cast<size_t>(k)];
    const Expr& inner = e->operands[static_cast<size_t>(1 - k)];
    if (!in_range(float_constant(bound)) || inner->kind != inner_kind) continue;
    if (in_range(float_constant(inner->operands[0])) || in_range(float_constant(inner->operands[1]))) return true;
  }
  return false;
}
}  // namespace

llvm::Value* Emitter::emit_cast(DataType to, const Expr& value) {
  const DataType from = value->type;
  llvm::Value* v = emit(value);
  llvm::Type* t = llvm_type(to.with_lanes(from.lanes));
  llvm::Value* r = v;
  if (from.dtype == to.dtype) {
    r = v;
  } else if (to.is_bool()) {
    llvm::Value* zero = llvm::Constant::getNullValue(v->getType());
    r = from.is_float() ? b_.CreateFCmpUNE(v, zero) : b_.CreateICmpNE(v, zero);
  } else if (from.is_bool()) {
    r = to.is_float() ? b_.CreateUIToFP(v, t) : b_.CreateZExt(v, t);
  } else if (from.is_float() && to.is_float()) {
    r = b_.CreateFPCast(v, t);
  } else if (from.is_float()) {
    // Like a C++ cast on x86: narrow integers go through i64 and wrap; only u64 converts unsigned.
    // A value clamped into the int32 range by constants (a quantizer's saturation) converts
    // through i32, one vcvttps2dq instead of two 64-bit conversions and a quadword pack.
    if (to.dtype == DType::kUInt64) {
      r = b_.CreateFPToUI(v, t);
    } else if (clamped_to_int32(value) && to.dtype != DType::kInt64) {
      r = b_.CreateIntCast(b_.CreateFPToSI(v, llvm_type({DType::kInt32, from.lanes})), t, true);
    } else {
      llvm::Value* wide = b_.CreateFPToSI(v, llvm_type({DType::kInt64, from.lanes}));
      r = b_.CreateTrunc(wide, t);
    }
  } else if (to.is_float()) {
    r = is_signed(from.dtype) ? b_.CreateSIToFP(v, t) : b_.CreateUIToFP(v, t);
  } else {
    r = b_.CreateIntCast(v, t, is_signed(from.dtype));
  }
  return to_lanes(r, to.lanes);
}

namespace {

// Math functions with an LLVM intrinsic (overloaded on the float type).
llvm::Intrinsic::ID float_intrinsic(const std::string& name) {
  static const std::pair<const char*, llvm::Intrinsic::ID> kTable[] = {
      {"exp", llvm::Intrinsic::exp},       {"exp2", llvm::Intrinsic::exp2},
      {"exp10", llvm::Intrinsic::exp10},
      {"log", llvm::Intrinsic::log},       {"log2", llvm::Intrinsic::log2},
      {"log10", llvm::Intrinsic::log10},   {"sqrt", llvm::Intrinsic::sqrt},
      {"fabs", llvm::Intrinsic::fabs},     {"floor", llvm::Intrinsic::floor},
      {"ceil", llvm::Intrinsic::ceil},     {"trunc", llvm::Intrinsic::trunc},
      {"round", llvm::Intrinsic::roundeven}, {"nearbyint", llvm::Intrinsic::roundeven},
      {"sin", llvm::Intrinsic::sin},       {"cos", llvm::Intrinsic::cos},
      {"pow", llvm::Intrinsic::pow},       {"fma", llvm::Intrinsic::fma},
      {"copysign", llvm::Intrinsic::copysign},
  };
  for (const auto& [n, id] : kTable)
    if (name == n) return id;
  return llvm::Intrinsic::not_intrinsic;
}

// Math functions called in libm by their C name (float variant with an "f" suffix).
bool is_libm(const std::string& name) {
  static const char* kNames[] = {"tanh", "erf",   "erfc",  "tan",   "atan",  "asin", "acos",
                                 "sinh", "cosh",  "asinh", "acosh", "atanh", "atan2", "expm1",
                                 "log1p", "cbrt", "fmod"};
  for (const char* n : kNames)
    if (name == n) return true;
  return false;
}

}  // namespace

llvm::Value* Emitter::call_libm(const std::string& name, llvm::Value* x, llvm::Value* y) {
  llvm::Type* t = x->getType();
  if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(t)) {  // one call per lane
    llvm::Value* r = llvm::PoisonValue::get(vt);
    for (unsigned i = 0; i < vt->getNumElements(); ++i) {
      llvm::Value* yi = y ? b_.CreateExtractElement(y, i) : nullptr;
      r = b_.CreateInsertElement(r, call_libm(name, b_.CreateExtractElement(x, i), yi), i);
    }
    return r;
  }
  if (t->isHalfTy()) {
    llvm::Value* r = call_libm(name, b_.CreateFPExt(x, b_.getFloatTy()),
                               y ? b_.CreateFPExt(y, b_.getFloatTy()) : nullptr);
    return b_.CreateFPTrunc(r, t);
  }
  std::string cname = t->isFloatTy() ? name + "f" : name;
  std::vector<llvm::Type*> params(y ? 2 : 1, t);
  llvm::FunctionCallee f = module_.getOrInsertFunction(cname, llvm::FunctionType::get(t, params, false));
  if (auto* fn = llvm::dyn_cast<llvm::Function>(f.getCallee())) {
    fn->setDoesNotThrow();
    fn->setWillReturn();
    fn->setDoesNotAccessMemory();
  }
  std::vector<llvm::Value*> args{x};
  if (y) args.push_back(y);
  return b_.CreateCall(f, args);
}

llvm::Value* Emitter::call_libmvec(const std::string& name, const std::vector<llvm::Value*>& args) {
  auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(args[0]->getType());
  if (!vt || target_.vector_math_bits == 0 || !has_libmvec_variant(name)) return nullptr;
  llvm::Type* elem = vt->getElementType();
  if (!elem->isFloatTy() && !elem->isDoubleTy()) return nullptr;
  const int elem_bits = static_cast<int>(elem->getPrimitiveSizeInBits());
  const int lanes = static_cast<int>(vt->getNumElements());
  int width = 0;  // widest variant that divides the lanes
  for (int bits : {512, 256, 128})
    if (bits <= target_.vector_math_bits && lanes % (bits / elem_bits) == 0) {
      width = bits / elem_bits;
      break;
    }
  if (width == 0) {
    // An odd lane count (a loop tail: 5 of 16 lanes) runs in the smallest variant that holds it,
    // the extra lanes undefined and dropped, rather than as one scalar libm call per lane.
    for (int bits : {128, 256, 512})
      if (bits <= target_.vector_math_bits && bits / elem_bits >= lanes) {
        width = bits / elem_bits;
        break;
      }
    if (width == 0) return nullptr;
    std::vector<llvm::Value*> wide;
    for (llvm::Value* a : args) wide.push_back(b_.CreateShuffleVector(a, llvm::createSequentialMask(0, lanes, width - lanes)));
    llvm::Value* r = call_libmvec(name, wide);
    if (!r) return nullptr;
    return b_.CreateShuffleVector(r, llvm::createSequentialMask(0, lanes, 0));
  }
  auto* wt = llvm::FixedVectorType::get(elem, width);
  std::vector<llvm::Type*> params(args.size(), wt);
  llvm::FunctionCallee f = module_.getOrInsertFunction(libmvec_name(name, elem_bits, width),
                                                       llvm::FunctionType::get(wt, params, false));
  if (auto* fn = llvm::dyn_cast<llvm::Function>(f.getCallee())) {
    fn->setDoesNotThrow();
    fn->setWillReturn();
    fn->setDoesNotAccessMemory();
  }
  std::vector<llvm::Value*> parts;
  for (int c = 0; c < lanes / width; ++c) {
    std::vector<llvm::Value*> chunk;
    for (llvm::Value* a : args)
      chunk.push_back(lanes == width ? a : b_.CreateShuffleVector(a, llvm::createSequentialMask(c * width, width, 0)));
    parts.push_back(b_.CreateCall(f, chunk));
  }
  return parts.size() == 1 ? parts[0] : llvm::concatenateVectors(b_, parts);
}

// exp(x) for float32 vectors, inline: n = rint(x * log2(e)), r = x - n*ln2 (in two parts, Cody-Waite),
// exp(r) by the Cephes degree-6 polynomial on [-ln2/2, ln2/2] (about 1 ulp), times 2^n applied as two
// exact powers 2^(n >> 1) * 2^(n - (n >> 1)) so that n in [-150, 129] needs no special cases: x is
// clamped to [-104, 89], whose ends underflow to 0 and overflow to inf in the multiplies; NaN
// passes through. As a call the vector ABI spills every live vector register; inline, LLVM
// interleaves it with the loads and reductions around it (Softmax, sigmoid).
namespace {
// Whether the comma-separated LLVM feature list enables `name` (its last +name/-name wins).
bool feature_on(const std::string& features, const std::string& name) {
  bool on = false;
  size_t at = 0;
  while (at <= features.size()) {
    const size_t end = std::min(features.find(',', at), features.size());
    const std::string f = features.substr(at, end - at);
    if (f == "+" + name) on = true;
    if (f == "-" + name) on = false;
    at = end + 1;
  }
  return on;
}
}  // namespace

// a / b for a float32 constant b (a QuantizeLinear's scale), correctly rounded like the
// division but without one (vdivps is the costliest step of a quantizing kernel): q = a * inv
// with inv = RN(1 / b), then one correction with the exact residual a - q * b, fused
// multiply-adds (Markstein: with inv the correctly rounded reciprocal and q within an ulp of the
// quotient, q + r * inv rounds to the correctly rounded quotient). Only with hardware FMA and
// |b| within 2^-60..2^60 (the reciprocal and quotients stay normal; an a that overflows keeps
// the product, whose residual is NaN); else null and the caller divides.
llvm::Value* Emitter::divide_by_constant_exactly(llvm::Value* a, llvm::Value* b) {
  auto* k = llvm::dyn_cast<llvm::Constant>(b);
  if (!k || !a->getType()->getScalarType()->isFloatTy() || !feature_on(target_.features, "fma")) return nullptr;
  auto* c = llvm::dyn_cast_or_null<llvm::ConstantFP>(k->getType()->isVectorTy() ? k->getSplatValue() : k);
  if (!c) return nullptr;
  const float d = c->getValueAPF().convertToFloat();
  if (!(std::fabs(d) >= 0x1p-60f && std::fabs(d) <= 0x1p60f)) return nullptr;
  llvm::Type* t = a->getType();
  llvm::Value* inv = llvm::ConstantFP::get(t, 1.0f / d);
  llvm::Value* divisor = llvm::ConstantFP::get(t, d);
  llvm::Value* q = b_.CreateFMul(a, inv);
  llvm::Value* r = b_.CreateIntrinsic(llvm::Intrinsic::fma, {t}, {b_.CreateFNeg(q), divisor, a});
  llvm::Value* corrected = b_.CreateIntrinsic(llvm::Intrinsic::fma, {t}, {r, inv, q});
  return b_.CreateSelect(b_.CreateFCmpUNO(corrected, corrected), q, corrected);
}

llvm::Value* Emitter::inline_exp(llvm::Value* x) {
  auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(x->getType());
  if (!vt || !vt->getElementType()->isFloatTy()) return nullptr;
  auto* it = llvm::FixedVectorType::get(b_.getInt32Ty(), static_cast<unsigned>(vt->getNumElements()));
  auto c = [&](double v) { return llvm::ConstantFP::get(vt, v); };
  auto fma = [&](llvm::Value* a, llvm::Value* b, llvm::Value* d) {
    return b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {vt}, {a, b, d});
  };
  llvm::Value* hi = c(89.0);
  llvm::Value* lo = c(-104.0);
  llvm::Value* xc = b_.CreateSelect(b_.CreateFCmpOGT(x, hi), hi, x);  // NaN stays NaN
  xc = b_.CreateSelect(b_.CreateFCmpOLT(xc, lo), lo, xc);
  llvm::Value* n = b_.CreateUnaryIntrinsic(llvm::Intrinsic::rint, b_.CreateFMul(xc, c(1.44269504088896341)));
  llvm::Value* r = fma(n, c(-0.693359375), xc);
  r = fma(n, c(2.12194440e-4), r);
  llvm::Value* p = c(1.9875691500e-4);
  for (double k : {1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1})
    p = fma(p, r, c(k));
  llvm::Value* y = fma(p, b_.CreateFMul(r, r), b_.CreateFAdd(r, c(1.0)));
  llvm::Value* ni = b_.CreateFPToSI(b_.CreateSelect(b_.CreateFCmpUNO(n, n), c(0.0), n), it);
  llvm::Value* n1 = b_.CreateAShr(ni, 1);
  llvm::Value* n2 = b_.CreateSub(ni, n1);
  auto pow2 = [&](llvm::Value* e) {
    return b_.CreateBitCast(b_.CreateShl(b_.CreateAdd(e, llvm::ConstantInt::get(it, 127)), 23), vt);
  };
  llvm::Value* v = b_.CreateFMul(b_.CreateFMul(y, pow2(n1)), pow2(n2));
  return b_.CreateSelect(b_.CreateFCmpUNO(x, x), x, v);
}

// erf(x) for float32 vectors, inline (GELU's erf, otherwise a libmvec call that spills every live
// vector register). |x| < 0.5: the Maclaurin series to x^13 (relative error ~1e-8, so tiny inputs
// keep their relative accuracy); above: Abramowitz & Stegun 7.1.26, 1 - t (a1 + t (a2 + ...))
// e^{-x^2} with t = 1 / (1 + p |x|) (absolute error <= 1.5e-7), e^{-x^2} by inline_exp; the sign
// restored last (erf is odd). Infinities give +-1, NaN stays NaN.
llvm::Value* Emitter::inline_erf(llvm::Value* x) {
  auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(x->getType());
  if (!vt || !vt->getElementType()->isFloatTy()) return nullptr;
  auto c = [&](double v) { return llvm::ConstantFP::get(vt, v); };
  auto fma = [&](llvm::Value* a, llvm::Value* b, llvm::Value* d) {
    return b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {vt}, {a, b, d});
  };
  llvm::Value* a = b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  llvm::Value* a2 = b_.CreateFMul(a, a);
  // 2/sqrt(pi) * (x - x^3/3 + x^5/10 - x^7/42 + x^9/216 - x^11/1320 + x^13/9360), in a^2.
  const double s = 1.1283791670955126;
  llvm::Value* series = c(s / 9360.0);
  for (double k : {-s / 1320.0, s / 216.0, -s / 42.0, s / 10.0, -s / 3.0, s}) series = fma(series, a2, c(k));
  series = b_.CreateFMul(series, a);
  llvm::Value* t = b_.CreateFDiv(c(1.0), fma(a, c(0.3275911), c(1.0)));
  llvm::Value* poly = c(1.061405429);
  for (double k : {-1.453152027, 1.421413741, -0.284496736, 0.254829592}) poly = fma(poly, t, c(k));
  poly = b_.CreateFMul(poly, t);
  llvm::Value* e = inline_exp(b_.CreateFNeg(a2));
  llvm::Value* tail = fma(b_.CreateFNeg(poly), e, c(1.0));
  llvm::Value* r = b_.CreateSelect(b_.CreateFCmpOLT(a, c(0.5)), series, tail);
  return b_.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, r, x);
}

llvm::Value* Emitter::emit_call(const ExprNode& n) {
  const std::string& name = n.name;
  const int lanes = n.type.lanes;
  std::vector<llvm::Value*> args;
  for (const Expr& a : n.operands) args.push_back(to_lanes(emit(a), lanes));
  auto arity = [&](size_t k) {
    if (args.size() != k)
      fail("intrinsic '" + name + "' takes " + std::to_string(k) + " arguments, got " +
           std::to_string(args.size()));
  };
  if (n.type.is_int() && (name == "abs" || name == "fabs")) {
    arity(1);
    return b_.CreateBinaryIntrinsic(llvm::Intrinsic::abs, args[0], b_.getFalse());
  }
  if (!n.type.is_float()) fail("intrinsic '" + name + "' on " + tir::to_string(n.type));
  if (args.empty()) fail("intrinsic '" + name + "' without arguments");
  if (name == "abs") {
    arity(1);
    return b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, args[0]);
  }
  if (name == "div_exact") {  // a / b as IEEE division: never the reciprocal multiply of emit_binary
    arity(2);
    if (llvm::Value* q = divide_by_constant_exactly(args[0], args[1])) return q;
    return b_.CreateFDiv(args[0], args[1]);
  }
  if (name == "sigmoid") {  // 1 / (1 + exp(-x))
    arity(1);
    llvm::Value* neg = b_.CreateFNeg(args[0]);
    llvm::Value* e = inline_exp(neg);
    if (!e) e = call_libmvec("exp", {neg});
    if (!e) e = b_.CreateUnaryIntrinsic(llvm::Intrinsic::exp, neg);
    llvm::Value* one = llvm::ConstantFP::get(args[0]->getType(), 1.0);
    return b_.CreateFDiv(one, b_.CreateFAdd(one, e));
  }
  if (name == "rsqrt") {
    arity(1);
    llvm::Value* one = llvm::ConstantFP::get(args[0]->getType(), 1.0);
    return b_.CreateFDiv(one, b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, args[0]));
  }
  const bool known = float_intrinsic(name) != llvm::Intrinsic::not_intrinsic || is_libm(name);
  if (known) {
    const size_t want = name == "fma" ? 3 : is_binary_math(name) || name == "copysign" ? 2 : 1;
    arity(want);
    if (name == "exp")
      if (llvm::Value* v = inline_exp(args[0])) return v;
    if (name == "erf")
      if (llvm::Value* v = inline_erf(args[0])) return v;
    if (llvm::Value* v = call_libmvec(name, args)) return v;
  }
  if (llvm::Intrinsic::ID id = float_intrinsic(name); id != llvm::Intrinsic::not_intrinsic) {
    if (id == llvm::Intrinsic::fma) return b_.CreateIntrinsic(id, {args[0]->getType()}, args);
    if (args.size() == 2) return b_.CreateBinaryIntrinsic(id, args[0], args[1]);
    return b_.CreateUnaryIntrinsic(id, args[0]);
  }
  if (is_libm(name)) return call_libm(name, args[0], args.size() == 2 ? args[1] : nullptr);
  fail("unknown intrinsic '" + name + "'");
}

llvm::Value* Emitter::buffer_ptr(const tir::Buffer& b) {
  auto it = buffers_.find(b.get());
  if (it == buffers_.end())
    fail("buffer '" + b->name + "' is neither a parameter nor allocated around its use");
  return it->second;
}

llvm::Value* Emitter::flat_index(const tir::Buffer& b, const std::vector<Expr>& indices) {
  auto index = [&](const Expr& e) { return as_i64(emit(e), is_signed(e->type.dtype)); };
  if (indices.size() == 1) return index(indices[0]);
  if (indices.size() != b->shape.size())
    fail("access to '" + b->name + "' with " + std::to_string(indices.size()) + " indices for " +
         std::to_string(b->shape.size()) + " dims");
  int lanes = 1;
  for (const Expr& e : indices) lanes = std::max(lanes, e->type.lanes);
  llvm::Value* acc = to_lanes(index(indices[0]), lanes);
  for (size_t k = 1; k < indices.size(); ++k) {
    llvm::Value* dim = to_lanes(index(b->shape[k]), lanes);
    acc = b_.CreateAdd(b_.CreateMul(acc, dim), to_lanes(index(indices[k]), lanes));
  }
  return acc;
}

llvm::Value* Emitter::element_address(const tir::Buffer& b, const std::vector<Expr>& indices) {
  llvm::Value* idx = flat_index(b, indices);
  if (idx->getType()->isVectorTy()) idx = b_.CreateExtractElement(idx, uint64_t{0});
  return b_.CreateGEP(memory_type(b->dtype), buffer_ptr(b), idx);
}

bool Emitter::ramp_stride(const std::vector<Expr>& indices, int64_t* stride) {
  const Expr& last = indices.back();
  if (last->kind != ExprKind::kRamp || !tir::is_const_int(last->operands[1], stride)) return false;
  for (size_t k = 0; k + 1 < indices.size(); ++k)
    if (indices[k]->type.lanes != 1) return false;
  return true;
}

llvm::Value* Emitter::lane0_address(const tir::Buffer& b, const std::vector<Expr>& indices) {
  std::vector<Expr> first = indices;
  first.back() = indices.back()->operands[0];
  return b_.CreateGEP(memory_type(b->dtype), buffer_ptr(b), flat_index(b, first));
}

llvm::Value* Emitter::contiguous_address(const tir::Buffer& b, const std::vector<Expr>& indices) {
  int64_t stride = 0;
  return ramp_stride(indices, &stride) && stride == 1 ? lane0_address(b, indices) : nullptr;
}

llvm::Value* Emitter::emit_load(const ExprNode& n) {
  const tir::Buffer& buf = n.buffer;
  llvm::Type* elem = memory_type(buf->dtype);
  const int lanes = n.type.lanes;
  const llvm::Align align(elem->getPrimitiveSizeInBits() / 8);
  llvm::Value* v = nullptr;
  int64_t stride = 0;
  const bool ramp = lanes > 1 && ramp_stride(n.operands, &stride);
  llvm::Value* ptr = ramp && stride == 1 ? lane0_address(buf, n.operands) : nullptr;
  llvm::Value* strided = ramp && stride >= 2 && stride <= 4 ? lane0_address(buf, n.operands) : nullptr;
  if (ptr) {
    llvm::Type* vt = llvm::FixedVectorType::get(elem, lanes);
    v = b_.CreateAlignedLoad(vt, ptr, align);
  } else if (strided) {
    // Every stride-th element of one masked contiguous load (shuffles, not a gather: pooling
    // and strided slices); the mask stops at the last element used, so nothing past it is read.
    const int64_t span = stride * lanes;
    llvm::Type* wide = llvm::FixedVectorType::get(elem, static_cast<unsigned>(span));
    std::vector<llvm::Constant*> mask_bits;
    std::vector<int> pick;
    for (int64_t i = 0; i < span; ++i) mask_bits.push_back(b_.getInt1(i <= stride * (lanes - 1)));
    for (int i = 0; i < lanes; ++i) pick.push_back(static_cast<int>(i * stride));
    llvm::Value* all = b_.CreateMaskedLoad(wide, strided, align, llvm::ConstantVector::get(mask_bits));
    v = b_.CreateShuffleVector(all, pick);
  } else {
    llvm::Value* idx = to_lanes(flat_index(buf, n.operands), lanes);
    ptr = b_.CreateGEP(elem, buffer_ptr(buf), idx);
    if (lanes > 1) {
      llvm::Type* vt = llvm::FixedVectorType::get(elem, lanes);
      v = b_.CreateMaskedGather(vt, ptr, align);
    } else {
      v = b_.CreateAlignedLoad(elem, ptr, align);
    }
  }
  if (buf->dtype == DType::kBool) v = b_.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType()));
  return v;
}

}  // namespace kiln::codegen
