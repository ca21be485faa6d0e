// The seal of a compiled model library: `kiln compile` appends 32 bytes (magic, format, the
// sealed size and a 64-bit hash of every byte before the seal) to the .so, and every loader
// checks it, with the ELF headers, before dlopen. A truncated, damaged or modified file (a
// partial download, a flipped bit, `strip`) is refused with a clear error instead of crashing
// inside the dynamic loader or running a damaged plan. It detects damage, not tampering: the
// hash is not cryptographic. Tests: tests/capi/test_library_seal.cc, fuzz: tests/fuzz.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln {

constexpr size_t kLibrarySealBytes = 32;

// A fast 64-bit hash of `size` bytes (four independent multiply-rotate lanes; ~10 GB/s).
uint64_t seal_hash(const void* data, size_t size);
// Appends the seal to the library file at `path` (kUsage when it cannot be written).
void seal_library_file(const std::string& path);
// Why the image of a whole library file (`data`, `size` bytes) cannot be loaded, or "" when it
// is an intact sealed 64-bit shared library whose loadable segments lie inside the file.
std::string check_library_image(const void* data, size_t size);
// The same for a file: reads it once. Returns why it cannot be loaded, or "".
std::string check_library_file(const std::string& path);

}  // namespace kiln
