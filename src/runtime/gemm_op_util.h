// Small helpers shared by the GemmOp implementations (gemm_ops.cc, matmul_batched.cc): element
// counts, a kernels::ParallelFor on the calling thread's pool, and f32 operand data.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/value.h"
#include "kernels/x86/f32_gemm.h"
#include "runtime/thread_pool.h"

namespace kiln::gemm_ops {

inline int64_t numel(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

inline kernels::ParallelFor pool_parallel() {
  return [](int64_t n, std::function<void(int64_t, int64_t)> fn) { current_thread_pool().parallel_for(n, fn); };
}

inline const float* fdata(const RtValue* v) { return v->tensor.data<float>(); }

}  // namespace kiln::gemm_ops
