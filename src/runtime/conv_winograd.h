// Conv 2-D 3x3, stride 1, dilation 1, group 1, constant weights, by Winograd F(4x4, 3x3) or, for
// small images, F(2x2, 3x3) (kernels/x86/f32_winograd.h): weights transformed and packed once; per run, blocks of up to 32
// tiles go through the input transform, 36 (16) GEMMs and the output transform with the whole fused
// epilogue (bias, residual, clamp, activation) while they are in L2. Parallel over blocks, or,
// with fewer blocks than threads can share, over (block, channel chunk) then (block, output
// channel panel). AVX-512 only (declined elsewhere). Built from a GemmDesc (no Node).
// Tests: tests/runtime/test_conv_winograd.cc.
#pragma once

#include <limits>
#include <memory>

#include "runtime/gemm_ops.h"

namespace kiln::conv_ops {

// The Winograd op for a descriptor it covers, or null. clamp_lo/hi: a fused Clip/Relu. tile: the
// output tile size, 4 (F(4x4, 3x3)) or 2 (F(2x2, 3x3)); anything else: winograd_tile(d).
std::unique_ptr<gemm_ops::GemmOp> make_winograd_conv_op(const gemm_ops::GemmDesc& d,
                                                        float clamp_lo = -std::numeric_limits<float>::infinity(),
                                                        float clamp_hi = std::numeric_limits<float>::infinity(),
                                                        int tile = 0);
// The tile size chosen for a descriptor: 4, or 2 below 11x11 outputs.
int winograd_tile(const gemm_ops::GemmDesc& d);

}  // namespace kiln::conv_ops
