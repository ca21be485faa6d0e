// Tensor expressions: placeholder, compute, reductions and access, plus the expression
// utilities the schedule and lowering share (substitution, load collection, interval bounds).
// Tests: tests/te/test_te.cc.
#include "te/te.h"

#include <cstdint>
#include <limits>
#include <mutex>

#include "core/error.h"
#include "te/te_internal.h"

namespace kiln::te {
namespace detail {
namespace {

using tir::ExprKind;
using tir::ExprNode;

// A tensor together with the buffer its accesses load from.
struct TensorImpl : TensorNode {
  tir::Buffer buffer;
};

std::mutex& table_mutex() {
  static std::mutex m;
  return m;
}
std::map<const tir::BufferNode*, std::weak_ptr<const TensorNode>>& buffer_table() {
  static std::map<const tir::BufferNode*, std::weak_ptr<const TensorNode>> t;
  return t;
}

Expr rebuild(const Expr& e, std::vector<Expr> ops) {
  bool same = ops.size() == e->operands.size();
  for (size_t i = 0; same && i < ops.size(); ++i) same = ops[i] == e->operands[i];
  if (same) return e;
  auto n = std::make_shared<ExprNode>(*e);
  n->operands = std::move(ops);
  return n;
}

}  // namespace

tir::Buffer buffer_of(const Tensor& t) {
  KILN_CHECK(t != nullptr);
  return static_cast<const TensorImpl&>(*t).buffer;
}

Tensor tensor_of_buffer(const tir::BufferNode* b) {
  std::lock_guard<std::mutex> lock(table_mutex());
  auto it = buffer_table().find(b);
  if (it == buffer_table().end()) return nullptr;
  Tensor t = it->second.lock();
  if (!t || static_cast<const TensorImpl&>(*t).buffer.get() != b) return nullptr;
  return t;
}

Tensor make_tensor(TensorNode node, const std::string& scope) {
  auto impl = std::make_shared<TensorImpl>();
  static_cast<TensorNode&>(*impl) = std::move(node);
  impl->buffer = tir::make_buffer(impl->name, impl->dtype, impl->shape, scope);
  std::lock_guard<std::mutex> lock(table_mutex());
  auto& table = buffer_table();
  // Drop entries of dead tensors now and then so the table stays small.
  if (table.size() > 4096) {
    for (auto it = table.begin(); it != table.end();) it = it->second.expired() ? table.erase(it) : ++it;
  }
  Tensor t = impl;
  table[impl->buffer.get()] = t;
  return t;
}

bool is_reduce(const Expr& e) {
  return e && e->kind == ExprKind::kCall && e->name.rfind("te.reduce.", 0) == 0;
}

ReduceOp reduce_op_of(const Expr& e) {
  const std::string op = e->name.substr(10);
  if (op == "sum") return ReduceOp::kSum;
  if (op == "prod") return ReduceOp::kProd;
  if (op == "max") return ReduceOp::kMax;
  return ReduceOp::kMin;
}

Expr reduce_identity(ReduceOp op, tir::DataType t) {
  const bool f = t.is_float();
  // The dtype's own limits (an 8-bit max starts at -128, not at int64's least truncated to 0).
  const auto range = integer_range(t.dtype).value_or(
      std::pair{std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()});
  switch (op) {
    case ReduceOp::kSum: return f ? tir::float_imm(0.0, t) : tir::int_imm(0, t);
    case ReduceOp::kProd: return f ? tir::float_imm(1.0, t) : tir::int_imm(1, t);
    case ReduceOp::kMax:
      if (f) return tir::float_imm(-std::numeric_limits<double>::infinity(), t);
      return tir::int_imm(range.first, t);
    case ReduceOp::kMin:
      if (f) return tir::float_imm(std::numeric_limits<double>::infinity(), t);
      return tir::int_imm(range.second, t);
  }
  return nullptr;
}

Expr reduce_combine(ReduceOp op, Expr acc, Expr v) {
  switch (op) {
    case ReduceOp::kSum: return acc + v;
    case ReduceOp::kProd: return acc * v;
    case ReduceOp::kMax: return tir::max(acc, v);
    case ReduceOp::kMin: return tir::min(acc, v);
  }
  return nullptr;
}

Expr substitute(const Expr& e, const VarMap& m) {
  if (!e) return e;
  if (e->kind == ExprKind::kVar) {
    auto it = m.find(e.get());
    return it == m.end() ? e : it->second;
  }
  if (e->operands.empty()) return e;
  std::vector<Expr> ops;
  ops.reserve(e->operands.size());
  for (const Expr& o : e->operands) ops.push_back(substitute(o, m));
  return rebuild(e, std::move(ops));
}

Expr rewrite_loads(const Expr& e, const std::function<Expr(const Expr&)>& f) {
  if (!e || e->operands.empty()) return e;
  std::vector<Expr> ops;
  ops.reserve(e->operands.size());
  for (const Expr& o : e->operands) ops.push_back(rewrite_loads(o, f));
  Expr r = rebuild(e, std::move(ops));
  if (r->kind == ExprKind::kLoad) return f(r);
  return r;
}

void collect_loads(const Expr& e, std::vector<Expr>* out) {
  if (!e) return;
  for (const Expr& o : e->operands) collect_loads(o, out);
  if (e->kind == ExprKind::kLoad) out->push_back(e);
}

std::vector<Tensor> tensors_read(const Expr& e) {
  std::vector<Expr> loads;
  collect_loads(e, &loads);
  std::vector<Tensor> out;
  for (const Expr& l : loads) {
    Tensor t = tensor_of_buffer(l->buffer.get());
    if (!t) continue;
    bool seen = false;
    for (const Tensor& o : out) seen = seen || o == t;
    if (!seen) out.push_back(t);
  }
  return out;
}

void collect_vars(const Expr& e, std::vector<Expr>* out) {
  if (!e) return;
  if (e->kind == ExprKind::kVar) {
    for (const Expr& o : *out)
      if (o == e) return;
    out->push_back(e);
    return;
  }
  for (const Expr& o : e->operands) collect_vars(o, out);
}

}  // namespace detail

using detail::buffer_of;

Expr access(const Tensor& t, std::vector<Expr> indices) {
  KILN_CHECK(t != nullptr);
  if (indices.size() != t->shape.size())
    throw Error(ErrorKind::kInternal, "te: access to " + t->name + " with " +
                                          std::to_string(indices.size()) + " indices for " +
                                          std::to_string(t->shape.size()) + " dims");
  for (Expr& i : indices) {
    if (i->type.dtype != DType::kInt64) i = tir::cast(tir::i64(), i);
  }
  return tir::load(buffer_of(t), std::move(indices));
}

Tensor placeholder(const std::string& name, DType dtype, std::vector<Expr> shape) {
  TensorNode n;
  n.name = name;
  n.dtype = dtype;
  n.shape = std::move(shape);
  n.kind = OpKind::kPlaceholder;
  return detail::make_tensor(std::move(n), "global");
}

Tensor compute(const std::string& name, std::vector<Expr> shape,
               const std::function<Expr(const std::vector<Expr>&)>& f) {
  TensorNode n;
  n.name = name;
  n.kind = OpKind::kCompute;
  std::vector<Expr> vars;
  for (size_t d = 0; d < shape.size(); ++d) {
    auto iv = std::make_shared<IterVarNode>();
    iv->var = tir::make_var(name + ".i" + std::to_string(d));
    iv->extent = shape[d];
    vars.push_back(iv->var);
    n.axes.push_back(iv);
  }
  n.shape = std::move(shape);
  n.body = f(vars);
  if (!n.body) throw Error(ErrorKind::kInternal, "te: compute " + name + " returned no value");
  if (n.body->type.lanes != 1)
    throw Error(ErrorKind::kInternal, "te: compute " + name + " must return a scalar");
  n.dtype = n.body->type.dtype;
  if (detail::is_reduce(n.body)) {
    const auto& ops = n.body->operands;
    for (size_t i = 1; i + 1 < ops.size(); i += 2) {
      auto iv = std::make_shared<IterVarNode>();
      iv->var = ops[i];
      iv->extent = ops[i + 1];
      iv->reduce = true;
      n.reduce_axes.push_back(iv);
    }
  }
  n.inputs = detail::tensors_read(n.body);
  return detail::make_tensor(std::move(n), "global");
}

IterVar reduce_axis(Expr extent, const std::string& name) {
  auto iv = std::make_shared<IterVarNode>();
  iv->var = tir::make_var(name);
  iv->extent = std::move(extent);
  iv->reduce = true;
  return iv;
}

Expr reduce(ReduceOp op, Expr value, const std::vector<IterVar>& axes) {
  static const char* names[] = {"sum", "prod", "max", "min"};
  std::vector<Expr> ops{value};
  for (const IterVar& a : axes) {
    ops.push_back(a->var);
    ops.push_back(a->extent);
  }
  return tir::call(std::string("te.reduce.") + names[static_cast<int>(op)], value->type,
                   std::move(ops));
}

}  // namespace kiln::te
