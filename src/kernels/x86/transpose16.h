// The AVX-512 in-register 16x16 f32 transpose, shared by the kernels that turn rows into
// columns (depthwise layouts, GEMM A packing, f32_transpose). Include only from AVX-512
// translation units.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace kiln::kernels {

// Full masks: GCC 12 warns (falsely) that the unmasked shuffle intrinsics read an uninitialized
// passthrough, so the maskz forms are used with every lane on.
constexpr __mmask16 kAll16 = 0xFFFF;
constexpr __mmask8 kAll8 = 0xFF;

// In-register transpose of a 16x16 block: r[i][j] -> r[j][i].
__attribute__((always_inline)) inline void transpose16(__m512 r[16]) {
  __m512 t[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_maskz_unpacklo_ps(kAll16, r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_maskz_unpackhi_ps(kAll16, r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
    r[4 * i] = _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(kAll8, a, c));
    r[4 * i + 1] = _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(kAll8, a, c));
    r[4 * i + 2] = _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(kAll8, b, d));
    r[4 * i + 3] = _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(kAll8, b, d));
  }
  // r[4i+k], 128-bit lane j: rows 4i..4i+3 of column 4j+k; gather lane j of the four groups.
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    const __m512 ab_lo = _mm512_maskz_shuffle_f32x4(kAll16, r[k], r[4 + k], 0x44);
    const __m512 ab_hi = _mm512_maskz_shuffle_f32x4(kAll16, r[k], r[4 + k], 0xEE);
    const __m512 cd_lo = _mm512_maskz_shuffle_f32x4(kAll16, r[8 + k], r[12 + k], 0x44);
    const __m512 cd_hi = _mm512_maskz_shuffle_f32x4(kAll16, r[8 + k], r[12 + k], 0xEE);
    t[k] = _mm512_maskz_shuffle_f32x4(kAll16, ab_lo, cd_lo, 0x88);
    t[4 + k] = _mm512_maskz_shuffle_f32x4(kAll16, ab_lo, cd_lo, 0xDD);
    t[8 + k] = _mm512_maskz_shuffle_f32x4(kAll16, ab_hi, cd_hi, 0x88);
    t[12 + k] = _mm512_maskz_shuffle_f32x4(kAll16, ab_hi, cd_hi, 0xDD);
  }
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = t[i];
}

// Rows [0, nc) of a 16-row block (row stride `stride`, the 16 columns masked by m; rows past nc
// read as zeros), transposed: r[k] is column k.
__attribute__((always_inline)) inline void load_transposed16(const float* src, int64_t stride, int64_t nc, __mmask16 m,
                                                             __m512 r[16]) {
#pragma GCC unroll 16
  for (int c = 0; c < 16; ++c) r[c] = c < nc ? _mm512_maskz_loadu_ps(m, src + c * stride) : _mm512_setzero_ps();
  transpose16(r);
}

}  // namespace kiln::kernels
