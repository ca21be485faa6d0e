// IR verifier: structural invariants every pass must preserve.
//  - SSA: each Value is defined once (graph input, constant or one node output), names are
//    unique within a graph, every use comes after its definition, and a node's inputs belong to
//    its graph or an enclosing one (captures by subgraphs);
//  - no cycles (a node input produced by the same or a later node is reported as such);
//  - each node's op is known in the op registry for the model's opset of its domain
//    (VerifyOptions::require_known_ops) and its input/output counts fit the schema;
//  - value types are well formed and agree with initializers; Value::owner/producer links and
//    subgraph parent pointers are consistent.
// Failures throw kiln::Error(kInvalidModel) whose location names the node and op.
#pragma once

#include "ir/graph.h"

namespace kiln {

class OpRegistry;

struct VerifyOptions {
  // Unknown ops (or ops not available in the model's opset) are errors; when false they are
  // skipped, and ops that are known still get their arity checked.
  bool require_known_ops = true;
  // Registry to check ops against; nullptr means OpRegistry::global().
  const OpRegistry* registry = nullptr;
};

void verify_model(const Model& m, const VerifyOptions& opts = {});

}  // namespace kiln
