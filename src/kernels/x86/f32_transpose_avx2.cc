// f32 transpose in 8x8 AVX2 register blocks (see f32_transpose.h): full 8-row strips in
// registers (the last partial block of a strip through a column mask), the last partial strip
// by scalar copies; and the k-major row-panel packing of GEMM A operands on the same blocks.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/x86/f32_transpose.h"
#include "kernels/x86/simd.h"
#include "kernels/x86/transpose8.h"

namespace kiln::kernels {
namespace {

// Columns [j_begin, j_end) of the 8-row strip at s; j_end - j_begin need not be a multiple of 8.
void transpose_strip8(int64_t j_begin, int64_t j_end, const float* s, int64_t lds, float* d, int64_t ldd) {
  __m256 r[8];
  const int64_t full_end = j_begin + (j_end - j_begin) / 8 * 8;
  for (int64_t j0 = j_begin; j0 < full_end; j0 += 8) {
    avx2::load_transposed8(s + j0, lds, r);
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) _mm256_storeu_ps(d + (j0 + j) * ldd, r[j]);
  }
  if (full_end < j_end) {
    const int64_t nc = j_end - full_end;
    avx2::load_transposed8(s + full_end, lds, 8, F32x8::first(nc), r);
    for (int64_t j = 0; j < nc; ++j) _mm256_storeu_ps(d + (full_end + j) * ldd, r[j]);
  }
}

}  // namespace

void transpose_f32_avx2(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst, int64_t ldd) {
  // Column panels, all rows per panel: the panel's destination rows fill sequentially, and each
  // 64-byte source line is read once. A strip across all columns instead leaves each destination
  // line half written until the next strip, evicted from L1 by then when cols is large. Measured
  // (Zen 3, us, whole width / 64 / 32 columns): 49x512 6.4 / 5.8 / 6.6-8.0; 196x256 7.9 / 8.7-9.0
  // / 11.6; 768x768 265 / 215 / 162 (the portable loop: 10.4, 19.5, 246).
  const int64_t panel = rows * cols > (1 << 17) ? 32 : 64;
  const int64_t full_rows = rows / 8 * 8;
  for (int64_t p0 = 0; p0 < cols; p0 += panel) {
    const int64_t p1 = std::min(cols, p0 + panel);
    for (int64_t i0 = 0; i0 < full_rows; i0 += 8) transpose_strip8(p0, p1, src + i0 * lds, lds, dst + i0, ldd);
    // The last 1-7 rows: scalar copies beat masked 8x8 blocks, which store 8 partial vectors per
    // block (49x512: 5.9 -> 4.5 us; 1x300: 1.3 -> 0.3 us).
    for (int64_t j = p0; j < p1; ++j)
      for (int64_t i = full_rows; i < rows; ++i) dst[j * ldd + i] = src[i * lds + j];
  }
}

void pack_rows_k_major_avx2(int mr, int64_t rows, int64_t kc, const float* a, int64_t lda, float alpha, float* out) {
  const __m256 scale = _mm256_set1_ps(alpha);
  const int64_t end = kc * mr;
  __m256 r[8];
  int64_t k0 = 0;
  // Each store writes 8 lanes where only mr belong to k; the next k overwrites the extra ones, so
  // only stores that would reach past the panel's end need narrowing (the last block below).
  for (; k0 + 8 <= kc && (k0 + 7) * mr + 8 <= end; k0 += 8) {
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) r[c] = c < rows ? _mm256_loadu_ps(a + c * lda + k0) : _mm256_setzero_ps();
    avx2::transpose8(r);
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) _mm256_storeu_ps(out + (k0 + j) * mr, alpha == 1.0f ? r[j] : _mm256_mul_ps(r[j], scale));
  }
  for (; k0 < kc; k0 += 8) {
    const int64_t n = std::min<int64_t>(8, kc - k0);
    avx2::load_transposed8(a + k0, lda, rows, F32x8::first(n), r);
    alignas(32) float lanes[8][8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) _mm256_store_ps(lanes[j], alpha == 1.0f ? r[j] : _mm256_mul_ps(r[j], scale));
    for (int64_t j = 0; j < n; ++j)
      for (int i = 0; i < mr; ++i) out[(k0 + j) * mr + i] = lanes[j][i];
  }
}

}  // namespace kiln::kernels
