// Per-node type inference shared by shape-inference and constant-folding (which refreshes the
// types of nodes it cannot fold so that later Shape nodes of the same sweep can fold).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"

namespace kiln {

// Runs the op's inference for `n` and merges the result into its output types; true when a
// type changed. Throws kInvalidModel on a genuine conflict with a declared type.
bool infer_node_types(Node& n, const Model& m);

// The value of a Shape or Size node (its start/end attributes applied) for an input of `dims`.
Tensor shape_op_value(const Node& n, int64_t opset, const std::vector<int64_t>& dims);

}  // namespace kiln
