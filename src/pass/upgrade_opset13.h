// Converting an opset 11/12 model to opset 13 (pass upgrade-opset13, used by kiln quantize for
// per-channel DequantizeLinear).
#pragma once

#include <string>

#include "ir/graph.h"

namespace kiln {

// Rewrites `m` (main graph and subgraphs) for opset 13 and sets its default-domain opset to 13;
// returns empty on success (or when the opset is already >= 13), else why it cannot — naming the
// node — with `m` unchanged.
std::string upgrade_to_opset13(Model& m);

}  // namespace kiln
