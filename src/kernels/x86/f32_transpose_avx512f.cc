// AVX-512 transpose (see f32_transpose.h): 16x16 blocks through unpack / 64-bit unpack /
// 128-bit lane shuffles; compiled with -mavx512f.
#include <immintrin.h>

#include <algorithm>

#include "kernels/x86/f32_transpose.h"

namespace kiln::kernels {
namespace {

__mmask16 first_lanes(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << n) - 1); }

// r[i] = row i of a 16x16 block -> out[j] = column j.
inline void transpose16(const __m512 r[16], __m512 out[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // u[4i + k]: in 128-bit lane l, column 4l + k of rows 4i..4i+3.
  for (int i = 0; i < 4; ++i) {
    const __m512d lo0 = _mm512_castps_pd(t[4 * i]), lo1 = _mm512_castps_pd(t[4 * i + 2]);
    const __m512d hi0 = _mm512_castps_pd(t[4 * i + 1]), hi1 = _mm512_castps_pd(t[4 * i + 3]);
    u[4 * i + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(lo0, lo1));
    u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(lo0, lo1));
    u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(hi0, hi1));
    u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(hi0, hi1));
  }
  for (int k = 0; k < 4; ++k) {
    const __m512 a = _mm512_shuffle_f32x4(u[k], u[4 + k], 0x88), b = _mm512_shuffle_f32x4(u[k], u[4 + k], 0xdd);
    const __m512 c = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0x88), d = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0xdd);
    out[k] = _mm512_shuffle_f32x4(a, c, 0x88);
    out[8 + k] = _mm512_shuffle_f32x4(a, c, 0xdd);
    out[4 + k] = _mm512_shuffle_f32x4(b, d, 0x88);
    out[12 + k] = _mm512_shuffle_f32x4(b, d, 0xdd);
  }
}

}  // namespace

void transpose_f32_avx512f(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst, int64_t ldd) {
  for (int64_t i0 = 0; i0 < rows; i0 += 16) {
    const int64_t nr = std::min<int64_t>(16, rows - i0);
    const __mmask16 store = first_lanes(nr);
    for (int64_t j0 = 0; j0 < cols; j0 += 16) {
      const int64_t nc = std::min<int64_t>(16, cols - j0);
      const __mmask16 load = first_lanes(nc);
      __m512 r[16], out[16];
      for (int i = 0; i < 16; ++i)
        r[i] = i < nr ? _mm512_maskz_loadu_ps(load, src + (i0 + i) * lds + j0) : _mm512_setzero_ps();
      transpose16(r, out);
      for (int j = 0; j < nc; ++j) _mm512_mask_storeu_ps(dst + (j0 + j) * ldd + i0, store, out[j]);
    }
  }
}

}  // namespace kiln::kernels
