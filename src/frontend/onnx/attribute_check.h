// Attributes against the ONNX op schemas (Debian's libonnx registry, what onnx.checker reads):
// names the op's schema does not define and types that differ from the schema's. kiln's own op
// schemas do not list attributes; libonnx knows every standard op up to its release's opsets,
// so nodes of newer opsets (whose ops may have gained attributes) are not checked.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>

namespace kiln {

// Why `n` (domain "" for ai.onnx, opset `opset` of that domain) has an attribute the schema
// does not allow, or "" when it has none (or when libonnx cannot tell). Attributes named
// "kiln.*" (kiln's own annotations, written by `kiln optimize`) are allowed on every op.
std::string check_onnx_attributes(const onnx::NodeProto& n, const std::string& domain, int64_t opset);

}  // namespace kiln
