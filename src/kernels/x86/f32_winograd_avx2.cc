// Winograd F(4x4, 3x3) / F(2x2, 3x3) input and output transforms and the per-block GEMM driver
// for AVX2 + FMA (see f32_winograd.h); compiled with -mavx2 -mfma, called when the default f32
// microkernel is the AVX2 one. The block layout of the AVX-512 file: a block's transformed input
// is points x [C, panel] row-major (points spaced by winograd_point_floats), panel = 16 or 32
// tile columns; the 6x16 GEMM loop reads a 32-column panel as two column halves. Transforms run
// on 8-lane vectors: the row pass along image columns, the column pass across 8 tiles after a
// stride-m deinterleave (a 4x4 transpose per 128-bit lane for m = 4).
#include <immintrin.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/x86/activation_simd.h"
#include "kernels/x86/f32_winograd_simd.h"
#include "kernels/x86/simd.h"

namespace kiln::kernels {
namespace {

// Floats per row of the row-transformed strip: at most 4 * 32 + 2 columns are read (the two past
// the last 8-tile group by its phases m and m + 1), rounded up to whole vectors.
constexpr int64_t kStrip = 144;
// Output-channel micro-panels whose GEMMs run back to back over one point's transformed input
// (it is read from L1 by all of them; their outputs, points x 24 rows x panel, stay in L2).
constexpr int64_t kPanelGroup = 4;

// C[rows, 16] = A * B over kc: A packed [kc][6] (rows <= 6 of them used), B rows `b_stride`
// floats apart, C rows `ldc` apart (overwritten). The 6x16 AVX2 microkernel's loop, inline
// (calls through the kernel table cost 10% at 64 channels) and with the packed weights
// prefetched 64 steps ahead: they stream from beyond L2 (points x [co, c], read once per block),
// and without it the weight-bound layers are 20-35% slower (14x14 x 256: 0.95-1.0 against
// 1.14-1.4 ms; 7x7 x 512 F(2x2): 1.6-1.8 against 2.2-2.6).
constexpr int kMr = static_cast<int>(kWinogradAvx2Rows);
constexpr int64_t kPrefetchSteps = 64;

template <int ROWS>
void gemm_x16(int64_t kc, const float* a, const float* b, int64_t b_stride, float* c, int64_t ldc) {
  __m256 acc0[ROWS], acc1[ROWS];
#pragma GCC unroll 6
  for (int i = 0; i < ROWS; ++i) acc0[i] = acc1[i] = _mm256_setzero_ps();
  for (int64_t k = 0; k < kc; ++k, a += kMr, b += b_stride) {
    _mm_prefetch(reinterpret_cast<const char*>(a + kPrefetchSteps * kMr), _MM_HINT_T0);
    const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
#pragma GCC unroll 6
    for (int i = 0; i < ROWS; ++i) {
      const __m256 ai = _mm256_broadcast_ss(a + i);
      acc0[i] = _mm256_fmadd_ps(ai, b0, acc0[i]);
      acc1[i] = _mm256_fmadd_ps(ai, b1, acc1[i]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < ROWS; ++i) {
    _mm256_storeu_ps(c + i * ldc, acc0[i]);
    _mm256_storeu_ps(c + i * ldc + 8, acc1[i]);
  }
}

void gemm_rows_x16(int64_t rows, int64_t kc, const float* a, const float* b, int64_t b_stride, float* c,
                   int64_t ldc) {
  switch (rows) {
    case 6: return gemm_x16<6>(kc, a, b, b_stride, c, ldc);
    case 5: return gemm_x16<5>(kc, a, b, b_stride, c, ldc);
    case 4: return gemm_x16<4>(kc, a, b, b_stride, c, ldc);
    case 3: return gemm_x16<3>(kc, a, b, b_stride, c, ldc);
    case 2: return gemm_x16<2>(kc, a, b, b_stride, c, ldc);
    default: return gemm_x16<1>(kc, a, b, b_stride, c, ldc);
  }
}

// How one 8-column vector of an input row is read: whole, not at all (padding), or masked.
struct ColumnLoad {
  enum Kind { kFull, kNone, kMasked } kind;
  __m256i mask;
};

// Row pass over one tile row of one channel: t[k][x] = sum_i BT[k][i] * xpad[iy0 + i][xbase + x].
template <int M>
void row_pass(const WinogradGeom& g, const float* xc, int64_t iy0, int64_t xbase, int nx, const ColumnLoad* loads,
              float* t) {
  constexpr int A = M + 2;
  for (int q = 0; q < nx; ++q) {
    __m256 d[A], out[A];
    for (int i = 0; i < A; ++i) {
      const int64_t iy = iy0 + i;
      const float* src = xc + iy * g.w + xbase + 8 * q;
      if (iy < 0 || iy >= g.h || loads[q].kind == ColumnLoad::kNone) d[i] = _mm256_setzero_ps();
      else if (loads[q].kind == ColumnLoad::kFull) d[i] = _mm256_loadu_ps(src);
      else d[i] = _mm256_maskload_ps(src, loads[q].mask);  // masked-off lanes are not read
    }
    winograd_bt<F32x8, M>(d, out);
    for (int k = 0; k < A; ++k) _mm256_store_ps(t + k * kStrip + 8 * q, out[k]);
  }
}

// Two 4-float pieces of a strip row as one vector: lo from tk, hi from tk + 16.
inline __m256 load_pair(const float* tk) {
  return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(tk)), _mm_loadu_ps(tk + 16), 1);
}

// Strip row columns from tk -> p[j][tile] = tk[M * tile + j] for 8 tiles, j < M + 2.
template <int M>
inline void tile_phases(const float* tk, __m256* p) {
  if constexpr (M == 4) {
    // zq = [tile q | tile q + 4]: a 4x4 transpose per 128-bit lane gives phase j of tiles 0..7 in order.
    const __m256 z0 = load_pair(tk), z1 = load_pair(tk + 4), z2 = load_pair(tk + 8), z3 = load_pair(tk + 12);
    const __m256 t0 = _mm256_unpacklo_ps(z0, z1), t1 = _mm256_unpackhi_ps(z0, z1);
    const __m256 t2 = _mm256_unpacklo_ps(z2, z3), t3 = _mm256_unpackhi_ps(z2, z3);
    p[0] = _mm256_shuffle_ps(t0, t2, 0x44);
    p[1] = _mm256_shuffle_ps(t0, t2, 0xEE);
    p[2] = _mm256_shuffle_ps(t1, t3, 0x44);
    p[3] = _mm256_shuffle_ps(t1, t3, 0xEE);
    // Phases 4 and 5 are phases 0 and 1 of the tiles one to the right: z1, z2, z3 and the next pair.
    const __m256 z4 = load_pair(tk + 16);
    const __m256 u0 = _mm256_unpacklo_ps(z1, z2), u2 = _mm256_unpacklo_ps(z3, z4);
    p[4] = _mm256_shuffle_ps(u0, u2, 0x44);
    p[5] = _mm256_shuffle_ps(u0, u2, 0xEE);
  } else {
    // Even / odd floats of 16: in-lane shuffles leave tiles in the order 0 1 4 5 2 3 6 7, the
    // 64-bit permute restores it. Phases 2 and 3 are phases 0 and 1 two columns on.
    for (int h = 0; h < 2; ++h) {
      const __m256 z0 = _mm256_loadu_ps(tk + 2 * h), z1 = _mm256_loadu_ps(tk + 2 * h + 8);
      const __m256 ev = _mm256_shuffle_ps(z0, z1, _MM_SHUFFLE(2, 0, 2, 0));
      const __m256 od = _mm256_shuffle_ps(z0, z1, _MM_SHUFFLE(3, 1, 3, 1));
      p[2 * h] = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), _MM_SHUFFLE(3, 1, 2, 0)));
      p[2 * h + 1] = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(od), _MM_SHUFFLE(3, 1, 2, 0)));
    }
  }
}

template <int M>
void input_block(const WinogradGeom& g, const WinogradBlocking& b, const float* x, int64_t block, int64_t c0,
                 int64_t c1, float* v) {
  constexpr int A = M + 2;
  const WinogradBlockSpan s = winograd_block_span(g, b, block, 8);
  const int64_t xbase = M * s.tx0 - g.pl;
  const int nx = static_cast<int>((M * s.ncol + 2 + 7) / 8);
  ColumnLoad loads[kStrip / 8];
  for (int q = 0; q < nx; ++q) {
    const int64_t x0 = xbase + 8 * q;
    if (x0 >= 0 && x0 + 8 <= g.w) loads[q] = {ColumnLoad::kFull, _mm256_setzero_si256()};
    else if (x0 + 8 <= 0 || x0 >= g.w) loads[q] = {ColumnLoad::kNone, _mm256_setzero_si256()};
    else loads[q] = {ColumnLoad::kMasked, F32x8::in_range(x0, g.w)};
  }
  // Zeroed so that the columns past the strip, read for lanes of absent tiles, hold no garbage.
  alignas(32) float t[A * kStrip] = {};
  const int64_t row = winograd_point_floats(g, b, Isa::kAvx2);  // from one point's [C, panel] to the next
  for (int64_t c = c0; c < c1; ++c) {
    const float* xc = x + c * g.h * g.w;
    for (int64_t ty = s.ty0; ty < s.ty1; ++ty) {
      row_pass<M>(g, xc, M * ty - g.pt, xbase, nx, loads, t);
      const int64_t col0 = (ty - s.ty0) * b.cols;
      for (int64_t gi = 0; gi < s.groups; ++gi) {
        const int64_t col = col0 + 8 * gi;
        // Lanes past the tile row land on the next tile row's columns (written after this one)
        // or on unused ones; only the panel's end bounds the store.
        const bool whole = col + 8 <= b.panel;
        const __m256i mask = F32x8::first(b.panel - col);
        for (int k = 0; k < A; ++k) {
          __m256 p[A], out[A];
          tile_phases<M>(t + k * kStrip + 8 * M * gi, p);
          winograd_bt<F32x8, M>(p, out);
          float* dst = v + k * A * row + c * b.panel + col;
          for (int l = 0; l < A; ++l) {
            if (whole) _mm256_storeu_ps(dst + l * row, out[l]);
            else _mm256_maskstore_ps(dst + l * row, mask, out[l]);
          }
        }
      }
    }
  }
}

// The M x 8 outputs of one output row of 8 tiles, o[j][tile] (column M * tile + j), interleaved
// into M vectors of consecutive columns.
template <int M>
inline void interleave_columns(const __m256* o, __m256* row) {
  if constexpr (M == 4) {
    // A 4x4 transpose per 128-bit lane gives q_t = [tile t | tile t + 4], four columns each.
    const __m256 t0 = _mm256_unpacklo_ps(o[0], o[1]), t1 = _mm256_unpackhi_ps(o[0], o[1]);
    const __m256 t2 = _mm256_unpacklo_ps(o[2], o[3]), t3 = _mm256_unpackhi_ps(o[2], o[3]);
    const __m256 q0 = _mm256_shuffle_ps(t0, t2, 0x44), q1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 q2 = _mm256_shuffle_ps(t1, t3, 0x44), q3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    row[0] = _mm256_permute2f128_ps(q0, q1, 0x20);
    row[1] = _mm256_permute2f128_ps(q2, q3, 0x20);
    row[2] = _mm256_permute2f128_ps(q0, q1, 0x31);
    row[3] = _mm256_permute2f128_ps(q2, q3, 0x31);
  } else {
    const __m256 lo = _mm256_unpacklo_ps(o[0], o[1]), hi = _mm256_unpackhi_ps(o[0], o[1]);  // tiles 0 1 4 5 / 2 3 6 7
    row[0] = _mm256_permute2f128_ps(lo, hi, 0x20);
    row[1] = _mm256_permute2f128_ps(lo, hi, 0x31);
  }
}

template <int M>
void gemm_output_block(const WinogradGeom& g, const WinogradBlocking& b, const WinogradWeights& u, const float* v,
                       int64_t block, int64_t p0, int64_t p1, const RowEpilogue& ep, float* y) {
  constexpr int A = M + 2, E = A * A;
  const WinogradBlockSpan s = winograd_block_span(g, b, block, 8);
  const int64_t mr = u.mr, panel = b.panel, halves = panel / 16;
  // Floats per point of the GEMM outputs, plus a cache line: an odd number of lines puts the
  // output transform's 36 (16) loads of one tile in different L1 sets.
  const int64_t estride = kPanelGroup * mr * panel + 16;
  const int64_t vstride = winograd_point_floats(g, b, Isa::kAvx2);
  // (+ one panel: a tile row's 8-tile loads may run past its last column.)
  thread_local std::vector<float> mbuf;
  const size_t need = static_cast<size_t>(E * estride + panel);
  if (mbuf.size() < need) mbuf.resize(need);
  float* m = mbuf.data();
  const bool clamp = ep.lo > -std::numeric_limits<float>::infinity() || ep.hi < std::numeric_limits<float>::infinity();
  const int64_t plane = g.ho * g.wo;
  const WinogradRowEpilogue<F32x8> row_ep{clamp, F32x8::set1(ep.lo), F32x8::set1(ep.hi), ep.act,
                                       std::min(g.wo, M * (s.tx0 + s.ncol))};
  for (int64_t pg = p0; pg < p1; pg += kPanelGroup) {
    const int64_t pe = std::min(p1, pg + kPanelGroup);
    for (int e = 0; e < E; ++e) {
      const float* ve = v + e * vstride;
      for (int64_t p = pg; p < pe; ++p) {
        const int64_t rows = std::min(mr, g.co - p * mr);
        float* me = m + e * estride + (p - pg) * mr * panel;
        for (int64_t h = 0; h < halves; ++h)
          gemm_rows_x16(rows, g.c, u.panel(p, e), ve + 16 * h, panel, me + 16 * h, panel);
      }
    }
    const int64_t k0 = pg * mr, rows = std::min(g.co, pe * mr) - k0;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t k = k0 + r;
      const float* rk = ep.residual ? ep.residual + k * ep.ldr : nullptr;
      winograd_output_channel<F32x8, M, interleave_columns<M>>(g, b, s, m + r * panel, estride, ep.bias ? ep.bias[k] : 0.0f,
                                                          row_ep, rk, y + k * plane);
    }
  }
}

}  // namespace

void winograd_input_block__avx2(const WinogradGeom& g, const WinogradBlocking& b, const float* x, int64_t block,
                                int64_t c0, int64_t c1, float* v) {
  if (g.m == 2) input_block<2>(g, b, x, block, c0, c1, v);
  else input_block<4>(g, b, x, block, c0, c1, v);
}

void winograd_gemm_output_block__avx2(const WinogradGeom& g, const WinogradBlocking& b, const WinogradWeights& u,
                                      const float* v, int64_t block, int64_t p0, int64_t p1, const RowEpilogue& ep,
                                      float* y) {
  if (g.m == 2) gemm_output_block<2>(g, b, u, v, block, p0, p1, ep, y);
  else gemm_output_block<4>(g, b, u, v, block, p0, p1, ep, y);
}

const WinogradKernels winograd_avx2 = {&winograd_input_block__avx2, &winograd_gemm_output_block__avx2, Isa::kAvx2};

}  // namespace kiln::kernels
