// AVX2 col2im row kernel for stride-2 ConvTranspose (see f32_col2im.h): the AVX-512 pair kernel
// on 8 lanes.
#include <immintrin.h>

#include <cstdint>

namespace kiln::kernels {

// d[2k] += s0[k], d[2k + 1] += s1[k] for k in [0, n): two taps' rows interleaved into 2n
// contiguous outputs.
void col2im_pair_row_avx2(const float* s0, const float* s1, int64_t n, float* d) {
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m256 a = _mm256_loadu_ps(s0 + k), b = _mm256_loadu_ps(s1 + k);
    // In-lane interleaves give pairs 0-1 | 4-5 and 2-3 | 6-7; the lane permutes put them in order.
    const __m256 lo = _mm256_unpacklo_ps(a, b), hi = _mm256_unpackhi_ps(a, b);
    float* o = d + 2 * k;
    _mm256_storeu_ps(o, _mm256_add_ps(_mm256_loadu_ps(o), _mm256_permute2f128_ps(lo, hi, 0x20)));
    _mm256_storeu_ps(o + 8, _mm256_add_ps(_mm256_loadu_ps(o + 8), _mm256_permute2f128_ps(lo, hi, 0x31)));
  }
  // The last 1-7 pairs one by one: masked loads and stores cost more than they save on Zen 3.
  for (; k < n; ++k) {
    d[2 * k] += s0[k];
    d[2 * k + 1] += s1[k];
  }
}

}  // namespace kiln::kernels
