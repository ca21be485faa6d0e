// The seal of compiled model libraries and the checks before dlopen (runtime/library_seal.h).
#include "runtime/library_seal.h"

#include <elf.h>

#include <cstring>
#include <fstream>
#include <vector>

#include "core/error.h"

namespace kiln {
namespace {

// The whole file in one sized read (libraries are several MB); false when it cannot be read.
bool read_whole_file(const std::string& path, std::vector<char>& bytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return false;
  bytes.resize(static_cast<size_t>(in.tellg()));
  in.seekg(0);
  return bytes.empty() || static_cast<bool>(in.read(bytes.data(), static_cast<std::streamsize>(bytes.size())));
}

constexpr char kSealMagic[8] = {'K', 'I', 'L', 'N', 'S', 'E', 'A', 'L'};
constexpr uint32_t kSealFormat = 1;
constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ULL, kPrime2 = 0xC2B2AE3D27D4EB4FULL;

uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
uint64_t lane_step(uint64_t acc, uint64_t word) { return rotl(acc + word * kPrime2, 31) * kPrime1; }
uint64_t load64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

struct Seal {
  char magic[8];
  uint32_t format;
  uint32_t reserved;
  uint64_t sealed_size;
  uint64_t hash;
};
static_assert(sizeof(Seal) == kLibrarySealBytes);

std::string check_elf(const unsigned char* data, size_t size) {
  if (size < sizeof(Elf64_Ehdr) || std::memcmp(data, ELFMAG, SELFMAG) != 0) return "not an ELF file";
  Elf64_Ehdr eh;
  std::memcpy(&eh, data, sizeof eh);
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_type != ET_DYN) return "not a 64-bit shared library";
  if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phoff > size || eh.e_phnum * sizeof(Elf64_Phdr) > size - eh.e_phoff)
    return "truncated ELF file (program headers)";
  for (size_t i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, data + eh.e_phoff + i * sizeof ph, sizeof ph);
    // dlopen maps segments past the end of a truncated file; touching them raises SIGBUS.
    if (ph.p_type == PT_LOAD && (ph.p_offset > size || ph.p_filesz > size - ph.p_offset))
      return "truncated ELF file (a segment ends past the end of the file)";
  }
  return "";
}

}  // namespace

uint64_t seal_hash(const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t lanes[4] = {kPrime1 + kPrime2, kPrime2, 0, 0 - kPrime1};
  size_t i = 0;
  for (; i + 32 <= size; i += 32)
    for (int k = 0; k < 4; ++k) lanes[k] = lane_step(lanes[k], load64(p + i + 8 * static_cast<size_t>(k)));
  uint64_t h = rotl(lanes[0], 1) + rotl(lanes[1], 7) + rotl(lanes[2], 12) + rotl(lanes[3], 18) + size;
  for (; i < size; ++i) h = rotl(h ^ (p[i] * kPrime1), 11) * kPrime2;
  h ^= h >> 33;  // avalanche: every input bit reaches every output bit
  h *= kPrime2;
  h ^= h >> 29;
  return h;
}

void seal_library_file(const std::string& path) {
  std::vector<char> bytes;
  if (!read_whole_file(path, bytes)) throw Error(ErrorKind::kUsage, "cannot read '" + path + "' to seal it");
  Seal seal{};
  std::memcpy(seal.magic, kSealMagic, sizeof kSealMagic);
  seal.format = kSealFormat;
  seal.sealed_size = bytes.size();
  seal.hash = seal_hash(bytes.data(), bytes.size());
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out.write(reinterpret_cast<const char*>(&seal), sizeof seal);
  if (!out) throw Error(ErrorKind::kUsage, "cannot write the seal of '" + path + "'");
}

std::string check_library_image(const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  if (size < kLibrarySealBytes) return "truncated file (" + std::to_string(size) + " bytes)";
  if (std::string why = check_elf(p, size); !why.empty()) return why;
  Seal seal;
  std::memcpy(&seal, p + size - sizeof seal, sizeof seal);
  if (std::memcmp(seal.magic, kSealMagic, sizeof kSealMagic) != 0)
    return "no kiln seal at its end: the file is truncated, was modified after `kiln compile` (strip, "
           "objcopy, ...) or was made by a kiln older than this one; compile the model again";
  if (seal.format != kSealFormat) return "seal format " + std::to_string(seal.format) + " (this kiln reads format 1)";
  if (seal.sealed_size != size - sizeof seal)
    return "the file is " + std::to_string(size) + " bytes, its seal says " +
           std::to_string(seal.sealed_size + sizeof seal) + ": truncated or extended";
  if (seal_hash(p, size - sizeof seal) != seal.hash)
    return "the file's contents do not match its seal: damaged or modified after `kiln compile`";
  return "";
}

std::string check_library_file(const std::string& path) {
  std::vector<char> bytes;
  if (!read_whole_file(path, bytes)) return "cannot open or read the file";
  return check_library_image(bytes.data(), bytes.size());
}

}  // namespace kiln
