// Large initializer payloads located in the model's bytes instead of copied by protobuf: the
// model is parsed from a copy without the main graph's large raw_data fields, and each of those
// tensors is filled straight from the (mapped) file. A 400 MB model is then copied once instead
// of into a zeroed protobuf string and again into its tensor. Internal to the ONNX frontend.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

struct StrippedModel {
  std::string bytes;  // the ModelProto without the payloads below
  // Per initializer of the main graph, in order: its raw_data bytes when they were left out
  // (empty view with a null data() when the field is still in `bytes`).
  std::vector<std::string_view> payloads;
};

// nullopt when nothing is large enough to strip or the bytes do not parse as protobuf wire
// format the way this needs (the caller then parses them as they are, which reports errors).
std::optional<StrippedModel> strip_initializer_payloads(const char* data, size_t size, size_t min_bytes = 1 << 16);

}  // namespace kiln
