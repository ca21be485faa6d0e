// TIR: kiln's loop IR. Expressions and statements are immutable nodes shared by pointer
// (rewrites build new nodes); a PrimFunc is one kernel: buffer parameters, scalar parameters
// (symbolic dims), and a statement body. Vectors are first class (Ramp, Broadcast, lanes > 1).
// See DESIGN.md "Lowering and code generation". Printer: tir/printer.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace kiln::tir {

// A scalar or vector type: element dtype and lane count.
struct DataType {
  DType dtype = DType::kInt64;
  int lanes = 1;
  bool operator==(const DataType& o) const { return dtype == o.dtype && lanes == o.lanes; }
  bool operator!=(const DataType& o) const { return !(*this == o); }
  DataType with_lanes(int l) const { return {dtype, l}; }
  bool is_float() const { return kiln::is_float(dtype); }
  bool is_int() const { return kiln::is_integer(dtype); }
  bool is_bool() const { return dtype == DType::kBool; }
};
inline DataType i64() { return {DType::kInt64, 1}; }
inline DataType i32() { return {DType::kInt32, 1}; }
inline DataType f32() { return {DType::kFloat32, 1}; }
inline DataType boolean() { return {DType::kBool, 1}; }
std::string to_string(DataType t);  // "f32", "f32x16", "i64"

struct ExprNode;
struct StmtNode;
struct BufferNode;
using Expr = std::shared_ptr<const ExprNode>;
using Stmt = std::shared_ptr<const StmtNode>;
using Buffer = std::shared_ptr<const BufferNode>;

enum class ExprKind {
  kIntImm, kFloatImm, kVar,
  kAdd, kSub, kMul, kDiv,            // Div: true division for floats, truncating for ints
  kFloorDiv, kFloorMod,              // integer floor division / modulo (index arithmetic)
  kMin, kMax,
  kEQ, kNE, kLT, kLE, kGT, kGE,      // result type: bool with the operands' lanes
  kAnd, kOr, kNot,
  kSelect,                           // operands: cond, true_value, false_value
  kCast,                             // operands: value; target in `type`
  kLoad,                             // buffer[indices...]; one index after flattening
  kCall,                             // pure intrinsic `name(args)`: exp, log, sqrt, tanh, erf, ...
  kRamp,                             // operands: base, stride; lanes in type
  kBroadcast,                        // operands: scalar value; lanes in type
  kLet,                              // operands: var, value, body
};

struct ExprNode {
  ExprKind kind;
  DataType type;
  int64_t int_value = 0;      // kIntImm
  double float_value = 0;     // kFloatImm
  std::string name;           // kVar (display name), kCall (intrinsic)
  std::vector<Expr> operands;
  Buffer buffer;              // kLoad
};

enum class ForKind { kSerial, kParallel, kVectorized, kUnrolled };
std::string_view for_kind_name(ForKind k);

enum class StmtKind {
  kFor,         // var in [min, min + extent)
  kLetStmt,     // var = value; body
  kStore,       // buffer[indices] = value
  kAllocate,    // buffer lives in body (scope "local": stack/registers, "global": heap)
  kIfThenElse,  // cond, then_case, else_case (may be null)
  kSeq,         // stmts in order
  kEvaluate,    // value (a call evaluated for its effect, e.g. a microkernel)
};

struct StmtNode {
  StmtKind kind;
  Expr var;                 // kFor, kLetStmt
  Expr min, extent;         // kFor
  ForKind for_kind = ForKind::kSerial;
  Expr value;               // kLetStmt, kStore, kEvaluate
  Expr cond;                // kIfThenElse
  Buffer buffer;            // kStore, kAllocate
  std::vector<Expr> indices;  // kStore
  Stmt body;                // kFor, kLetStmt, kAllocate
  Stmt then_case, else_case;  // kIfThenElse
  std::vector<Stmt> seq;    // kSeq
};

// A named region of memory. Before storage flattening it has a multi-dimensional shape and
// Load/Store use one index per dim; after, shape is {numel} and accesses use one index.
struct BufferNode {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<Expr> shape;
  std::string scope = "global";  // "global" (function argument or heap) or "local"
};

struct PrimFunc {
  std::string name;
  std::vector<Buffer> buffer_params;  // tensors, in call order
  std::vector<Expr> scalar_params;    // i64 vars (symbolic dims), in call order
  Stmt body;
};

// ---- constructors (validate operand types; throw kInternal on misuse) -----------------------
Expr int_imm(int64_t v, DataType t = i64());
Expr float_imm(double v, DataType t = f32());
Expr make_var(const std::string& name, DataType t = i64());
Expr binary(ExprKind k, Expr a, Expr b);  // broadcasts a scalar side to the other's lanes
Expr logical_not(Expr a);
Expr select(Expr cond, Expr t, Expr f);
Expr cast(DataType t, Expr v);
Expr load(Buffer b, std::vector<Expr> indices, int lanes = 1);  // lanes > 1: index is a Ramp
Expr call(const std::string& intrinsic, DataType t, std::vector<Expr> args);
Expr ramp(Expr base, Expr stride, int lanes);
Expr broadcast(Expr v, int lanes);
Expr let(Expr var, Expr value, Expr body);

Stmt for_loop(Expr var, Expr min, Expr extent, ForKind kind, Stmt body);
Stmt let_stmt(Expr var, Expr value, Stmt body);
Stmt store(Buffer b, std::vector<Expr> indices, Expr value);
Stmt allocate(Buffer b, Stmt body);
Stmt if_then_else(Expr cond, Stmt then_case, Stmt else_case = nullptr);
Stmt seq(std::vector<Stmt> stmts);  // flattens nested Seq, drops nulls; one stmt -> itself
Stmt evaluate(Expr v);

Buffer make_buffer(const std::string& name, DType dtype, std::vector<Expr> shape,
                   const std::string& scope = "global");

// Operators for readable index arithmetic in lowering code (ints and floats alike).
Expr operator+(Expr a, Expr b);
Expr operator-(Expr a, Expr b);
Expr operator*(Expr a, Expr b);
Expr operator/(Expr a, Expr b);
Expr operator+(Expr a, int64_t b);
Expr operator-(Expr a, int64_t b);
Expr operator*(Expr a, int64_t b);
Expr floordiv(Expr a, Expr b);
Expr floormod(Expr a, Expr b);
Expr min(Expr a, Expr b);
Expr max(Expr a, Expr b);

bool is_const_int(const Expr& e, int64_t* value = nullptr);

}  // namespace kiln::tir
