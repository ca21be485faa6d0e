// The AVX2 channels-last depthwise conv: the AVX-512 kernel's design on 8 lanes (per task a range
// of (image, output row, 8-channel block) items; per item the row's pixels in tiles of up to 8
// accumulators), or, where it wins, the blocked NCHW kernel's tiles over a copy of each channel
// block (f32_depthwise_avx2.cc). Compiled with -mavx2 -mfma; called only when the CPU has them.
#include <immintrin.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/x86/activation_avx2.h"
#include "kernels/x86/f32_depthwise.h"
#include "kernels/x86/lane_mask_avx2.h"

namespace kiln::kernels {
namespace {

struct RowTask {
  const DepthwiseGeom* g;
  const float* x;     // image n's input
  const float* taps;  // offset to the channel block
  float* y;           // output row oy, offset to the channel block
  int64_t oy, cb;
  __m256i m;          // the block's channels (all 8 except in a tail block)
  __m256 bias, lo, hi;
  bool clamp;
  Activation act;
};

// Loads and stores of one channel block: plain for full blocks, masked for the tail block only
// (masked accesses cost more, masked stores much more on AMD).
template <bool kTail>
__attribute__((always_inline)) inline __m256 load(const RowTask& t, const float* p) {
  return kTail ? _mm256_maskload_ps(p, t.m) : _mm256_loadu_ps(p);
}

template <int TW, bool kTail>
__attribute__((always_inline)) inline void store(const RowTask& t, int64_t ox0, const __m256 (&acc)[TW]) {
  __m256 v[TW];
#pragma GCC unroll 8
  for (int p = 0; p < TW; ++p) v[p] = acc[p];
  clamp_activate8_all(t.clamp, t.lo, t.hi, t.act, v);
#pragma GCC unroll 8
  for (int p = 0; p < TW; ++p) {
    float* dst = t.y + (ox0 + p) * t.g->c;
    if (kTail) _mm256_maskstore_ps(dst, t.m, v[p]);
    else _mm256_storeu_ps(dst, v[p]);
  }
}

// Per tile and filter column j: the tile's pixels whose tap j falls inside the row.
using Inside = DepthwiseNhwcRowPlan::Inside;

// Bias-initialized accumulators for output pixels ox0 .. ox0 + TW - 1 of the row; for each filter
// row i inside the image, row(i, input row at the channel block, acc) adds its taps; then the store.
template <int TW, bool kTail, class Row>
__attribute__((always_inline)) inline void accumulate(const RowTask& t, int64_t ox0, Row&& row) {
  const DepthwiseGeom& g = *t.g;
  __m256 acc[TW];
#pragma GCC unroll 8
  for (int p = 0; p < TW; ++p) acc[p] = t.bias;
  for (int64_t i = 0; i < g.kh; ++i) {
    const int64_t iy = t.oy * g.sh - g.pt + i * g.dh;
    if (iy >= 0 && iy < g.h) row(i, t.x + iy * g.w * g.c + t.cb, acc);
  }
  store<TW, kTail>(t, ox0, acc);
}

// Any stride and dilation: each tap's weights loaded once per tile. kEdge: some tap of some pixel
// falls outside W; inside[j] says which.
template <int TW, bool kEdge, bool kTail>
inline void tile(const RowTask& t, int64_t ox0, const Inside* inside) {
  const DepthwiseGeom& g = *t.g;
  const int64_t c = g.c, sw = g.sw, kw = g.kw;
  accumulate<TW, kTail>(t, ox0, [&](int64_t i, const float* xrow, __m256(&acc)[TW]) __attribute__((always_inline)) {
    const float* taps = t.taps + i * kw * c;
    for (int64_t j = 0; j < kw; ++j) {
      const __m256 wv = load<kTail>(t, taps + j * c);
      const int64_t ix0 = ox0 * sw - g.pl + j * g.dw;
      const int64_t plo = kEdge ? inside[j].lo : 0, phi = kEdge ? inside[j].hi : TW;
      const float* src = xrow + ix0 * c;
      const int64_t step = sw * c;
#pragma GCC unroll 8
      for (int p = 0; p < TW; ++p)
        if (!kEdge || (p >= plo && p < phi)) acc[p] = _mm256_fmadd_ps(load<kTail>(t, src + p * step), wv, acc[p]);
    }
  });
}

// Stride S (1 or 2), no dilation along W, KW filter columns: each input pixel of the tile's span is
// loaded once and feeds every output pixel whose taps cover it; taps in the padding are skipped.
// (8 accumulators + KW weight vectors + the input fit the 16 registers for KW <= 5.)
template <int TW, int KW, int S, bool kEdge, bool kTail>
inline void tile_reusing_columns(const RowTask& t, int64_t ox0) {
  const DepthwiseGeom& g = *t.g;
  const int64_t c = g.c, w = g.w;
  accumulate<TW, kTail>(t, ox0, [&](int64_t i, const float* xrow, __m256(&acc)[TW]) __attribute__((always_inline)) {
    __m256 wv[KW];
#pragma GCC unroll 8
    for (int j = 0; j < KW; ++j) wv[j] = load<kTail>(t, t.taps + (i * KW + j) * c);
    const int64_t ix0 = ox0 * S - g.pl;
    const float* src = xrow + ix0 * c;
#pragma GCC unroll 24
    for (int q = 0; q < (TW - 1) * S + KW; ++q, src += c) {
      if (kEdge && (ix0 + q < 0 || ix0 + q >= w)) continue;
      const __m256 xv = load<kTail>(t, src);
#pragma GCC unroll 8
      for (int j = 0; j < KW; ++j) {
        const int p = (q - j) / S;  // output pixel p reads input q = p * S + j
        if (q - j >= 0 && (q - j) % S == 0 && p < TW) acc[p] = _mm256_fmadd_ps(xv, wv[j], acc[p]);
      }
    }
  });
}

// kEdge: some input column of the tile falls outside the row (checked per column).
template <int KW, int S, bool kEdge, bool kTail>
void column_reuse_tile(const RowTask& t, int64_t ox0, int64_t count) {
  switch (count) {
    case 1: return tile_reusing_columns<1, KW, S, kEdge, kTail>(t, ox0);
    case 2: return tile_reusing_columns<2, KW, S, kEdge, kTail>(t, ox0);
    case 3: return tile_reusing_columns<3, KW, S, kEdge, kTail>(t, ox0);
    case 4: return tile_reusing_columns<4, KW, S, kEdge, kTail>(t, ox0);
    case 5: return tile_reusing_columns<5, KW, S, kEdge, kTail>(t, ox0);
    case 6: return tile_reusing_columns<6, KW, S, kEdge, kTail>(t, ox0);
    case 7: return tile_reusing_columns<7, KW, S, kEdge, kTail>(t, ox0);
    default: return tile_reusing_columns<8, KW, S, kEdge, kTail>(t, ox0);
  }
}

template <int KW, int S, bool kTail>
void column_reuse_tile(const RowTask& t, int64_t ox0, int64_t count, bool interior) {
  if (interior) column_reuse_tile<KW, S, false, kTail>(t, ox0, count);
  else column_reuse_tile<KW, S, true, kTail>(t, ox0, count);
}

template <bool kEdge, bool kTail>
void any_tile(const RowTask& t, int64_t ox0, int64_t count, const Inside* inside) {
  switch (count) {
    case 1: return tile<1, kEdge, kTail>(t, ox0, inside);
    case 2: return tile<2, kEdge, kTail>(t, ox0, inside);
    case 3: return tile<3, kEdge, kTail>(t, ox0, inside);
    case 4: return tile<4, kEdge, kTail>(t, ox0, inside);
    case 5: return tile<5, kEdge, kTail>(t, ox0, inside);
    case 6: return tile<6, kEdge, kTail>(t, ox0, inside);
    case 7: return tile<7, kEdge, kTail>(t, ox0, inside);
    default: return tile<8, kEdge, kTail>(t, ox0, inside);
  }
}

// What a row needs besides the task: the tile count, the interior range, the per-tile bounds.
struct RowPlan {
  int64_t tiles, in_lo, in_hi;
  const Inside* inside;
  bool reuse;
};

// One item: the row's tiles of 8 pixels (the last one shorter); those touching [0, in_lo) or
// [in_hi, wo) check their taps against the row.
template <bool kTail>
void row_tiles(const RowTask& t, const RowPlan& r) {
  const DepthwiseGeom& g = *t.g;
  for (int64_t k = 0, ox = 0; k < r.tiles; ++k, ox += 8) {
    const int64_t count = std::min<int64_t>(8, g.wo - ox);
    const bool interior = ox >= r.in_lo && ox + count <= r.in_hi;
    if (r.reuse && g.sw == 1 && g.kw == 3) column_reuse_tile<3, 1, kTail>(t, ox, count, interior);
    else if (r.reuse && g.sw == 1 && g.kw == 5) column_reuse_tile<5, 1, kTail>(t, ox, count, interior);
    else if (r.reuse && g.sw == 2 && g.kw == 3) column_reuse_tile<3, 2, kTail>(t, ox, count, interior);
    else if (r.reuse && g.sw == 2 && g.kw == 5) column_reuse_tile<5, 2, kTail>(t, ox, count, interior);
    else if (interior) any_tile<false, kTail>(t, ox, count, nullptr);
    else any_tile<true, kTail>(t, ox, count, r.inside + k * g.kw);
  }
}

}  // namespace

void depthwise_conv2d_nhwc_f32_avx2(const DepthwiseGeom& g, const float* x, const float* taps, float* y,
                                    const DepthwiseEpilogue& ep, const ParallelFor& parallel) {
  // The blocked kernel (the NCHW kernel's tiles over a zero-bordered copy of the block) wins at
  // stride 1 and on small strided planes (1 thread, this kernel's time in parentheses): 960
  // channels 7x7 3x3 0.032 (0.050) ms, 1152 7x7 5x5 0.063 (0.085), 576 14x14 3x3/2 0.036 (0.042),
  // 144 56x56 3x3 0.38 (0.54); with the input rows read in place this one wins on large strided
  // planes: 96 112x112 3x3/2 0.43 (0.71), 144 56x56 5x5/2 0.24 (0.27).
  if ((g.sh == 1 || g.h * g.w <= 28 * 28) && depthwise_nhwc_avx2_blocked_fits(g))
    return depthwise_conv2d_nhwc_f32_avx2_blocked(g, x, taps, y, ep, parallel);
  const int64_t blocks = (g.c + 7) / 8;
  // The output pixels whose taps all fall inside the row, [in_lo, in_hi), and per 8-pixel tile
  // those of each filter column.
  const DepthwiseNhwcRowPlan rp = depthwise_nhwc_row_plan(g);
  const int64_t in_lo = rp.in_lo, in_hi = rp.in_hi, tiles = rp.tiles;
  const std::vector<Inside>& inside = rp.inside;
  const bool clamp = ep.lo > -std::numeric_limits<float>::infinity() || ep.hi < std::numeric_limits<float>::infinity();
  const RowPlan plan{tiles, in_lo, in_hi, inside.data(), (g.sw == 1 || g.sw == 2) && g.dw == 1};
  // Rows inner when an 8-channel column of the image stays in L2, so that the next row finds its
  // input rows in L1; else blocks inner (the AVX-512 kernel's measured choice, at half the lanes).
  const bool rows_inner = g.h * g.w * 32 <= 256 * 1024;
  auto items = [&](int64_t begin, int64_t end) {
    for (int64_t it = begin; it < end; ++it) {
      const int64_t rows = g.n * g.ho;
      const int64_t row = rows_inner ? it % rows : it / blocks, b = rows_inner ? it / rows : it % blocks;
      const int64_t n = row / g.ho, oy = row % g.ho, cb = b * 8;
      RowTask t;
      t.g = &g;
      t.x = x + n * g.h * g.w * g.c;
      t.taps = taps + cb;
      t.y = y + (n * g.ho + oy) * g.wo * g.c + cb;
      t.oy = oy;
      t.cb = cb;
      t.m = first_lanes8(g.c - cb);
      t.bias = ep.bias ? _mm256_maskload_ps(ep.bias + cb, t.m) : _mm256_setzero_ps();
      t.lo = _mm256_set1_ps(ep.lo);
      t.hi = _mm256_set1_ps(ep.hi);
      t.clamp = clamp;
      t.act = ep.act;
      if (g.c - cb >= 8) row_tiles<false>(t, plan);
      else row_tiles<true>(t, plan);
    }
  };
  run_parallel(parallel, g.n * g.ho * blocks, items);
}

}  // namespace kiln::kernels
