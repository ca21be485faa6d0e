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

// A file mapped read-only into memory (models: parsed in place, no copy of the weights into a
// buffer first). Same errors as read_file.
class MappedFile {
 public:
  MappedFile(const std::string& path, ErrorKind kind);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kiln
