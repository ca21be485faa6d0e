// Evaluating one node outside the interpreter (constant folding): the node's reference kernel
// run on given input values, with the same f16/bf16 handling as the interpreter.
#pragma once

#include <cstdint>
#include <vector>

#include "core/value.h"
#include "ir/graph.h"
#include "ops/registry.h"

namespace kiln {

// Runs `schema.kernel` on `inputs` (parallel to node.inputs; nullptr for omitted ones) and
// returns one value per node output (None for omitted outputs). For half_via_float schemas,
// f16/bf16 tensor inputs are computed in f32 and f32 results converted back. Subgraphs cannot
// be run (nodes with subgraph attributes are not evaluable here); random ops draw from a fixed
// seed. Kernel errors propagate as thrown.
std::vector<RtValue> evaluate_node(const Node& node, const OpSchema& schema, int64_t opset,
                                   const std::vector<const RtValue*>& inputs);

}  // namespace kiln
