// The PassContext the compiled engine's pipeline runs with: the pass options that depend on what
// this CPU's kernels run fast (today the int8 GEMM, for qdq-to-integer).
#pragma once

#include "pass/pass.h"

namespace kiln {

PassContext engine_pass_context();

}  // namespace kiln
