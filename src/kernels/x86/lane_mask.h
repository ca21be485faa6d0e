// Lane masks of the AVX-512 kernels' partial vectors (16 f32 lanes), and the permute indices
// that split two vectors into their even and odd floats (stride-2 reads).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace kiln::kernels {

// The first n lanes of 16 (none for n <= 0, all for n >= 16).
inline __mmask16 first_lanes(int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : static_cast<__mmask16>((1u << n) - 1);
}

// The lanes l with 0 <= lo + l < n: a vector starting at element lo of an n-element row, lanes
// outside the row masked off.
inline __mmask16 lanes_in_range(int64_t lo, int64_t n) {
  return static_cast<__mmask16>(first_lanes(n - lo) & ~first_lanes(-lo));
}

// _mm512_permutex2var_ps(a, even_lanes(), b): the floats at even positions of a then b (a
// stride-2 load of 16 from 32); odd_lanes(): those at odd positions.
inline __m512i even_lanes() { return _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30); }
inline __m512i odd_lanes() { return _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31); }

}  // namespace kiln::kernels
