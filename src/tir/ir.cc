// TIR node constructors: each validates its operands' types (equal dtypes for binary ops,
// scalar operands broadcast to the other side's lanes) and throws an internal error on misuse.
#include "tir/ir.h"

#include "core/error.h"

namespace kiln::tir {
namespace {

#define TIR_CHECK(cond, msg)                                                   \
  do {                                                                         \
    if (!(cond)) ::kiln::throw_internal(__FILE__, __LINE__, std::string("tir: ") + (msg)); \
  } while (0)

Expr make(ExprKind kind, DataType type, std::vector<Expr> operands) {
  auto n = std::make_shared<ExprNode>();
  n->kind = kind;
  n->type = type;
  n->operands = std::move(operands);
  return n;
}

std::shared_ptr<StmtNode> make_stmt(StmtKind kind) {
  auto n = std::make_shared<StmtNode>();
  n->kind = kind;
  return n;
}

const char* kind_name(ExprKind k) {
  switch (k) {
    case ExprKind::kAdd: return "add";
    case ExprKind::kSub: return "sub";
    case ExprKind::kMul: return "mul";
    case ExprKind::kDiv: return "div";
    case ExprKind::kFloorDiv: return "floordiv";
    case ExprKind::kFloorMod: return "floormod";
    case ExprKind::kMin: return "min";
    case ExprKind::kMax: return "max";
    case ExprKind::kEQ: return "==";
    case ExprKind::kNE: return "!=";
    case ExprKind::kLT: return "<";
    case ExprKind::kLE: return "<=";
    case ExprKind::kGT: return ">";
    case ExprKind::kGE: return ">=";
    case ExprKind::kAnd: return "&&";
    case ExprKind::kOr: return "||";
    default: return "?";
  }
}

bool is_int_scalar(const Expr& e) { return e && e->type.is_int() && e->type.lanes == 1; }

// Makes the lanes of `a` and `b` agree by broadcasting a scalar side.
void match_lanes(Expr& a, Expr& b, const char* what) {
  if (a->type.lanes == b->type.lanes) return;
  if (a->type.lanes == 1) {
    a = broadcast(a, b->type.lanes);
  } else if (b->type.lanes == 1) {
    b = broadcast(b, a->type.lanes);
  } else {
    TIR_CHECK(false, std::string(what) + ": lane mismatch " + to_string(a->type) + " vs " +
                         to_string(b->type));
  }
}

// The constant `v` in the scalar type of `like` (float or integer).
Expr const_like(const Expr& like, int64_t v) {
  DataType t = like->type.with_lanes(1);
  if (t.is_float()) return float_imm(static_cast<double>(v), t);
  return int_imm(v, t);
}

}  // namespace

std::string to_string(DataType t) {
  std::string s(dtype_name(t.dtype));
  if (t.lanes != 1) s += "x" + std::to_string(t.lanes);
  return s;
}

std::string_view for_kind_name(ForKind k) {
  switch (k) {
    case ForKind::kSerial: return "serial";
    case ForKind::kParallel: return "parallel";
    case ForKind::kVectorized: return "vectorized";
    case ForKind::kUnrolled: return "unrolled";
  }
  return "?";
}

Expr int_imm(int64_t v, DataType t) {
  if (t.is_float()) return float_imm(static_cast<double>(v), t);
  TIR_CHECK(t.is_int() || t.is_bool(), "int_imm of type " + to_string(t));
  auto n = std::make_shared<ExprNode>();
  n->kind = ExprKind::kIntImm;
  n->type = t.with_lanes(1);
  n->int_value = t.is_bool() ? (v != 0) : v;
  if (t.lanes > 1) return broadcast(n, t.lanes);
  return n;
}

Expr float_imm(double v, DataType t) {
  TIR_CHECK(t.is_float(), "float_imm of type " + to_string(t));
  auto n = std::make_shared<ExprNode>();
  n->kind = ExprKind::kFloatImm;
  n->type = t.with_lanes(1);
  n->float_value = v;
  if (t.lanes > 1) return broadcast(n, t.lanes);
  return n;
}

Expr make_var(const std::string& name, DataType t) {
  auto n = std::make_shared<ExprNode>();
  n->kind = ExprKind::kVar;
  n->type = t;
  n->name = name;
  return n;
}

Expr binary(ExprKind k, Expr a, Expr b) {
  TIR_CHECK(a && b, std::string(kind_name(k)) + ": null operand");
  TIR_CHECK(k >= ExprKind::kAdd && k <= ExprKind::kOr && k != ExprKind::kNot,
            "binary: not a binary kind");
  TIR_CHECK(a->type.dtype == b->type.dtype, std::string(kind_name(k)) + ": dtype mismatch " +
                                                to_string(a->type) + " vs " + to_string(b->type));
  match_lanes(a, b, kind_name(k));
  DataType t = a->type;
  switch (k) {
    case ExprKind::kFloorDiv:
    case ExprKind::kFloorMod:
      TIR_CHECK(t.is_int(), std::string(kind_name(k)) + " needs integers, got " + to_string(t));
      break;
    case ExprKind::kAnd:
    case ExprKind::kOr:
      TIR_CHECK(t.is_bool(), std::string(kind_name(k)) + " needs bool, got " + to_string(t));
      break;
    case ExprKind::kEQ:
    case ExprKind::kNE:
    case ExprKind::kLT:
    case ExprKind::kLE:
    case ExprKind::kGT:
    case ExprKind::kGE:
      t = DataType{DType::kBool, t.lanes};
      break;
    default:
      TIR_CHECK(!t.is_bool(), std::string(kind_name(k)) + " on bool");
      break;
  }
  return make(k, t, {std::move(a), std::move(b)});
}

Expr logical_not(Expr a) {
  TIR_CHECK(a && a->type.is_bool(), "not: needs bool");
  DataType t = a->type;
  return make(ExprKind::kNot, t, {std::move(a)});
}

Expr select(Expr cond, Expr t, Expr f) {
  TIR_CHECK(cond && t && f, "select: null operand");
  TIR_CHECK(cond->type.is_bool(), "select: condition must be bool, got " + to_string(cond->type));
  TIR_CHECK(t->type.dtype == f->type.dtype,
            "select: dtype mismatch " + to_string(t->type) + " vs " + to_string(f->type));
  match_lanes(t, f, "select");
  if (cond->type.lanes == 1 && t->type.lanes > 1) {
    cond = broadcast(cond, t->type.lanes);
  } else if (cond->type.lanes > 1 && t->type.lanes == 1) {
    t = broadcast(t, cond->type.lanes);
    f = broadcast(f, cond->type.lanes);
  }
  TIR_CHECK(cond->type.lanes == t->type.lanes, "select: lane mismatch");
  DataType type = t->type;
  return make(ExprKind::kSelect, type, {std::move(cond), std::move(t), std::move(f)});
}

Expr cast(DataType t, Expr v) {
  TIR_CHECK(v != nullptr, "cast: null operand");
  if (v->type.lanes == 1 && t.lanes > 1) v = broadcast(v, t.lanes);
  if (t.lanes == 1 && v->type.lanes > 1) t = t.with_lanes(v->type.lanes);
  TIR_CHECK(v->type.lanes == t.lanes, "cast: lane mismatch");
  return make(ExprKind::kCast, t, {std::move(v)});
}

Expr load(Buffer b, std::vector<Expr> indices, int lanes) {
  TIR_CHECK(b != nullptr, "load: null buffer");
  TIR_CHECK(!indices.empty(), "load from " + b->name + ": no indices");
  TIR_CHECK(indices.size() == b->shape.size() || indices.size() == 1 || b->shape.empty(),
            "load from " + b->name + ": " + std::to_string(indices.size()) + " indices for " +
                std::to_string(b->shape.size()) + " dims");
  for (size_t i = 0; i + 1 < indices.size(); ++i)
    TIR_CHECK(is_int_scalar(indices[i]), "load from " + b->name + ": index must be a scalar int");
  Expr& last = indices.back();
  TIR_CHECK(last && last->type.is_int(), "load from " + b->name + ": index must be an int");
  if (lanes > 1 && last->type.lanes == 1) last = ramp(last, int_imm(1, last->type), lanes);
  if (lanes == 1) lanes = last->type.lanes;
  TIR_CHECK(last->type.lanes == lanes, "load from " + b->name + ": index lanes mismatch");
  auto n = std::make_shared<ExprNode>();
  n->kind = ExprKind::kLoad;
  n->type = DataType{b->dtype, lanes};
  n->operands = std::move(indices);
  n->buffer = std::move(b);
  return n;
}

Expr call(const std::string& intrinsic, DataType t, std::vector<Expr> args) {
  for (const Expr& a : args) TIR_CHECK(a != nullptr, "call " + intrinsic + ": null argument");
  auto n = std::make_shared<ExprNode>();
  n->kind = ExprKind::kCall;
  n->type = t;
  n->name = intrinsic;
  n->operands = std::move(args);
  return n;
}

Expr ramp(Expr base, Expr stride, int lanes) {
  TIR_CHECK(is_int_scalar(base) && is_int_scalar(stride), "ramp: base and stride must be scalar ints");
  TIR_CHECK(base->type == stride->type, "ramp: base and stride types differ");
  TIR_CHECK(lanes >= 1, "ramp: lanes must be positive");
  DataType t = base->type.with_lanes(lanes);
  return make(ExprKind::kRamp, t, {std::move(base), std::move(stride)});
}

Expr broadcast(Expr v, int lanes) {
  TIR_CHECK(v && v->type.lanes == 1, "broadcast: needs a scalar");
  TIR_CHECK(lanes >= 1, "broadcast: lanes must be positive");
  if (lanes == 1) return v;
  DataType t = v->type.with_lanes(lanes);
  return make(ExprKind::kBroadcast, t, {std::move(v)});
}

Expr let(Expr var, Expr value, Expr body) {
  TIR_CHECK(var && var->kind == ExprKind::kVar, "let: binds a var");
  TIR_CHECK(value && value->type == var->type, "let " + var->name + ": value type mismatch");
  TIR_CHECK(body != nullptr, "let: null body");
  DataType t = body->type;
  return make(ExprKind::kLet, t, {std::move(var), std::move(value), std::move(body)});
}

Stmt for_loop(Expr var, Expr min, Expr extent, ForKind kind, Stmt body) {
  TIR_CHECK(var && var->kind == ExprKind::kVar && is_int_scalar(var), "for: var must be an int var");
  TIR_CHECK(is_int_scalar(min) && is_int_scalar(extent),
            "for " + var->name + ": min and extent must be scalar ints");
  TIR_CHECK(body != nullptr, "for " + var->name + ": null body");
  auto n = make_stmt(StmtKind::kFor);
  n->var = std::move(var);
  n->min = std::move(min);
  n->extent = std::move(extent);
  n->for_kind = kind;
  n->body = std::move(body);
  return n;
}

Stmt let_stmt(Expr var, Expr value, Stmt body) {
  TIR_CHECK(var && var->kind == ExprKind::kVar, "let_stmt: binds a var");
  TIR_CHECK(value && value->type == var->type, "let_stmt " + var->name + ": value type mismatch");
  TIR_CHECK(body != nullptr, "let_stmt: null body");
  auto n = make_stmt(StmtKind::kLetStmt);
  n->var = std::move(var);
  n->value = std::move(value);
  n->body = std::move(body);
  return n;
}

Stmt store(Buffer b, std::vector<Expr> indices, Expr value) {
  TIR_CHECK(b != nullptr, "store: null buffer");
  TIR_CHECK(value != nullptr, "store to " + b->name + ": null value");
  TIR_CHECK(!indices.empty(), "store to " + b->name + ": no indices");
  TIR_CHECK(indices.size() == b->shape.size() || indices.size() == 1 || b->shape.empty(),
            "store to " + b->name + ": " + std::to_string(indices.size()) + " indices for " +
                std::to_string(b->shape.size()) + " dims");
  TIR_CHECK(value->type.dtype == b->dtype, "store to " + b->name + ": value type " +
                                               to_string(value->type) + " for buffer of " +
                                               std::string(dtype_name(b->dtype)));
  for (size_t i = 0; i + 1 < indices.size(); ++i)
    TIR_CHECK(is_int_scalar(indices[i]), "store to " + b->name + ": index must be a scalar int");
  Expr& last = indices.back();
  TIR_CHECK(last && last->type.is_int(), "store to " + b->name + ": index must be an int");
  int lanes = value->type.lanes;
  if (lanes > 1 && last->type.lanes == 1) last = ramp(last, int_imm(1, last->type), lanes);
  if (lanes == 1 && last->type.lanes > 1) value = broadcast(value, last->type.lanes);
  TIR_CHECK(last->type.lanes == value->type.lanes, "store to " + b->name + ": index lanes mismatch");
  auto n = make_stmt(StmtKind::kStore);
  n->buffer = std::move(b);
  n->indices = std::move(indices);
  n->value = std::move(value);
  return n;
}

Stmt allocate(Buffer b, Stmt body) {
  TIR_CHECK(b != nullptr && body != nullptr, "allocate: null buffer or body");
  auto n = make_stmt(StmtKind::kAllocate);
  n->buffer = std::move(b);
  n->body = std::move(body);
  return n;
}

Stmt if_then_else(Expr cond, Stmt then_case, Stmt else_case) {
  TIR_CHECK(cond && cond->type == boolean(), "if: condition must be a scalar bool");
  TIR_CHECK(then_case != nullptr, "if: null then case");
  auto n = make_stmt(StmtKind::kIfThenElse);
  n->cond = std::move(cond);
  n->then_case = std::move(then_case);
  n->else_case = std::move(else_case);
  return n;
}

Stmt seq(std::vector<Stmt> stmts) {
  std::vector<Stmt> flat;
  for (Stmt& s : stmts) {
    if (!s) continue;
    if (s->kind == StmtKind::kSeq) {
      flat.insert(flat.end(), s->seq.begin(), s->seq.end());
    } else {
      flat.push_back(std::move(s));
    }
  }
  if (flat.size() == 1) return flat[0];
  auto n = make_stmt(StmtKind::kSeq);
  n->seq = std::move(flat);
  return n;
}

Stmt evaluate(Expr v) {
  TIR_CHECK(v != nullptr, "evaluate: null value");
  auto n = make_stmt(StmtKind::kEvaluate);
  n->value = std::move(v);
  return n;
}

Buffer make_buffer(const std::string& name, DType dtype, std::vector<Expr> shape,
                   const std::string& scope) {
  for (const Expr& d : shape) TIR_CHECK(is_int_scalar(d), "buffer " + name + ": dims must be scalar ints");
  auto n = std::make_shared<BufferNode>();
  n->name = name;
  n->dtype = dtype;
  n->shape = std::move(shape);
  n->scope = scope;
  return n;
}

Expr operator+(Expr a, Expr b) { return binary(ExprKind::kAdd, std::move(a), std::move(b)); }
Expr operator-(Expr a, Expr b) { return binary(ExprKind::kSub, std::move(a), std::move(b)); }
Expr operator*(Expr a, Expr b) { return binary(ExprKind::kMul, std::move(a), std::move(b)); }
Expr operator/(Expr a, Expr b) { return binary(ExprKind::kDiv, std::move(a), std::move(b)); }
Expr operator+(Expr a, int64_t b) {
  TIR_CHECK(a != nullptr, "+: null operand");
  Expr c = const_like(a, b);
  return binary(ExprKind::kAdd, std::move(a), std::move(c));
}
Expr operator-(Expr a, int64_t b) {
  TIR_CHECK(a != nullptr, "-: null operand");
  Expr c = const_like(a, b);
  return binary(ExprKind::kSub, std::move(a), std::move(c));
}
Expr operator*(Expr a, int64_t b) {
  TIR_CHECK(a != nullptr, "*: null operand");
  Expr c = const_like(a, b);
  return binary(ExprKind::kMul, std::move(a), std::move(c));
}
Expr floordiv(Expr a, Expr b) { return binary(ExprKind::kFloorDiv, std::move(a), std::move(b)); }
Expr floormod(Expr a, Expr b) { return binary(ExprKind::kFloorMod, std::move(a), std::move(b)); }
Expr min(Expr a, Expr b) { return binary(ExprKind::kMin, std::move(a), std::move(b)); }
Expr max(Expr a, Expr b) { return binary(ExprKind::kMax, std::move(a), std::move(b)); }

bool is_const_int(const Expr& e, int64_t* value) {
  if (!e || e->kind != ExprKind::kIntImm) return false;
  if (value) *value = e->int_value;
  return true;
}

}  // namespace kiln::tir
