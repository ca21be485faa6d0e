// A backend for golden tests of the external passes: it supports the ops it is given by name and
// its "codegen" lists the region's ops. Spec (a golden file's "// offload:" line):
//   NAME ops=Conv,Relu[,...] [composites=conv_relu:Conv+Relu[;...]] [min-cost=C]
#pragma once

#include <memory>
#include <string>

#include "kiln/extension.h"

namespace kiln {

std::shared_ptr<const ext::Backend> make_op_list_backend(const std::string& spec);

}  // namespace kiln
