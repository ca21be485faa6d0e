// Facts about a model for `kiln inspect`: signature, op histogram, parameters, and the nodes
// whose op (or opset) kiln does not support.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln {

struct UnsupportedNode {
  std::string node;
  std::string op;
  std::string reason;
};

struct ModelInfo {
  std::map<std::string, int64_t> op_histogram;  // qualified op -> count, subgraphs included
  size_t node_count = 0;
  int64_t parameter_count = 0;  // elements of all initializers
  int64_t parameter_bytes = 0;
  std::vector<UnsupportedNode> unsupported;
};

ModelInfo analyze_model(const Model& m);

// The memory plan of the main graph (pass/memory_plan.h) with sizes from static types; named
// dims take their value from `bindings`, or 1 (dim_bindings lists the values used).
struct MemoryInfo {
  int64_t arena_bytes = 0;
  int64_t intermediate_bytes = 0;
  int64_t live_bytes_lower_bound = 0;
  size_t planned_values = 0;
  size_t unplanned_values = 0;  // intermediates without a static size
  int in_place = 0;
  std::map<std::string, int64_t> dim_bindings;
};

MemoryInfo analyze_memory(const Model& m, const std::map<std::string, int64_t>& bindings = {});

// Named (symbolic) dims in the types of the main graph's values.
std::set<std::string> dim_symbols(const Graph& g);
// Replaces named dims in the types of the main graph's values by their bindings, so that shape
// inference and folding can make the shapes that depend on them static.
void bind_dims(Model& m, const std::map<std::string, int64_t>& bindings);

}  // namespace kiln
