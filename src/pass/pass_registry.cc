// The list of passes; the default pipeline is this order.
#include "pass/passes.h"

namespace kiln {

std::vector<PassInfo> registered_passes() {
  return {
      dead_code_elimination_pass(),
  };
}

std::vector<std::string> default_pipeline() {
  std::vector<std::string> names;
  for (const auto& p : registered_passes()) names.push_back(p.name);
  return names;
}

}  // namespace kiln
