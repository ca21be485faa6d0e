// Memory planning (an analysis, not a rewrite): lifetimes of the intermediate values of a graph
// in node order, then offsets in one arena (64-byte aligned, greedy by size with best fit into
// free gaps, as TFLite's arena planner and ONNX Runtime's), with in-place reuse where legal.
// Planned values: outputs of the main graph's nodes that are not graph outputs and whose size
// is known. A value is live from its producer's step to its last use (uses inside nested graphs
// count at the owning node). In place: the output of a single-output elementwise node (or a
// broadcast node, for an input of the output's shape) may take the buffer of an input whose
// last use is that node and whose size equals the output's.
// Tests: tests/pass/test_memory_plan.cc
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"

namespace kiln {

inline constexpr int64_t kArenaAlignment = 64;

struct PlannedValue {
  const Value* value = nullptr;
  int64_t offset = 0;                  // in the arena, a multiple of kArenaAlignment
  int64_t size = 0;                    // bytes, as bytes_of said
  int first_step = 0;                  // index of the producing node
  int last_step = 0;                   // index of the last consuming node (first_step when unused)
  const Value* in_place_of = nullptr;  // the input whose buffer this value reuses
};

struct MemoryPlan {
  std::vector<PlannedValue> values;                // in node order
  std::unordered_map<const Value*, size_t> index;  // value -> position in `values`
  std::vector<const Value*> unplanned;             // intermediates whose size is unknown
  int64_t arena_bytes = 0;
  int64_t intermediate_bytes = 0;      // sum of the sizes of all planned values
  int64_t live_bytes_lower_bound = 0;  // max over steps of the bytes of buffers live then
  int in_place_count = 0;

  const PlannedValue* find(const Value* v) const {
    auto it = index.find(v);
    return it == index.end() ? nullptr : &values[it->second];
  }
};

// One arena, shared by this planner (inspect's view of a graph) and the compiled executor's plan
// (driver/compile/arena.cc): blocks with a size (aligned up to kArenaAlignment here) and a
// lifetime [first, last] in steps get offsets, largest first (ties: earlier first), each in the
// smallest gap between the placed blocks whose lifetimes overlap its own, or above them all.
// Returns the arena's size in bytes.
struct ArenaBlock {
  int64_t size = 0;
  int first = 0, last = 0;
  int64_t offset = -1;
};
int64_t place_blocks(std::vector<ArenaBlock>& blocks);

// Plans `g`'s intermediates. `bytes_of` returns a value's size in bytes, or < 0 when unknown
// (such values are listed in `unplanned`). Nodes must be in topological order.
MemoryPlan plan_memory(const Graph& g, const std::function<int64_t(const Value*)>& bytes_of);

// Size of a value from its static type with every symbolic dim bound to `symbol_value`; -1 when
// the dtype, rank or an unnamed dim is unknown, or the value is not a tensor.
int64_t static_bytes(const Value* v, int64_t symbol_value = 1);

}  // namespace kiln
