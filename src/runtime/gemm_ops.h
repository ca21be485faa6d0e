// Fast f32 paths for the compiled executor's out-fusable ops: MatMul (2-D, and N-D x 2-D by
// flattening the batch into rows), Gemm, and Conv 2-D with group == 1 (1x1/stride 1/no pad as a
// direct GEMM, other kernels through im2col), all through kernels::sgemm on the current thread
// pool. Constant weights are packed once when the op is made; biases go in the GEMM epilogue.
// Anything else is declined (make_gemm_op returns null) and runs its reference kernel.
// Tests: tests/runtime/test_gemm_ops.cc
#pragma once

#include <memory>
#include <vector>

#include "core/value.h"
#include "ir/graph.h"

namespace kiln::gemm_ops {

// What the plan knows about one node input (null `constant` for values computed at run time).
struct Operand {
  bool present = false;
  DType dtype = DType::kUndefined;
  std::vector<int64_t> dims;
  const Tensor* constant = nullptr;
};

class GemmOp {
 public:
  virtual ~GemmOp() = default;
  // `ins` parallel to the node inputs (null for absent ones); returns output 0. Uses the calling
  // thread's current pool. Not reentrant (scratch buffers are members).
  virtual Tensor run(const std::vector<const RtValue*>& ins) = 0;
};

// A fast op for node `n` (MatMul, Gemm or Conv of float32) with these operands and output
// dims, or null when the node is not covered.
std::unique_ptr<GemmOp> make_gemm_op(const Node& n, const std::vector<Operand>& ins,
                                     const std::vector<int64_t>& out_dims, DType out_dtype);

}  // namespace kiln::gemm_ops
