// `kiln tune`'s search space: which GEMM-like descriptors are tuning tasks and the kernel choices
// (GemmDesc::choice) their ops honour. Convs (group 1, float32, constant weight, not a stem or a
// single pixel): the algorithm (weights-as-rows GEMM, pixel-rows GEMM, Winograd F(2x2) and
// F(4x4) where they cover it), the micro-kernel height and the thread split; MatMul / Gemm with a
// constant 2-D weight and more than one row: the micro-kernel height and the thread split.
// Tests: tests/runtime/test_conv_tuning.cc.
#pragma once

#include <vector>

#include "runtime/gemm_ops.h"

namespace kiln::tune_space {

// True for the descriptors whose op a kernel choice changes (the tuning tasks).
bool tunable(const gemm_ops::GemmDesc& d);

// The choices for `d` on `threads` threads, the default (all zero) first; empty when !tunable(d).
std::vector<gemm_ops::KernelChoice> candidates(const gemm_ops::GemmDesc& d, int threads);

}  // namespace kiln::tune_space
