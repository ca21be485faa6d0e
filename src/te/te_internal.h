// Internals shared by the te files: the tensor/buffer side table, expression utilities
// (substitution, load collection, interval bounds) and the Schedule's stage records.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "te/te.h"

namespace kiln::te::detail {

// The buffer that access() loads from and that lowering realizes for `t`.
tir::Buffer buffer_of(const Tensor& t);
// The tensor whose buffer is `b`, or null.
Tensor tensor_of_buffer(const tir::BufferNode* b);
// Makes a tensor (registered in the side table) with buffer scope `scope`.
Tensor make_tensor(TensorNode node, const std::string& scope);

// Reduce expressions are calls named "te.reduce.<op>" with operands {value, var0, ext0, ...}.
bool is_reduce(const Expr& e);
ReduceOp reduce_op_of(const Expr& e);
Expr reduce_identity(ReduceOp op, tir::DataType t);
Expr reduce_combine(ReduceOp op, Expr acc, Expr v);

using VarMap = std::map<const tir::ExprNode*, Expr>;
Expr substitute(const Expr& e, const VarMap& m);
// Rewrites every Load whose buffer is in `m` with f(load) (bottom-up).
Expr rewrite_loads(const Expr& e, const std::function<Expr(const Expr& load)>& f);
void collect_loads(const Expr& e, std::vector<Expr>* out);
// Tensors read by `e`, in first-read order.
std::vector<Tensor> tensors_read(const Expr& e);
// Vars in `e` in first-appearance order.
void collect_vars(const Expr& e, std::vector<Expr>* out);

// Inclusive bounds [lo, hi] of `e` when each var in `ranges` takes values in its [lo, hi];
// other vars are fixed. nullopt when `e` is not analyzable (e.g. a load).
struct Interval {
  Expr lo, hi;
};
std::optional<Interval> bound(const Expr& e, const std::map<const tir::ExprNode*, Interval>& ranges);
// e1 - e2 as a constant when both are affine in the same vars with equal coefficients.
std::optional<int64_t> const_difference(const Expr& a, const Expr& b);
Expr simplify_expr(const Expr& e);

}  // namespace kiln::te::detail

namespace kiln::te {

// One loop of a stage (a leaf or an intermediate of split/fuse relations).
struct LoopInfo {
  std::string name;
  bool reduce = false;
  tir::ForKind kind = tir::ForKind::kSerial;
  Expr var;  // leaf loop variable (created with the loop)
};

struct Relation {
  enum Kind { kSplit, kFuse, kReorder } kind;
  std::string parent, outer, inner, fused;  // split: parent -> outer, inner; fuse: outer, inner -> fused
  int64_t factor = 0;
  std::vector<std::string> order;  // reorder: the leaf order after the step
};

struct Stage {
  std::string name;
  Tensor tensor;                      // the tensor this stage writes (its buffer is realized)
  std::vector<IterVar> axes;          // root spatial axes ("i0", ...)
  std::vector<IterVar> reduce_axes;   // root reduce axes ("r0", ...)
  Expr body;                          // value at axes (a reduce call when reducing)
  std::vector<std::string> leaves;    // current loop order
  std::map<std::string, LoopInfo> loops;
  std::vector<Relation> relations;
  bool inlined = false;
  std::string attach_stage, attach_loop;  // compute_at target; empty: root
  std::string tensorize_loop, tensorize_intrinsic;
};

struct Schedule::Impl {
  std::vector<Tensor> outputs;
  std::vector<Stage> stages;  // creation order
  Stage& stage(const std::string& name);
  Stage* find_stage_of(const TensorNode* t);
  void split(const std::string& stage, const std::string& loop, int64_t factor);
  void reorder(const std::string& stage, const std::vector<std::string>& order);
  void fuse(const std::string& stage, const std::string& outer, const std::string& inner);
  void set_kind(const std::string& stage, const std::string& loop, tir::ForKind kind);
  std::string unique_stage_name(const std::string& base) const;
  Stage make_stage(const std::string& name, const Tensor& t, std::vector<IterVar> axes,
                   std::vector<IterVar> reduce_axes, Expr body);
};

const TensorIntrinsic* find_tensor_intrinsic(const std::string& name);

}  // namespace kiln::te
