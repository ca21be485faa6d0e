// Dynamic quantization as a graph rewrite: MatMul/Gemm with a constant 2-D weight become
// DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul (ONNX Runtime's dynamic format): the
// weight is int8 offline, the activation is quantized to uint8 on every run.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "pass/insert_qdq.h"

namespace kiln {

struct DynamicQuantResult {
  int quantized_nodes = 0;
  std::vector<std::string> notes;  // nodes left float and why
};

// Rewrites every eligible MatMul/Gemm of the main graph not excluded by opts.exclude; weights
// per output column when opts.per_channel. kUnsupported for opset < 11 (DynamicQuantizeLinear).
DynamicQuantResult quantize_dynamic(Model& m, const QdqOptions& opts);

}  // namespace kiln
