// Facts about a model for `kiln inspect`: signature, op histogram, parameters, and the nodes
// whose op (or opset) kiln does not support.
#pragma once

#include <map>
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

}  // namespace kiln
