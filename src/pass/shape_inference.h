// Per-node type inference shared by shape-inference and constant-folding (which refreshes the
// types of nodes it cannot fold so that later Shape nodes of the same sweep can fold).
#pragma once

#include "ir/graph.h"

namespace kiln {

// Runs the op's inference for `n` and merges the result into its output types; true when a
// type changed. Throws kInvalidModel on a genuine conflict with a declared type.
bool infer_node_types(Node& n, const Model& m);

}  // namespace kiln
