// Lane masks of the AVX-512 kernels' partial vectors (16 f32 lanes).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace kiln::kernels {

// The first n lanes of 16 (none for n <= 0, all for n >= 16).
inline __mmask16 first_lanes(int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : static_cast<__mmask16>((1u << n) - 1);
}

}  // namespace kiln::kernels
