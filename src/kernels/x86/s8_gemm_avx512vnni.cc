// u8 x s8 -> s32 GEMM microkernel for AVX-512 VNNI (compiled with -mavx512f -mavx512vnni;
// called only when the CPU has them): 14 rows x 32 columns of int32 accumulators, A from packed
// micro-panels or read in place from its rows; the weight-stationary tiles can requantize their
// accumulators in registers (Requantize, s8_gemm.h) instead of storing int32.
// Compiled with -ffp-contract=off: the requantization's multiply and add must round separately
// (its fused multiply-adds are explicit).
// GCC 12's AVX-512 conversion intrinsics pass a deliberately undefined vector (__Y) as the
// merge source; -Wuninitialized flags it once they are inlined here.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/x86/lane_mask.h"
#include "kernels/x86/s8_gemm.h"

namespace kiln::kernels {

namespace {

constexpr int kMr = 14;

// The int32 store of a tile row (accumulate: added to what C holds).
struct Int32Store {
  int32_t* c;
  int64_t ldc;
  bool accumulate;
  void operator()(int i, __m512i v0, __m512i v1, __mmask16 m0, __mmask16 m1) const {
    int32_t* out = c + i * ldc;
    if (accumulate) {
      v0 = _mm512_add_epi32(v0, _mm512_maskz_loadu_epi32(m0, out));
      v1 = _mm512_add_epi32(v1, _mm512_maskz_loadu_epi32(m1, out + 16));
    }
    _mm512_mask_storeu_epi32(out, m0, v0);
    _mm512_mask_storeu_epi32(out + 16, m1, v1);
  }
};

// A tile row requantized to uint8 (Requantize's definition, each float step rounded as the nodes
// round it). v / y_scale without vdivps (a fifth of a small-K tile's time): q = v * inv with
// inv = RN(1 / y_scale), then one correction with the exact residual v - q * y_scale. Markstein's
// theorem: with inv the correctly rounded reciprocal and q within an ulp of the quotient, q + r *
// inv rounds to the correctly rounded quotient (no overflow or underflow: y_scales outside
// 2^-60..2^60 divide, and rows whose scale or bias could make v infinite keep the division too).
// A Relu folds into the lower clamp: Q(max(v, 0)) = max(Q(v), zero point) for a positive y_scale.
class RequantStore {
 public:
  RequantStore(const Requantize& rq, int64_t row0, uint8_t* y, int64_t ldy) : rq_(rq), row0_(row0), y_(y), ldy_(ldy) {
    y_scale_ = _mm512_set1_ps(rq.y_scale);
    inv_ = _mm512_set1_ps(1.0f / rq.y_scale);
    zp_ = _mm512_set1_epi32(rq.y_zero_point);
    const float magnitude = std::fabs(rq.y_scale);
    reciprocal_ok_ = magnitude >= 0x1p-60f && magnitude <= 0x1p60f;
    relu_in_clamp_ = rq.relu && rq.y_scale > 0;
    lo_ = _mm512_set1_ps(relu_in_clamp_ ? 0.0f : -static_cast<float>(rq.y_zero_point));
    hi_ = _mm512_set1_ps(255.0f - static_cast<float>(rq.y_zero_point));
  }

  void operator()(int i, __m512i v0, __m512i v1, __mmask16 m0, __mmask16 m1) const {
    const int64_t m = row0_ + i;
    const float scale = rq_.scale[m], bias = rq_.bias ? rq_.bias[m] : 0.0f;
    // |v| <= 2^32 * |scale| + |bias| stays finite: the reciprocal path is exact.
    const bool reciprocal = reciprocal_ok_ && std::fabs(scale) < 0x1p90f && std::fabs(bias) < 0x1p120f;
    const __m512i corr = _mm512_set1_epi32(rq_.correction ? rq_.correction[m] : 0);
    uint8_t* out = y_ + i * ldy_;
    const __m512i q0 = requantize(v0, corr, scale, bias, reciprocal);
    if (m1 == 0xFFFF) {  // a whole row: narrowed in registers, two plain stores (the masked narrowing store is slow)
      const __m512i q1 = requantize(v1, corr, scale, bias, reciprocal);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm512_cvtepi32_epi8(q0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 16), _mm512_cvtepi32_epi8(q1));
      return;
    }
    _mm512_mask_cvtepi32_storeu_epi8(out, m0, q0);
    if (m1) _mm512_mask_cvtepi32_storeu_epi8(out + 16, m1, requantize(v1, corr, scale, bias, reciprocal));
  }

 private:
  __m512i requantize(__m512i acc, __m512i corr, float scale, float bias, bool reciprocal) const {
    __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc, corr)), _mm512_set1_ps(scale));
    if (rq_.bias) v = _mm512_add_ps(v, _mm512_set1_ps(bias));
    if (rq_.relu && !relu_in_clamp_) v = _mm512_max_ps(v, _mm512_setzero_ps());
    if (reciprocal) {
      const __m512 q = _mm512_mul_ps(v, inv_);
      v = _mm512_fmadd_ps(_mm512_fnmadd_ps(q, y_scale_, v), inv_, q);
    } else {
      v = _mm512_div_ps(v, y_scale_);
    }
    // Clamped to [lo - zp, 255 - zp] (whole numbers) before rounding, which commutes with it, so
    // that the conversion (round half to even, as nearbyint) stays in range; then + zp.
    v = _mm512_min_ps(_mm512_max_ps(v, lo_), hi_);
    return _mm512_add_epi32(_mm512_cvtps_epi32(v), zp_);
  }

  const Requantize& rq_;
  int64_t row0_;
  uint8_t* y_;
  int64_t ldy_;
  __m512 y_scale_, inv_, lo_, hi_;
  __m512i zp_;
  bool reciprocal_ok_ = false, relu_in_clamp_ = false;
};

// MR rows of the tile; row i's quad q of A at a + row[i] + q * a_quad_stride. Without
// kWeightStationary A holds uint8 values and B's 32 int8 columns of quad q are at b + 128 * q (a
// packed panel); with it (the NCHW conv) A holds the int8 weights and B's 32 uint8 columns of
// quad q are at b + b_offsets[q] (an implicit convolution's taps), vpdpbusd's unsigned operand
// then being the vector. store(i, ...) takes row i's two accumulators.
// Lines of memory a tile asks into L2 as it goes, one per K quad (the next B panel: streamed
// from memory, it would stall the first tile that reads it).
struct Prefetch {
  const int8_t* at = nullptr;
  int64_t lines = 0;
};

template <int MR, bool kWeightStationary, typename Store>
void s8_tile(int64_t nr, int64_t kq, const uint8_t* a, const int64_t* row, int64_t a_quad_stride, const uint8_t* b,
             const int64_t* b_offsets, const Store& store, Prefetch pf = {}) {
  __m512i acc0[MR], acc1[MR];
#pragma GCC unroll 14
  for (int i = 0; i < MR; ++i) acc0[i] = acc1[i] = _mm512_setzero_si512();
  for (int64_t q = 0; q < kq; ++q) {
    const uint8_t* bq = kWeightStationary ? b + b_offsets[q] : b + 128 * q;
    const __m512i b0 = _mm512_loadu_si512(bq);
    const __m512i b1 = _mm512_loadu_si512(bq + 64);
    if (q < pf.lines) _mm_prefetch(reinterpret_cast<const char*>(pf.at + 64 * q), _MM_HINT_T1);
#pragma GCC unroll 14
    for (int i = 0; i < MR; ++i) {
      int32_t quad;
      std::memcpy(&quad, a + row[i], 4);
      const __m512i ai = _mm512_set1_epi32(quad);
      if constexpr (kWeightStationary) {
        acc0[i] = _mm512_dpbusd_epi32(acc0[i], b0, ai);
        acc1[i] = _mm512_dpbusd_epi32(acc1[i], b1, ai);
      } else {
        acc0[i] = _mm512_dpbusd_epi32(acc0[i], ai, b0);
        acc1[i] = _mm512_dpbusd_epi32(acc1[i], ai, b1);
      }
    }
    a += a_quad_stride;
  }
  const __mmask16 m0 = F32x16::first(nr), m1 = F32x16::first(nr - 16);
#pragma GCC unroll 14
  for (int i = 0; i < MR; ++i) store(i, acc0[i], acc1[i], m0, m1);
}

// The instance for mr rows (1..14): a partial micro-panel (M = 128 leaves 2 rows after nine
// full ones) computes only its rows.
template <bool kWeightStationary, typename Store>
void s8_tile_rows(int64_t mr, int64_t nr, int64_t kq, const uint8_t* a, const int64_t* row, int64_t a_quad_stride,
                  const uint8_t* b, const int64_t* b_offsets, const Store& store, Prefetch pf = {}) {
  switch (mr) {
#define KILN_S8_TILE_CASE(MR) \
  case MR: return s8_tile<MR, kWeightStationary>(nr, kq, a, row, a_quad_stride, b, b_offsets, store, pf);
    KILN_S8_TILE_CASE(1) KILN_S8_TILE_CASE(2) KILN_S8_TILE_CASE(3) KILN_S8_TILE_CASE(4) KILN_S8_TILE_CASE(5)
    KILN_S8_TILE_CASE(6) KILN_S8_TILE_CASE(7) KILN_S8_TILE_CASE(8) KILN_S8_TILE_CASE(9) KILN_S8_TILE_CASE(10)
    KILN_S8_TILE_CASE(11) KILN_S8_TILE_CASE(12) KILN_S8_TILE_CASE(13)
#undef KILN_S8_TILE_CASE
    default: return s8_tile<kMr, kWeightStationary>(nr, kq, a, row, a_quad_stride, b, b_offsets, store, pf);
  }
}

constexpr int64_t kPacked[kMr] = {0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52};

// The weight-stationary tile: the int8 weights broadcast, x's quads at x_offsets.
template <typename Store>
void weight_stationary_tile(int64_t mr, int64_t nr, int64_t kq, const int8_t* w, const uint8_t* x,
                            const int64_t* x_offsets, const Store& store) {
  s8_tile_rows<true>(mr, nr, kq, reinterpret_cast<const uint8_t*>(w), kPacked, 4 * kMr, x, x_offsets, store);
}

}  // namespace

// a: MR rows x kq groups of 4 u8 ([kq][14][4]); b: one packed panel ([kq][32][4]).
// Writes (accumulate: adds to) the mr x nr tile of C.
void s8_gemm_ukernel_14x32__avx512vnni(int64_t mr, int64_t nr, int64_t kq, const uint8_t* a, const int8_t* b,
                                       int32_t* c, int64_t ldc, bool accumulate) {
  s8_tile_rows<false>(mr, nr, kq, a, kPacked, 4 * kMr, reinterpret_cast<const uint8_t*>(b), nullptr,
                      Int32Store{c, ldc, accumulate});
}

// The same with A read in place: row i at a + i * lda (mr rows), 4 * kq bytes each; asks for
// prefetch_lines lines from `prefetch` into L2 on the way.
void s8_gemm_ukernel_14x32_rows__avx512vnni(int64_t mr, int64_t nr, int64_t kq, const uint8_t* a, int64_t lda,
                                            const int8_t* b, int32_t* c, int64_t ldc, bool accumulate,
                                            const int8_t* prefetch, int64_t prefetch_lines) {
  int64_t row[kMr];
  for (int i = 0; i < kMr; ++i) row[i] = i * lda;
  s8_tile_rows<false>(mr, nr, kq, a, row, 4, reinterpret_cast<const uint8_t*>(b), nullptr,
                      Int32Store{c, ldc, accumulate}, Prefetch{prefetch, std::min(prefetch_lines, kq)});
}

// Weight-stationary: w one packed int8 panel of MR output channels ([kq][14][4]), x 32 pixels of
// uint8 activations, quad q of pixel j at x + x_offsets[q] + 4 * j (an implicit convolution's
// taps). Int32 out.
void s8_gemm_ukernel_14x32_wx__avx512vnni(int64_t mr, int64_t nr, int64_t kq, const int8_t* w, const uint8_t* x,
                                          const int64_t* x_offsets, int32_t* c, int64_t ldc) {
  weight_stationary_tile(mr, nr, kq, w, x, x_offsets, Int32Store{c, ldc, false});
}

// The same requantized (rows row0 + i of rq) into uint8 y.
void s8_gemm_ukernel_14x32_wx_requantize__avx512vnni(int64_t mr, int64_t nr, int64_t kq, const int8_t* w,
                                                     const uint8_t* x, const int64_t* x_offsets, const Requantize& rq,
                                                     int64_t row0, uint8_t* y, int64_t ldy) {
  weight_stationary_tile(mr, nr, kq, w, x, x_offsets, RequantStore(rq, row0, y, ldy));
}

}  // namespace kiln::kernels
