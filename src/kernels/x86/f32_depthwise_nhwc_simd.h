// The channels-last depthwise conv (f32_depthwise.h), written once over simd.h's vector types
// and instantiated by f32_depthwise_nhwc_avx2.cc and f32_depthwise_nhwc_avx512f.cc: the channels
// are the vector lanes; per output row tiles of up to 8 pixels in registers. Strides 1 and 2 with
// 3 or 5 columns load each input pixel once per filter row; otherwise each tap's weights are
// loaded once per tile, and interior tiles skip the padding checks. Full channel blocks use plain
// loads and stores, the tail block masked ones (masked accesses cost more, masked stores much
// more on AMD).
#pragma once

#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/x86/activation_simd.h"
#include "kernels/x86/f32_depthwise.h"

namespace kiln::kernels {
namespace {

template <class S>
struct NhwcRowTask {
  const DepthwiseGeom* g;
  const float* x;     // image n's input
  const float* taps;  // offset to the channel block
  float* y;           // output row oy, offset to the channel block
  int64_t oy, cb;
  typename S::Mask m;  // the block's channels (all lanes except in a tail block)
  typename S::V bias, lo, hi;
  bool clamp;
  Activation act;
};

// Loads and stores of one channel block: plain for full blocks, masked for the tail block only
// (masked accesses cost more, masked stores much more on AMD).
template <class S, bool kTail>
__attribute__((always_inline)) inline typename S::V load(const NhwcRowTask<S>& t, const float* p) {
  return kTail ? S::load_masked(p, t.m) : S::loadu(p);
}

template <class S, int TW, bool kTail>
__attribute__((always_inline)) inline void store(const NhwcRowTask<S>& t, int64_t ox0, const typename S::V (&acc)[TW]) {
  typename S::V v[TW];
#pragma GCC unroll 8
  for (int p = 0; p < TW; ++p) v[p] = acc[p];
  clamp_activate_all<S>(t.clamp, t.lo, t.hi, t.act, v);
#pragma GCC unroll 8
  for (int p = 0; p < TW; ++p) {
    float* dst = t.y + (ox0 + p) * t.g->c;
    if (kTail) S::store_masked(dst, t.m, v[p]);
    else S::storeu(dst, v[p]);
  }
}

// Per tile and filter column j: the tile's pixels whose tap j falls inside the row.
using Inside = DepthwiseNhwcRowPlan::Inside;

// Bias-initialized accumulators for output pixels ox0 .. ox0 + TW - 1 of the row; for each filter
// row i inside the image, row(i, input row at the channel block, acc) adds its taps; then the store.
template <class S, int TW, bool kTail, class Row>
__attribute__((always_inline)) inline void accumulate(const NhwcRowTask<S>& t, int64_t ox0, Row&& row) {
  const DepthwiseGeom& g = *t.g;
  typename S::V acc[TW];
#pragma GCC unroll 8
  for (int p = 0; p < TW; ++p) acc[p] = t.bias;
  for (int64_t i = 0; i < g.kh; ++i) {
    const int64_t iy = t.oy * g.sh - g.pt + i * g.dh;
    if (iy >= 0 && iy < g.h) row(i, t.x + iy * g.w * g.c + t.cb, acc);
  }
  store<S, TW, kTail>(t, ox0, acc);
}

// Any stride and dilation: each tap's weights loaded once per tile. kEdge: some tap of some pixel
// falls outside W; inside[j] says which.
template <class S, int TW, bool kEdge, bool kTail>
inline void tile(const NhwcRowTask<S>& t, int64_t ox0, const Inside* inside) {
  const DepthwiseGeom& g = *t.g;
  const int64_t c = g.c, sw = g.sw, kw = g.kw;
  accumulate<S, TW, kTail>(t, ox0, [&](int64_t i, const float* xrow, typename S::V(&acc)[TW]) __attribute__((always_inline)) {
    const float* taps = t.taps + i * kw * c;
    for (int64_t j = 0; j < kw; ++j) {
      const typename S::V wv = load<S, kTail>(t, taps + j * c);
      const int64_t ix0 = ox0 * sw - g.pl + j * g.dw;
      const int64_t plo = kEdge ? inside[j].lo : 0, phi = kEdge ? inside[j].hi : TW;
      const float* src = xrow + ix0 * c;
      const int64_t step = sw * c;
#pragma GCC unroll 8
      for (int p = 0; p < TW; ++p)
        if (!kEdge || (p >= plo && p < phi)) acc[p] = S::fmadd(load<S, kTail>(t, src + p * step), wv, acc[p]);
    }
  });
}

// Stride S (1 or 2), no dilation along W, KW filter columns: each input pixel of the tile's span is
// loaded once and feeds every output pixel whose taps cover it; taps in the padding are skipped.
// (8 accumulators + KW weight vectors + the input fit the 16 registers for KW <= 5.)
template <class S, int TW, int KW, int SW, bool kEdge, bool kTail>
inline void tile_reusing_columns(const NhwcRowTask<S>& t, int64_t ox0) {
  const DepthwiseGeom& g = *t.g;
  const int64_t c = g.c, w = g.w;
  accumulate<S, TW, kTail>(t, ox0, [&](int64_t i, const float* xrow, typename S::V(&acc)[TW]) __attribute__((always_inline)) {
    typename S::V wv[KW];
#pragma GCC unroll 8
    for (int j = 0; j < KW; ++j) wv[j] = load<S, kTail>(t, t.taps + (i * KW + j) * c);
    const int64_t ix0 = ox0 * SW - g.pl;
    const float* src = xrow + ix0 * c;
#pragma GCC unroll 24
    for (int q = 0; q < (TW - 1) * SW + KW; ++q, src += c) {
      if (kEdge && (ix0 + q < 0 || ix0 + q >= w)) continue;
      const typename S::V xv = load<S, kTail>(t, src);
#pragma GCC unroll 8
      for (int j = 0; j < KW; ++j) {
        const int p = (q - j) / SW;  // output pixel p reads input q = p * SW + j
        if (q - j >= 0 && (q - j) % SW == 0 && p < TW) acc[p] = S::fmadd(xv, wv[j], acc[p]);
      }
    }
  });
}

// kEdge: some input column of the tile falls outside the row (checked per column).
template <class S, int KW, int SW, bool kEdge, bool kTail>
void column_reuse_tile(const NhwcRowTask<S>& t, int64_t ox0, int64_t count) {
  switch (count) {
    case 1: return tile_reusing_columns<S, 1, KW, SW, kEdge, kTail>(t, ox0);
    case 2: return tile_reusing_columns<S, 2, KW, SW, kEdge, kTail>(t, ox0);
    case 3: return tile_reusing_columns<S, 3, KW, SW, kEdge, kTail>(t, ox0);
    case 4: return tile_reusing_columns<S, 4, KW, SW, kEdge, kTail>(t, ox0);
    case 5: return tile_reusing_columns<S, 5, KW, SW, kEdge, kTail>(t, ox0);
    case 6: return tile_reusing_columns<S, 6, KW, SW, kEdge, kTail>(t, ox0);
    case 7: return tile_reusing_columns<S, 7, KW, SW, kEdge, kTail>(t, ox0);
    default: return tile_reusing_columns<S, 8, KW, SW, kEdge, kTail>(t, ox0);
  }
}

template <class S, int KW, int SW, bool kTail>
void column_reuse_tile(const NhwcRowTask<S>& t, int64_t ox0, int64_t count, bool interior) {
  if (interior) column_reuse_tile<S, KW, SW, false, kTail>(t, ox0, count);
  else column_reuse_tile<S, KW, SW, true, kTail>(t, ox0, count);
}

template <class S, bool kEdge, bool kTail>
void any_tile(const NhwcRowTask<S>& t, int64_t ox0, int64_t count, const Inside* inside) {
  switch (count) {
    case 1: return tile<S, 1, kEdge, kTail>(t, ox0, inside);
    case 2: return tile<S, 2, kEdge, kTail>(t, ox0, inside);
    case 3: return tile<S, 3, kEdge, kTail>(t, ox0, inside);
    case 4: return tile<S, 4, kEdge, kTail>(t, ox0, inside);
    case 5: return tile<S, 5, kEdge, kTail>(t, ox0, inside);
    case 6: return tile<S, 6, kEdge, kTail>(t, ox0, inside);
    case 7: return tile<S, 7, kEdge, kTail>(t, ox0, inside);
    default: return tile<S, 8, kEdge, kTail>(t, ox0, inside);
  }
}

// What a row needs besides the task: the tile count, the interior range, the per-tile bounds.
struct NhwcRowPlanView {
  int64_t tiles, in_lo, in_hi;
  const Inside* inside;
  bool reuse;
};

// One item: the row's tiles of 8 pixels (the last one shorter); those touching [0, in_lo) or
// [in_hi, wo) check their taps against the row.
template <class S, bool kTail>
void row_tiles(const NhwcRowTask<S>& t, const NhwcRowPlanView& r) {
  const DepthwiseGeom& g = *t.g;
  for (int64_t k = 0, ox = 0; k < r.tiles; ++k, ox += 8) {
    const int64_t count = std::min<int64_t>(8, g.wo - ox);
    const bool interior = ox >= r.in_lo && ox + count <= r.in_hi;
    if (r.reuse && g.sw == 1 && g.kw == 3) column_reuse_tile<S, 3, 1, kTail>(t, ox, count, interior);
    else if (r.reuse && g.sw == 1 && g.kw == 5) column_reuse_tile<S, 5, 1, kTail>(t, ox, count, interior);
    else if (r.reuse && g.sw == 2 && g.kw == 3) column_reuse_tile<S, 3, 2, kTail>(t, ox, count, interior);
    else if (r.reuse && g.sw == 2 && g.kw == 5) column_reuse_tile<S, 5, 2, kTail>(t, ox, count, interior);
    else if (interior) any_tile<S, false, kTail>(t, ox, count, nullptr);
    else any_tile<S, true, kTail>(t, ox, count, r.inside + k * g.kw);
  }
}


// The rows kernel: per task a range of (image, output row, L-channel block) items; per item the
// row's pixels in tiles of up to 8 accumulators.
template <class S>
void depthwise_nhwc_rows(const DepthwiseGeom& g, const float* x, const float* taps, float* y,
                         const DepthwiseEpilogue& ep, const ParallelFor& parallel) {
  constexpr int64_t L = S::kLanes;
  const int64_t blocks = (g.c + L - 1) / L;
  // The output pixels whose taps all fall inside the row, [in_lo, in_hi), and per 8-pixel tile
  // those of each filter column.
  const DepthwiseNhwcRowPlan rp = depthwise_nhwc_row_plan(g);
  const bool clamp = ep.lo > -std::numeric_limits<float>::infinity() || ep.hi < std::numeric_limits<float>::infinity();
  const NhwcRowPlanView plan{rp.tiles, rp.in_lo, rp.in_hi, rp.inside.data(), (g.sw == 1 || g.sw == 2) && g.dw == 1};
  // Rows inner when an L-channel column of the image stays in L2 (16 lanes at 14x14: 12.5 KiB),
  // so that the next row finds its input rows in L1; else blocks inner (measured on AVX-512:
  // 0.85-0.9x the time at 7x7 and 14x14 with 384-960 channels; 2.3x at 112x112, where blocks
  // inner wins).
  const bool rows_inner = g.h * g.w * L * 4 <= 256 * 1024;
  auto items = [&](int64_t begin, int64_t end) {
    for (int64_t it = begin; it < end; ++it) {
      const int64_t rows = g.n * g.ho;
      const int64_t row = rows_inner ? it % rows : it / blocks, b = rows_inner ? it / rows : it % blocks;
      const int64_t n = row / g.ho, oy = row % g.ho, cb = b * L;
      NhwcRowTask<S> t;
      t.g = &g;
      t.x = x + n * g.h * g.w * g.c;
      t.taps = taps + cb;
      t.y = y + (n * g.ho + oy) * g.wo * g.c + cb;
      t.oy = oy;
      t.cb = cb;
      t.m = S::first(g.c - cb);
      t.bias = ep.bias ? S::load_masked(ep.bias + cb, t.m) : S::zero();
      t.lo = S::set1(ep.lo);
      t.hi = S::set1(ep.hi);
      t.clamp = clamp;
      t.act = ep.act;
      if (g.c - cb >= L) row_tiles<S, false>(t, plan);
      else row_tiles<S, true>(t, plan);
    }
  };
  run_parallel(parallel, g.n * g.ho * blocks, items);
}

}  // namespace
}  // namespace kiln::kernels
