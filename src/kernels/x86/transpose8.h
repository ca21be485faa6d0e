// The AVX2 in-register 8x8 f32 transpose, for kernels that turn rows into columns on 8 lanes
// (f32_transpose; the AVX2 counterpart of transpose16.h). Include only from AVX2 translation
// units (*_avx2.cc).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace kiln::kernels::avx2 {

// In-register transpose of an 8x8 block: r[i][j] -> r[j][i].
__attribute__((always_inline)) inline void transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // u[4i + c], 128-bit half h: column c + 4h of rows 4i..4i+3.
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i) {
    u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  // Rows 0-3 and 4-7 of one column live in the same half of u[k] and u[4 + k]: join them.
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    r[k] = _mm256_permute2f128_ps(u[k], u[4 + k], 0x20);
    r[4 + k] = _mm256_permute2f128_ps(u[k], u[4 + k], 0x31);
  }
}

// Rows [0, nr) of an 8-row block (row stride `stride`; the 8 columns masked by m, a
// _mm256_maskload_ps mask; rows past nr read as zeros), transposed: r[k] is column k.
__attribute__((always_inline)) inline void load_transposed8(const float* src, int64_t stride, int64_t nr, __m256i m,
                                                           __m256 r[8]) {
#pragma GCC unroll 8
  for (int c = 0; c < 8; ++c) r[c] = c < nr ? _mm256_maskload_ps(src + c * stride, m) : _mm256_setzero_ps();
  transpose8(r);
}

// The full 8x8 block at src, transposed: r[k] is column k.
__attribute__((always_inline)) inline void load_transposed8(const float* src, int64_t stride, __m256 r[8]) {
#pragma GCC unroll 8
  for (int c = 0; c < 8; ++c) r[c] = _mm256_loadu_ps(src + c * stride);
  transpose8(r);
}

}  // namespace kiln::kernels::avx2
