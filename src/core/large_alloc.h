// Memory for large, long-lived buffers (packed weights, and weights through Tensor::populated):
// from 1 MiB on, its own mapping with the pages populated in one call (zeroed), where faulting
// them in one 4 KiB page at a time cost more than packing itself; smaller ones come from
// aligned_alloc. 64-byte aligned either way.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace kiln {

// Null when out of memory. Free with free_large and the same size.
void* alloc_large(size_t bytes);
void free_large(void* p, size_t bytes);

template <class T>
struct LargeAllocator {
  using value_type = T;
  LargeAllocator() = default;
  template <class U>
  LargeAllocator(const LargeAllocator<U>&) {}  // NOLINT: rebinding
  T* allocate(size_t n) {
    void* p = alloc_large(n * sizeof(T));
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) { free_large(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const LargeAllocator<U>&) const { return true; }
};

// A std::vector for packed weights.
template <class T>
using LargeVector = std::vector<T, LargeAllocator<T>>;

}  // namespace kiln
