// The permute indices that split two AVX-512 vectors into their even and odd floats (stride-2
// reads); lane masks of partial vectors are F32x16::first / F32x16::in_range (simd.h).
#pragma once

#include <immintrin.h>

#include "kernels/x86/simd.h"

namespace kiln::kernels {

// _mm512_permutex2var_ps(a, even_lanes(), b): the floats at even positions of a then b (a
// stride-2 load of 16 from 32); odd_lanes(): those at odd positions.
inline __m512i even_lanes() { return _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30); }
inline __m512i odd_lanes() { return _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31); }

}  // namespace kiln::kernels
