// Protobuf parsing limits and file reading.
#include "frontend/onnx/proto_util.h"

#include <google/protobuf/io/coded_stream.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <filesystem>
#include <fstream>

namespace kiln {

bool parse_proto(google::protobuf::MessageLite& msg, const void* data, size_t size) {
  if (size > static_cast<size_t>(INT_MAX)) return false;
  google::protobuf::io::CodedInputStream in(static_cast<const uint8_t*>(data), static_cast<int>(size));
  in.SetTotalBytesLimit(INT_MAX);
  // Deep enough for the importer's own nesting limits (64 levels of subgraphs take ~200 message
  // levels) to report the problem clearly; shallow enough to keep the parser's stack bounded.
  in.SetRecursionLimit(1000);
  return msg.ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
}

std::string read_file(const std::string& path, ErrorKind kind) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error(kind, "'" + path + "' is a directory, expected a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(kind, "cannot open '" + path + "'");
  // One read into a buffer of the file's size: a model's weights are copied once here (a
  // stringstream grew and copied a 400 MB model three times, most of its load time).
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(0, std::ios::beg);
  if (size < 0) throw Error(kind, "cannot read '" + path + "'");
  std::string data(static_cast<size_t>(size), '\0');
  if (size > 0 && !in.read(data.data(), size)) throw Error(kind, "cannot read '" + path + "'");
  return data;
}

MappedFile::MappedFile(const std::string& path, ErrorKind kind) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error(kind, "'" + path + "' is a directory, expected a file");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(kind, "cannot open '" + path + "'");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw Error(kind, "cannot read '" + path + "'");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    // Pages mapped in one call (MAP_POPULATE): a model's weights are all read once while loading.
    data_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (data_ == MAP_FAILED) {
      data_ = nullptr;
      ::close(fd);
      throw Error(kind, "cannot read '" + path + "'");
    }
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
}

}  // namespace kiln
