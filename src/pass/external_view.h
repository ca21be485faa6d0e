// IR nodes and region bodies as the extension API's plain data (include/kiln/extension.h): what
// external backends see when they annotate (one node), generate code for and load a region.
#pragma once

#include <string>
#include <unordered_map>

#include "ir/graph.h"
#include "kiln/extension.h"

namespace kiln {

// The node as a one-node region: its inputs then its outputs as values, with their declared
// types and constant data. The node is regions's nodes[0].
ext::Region node_region(const Node& n);
// A kiln::External body as a region named `name`. `types`, when given, overrides the declared
// types (the dims bound for one input-shape signature).
ext::Region body_region(const Graph& body, const std::string& name,
                        const std::unordered_map<const Value*, Type>* types = nullptr);

}  // namespace kiln
