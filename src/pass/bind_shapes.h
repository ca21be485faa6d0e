// bind-shapes: the compile pipeline's shape step. With the input dims of one call bound, it runs
// each node's static inference in order and evaluates the small values that the input shapes
// and constants alone decide (Shape -> Gather -> Concat -> Reshape targets), so that every value
// of the main graph gets its dtype and dims without running the model. The graph is not changed.
// Requires: a model after the pass pipeline; feeds parallel to the graph inputs.
// Guarantees: `complete` only when every value has a tensor type with static dims and nothing
// was guessed; otherwise `stopped_at` says which node (and why) needs a run to know its shapes.
// Tests: tests/pass/test_bind_shapes.cc; KILN_VERIFY_PLAN_SHAPES=1 checks it against a run.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/value.h"
#include "ir/graph.h"

namespace kiln {

struct BoundValue {
  DType dtype = DType::kUndefined;
  std::vector<int64_t> dims;
  Tensor value;  // defined when computed at compile time and small enough to keep
};

struct BoundShapes {
  std::unordered_map<const Value*, BoundValue> values;  // tensors of the main graph
  bool complete = false;
  std::string stopped_at;  // when not complete: "node 'x' (NonZero): output shape depends on values"
};

// `feeds`: values parallel to the graph inputs (None: the input's initializer), then to
// `captures` (a subgraph's values from enclosing graphs, when m.graph is a body). Values with at
// most `keep_max_elements` elements that are computable at compile time are kept in
// BoundValue::value.
BoundShapes bind_shapes(const Model& m, const std::vector<RtValue>& feeds, int64_t keep_max_elements,
                        const std::vector<Value*>& captures = {});

}  // namespace kiln
