// The marks the fuse-epilogues pass (pass/fuse_epilogues.cc) puts on nodes, which the compiled
// engine's GEMM steps follow (driver/compile/gemm_steps.cc), and the Identity walk both use.
#pragma once

#include "ir/graph.h"

namespace kiln::epilogue_marks {

// On a node absorbed into a GEMM step: its role ("bias", "residual", "relu", "clip",
// "hardswish", "sigmoid", "silu", "silu_gate", "max_pool") and the GEMM output's name.
inline constexpr const char* kRole = "kiln.epilogue";
inline constexpr const char* kInto = "kiln.fused_into";
// On a Clip in a chain: [lo, hi].
inline constexpr const char* kClip = "kiln.clip";
// On a per-channel Mul before a Conv: the Conv output's name.
inline constexpr const char* kInputScaleOf = "kiln.input_scale_of";

}  // namespace kiln::epilogue_marks

namespace kiln {

// Through ai.onnx Identity nodes to the value they forward (exporters share a bias through them).
const Value* through_identities(const Value* v);

}  // namespace kiln
