// Protobuf parsing with large-message limits and file reading, shared by the ONNX frontend.
#pragma once

#include <google/protobuf/message_lite.h>

#include <string>

#include "core/error.h"

namespace kiln {

// Parses a whole message (up to 2 GB); false when malformed or truncated.
bool parse_proto(google::protobuf::MessageLite& msg, const void* data, size_t size);
// Whole file as bytes; errors of `kind` name the path.
std::string read_file(const std::string& path, ErrorKind kind);

}  // namespace kiln
