// TIR text printer (see printer.h).
#include "tir/printer.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <sstream>

namespace kiln::tir {
namespace {

// Binding strength of an infix operator (higher binds tighter); 100 for atoms.
int precedence(ExprKind k) {
  switch (k) {
    case ExprKind::kOr: return 1;
    case ExprKind::kAnd: return 2;
    case ExprKind::kEQ:
    case ExprKind::kNE:
    case ExprKind::kLT:
    case ExprKind::kLE:
    case ExprKind::kGT:
    case ExprKind::kGE: return 3;
    case ExprKind::kAdd:
    case ExprKind::kSub: return 4;
    case ExprKind::kMul:
    case ExprKind::kDiv:
    case ExprKind::kFloorDiv:
    case ExprKind::kFloorMod: return 5;
    case ExprKind::kNot: return 6;
    default: return 100;
  }
}

const char* infix(ExprKind k) {
  switch (k) {
    case ExprKind::kAdd: return " + ";
    case ExprKind::kSub: return " - ";
    case ExprKind::kMul: return "*";
    case ExprKind::kDiv: return " / ";
    case ExprKind::kFloorDiv: return " // ";
    case ExprKind::kFloorMod: return " % ";
    case ExprKind::kEQ: return " == ";
    case ExprKind::kNE: return " != ";
    case ExprKind::kLT: return " < ";
    case ExprKind::kLE: return " <= ";
    case ExprKind::kGT: return " > ";
    case ExprKind::kGE: return " >= ";
    case ExprKind::kAnd: return " && ";
    case ExprKind::kOr: return " || ";
    default: return nullptr;
  }
}

std::string float_text(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

void print_expr(std::ostream& os, const Expr& e);

void print_operand(std::ostream& os, const Expr& e, int min_prec) {
  if (precedence(e->kind) < min_prec) {
    os << '(';
    print_expr(os, e);
    os << ')';
  } else {
    print_expr(os, e);
  }
}

void print_list(std::ostream& os, const std::vector<Expr>& es, size_t from = 0) {
  for (size_t i = from; i < es.size(); ++i) {
    if (i > from) os << ", ";
    print_expr(os, es[i]);
  }
}

void print_expr(std::ostream& os, const Expr& e) {
  if (!e) {
    os << "<null>";
    return;
  }
  switch (e->kind) {
    case ExprKind::kIntImm:
      if (e->type.is_bool()) {
        os << (e->int_value ? "true" : "false");
      } else if (e->type == i64()) {
        os << e->int_value;
      } else {
        os << to_string(e->type) << '(' << e->int_value << ')';
      }
      return;
    case ExprKind::kFloatImm:
      if (e->type == f32()) {
        os << float_text(e->float_value);
      } else {
        os << to_string(e->type) << '(' << float_text(e->float_value) << ')';
      }
      return;
    case ExprKind::kVar: os << e->name; return;
    case ExprKind::kNot:
      os << '!';
      print_operand(os, e->operands[0], precedence(ExprKind::kNot));
      return;
    case ExprKind::kMin:
    case ExprKind::kMax:
      os << (e->kind == ExprKind::kMin ? "min(" : "max(");
      print_list(os, e->operands);
      os << ')';
      return;
    case ExprKind::kSelect:
      os << "select(";
      print_list(os, e->operands);
      os << ')';
      return;
    case ExprKind::kCast:
      os << to_string(e->type) << '(';
      print_expr(os, e->operands[0]);
      os << ')';
      return;
    case ExprKind::kLoad:
      os << e->buffer->name << '[';
      print_list(os, e->operands);
      os << ']';
      return;
    case ExprKind::kCall:
      os << e->name << '(';
      print_list(os, e->operands);
      os << ')';
      return;
    case ExprKind::kRamp:
      os << "ramp(";
      print_list(os, e->operands);
      os << ", " << e->type.lanes << ')';
      return;
    case ExprKind::kBroadcast:
      os << "broadcast(";
      print_expr(os, e->operands[0]);
      os << ", " << e->type.lanes << ')';
      return;
    case ExprKind::kLet:
      os << "(let " << e->operands[0]->name << " = ";
      print_expr(os, e->operands[1]);
      os << " in ";
      print_expr(os, e->operands[2]);
      os << ')';
      return;
    default: break;
  }
  // Infix binary operators; left-associative, so the right side needs a tighter binding.
  int p = precedence(e->kind);
  const Expr& rhs = e->operands[1];
  if (e->kind == ExprKind::kAdd && rhs->kind == ExprKind::kIntImm && rhs->int_value < 0 &&
      rhs->int_value != INT64_MIN && rhs->type == i64()) {
    print_operand(os, e->operands[0], p);
    os << " - " << -rhs->int_value;
    return;
  }
  print_operand(os, e->operands[0], p);
  os << infix(e->kind);
  print_operand(os, e->operands[1], p + 1);
}

void print_stmt(std::ostream& os, const Stmt& s, int indent) {
  std::string pad(indent * 2, ' ');
  if (!s) {
    os << pad << "<null>\n";
    return;
  }
  switch (s->kind) {
    case StmtKind::kFor: {
      os << pad << "for " << s->var->name << " in [";
      print_expr(os, s->min);
      os << ", ";
      int64_t mn = 0, ext = 0;
      if (is_const_int(s->min, &mn) && is_const_int(s->extent, &ext)) {
        os << mn + ext;
      } else if (is_const_int(s->min, &mn) && mn == 0) {
        print_expr(os, s->extent);
      } else {
        print_operand(os, s->min, precedence(ExprKind::kAdd));
        os << " + ";
        print_operand(os, s->extent, precedence(ExprKind::kAdd) + 1);
      }
      os << ')';
      if (s->for_kind != ForKind::kSerial) os << ' ' << for_kind_name(s->for_kind);
      os << ":\n";
      print_stmt(os, s->body, indent + 1);
      return;
    }
    case StmtKind::kLetStmt:
      os << pad << "let " << s->var->name << " = ";
      print_expr(os, s->value);
      os << '\n';
      print_stmt(os, s->body, indent);
      return;
    case StmtKind::kStore:
      os << pad << s->buffer->name << '[';
      print_list(os, s->indices);
      os << "] = ";
      print_expr(os, s->value);
      os << '\n';
      return;
    case StmtKind::kAllocate: {
      os << pad << "allocate " << s->buffer->name << ": " << dtype_name(s->buffer->dtype) << '[';
      print_list(os, s->buffer->shape);
      os << "] " << s->buffer->scope << '\n';
      print_stmt(os, s->body, indent);
      return;
    }
    case StmtKind::kIfThenElse:
      os << pad << "if ";
      print_expr(os, s->cond);
      os << ":\n";
      print_stmt(os, s->then_case, indent + 1);
      if (s->else_case) {
        os << pad << "else:\n";
        print_stmt(os, s->else_case, indent + 1);
      }
      return;
    case StmtKind::kSeq:
      for (const Stmt& x : s->seq) print_stmt(os, x, indent);
      return;
    case StmtKind::kEvaluate:
      os << pad;
      print_expr(os, s->value);
      os << '\n';
      return;
  }
}

}  // namespace

std::string print(const Expr& e) {
  std::ostringstream os;
  print_expr(os, e);
  return os.str();
}

std::string print(const Stmt& s) {
  std::ostringstream os;
  print_stmt(os, s, 0);
  return os.str();
}

std::string print(const PrimFunc& f) {
  std::ostringstream os;
  os << "func " << f.name << '(';
  bool first = true;
  for (const Buffer& b : f.buffer_params) {
    if (!first) os << ", ";
    first = false;
    os << b->name << ": " << dtype_name(b->dtype) << '[';
    print_list(os, b->shape);
    os << ']';
  }
  for (const Expr& v : f.scalar_params) {
    if (!first) os << ", ";
    first = false;
    os << v->name << ": " << to_string(v->type);
  }
  os << ") {\n";
  print_stmt(os, f.body, 1);
  os << "}\n";
  return os.str();
}

}  // namespace kiln::tir
