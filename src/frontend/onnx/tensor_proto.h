// TensorProto <-> Tensor conversion (typed fields, raw_data, external data), internal to the
// ONNX frontend.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <string_view>

#include "core/tensor.h"

namespace kiln {

// `base_dir` resolves external data; `what` names the tensor in error messages. `raw`, when it
// has data, is the tensor's raw_data kept outside the proto (initializer_payloads.h).
Tensor tensor_from_proto(const onnx::TensorProto& p, const std::string& base_dir,
                         const std::string& what, std::string_view raw = {});
void tensor_to_proto(const Tensor& t, const std::string& name, onnx::TensorProto* p);

}  // namespace kiln
