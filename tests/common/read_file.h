// Whole-file reads for tests (compiled libraries of a few MB): one sized read, since a
// character-by-character stream copy takes seconds per file in the -O0 sanitizer build.
#pragma once

#include <fstream>
#include <string>

namespace kiln::testing {

inline std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  std::string bytes(in ? static_cast<size_t>(in.tellg()) : 0, '\0');
  in.seekg(0);
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return bytes;
}

}  // namespace kiln::testing
