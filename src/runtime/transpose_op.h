// f32 Transposes that are batched 2-D transposes (the trailing axes rotate: [B, R..., C...] to
// [B, C..., R...]), run on kernels::transpose_f32's 16x16 register blocks instead of a generated
// loop nest: the layout changes around channels-last conv chains ([N, C, H, W] <-> [N, H, W, C])
// and ViT's patch-token transpose. Other permutations are left to the generated kernels.
// Tests: tests/runtime/test_transpose_op.cc.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "runtime/gemm_ops.h"

namespace kiln::transpose_ops {

// The permutation `perm` of a tensor with `dims` as `batch` independent rows x cols transposes,
// or nullopt when it is not one (or is the identity).
struct BatchedTranspose {
  int64_t batch = 1, rows = 1, cols = 1;
};
std::optional<BatchedTranspose> batched_transpose(const std::vector<int64_t>& dims, const std::vector<int64_t>& perm);

// The op for a GemmKind::kTranspose descriptor, or null when it is no batched 2-D transpose.
std::unique_ptr<gemm_ops::GemmOp> make_transpose_op(const gemm_ops::GemmDesc& d);

}  // namespace kiln::transpose_ops
