// Winograd F(4x4, 3x3) / F(2x2, 3x3) input and output transforms and the per-block GEMM driver
// for AVX-512 (see f32_winograd.h); compiled with -mavx512f -mavx512vl -mfma, called only when
// the default microkernel is the 32-column AVX-512 one. Each 1-D transform pass is vectorized:
// along image columns for the row pass, across 16 tiles (after a stride-m deinterleave) for the
// column pass.
#include <immintrin.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/x86/f32_winograd_simd.h"
#include "kernels/x86/lane_mask.h"

namespace kiln::kernels {

namespace {

// Floats per row of the row-transformed strip: at most 4 * 32 + 2 columns read, rounded up to
// whole vectors, plus the two columns past the last 16-tile group that the column pass reads.
constexpr int64_t kStrip = 144;

// C[mr, 16] = A * B over kc: A packed [kc][MR], B [kc][16], C rows 16 floats apart (overwritten).
// One vector column, so MR up to 28 accumulators hide the FMA latency.
constexpr int64_t kPrefetchSteps = 24;

template <int MR>
void gemm_x16(int64_t mr, int64_t kc, const float* a, const float* b, float* c) {
  __m512 acc[MR];
#pragma GCC unroll 28
  for (int i = 0; i < MR; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    // The packed weights stream from beyond L2 (points x [co, c]): fetch them well ahead.
    _mm_prefetch(reinterpret_cast<const char*>(a + (k + kPrefetchSteps) * MR), _MM_HINT_T0);
    const __m512 bk = _mm512_loadu_ps(b + 16 * k);
#pragma GCC unroll 28
    for (int i = 0; i < MR; ++i) acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(a[k * MR + i]), bk, acc[i]);
  }
#pragma GCC unroll 28
  for (int i = 0; i < MR; ++i)
    if (i < mr) _mm512_storeu_ps(c + 16 * i, acc[i]);
}

void gemm_x16_rows(int64_t rows_of_kernel, int64_t mr, int64_t kc, const float* a, const float* b, float* c) {
  switch (rows_of_kernel) {
    case 28: return gemm_x16<28>(mr, kc, a, b, c);
    case 24: return gemm_x16<24>(mr, kc, a, b, c);
    default: return gemm_x16<16>(mr, kc, a, b, c);
  }
}

// Row pass over one tile row of one channel: t[k][x] = sum_i BT[k][i] * xpad[iy0 + i][xbase + x].
template <int M>
void row_pass(const WinogradGeom& g, const float* xc, int64_t iy0, int64_t xbase, int nx, const __mmask16* masks,
              float* t) {
  constexpr int A = M + 2;
  for (int q = 0; q < nx; ++q) {
    __m512 d[A], out[A];
    for (int i = 0; i < A; ++i) {
      const int64_t iy = iy0 + i;
      d[i] = iy < 0 || iy >= g.h || masks[q] == 0
                 ? _mm512_setzero_ps()
                 : _mm512_maskz_loadu_ps(masks[q], xc + iy * g.w + xbase + 16 * q);
    }
    winograd_bt<F32x16, M>(d, out);
    for (int k = 0; k < A; ++k) _mm512_store_ps(t + k * kStrip + 16 * q, out[k]);
  }
}

// Columns [0, 16 M + 2) of a row-transformed strip row -> p[j][tile] = tk[M * tile + j] for 16
// tiles, j < M + 2 (a stride-M deinterleave; phases M and M+1 are phases 0 and 1 of the next tile).
template <int M>
inline void tile_phases(const float* tk, __m512* p) {
  const __m512i even = even_lanes(), odd = odd_lanes();
  const __m512i next = _mm512_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
  if constexpr (M == 4) {
    const __m512 z0 = _mm512_load_ps(tk), z1 = _mm512_load_ps(tk + 16), z2 = _mm512_load_ps(tk + 32),
                 z3 = _mm512_load_ps(tk + 48);
    const __m512 e01 = _mm512_permutex2var_ps(z0, even, z1), o01 = _mm512_permutex2var_ps(z0, odd, z1);
    const __m512 e23 = _mm512_permutex2var_ps(z2, even, z3), o23 = _mm512_permutex2var_ps(z2, odd, z3);
    p[0] = _mm512_permutex2var_ps(e01, even, e23);
    p[2] = _mm512_permutex2var_ps(e01, odd, e23);
    p[1] = _mm512_permutex2var_ps(o01, even, o23);
    p[3] = _mm512_permutex2var_ps(o01, odd, o23);
  } else {
    const __m512 z0 = _mm512_load_ps(tk), z1 = _mm512_load_ps(tk + 16);
    p[0] = _mm512_permutex2var_ps(z0, even, z1);
    p[1] = _mm512_permutex2var_ps(z0, odd, z1);
  }
  p[M] = _mm512_permutex2var_ps(p[0], next, _mm512_set1_ps(tk[16 * M]));
  p[M + 1] = _mm512_permutex2var_ps(p[1], next, _mm512_set1_ps(tk[16 * M + 1]));
}

template <int M>
void input_block(const WinogradGeom& g, const WinogradBlocking& b, const float* x, int64_t block, int64_t c0,
                 int64_t c1, float* v) {
  constexpr int A = M + 2;
  const WinogradBlockSpan s = winograd_block_span(g, b, block, 16);
  const int64_t xbase = M * s.tx0 - g.pl;
  const int nx = static_cast<int>((M * s.ncol + 2 + 15) / 16);
  __mmask16 masks[kStrip / 16];
  for (int q = 0; q < nx; ++q) masks[q] = F32x16::in_range(xbase + 16 * q, g.w);
  // Zeroed so that the columns past the strip, read for lanes of absent tiles, hold no garbage.
  alignas(64) float t[A * kStrip] = {};
  for (int64_t c = c0; c < c1; ++c) {
    const float* xc = x + c * g.h * g.w;
    for (int64_t ty = s.ty0; ty < s.ty1; ++ty) {
      row_pass<M>(g, xc, M * ty - g.pt, xbase, nx, masks, t);
      const int64_t col0 = (ty - s.ty0) * b.cols;
      for (int64_t gi = 0; gi < s.groups; ++gi) {
        const __mmask16 store = F32x16::first(s.ncol - 16 * gi);
        for (int k = 0; k < A; ++k) {
          __m512 p[A], out[A];
          tile_phases<M>(t + k * kStrip + 16 * M * gi, p);
          winograd_bt<F32x16, M>(p, out);
          float* dst = v + (k * A * g.c + c) * b.panel + col0 + 16 * gi;
          for (int l = 0; l < A; ++l) _mm512_mask_storeu_ps(dst + l * g.c * b.panel, store, out[l]);
        }
      }
    }
  }
}

// The M x 16 outputs of output row `a` of 16 tiles, o[j][tile] (column M * tile + j), interleaved
// into M vectors of consecutive columns.
template <int M>
inline void interleave_columns(const __m512* o, __m512* row) {
  const __m512i il_lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i il_hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const __m512 ab_lo = _mm512_permutex2var_ps(o[0], il_lo, o[1]), ab_hi = _mm512_permutex2var_ps(o[0], il_hi, o[1]);
  if constexpr (M == 4) {
    const __m512i q_lo = _mm512_setr_epi32(0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23);
    const __m512i q_hi = _mm512_setr_epi32(8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31);
    const __m512 cd_lo = _mm512_permutex2var_ps(o[2], il_lo, o[3]), cd_hi = _mm512_permutex2var_ps(o[2], il_hi, o[3]);
    row[0] = _mm512_permutex2var_ps(ab_lo, q_lo, cd_lo);
    row[1] = _mm512_permutex2var_ps(ab_lo, q_hi, cd_lo);
    row[2] = _mm512_permutex2var_ps(ab_hi, q_lo, cd_hi);
    row[3] = _mm512_permutex2var_ps(ab_hi, q_hi, cd_hi);
  } else {
    row[0] = ab_lo;
    row[1] = ab_hi;
  }
}

template <int M>
void gemm_output_block(const WinogradGeom& g, const WinogradBlocking& b, const WinogradWeights& u, const float* v,
                       int64_t block, int64_t p0, int64_t p1, const RowEpilogue& ep, float* y) {
  constexpr int A = M + 2, E = A * A;
  const WinogradBlockSpan s = winograd_block_span(g, b, block, 16);
  const int64_t mr = u.mr, panel = b.panel, estride = mr * panel;
  // (+ one panel: a tile row's 16-tile loads may run past its last column.)
  thread_local std::vector<float> mbuf;
  if (mbuf.size() < static_cast<size_t>(E * estride + panel)) mbuf.resize(static_cast<size_t>(E * estride + panel));
  float* m = mbuf.data();
  const bool clamp = ep.lo > -std::numeric_limits<float>::infinity() || ep.hi < std::numeric_limits<float>::infinity();
  const int64_t plane = g.ho * g.wo;
  const WinogradRowEpilogue<F32x16> row_ep{clamp, F32x16::set1(ep.lo), F32x16::set1(ep.hi), ep.act,
                                       std::min(g.wo, M * (s.tx0 + s.ncol))};
  const F32GemmParams params;  // plain overwrite
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t k0 = p * mr, rows = std::min(mr, g.co - k0);
    for (int e = 0; e < E; ++e) {
      if (panel == 32) u.kernel->fn(rows, 32, g.c, u.panel(p, e), v + e * g.c * 32, m + e * estride, 32, params);
      else gemm_x16_rows(mr, rows, g.c, u.panel(p, e), v + e * g.c * 16, m + e * estride);
    }
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t k = k0 + r;
      const float* rk = ep.residual ? ep.residual + k * ep.ldr : nullptr;
      winograd_output_channel<F32x16, M, interleave_columns<M>>(g, b, s, m + r * panel, estride, ep.bias ? ep.bias[k] : 0.0f,
                                                          row_ep, rk, y + k * plane);
    }
  }
}

}  // namespace

void winograd_input_block__avx512f(const WinogradGeom& g, const WinogradBlocking& b, const float* x, int64_t block,
                                   int64_t c0, int64_t c1, float* v) {
  if (g.m == 2) input_block<2>(g, b, x, block, c0, c1, v);
  else input_block<4>(g, b, x, block, c0, c1, v);
}

void winograd_gemm_output_block__avx512f(const WinogradGeom& g, const WinogradBlocking& b, const WinogradWeights& u,
                                         const float* v, int64_t block, int64_t p0, int64_t p1, const RowEpilogue& ep,
                                         float* y) {
  if (g.m == 2) gemm_output_block<2>(g, b, u, v, block, p0, p1, ep, y);
  else gemm_output_block<4>(g, b, u, v, block, p0, p1, ep, y);
}

const WinogradKernels winograd_avx512f = {&winograd_input_block__avx512f, &winograd_gemm_output_block__avx512f,
                                          Isa::kAvx512};

}  // namespace kiln::kernels
