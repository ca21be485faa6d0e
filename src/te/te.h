// Tensor expressions (Halide/TVM style): a computation is declared once as tensors defined by
// index lambdas (compute) or reductions over axes; a Schedule then decides loop structure
// (split, tile, reorder, fuse, vectorize, unroll, parallel, compute_at, compute_inline,
// cache_read/cache_write, tensorize) and is recorded as a replayable Trace. lower() turns a
// schedule into a TIR PrimFunc.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tir/ir.h"

namespace kiln::te {

using tir::Expr;

struct OperationNode;
struct TensorNode;
using Tensor = std::shared_ptr<const TensorNode>;

// An iteration axis: a loop variable with a range [0, extent).
struct IterVarNode {
  Expr var;
  Expr extent;
  bool reduce = false;
};
using IterVar = std::shared_ptr<const IterVarNode>;

enum class OpKind { kPlaceholder, kCompute };

struct TensorNode {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<Expr> shape;
  OpKind kind = OpKind::kPlaceholder;
  std::vector<IterVar> axes;         // kCompute: one spatial axis per output dim
  std::vector<IterVar> reduce_axes;  // kCompute with a reduction
  Expr body;                         // kCompute: value at `axes` (a Reduce expression if reducing)
  std::vector<Tensor> inputs;        // tensors read by body (filled by compute())
};

// Reads tensor `t` at `indices` (an Expr of kind kLoad on t's buffer when lowered).
Expr access(const Tensor& t, std::vector<Expr> indices);

Tensor placeholder(const std::string& name, DType dtype, std::vector<Expr> shape);
// out[i...] = f(i...)
Tensor compute(const std::string& name, std::vector<Expr> shape,
               const std::function<Expr(const std::vector<Expr>&)>& f);
IterVar reduce_axis(Expr extent, const std::string& name);

enum class ReduceOp { kSum, kProd, kMax, kMin };
// A reduction of `value` over `axes` with the identity of `op` as initial value; used as the
// body of compute(): compute("s", {n}, [&](auto& i) { return reduce(kSum, A(i, k), {k}); }).
Expr reduce(ReduceOp op, Expr value, const std::vector<IterVar>& axes);

// ---- schedules ------------------------------------------------------------------------------

// One recorded primitive: name and parameters, e.g. {"split", {"C", "i", "8"}}.
struct TraceStep {
  std::string primitive;
  std::vector<std::string> args;
};
std::string to_string(const std::vector<TraceStep>& trace);        // one step per line
std::vector<TraceStep> parse_trace(const std::string& text);       // inverse of to_string

class Schedule {
 public:
  // Schedules the computation of `outputs` (and everything they read).
  explicit Schedule(std::vector<Tensor> outputs);

  // Loop handles are names: a stage's axes are "i0", "i1", ... (spatial) and "r0", ... (reduce)
  // in definition order; split(x) creates x.outer / x.inner; fuse(a, b) creates a.b.fused.
  void split(const std::string& stage, const std::string& loop, int64_t factor);
  void tile(const std::string& stage, const std::string& x, const std::string& y, int64_t fx, int64_t fy);
  void reorder(const std::string& stage, const std::vector<std::string>& order);
  void fuse(const std::string& stage, const std::string& outer, const std::string& inner);
  void vectorize(const std::string& stage, const std::string& loop);
  void unroll(const std::string& stage, const std::string& loop);
  void parallel(const std::string& stage, const std::string& loop);
  void compute_at(const std::string& stage, const std::string& target_stage, const std::string& loop);
  void compute_inline(const std::string& stage);
  // Adds a stage that copies `stage`'s input `tensor` into a local buffer read by it.
  std::string cache_read(const std::string& tensor, const std::string& reader);
  // Accumulates `stage` in a local buffer written back at the end; returns the new stage name.
  std::string cache_write(const std::string& stage);
  // Replaces the loop nest under `loop` by a call to `intrinsic` (a microkernel with a declared
  // shape contract registered through register_tensor_intrinsic).
  void tensorize(const std::string& stage, const std::string& loop, const std::string& intrinsic);

  const std::vector<TraceStep>& trace() const { return trace_; }
  // Applies a recorded trace to this (fresh) schedule.
  void replay(const std::vector<TraceStep>& trace);
  struct Impl;
  Impl& impl() const { return *impl_; }

 private:
  std::shared_ptr<Impl> impl_;
  std::vector<TraceStep> trace_;
};

// A microkernel's shape contract for tensorize: the extents of the loops it replaces (the
// tensorized loop first, then the loops nested in it, in order). The call it becomes is
// `name(address_of(out[min...]), address_of(in[min...])..., extents..., row strides...)` (an
// Evaluate; row stride = the buffer's last dim, per buffer in the same order). A kernel whose
// loops include the start of a reduction initializes its output itself.
struct TensorIntrinsic {
  std::vector<int64_t> extents;
};
void register_tensor_intrinsic(const std::string& name, TensorIntrinsic contract);

// Lowers a schedule to one PrimFunc whose buffer params are `args` (placeholders and outputs,
// in call order); symbolic dims used in shapes become scalar params.
tir::PrimFunc lower(const Schedule& s, const std::vector<Tensor>& args, const std::string& name);

struct LowerOptions {
  bool run_passes = true;  // false: the loop nest as built (multi-dimensional accesses)
};
tir::PrimFunc lower(const Schedule& s, const std::vector<Tensor>& args, const std::string& name,
                    const LowerOptions& options);

}  // namespace kiln::te
