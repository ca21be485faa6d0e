// Lane masks of the AVX2 kernels' partial vectors (8 f32 lanes) for _mm256_maskload_ps /
// _mm256_maskstore_ps. Include only from translation units compiled for AVX2 (*_avx2.cc).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace kiln::kernels {

// The first n lanes of 8 (none for n <= 0, all for n >= 8).
inline __m256i first_lanes8(int64_t n) {
  const int32_t k = static_cast<int32_t>(n < 0 ? 0 : n > 8 ? 8 : n);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

}  // namespace kiln::kernels
