// AVX-512 col2im row kernel for stride-2 ConvTranspose (see f32_col2im.h).
#include <immintrin.h>

#include <cstdint>

#include "kernels/x86/lane_mask.h"

namespace kiln::kernels {

// d[2k] += s0[k], d[2k + 1] += s1[k] for k in [0, n): two taps' rows interleaved into 2n
// contiguous outputs.
void col2im_pair_row_avx512f(const float* s0, const float* s1, int64_t n, float* d) {
  const __m512i lo_idx = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi_idx = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    const __m512 a = _mm512_loadu_ps(s0 + k), b = _mm512_loadu_ps(s1 + k);
    float* o = d + 2 * k;
    _mm512_storeu_ps(o, _mm512_add_ps(_mm512_loadu_ps(o), _mm512_permutex2var_ps(a, lo_idx, b)));
    _mm512_storeu_ps(o + 16, _mm512_add_ps(_mm512_loadu_ps(o + 16), _mm512_permutex2var_ps(a, hi_idx, b)));
  }
  if (k < n) {
    const int64_t r = n - k;  // 1..15 pairs: 2r outputs
    const __mmask16 m = F32x16::first(r);
    const __m512 a = _mm512_maskz_loadu_ps(m, s0 + k), b = _mm512_maskz_loadu_ps(m, s1 + k);
    float* o = d + 2 * k;
    const __mmask16 m0 = F32x16::first(2 * r), m1 = F32x16::first(2 * r - 16);
    _mm512_mask_storeu_ps(o, m0, _mm512_add_ps(_mm512_maskz_loadu_ps(m0, o), _mm512_permutex2var_ps(a, lo_idx, b)));
    _mm512_mask_storeu_ps(o + 16, m1,
                          _mm512_add_ps(_mm512_maskz_loadu_ps(m1, o + 16), _mm512_permutex2var_ps(a, hi_idx, b)));
  }
}

}  // namespace kiln::kernels
