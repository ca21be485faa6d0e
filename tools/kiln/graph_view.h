// Views of a model's main graph for `kiln inspect`: Graphviz dot, and one self-contained HTML
// file (inline JS/CSS, no network) with a layered layout, pan/zoom, a node detail panel and the
// fused groups (`kiln.group`) outlined.
#pragma once

#include <ostream>

#include "driver/model_info.h"
#include "ir/graph.h"

namespace kiln::cli {

void write_dot(const Model& m, std::ostream& out);
void write_html(const Model& m, const MemoryInfo& mem, std::ostream& out);

}  // namespace kiln::cli
