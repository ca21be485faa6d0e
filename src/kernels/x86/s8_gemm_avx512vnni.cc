// u8 x s8 -> s32 GEMM microkernel for AVX-512 VNNI (compiled with -mavx512f -mavx512vnni;
// called only when the CPU has them): 14 rows x 32 columns of int32 accumulators, A from packed
// micro-panels or read in place from its rows; the requantizing tile epilogue (s8_gemm.h).
// Compiled with -ffp-contract=off: the epilogue's multiply and add must round separately (its
// fused multiply-adds are explicit).
#include <immintrin.h>

#include <cstdint>
#include <cmath>
#include <cstring>

#include "kernels/x86/lane_mask.h"
#include "kernels/x86/s8_gemm.h"

namespace kiln::kernels {

namespace {

constexpr int kMr = 14;

// MR rows of the tile; row i's quad q of A at a + row[i] + q * a_quad_stride, B's 32 columns of
// quad q at b + q * b_quad_stride (kOffsets: at b + b_offsets[q], an implicit convolution's taps). kSignedRows: A holds the int8 values (broadcast) and B the
// uint8 ones (vpdpbusd's unsigned operand is the vector then), as the weight-stationary NCHW conv
// has them; else A uint8, B int8.
template <int MR, bool kSignedRows, bool kOffsets = false>
void s8_tile(int64_t nr, int64_t kq, const uint8_t* a, const int64_t* row, int64_t a_quad_stride, const uint8_t* b,
             int64_t b_quad_stride, const int64_t* b_offsets, int32_t* c, int64_t ldc, bool accumulate) {
  __m512i acc0[MR], acc1[MR];
#pragma GCC unroll 14
  for (int i = 0; i < MR; ++i) acc0[i] = acc1[i] = _mm512_setzero_si512();
  for (int64_t q = 0; q < kq; ++q) {
    const uint8_t* bq = kOffsets ? b + b_offsets[q] : b;
    const __m512i b0 = _mm512_loadu_si512(bq);
    const __m512i b1 = _mm512_loadu_si512(bq + 64);
#pragma GCC unroll 14
    for (int i = 0; i < MR; ++i) {
      int32_t quad;
      std::memcpy(&quad, a + row[i], 4);
      const __m512i ai = _mm512_set1_epi32(quad);
      if constexpr (kSignedRows) {
        acc0[i] = _mm512_dpbusd_epi32(acc0[i], b0, ai);
        acc1[i] = _mm512_dpbusd_epi32(acc1[i], b1, ai);
      } else {
        acc0[i] = _mm512_dpbusd_epi32(acc0[i], ai, b0);
        acc1[i] = _mm512_dpbusd_epi32(acc1[i], ai, b1);
      }
    }
    a += a_quad_stride;
    b += b_quad_stride;
  }
  const __mmask16 m0 = F32x16::first(nr), m1 = F32x16::first(nr - 16);
#pragma GCC unroll 14
  for (int i = 0; i < MR; ++i) {
    int32_t* out = c + i * ldc;
    __m512i v0 = acc0[i], v1 = acc1[i];
    if (accumulate) {
      v0 = _mm512_add_epi32(v0, _mm512_maskz_loadu_epi32(m0, out));
      v1 = _mm512_add_epi32(v1, _mm512_maskz_loadu_epi32(m1, out + 16));
    }
    _mm512_mask_storeu_epi32(out, m0, v0);
    _mm512_mask_storeu_epi32(out + 16, m1, v1);
  }
}

// The instance for mr rows (1..14): a partial micro-panel (M = 128 leaves 2 rows after nine
// full ones) computes only its rows.
template <bool kSignedRows, bool kOffsets = false>
void s8_tile_rows(int64_t mr, int64_t nr, int64_t kq, const uint8_t* a, const int64_t* row, int64_t a_quad_stride,
                  const uint8_t* b, int64_t b_quad_stride, const int64_t* b_offsets, int32_t* c, int64_t ldc,
                  bool accumulate) {
  switch (mr) {
#define KILN_S8_TILE_CASE(MR)                                                                                      \
  case MR:                                                                                                         \
    return s8_tile<MR, kSignedRows, kOffsets>(nr, kq, a, row, a_quad_stride, b, b_quad_stride, b_offsets, c, ldc, \
                                              accumulate);
    KILN_S8_TILE_CASE(1) KILN_S8_TILE_CASE(2) KILN_S8_TILE_CASE(3) KILN_S8_TILE_CASE(4) KILN_S8_TILE_CASE(5)
    KILN_S8_TILE_CASE(6) KILN_S8_TILE_CASE(7) KILN_S8_TILE_CASE(8) KILN_S8_TILE_CASE(9) KILN_S8_TILE_CASE(10)
    KILN_S8_TILE_CASE(11) KILN_S8_TILE_CASE(12) KILN_S8_TILE_CASE(13)
#undef KILN_S8_TILE_CASE
    default:
      return s8_tile<kMr, kSignedRows, kOffsets>(nr, kq, a, row, a_quad_stride, b, b_quad_stride, b_offsets, c, ldc,
                                                 accumulate);
  }
}

constexpr int64_t kPacked[kMr] = {0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52};

}  // namespace

// a: MR rows x kq groups of 4 u8 ([kq][14][4]); b: one packed panel ([kq][32][4]).
// Writes (accumulate: adds to) the mr x nr tile of C.
void s8_gemm_ukernel_14x32__avx512vnni(int64_t mr, int64_t nr, int64_t kq, const uint8_t* a, const int8_t* b,
                                       int32_t* c, int64_t ldc, bool accumulate) {
  s8_tile_rows<false>(mr, nr, kq, a, kPacked, 4 * kMr, reinterpret_cast<const uint8_t*>(b), 128, nullptr, c, ldc,
                      accumulate);
}

// The same with A read in place: row i at a + i * lda (mr rows), 4 * kq bytes each.
void s8_gemm_ukernel_14x32_rows__avx512vnni(int64_t mr, int64_t nr, int64_t kq, const uint8_t* a, int64_t lda,
                                            const int8_t* b, int32_t* c, int64_t ldc, bool accumulate) {
  int64_t row[kMr];
  for (int i = 0; i < kMr; ++i) row[i] = i * lda;
  s8_tile_rows<false>(mr, nr, kq, a, row, 4, reinterpret_cast<const uint8_t*>(b), 128, nullptr, c, ldc, accumulate);
}

// Weight-stationary: w one packed int8 panel of MR output channels ([kq][14][4]), x 32 pixels of
// uint8 activations in quad-major layout (quad q of pixel j at x + q * x_quad_stride + 4 * j).
void s8_gemm_ukernel_14x32_wx__avx512vnni(int64_t mr, int64_t nr, int64_t kq, const int8_t* w, const uint8_t* x,
                                          int64_t x_quad_stride, int32_t* c, int64_t ldc, bool accumulate) {
  s8_tile_rows<true>(mr, nr, kq, reinterpret_cast<const uint8_t*>(w), kPacked, 4 * kMr, x, x_quad_stride, nullptr, c,
                     ldc, accumulate);
}

// The same with quad q of the 32 pixels at x + x_offsets[q] (an implicit convolution's taps).
void s8_gemm_ukernel_14x32_wxo__avx512vnni(int64_t mr, int64_t nr, int64_t kq, const int8_t* w, const uint8_t* x,
                                           const int64_t* x_offsets, int32_t* c, int64_t ldc) {
  s8_tile_rows<true, true>(mr, nr, kq, reinterpret_cast<const uint8_t*>(w), kPacked, 4 * kMr, x, 0, x_offsets, c, ldc,
                           false);
}

// v / y_scale correctly rounded without a division (vdivps is a fifth of a small-K tile's time):
// q = v * inv with inv = RN(1 / y_scale), then one correction with the exact residual v - q * y_scale
// (fused multiply-adds). Markstein's theorem: with inv the correctly rounded reciprocal and q
// within an ulp of the quotient, q + r * inv rounds to the correctly rounded quotient (no
// overflow or underflow; the caller takes vdivps for scales where that could occur). An infinite
// v keeps q (its residual is NaN).
inline __m512 divide_exactly(__m512 v, __m512 y_scale, __m512 inv) {
  const __m512 q = _mm512_mul_ps(v, inv);
  const __m512 r = _mm512_fnmadd_ps(q, y_scale, v);
  const __m512 corrected = _mm512_fmadd_ps(r, inv, q);
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(corrected, corrected, _CMP_UNORD_Q), corrected, q);
}

// Rows [row0, row0 + mr) x nr (<= 32) columns of int32 sums (acc, leading dim ldacc) requantized
// into y (leading dim ldy), 16 columns per step.
void requantize_tile_u8__avx512vnni(int64_t mr, int64_t nr, const int32_t* acc, int64_t ldacc, const Requantize& rq,
                                    int64_t row0, uint8_t* y, int64_t ldy) {
  const __m512 y_scale = _mm512_set1_ps(rq.y_scale), zp = _mm512_set1_ps(static_cast<float>(rq.y_zero_point));
  const __m512 inv = _mm512_set1_ps(1.0f / rq.y_scale);
  // Scales whose reciprocal or quotients could leave the normal range divide instead.
  const float magnitude = std::fabs(rq.y_scale);
  const bool markstein = magnitude >= 0x1p-60f && magnitude <= 0x1p60f;
  const __m512 zero = _mm512_setzero_ps(), top = _mm512_set1_ps(255.0f);
  for (int64_t i = 0; i < mr; ++i) {
    const int64_t m = row0 + i;
    const __m512i corr = _mm512_set1_epi32(rq.correction ? rq.correction[m] : 0);
    const __m512 scale = _mm512_set1_ps(rq.scale[m]);
    const __m512 bias = _mm512_set1_ps(rq.bias ? rq.bias[m] : 0.0f);
    for (int64_t j = 0; j < nr; j += 16) {
      const __mmask16 mask = F32x16::first(nr - j);
      const __m512i s = _mm512_sub_epi32(_mm512_maskz_loadu_epi32(mask, acc + i * ldacc + j), corr);
      __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(s), scale);
      if (rq.bias) v = _mm512_add_ps(v, bias);
      if (rq.relu) v = _mm512_max_ps(v, zero);
      v = markstein ? divide_exactly(v, y_scale, inv) : _mm512_div_ps(v, y_scale);
      v = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      v = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(v, zp), zero), top);
      _mm512_mask_cvtepi32_storeu_epi8(y + i * ldy + j, mask, _mm512_cvtps_epi32(v));
    }
  }
}

}  // namespace kiln::kernels
