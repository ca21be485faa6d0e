// u8 x s8 -> s32 GEMM microkernels for AVX2 without VNNI (compiled with -mavx2), both exact:
// - any int8 B: operands widened to int16 and multiplied with vpmaddwd (int16 x int16 pairs
//   summed into int32), which cannot saturate — unlike vpmaddubsw, whose int16 pair sums overflow
//   for u8 x s8 products (ONNX Runtime's AVX2 kernels, hence its "reduce_range" advice);
// - B within [-64, 63] (7-bit weights, kiln quantize --reduce-range): vpmaddubsw, which cannot
//   overflow there, then vpmaddwd by ones: about twice the products per multiply uop.
// The operands come packed as for VNNI (kernels/x86/s8_gemm.cc: A [kq][14][4], B [kq][32][4]) but
// already widened to int16, so each load feeds vpmaddwd directly. Also the GEMM's row epilogue
// (s8_finish_row__avx2: zero-point correction and dequantization; its multiply and add round
// separately: ISO C++ mode compiles without contraction into FMA).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/x86/s8_gemm.h"

namespace kiln::kernels {
namespace {

constexpr int64_t kPanelRows = 14;  // rows of a packed A micro-panel
constexpr int64_t kPanelCols = 32;  // columns of a packed B panel

// R rows x 8 columns: per K quad, B's 8 columns x 4 k are two vectors of int16
// [c0k0 c0k1 c0k2 c0k3 c1k0 ...]; each row's quad, repeated, multiplies them into lanes holding
// the (k0,k1) and (k2,k3) partial sums per column, folded at the end.
template <int R>
void tile(int64_t kq, const int16_t* a, const int16_t* b, int32_t* out /* R x 8 */) {
  __m256i acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  for (int64_t q = 0; q < kq; ++q) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16));
    for (int r = 0; r < R; ++r) {
      int64_t quad;
      std::memcpy(&quad, a + 4 * r, 8);
      const __m256i ar = _mm256_set1_epi64x(quad);
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(ar, b0));
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(ar, b1));
    }
    a += 4 * kPanelRows;
    b += 4 * kPanelCols;
  }
  // acc[r][0] lanes: c0(k01), c0(k23), c1, c1, c2, c2, c3, c3; acc[r][1] the same for c4..c7.
  const __m256i order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
  for (int r = 0; r < R; ++r) {
    const __m256i sums = _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(acc[r][0], acc[r][1]), order);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8 * r), sums);
  }
}

using TileFn = void (*)(int64_t, const int16_t*, const int16_t*, int32_t*);
constexpr TileFn kTiles[] = {nullptr, tile<1>, tile<2>, tile<3>, tile<4>, tile<5>, tile<6>};

// Covers the mr x nr tile of C with TR x TC register tiles (compute(rows, r0, c0, out) computes
// `rows` rows from row r0 and column c0 into a TR x TC buffer), storing (accumulate: adding) the
// live part.
template <int TR, int TC, typename Compute>
void run_tiles(Compute compute, int64_t mr, int64_t nr, int32_t* c, int64_t ldc, bool accumulate) {
  alignas(32) int32_t out[TR * TC];
  for (int64_t r0 = 0; r0 < mr; r0 += TR) {
    const int64_t rows = std::min<int64_t>(TR, mr - r0);
    for (int64_t c0 = 0; c0 < nr; c0 += TC) {
      compute(rows, r0, c0, out);
      const int64_t cols = std::min<int64_t>(TC, nr - c0);
      for (int64_t r = 0; r < rows; ++r) {
        int32_t* row = c + (r0 + r) * ldc + c0;
        for (int64_t j = 0; j < cols; ++j) row[j] = accumulate ? row[j] + out[TC * r + j] : out[TC * r + j];
      }
    }
  }
}

}  // namespace

// a: one packed A micro-panel ([kq][14][4] int16); b: one packed B panel ([kq][32][4] int16).
// Writes (accumulate: adds to) the mr x nr tile of C (mr <= 14, nr <= 32).
void s8_gemm_ukernel_14x32__avx2(int64_t mr, int64_t nr, int64_t kq, const int16_t* a, const int16_t* b, int32_t* c,
                                 int64_t ldc, bool accumulate) {
  run_tiles<6, 8>([&](int64_t rows, int64_t r0, int64_t c0, int32_t* out) { kTiles[rows](kq, a + 4 * r0, b + 4 * c0, out); },
                  mr, nr, c, ldc, accumulate);
}

}  // namespace kiln::kernels

namespace kiln::kernels {
namespace {

// R rows x 16 columns from the int8 packing, for B within [-64, 63]: vpmaddubsw sums each
// column's u8 x s8 pairs into int16 (|255 * 64 * 2| < 2^15: exact), vpmaddwd with ones sums the
// two pairs of a K quad into int32. Two multiply uops per 32 products, against four on the
// widened path.
// Row r's quad q of A at a + r * lda + q * quad_stride (packed: lda 4, quad_stride 56; in place:
// lda the row stride, quad_stride 4).
template <int R>
void tile7(int64_t kq, const uint8_t* a, int64_t lda, int64_t quad_stride, const int8_t* b,
           int32_t* out /* R x 16 */) {
  __m256i acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t q = 0; q < kq; ++q) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 32));
    for (int r = 0; r < R; ++r) {
      int32_t quad;
      std::memcpy(&quad, a + r * lda, 4);
      const __m256i ar = _mm256_set1_epi32(quad);
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(_mm256_maddubs_epi16(ar, b0), ones));
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(_mm256_maddubs_epi16(ar, b1), ones));
    }
    a += quad_stride;
    b += 4 * kPanelCols;
  }
  for (int r = 0; r < R; ++r) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 16 * r), acc[r][0]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 16 * r + 8), acc[r][1]);
  }
}

using Tile7Fn = void (*)(int64_t, const uint8_t*, int64_t, int64_t, const int8_t*, int32_t*);
constexpr Tile7Fn kTiles7[] = {nullptr, tile7<1>, tile7<2>, tile7<3>, tile7<4>};

}  // namespace

// The same contract as s8_gemm_ukernel_14x32__avx2 on the int8 packing ([kq][14][4] u8,
// [kq][32][4] s8), for B values within [-64, 63] only.
void s8_gemm_ukernel_14x32__avx2_7bit(int64_t mr, int64_t nr, int64_t kq, const uint8_t* a, const int8_t* b,
                                      int32_t* c, int64_t ldc, bool accumulate) {
  run_tiles<4, 16>([&](int64_t rows, int64_t r0, int64_t c0,
                       int32_t* out) { kTiles7[rows](kq, a + 4 * r0, 4, 4 * kPanelRows, b + 4 * c0, out); },
                   mr, nr, c, ldc, accumulate);
}

// The same with A read in place: row i at a + i * lda, 4 * kq bytes each; any number of rows
// (four at a time), nr <= 32 columns of one packed B panel.
void s8_gemm_ukernel_rows_x32__avx2_7bit(int64_t mr, int64_t nr, int64_t kq, const uint8_t* a, int64_t lda,
                                         const int8_t* b, int32_t* c, int64_t ldc, bool accumulate) {
  run_tiles<4, 16>([&](int64_t rows, int64_t r0, int64_t c0,
                       int32_t* out) { kTiles7[rows](kq, a + r0 * lda, lda, 4, b + 4 * c0, out); },
                   mr, nr, c, ldc, accumulate);
}

// dst[4p + t] = rows[t][p] for p < n: four uint8 rows interleaved into quads (the columns of
// kernels::s8u8_gemm_quads), 32 pixels per step with byte and word unpacks.
void interleave_quads_u8__avx2(const uint8_t* const rows[4], int64_t n, uint8_t* dst) {
  int64_t p = 0;
  for (; p + 32 <= n; p += 32) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[0] + p));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[1] + p));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[2] + p));
    const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[3] + p));
    const __m256i ab_lo = _mm256_unpacklo_epi8(a, b), ab_hi = _mm256_unpackhi_epi8(a, b);
    const __m256i cd_lo = _mm256_unpacklo_epi8(c, d), cd_hi = _mm256_unpackhi_epi8(c, d);
    // Per 128-bit lane: q0 pixels 0-3 (16-19), q1 4-7 (20-23), q2 8-11 (24-27), q3 12-15 (28-31).
    const __m256i q0 = _mm256_unpacklo_epi16(ab_lo, cd_lo), q1 = _mm256_unpackhi_epi16(ab_lo, cd_lo);
    const __m256i q2 = _mm256_unpacklo_epi16(ab_hi, cd_hi), q3 = _mm256_unpackhi_epi16(ab_hi, cd_hi);
    __m256i* out = reinterpret_cast<__m256i*>(dst + 4 * p);
    _mm256_storeu_si256(out, _mm256_permute2x128_si256(q0, q1, 0x20));
    _mm256_storeu_si256(out + 1, _mm256_permute2x128_si256(q2, q3, 0x20));
    _mm256_storeu_si256(out + 2, _mm256_permute2x128_si256(q0, q1, 0x31));
    _mm256_storeu_si256(out + 3, _mm256_permute2x128_si256(q2, q3, 0x31));
  }
  for (; p < n; ++p)
    for (int t = 0; t < 4; ++t) dst[4 * p + t] = rows[t][p];
}

namespace {
// The corrected sums of 8 columns from j.
inline __m256i corrected(const S8RowEpilogue& e, __m256i rowsum, const int32_t* row, int64_t j, bool zb) {
  __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + j));
  if (!e.corr) return v;
  v = _mm256_add_epi32(v, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(e.corr + j)));
  if (zb) v = _mm256_sub_epi32(v, _mm256_mullo_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(e.zb + j)), rowsum));
  return v;
}
}  // namespace

void s8_finish_row__avx2(const S8RowEpilogue& e, int32_t rowsum, int32_t* row, int64_t cols) {
  const bool zb = e.corr && e.zb;
  const __m256i rs = _mm256_set1_epi32(rowsum);
  int64_t j = 0;
  for (; j + 8 <= cols; j += 8) {
    const __m256i v = corrected(e, rs, row, j, zb);
    if (!e.scale) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + j), v);
      continue;
    }
    __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(v), _mm256_loadu_ps(e.scale + j));
    if (e.bias) f = _mm256_add_ps(_mm256_loadu_ps(e.bias + j), f);
    _mm256_storeu_ps(reinterpret_cast<float*>(row + j), f);
  }
  for (; j < cols; ++j) {
    int32_t s = row[j];
    if (e.corr) s += e.corr[j] - (zb ? e.zb[j] * rowsum : 0);
    if (!e.scale) {
      row[j] = s;
      continue;
    }
    float f = static_cast<float>(s) * e.scale[j];
    if (e.bias) f = e.bias[j] + f;
    std::memcpy(row + j, &f, sizeof f);
  }
}

}  // namespace kiln::kernels
