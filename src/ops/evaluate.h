// Evaluating one node through its reference kernel on given input values, with the f16/bf16
// handling of half_via_float schemas. The interpreter, constant folding and the compiled
// executor's fallback steps all run kernels through here.
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
// The same with a runner for the node's subgraphs and the random generator for random ops.
std::vector<RtValue> evaluate_node(const Node& node, const OpSchema& schema, int64_t opset,
                                   const std::vector<const RtValue*>& inputs,
                                   const KernelContext::SubgraphRunner& runner, std::mt19937_64* rng);

}  // namespace kiln
