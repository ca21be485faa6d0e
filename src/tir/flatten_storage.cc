// flatten_storage: multi-dimensional Load/Store -> one row-major index, buffers -> shape {numel}.
// Requires: accesses use one index per dim (or one flat index, taken as already flat).
// Guarantees: every Load/Store has one index; buffer params and allocations are replaced by
// flat buffers of the same name, dtype and scope; indices are simplified (vector indices end up
// as ramp/broadcast where they are linear). Tests: tests/tir/test_tir.cc (TirFlatten*).
#include <map>

#include "tir/passes.h"
#include "tir/rewrite.h"
#include "tir/simplify.h"

namespace kiln::tir {
namespace {

class Flattener {
 public:
  Buffer flat(const Buffer& b) {
    auto it = map_.find(b.get());
    if (it != map_.end()) return it->second;
    Expr numel;
    for (const Expr& d : b->shape) numel = numel ? numel * d : d;
    if (!numel) numel = int_imm(1);
    Buffer nb = make_buffer(b->name, b->dtype, {simplify(numel)}, b->scope);
    map_[b.get()] = nb;
    return nb;
  }

  Expr flat_index(const Buffer& b, const std::vector<Expr>& indices) {
    if (indices.size() == 1) return indices[0];
    Expr idx;
    for (size_t k = 0; k < indices.size(); ++k)
      idx = idx ? idx * b->shape[k] + indices[k] : indices[k];
    return simplify(idx);
  }

  Expr mutate(const Expr& e) {
    Expr m = map_operands(e, [&](const Expr& x) { return mutate(x); });
    if (m->kind != ExprKind::kLoad) return m;
    return load(flat(m->buffer), {flat_index(m->buffer, m->operands)}, 1);
  }

  Stmt mutate(const Stmt& s) {
    Stmt m = map_stmt(
        s, [&](const Expr& x) { return mutate(x); }, [&](const Stmt& x) { return mutate(x); });
    if (m->kind == StmtKind::kStore)
      return store(flat(m->buffer), {flat_index(m->buffer, m->indices)}, m->value);
    if (m->kind == StmtKind::kAllocate) return allocate(flat(m->buffer), m->body);
    return m;
  }

 private:
  std::map<const BufferNode*, Buffer> map_;
};

}  // namespace

PrimFunc flatten_storage(const PrimFunc& f) {
  Flattener fl;
  PrimFunc out = f;
  for (Buffer& b : out.buffer_params) b = fl.flat(b);
  out.body = fl.mutate(f.body);
  return out;
}

}  // namespace kiln::tir
