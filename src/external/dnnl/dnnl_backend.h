// kiln's oneDNN backend ("--offload dnnl"): conv (grouped, depthwise), MatMul, Gemm, pooling,
// eltwise, binary, Softmax, BatchNormalization, LayerNorm, Transpose and reshapes run as oneDNN
// primitives, in oneDNN's blocked layouts inside a region, with reorders only at its edges.
// Files: dnnl_steps.h (the artifact: a list of library calls as JSON), dnnl_codegen.cc (which
// nodes it runs; region -> steps with post-ops fused), dnnl_module.cc (steps -> primitives, run).
#pragma once

#include <memory>

#include "kiln/extension.h"

namespace kiln::external {

std::shared_ptr<const ext::Backend> make_dnnl_backend();

}  // namespace kiln::external
