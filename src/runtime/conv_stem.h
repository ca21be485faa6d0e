// Stem Conv (few input channels, stride 2: a network's first layer) for the compiled executor
// through kernels::conv_stem_f32, with the fused epilogue. Built from a GemmDesc (no Node).
// Tests: tests/runtime/test_conv_stem.cc.
#pragma once

#include <memory>

#include "runtime/gemm_ops.h"

namespace kiln::conv_ops {

// The op for a float32 Conv descriptor with group 1, a constant weight, 1-4 input channels,
// stride 2 and no dilation that the AVX-512 kernel covers (kernels::conv_stem_supported), or null.
// With GemmDesc::epilogue_max_pool its output is the pooled tensor.
std::unique_ptr<gemm_ops::GemmOp> make_stem_conv_op(const gemm_ops::GemmDesc& d);
// True when the stem kernel covers d's geometry (the op may still decline its operands).
bool stem_conv_covers(const gemm_ops::GemmDesc& d);

}  // namespace kiln::conv_ops
