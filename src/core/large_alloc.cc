// alloc_large / free_large (large_alloc.h).
#include "core/large_alloc.h"

#include <sys/mman.h>

#include <cstdlib>

namespace kiln {
namespace {

constexpr size_t kAlign = 64, kMappedFrom = size_t{1} << 20;

size_t rounded(size_t bytes) { return bytes == 0 ? kAlign : (bytes + kAlign - 1) / kAlign * kAlign; }

}  // namespace

void* alloc_large(size_t bytes) {
  if (rounded(bytes) < kMappedFrom) return std::aligned_alloc(kAlign, rounded(bytes));
  void* p = ::mmap(nullptr, rounded(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

void free_large(void* p, size_t bytes) {
  if (!p) return;
  if (rounded(bytes) < kMappedFrom) std::free(p);
  else ::munmap(p, rounded(bytes));
}

}  // namespace kiln
