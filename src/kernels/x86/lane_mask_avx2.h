// Partial vectors of the AVX2 kernels (8 f32 lanes): lane masks for _mm256_maskload_ps /
// _mm256_maskstore_ps, and stores of a vector's first lanes without a mask. Include only from
// translation units compiled for AVX2 (*_avx2.cc).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace kiln::kernels {

// The first n lanes of 8 (none for n <= 0, all for n >= 8).
inline __m256i first_lanes8(int64_t n) {
  const int32_t k = static_cast<int32_t>(n < 0 ? 0 : n > 8 ? 8 : n);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// The first n (1-7) lanes of v stored to dst with plain 4-, 2- and 1-float stores: a masked
// store (vmaskmovps) costs several times more on Zen 3.
inline void store_first(float* dst, __m256 v, int64_t n) {
  __m128 rest = _mm256_castps256_ps128(v);
  if (n >= 4) {
    _mm_storeu_ps(dst, rest);
    rest = _mm256_extractf128_ps(v, 1);
    dst += 4;
    n -= 4;
  }
  if (n >= 2) {
    _mm_storel_pi(reinterpret_cast<__m64*>(dst), rest);
    rest = _mm_movehl_ps(rest, rest);
    dst += 2;
    n -= 2;
  }
  if (n >= 1) _mm_store_ss(dst, rest);
}

}  // namespace kiln::kernels
