// The AVX-512 channels-last depthwise conv: per task a range of (image, output row, 16-channel
// block) items; per item the row's pixels in tiles of 8 accumulators. Strides 1 and 2 with 3 or
// 5 columns load each input pixel once per filter row; otherwise each tap's 16 weights are loaded
// once per tile and interior tiles skip the padding checks.
#include <immintrin.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/x86/activation_avx512f.h"
#include "kernels/x86/f32_depthwise.h"
#include "kernels/x86/lane_mask.h"

namespace kiln::kernels {
namespace {

struct RowTask {
  const DepthwiseGeom* g;
  const float* x;     // image n's input
  const float* taps;  // offset to the channel block
  float* y;           // output row oy, offset to the channel block
  int64_t oy, cb;
  __mmask16 m;
  __m512 bias, lo, hi;
  bool clamp;
  Activation act;
};

// Bias-initialized accumulators of pixels ox0 .. ox0 + TW - 1 out: clamp, activation, store.
// (Always inlined, so that the accumulators stay in registers; the activation, out of line in
// GCC's choice, is called only when there is one.)
template <int TW>
__attribute__((always_inline)) inline void store(const RowTask& t, int64_t ox0, const __m512 (&acc)[TW]) {
#pragma GCC unroll 8
  for (int p = 0; p < TW; ++p) {
    __m512 v = acc[p];
    if (t.clamp) v = _mm512_maskz_min_ps(kAll16, _mm512_maskz_max_ps(kAll16, v, t.lo), t.hi);
    if (t.act != Activation::kNone) v = activate16(t.act, v);
    _mm512_mask_storeu_ps(t.y + (ox0 + p) * t.g->c, t.m, v);
  }
}

// Per tile and filter column j: the tile's pixels whose tap j falls inside the row.
using Inside = DepthwiseNhwcRowPlan::Inside;

// Bias-initialized accumulators for output pixels ox0 .. ox0 + TW - 1 of the row; for each
// filter row i that falls inside the image, row(i, input row at the channel block, acc) adds its
// taps; then the store.
template <int TW, class Row>
__attribute__((always_inline)) inline void accumulate(const RowTask& t, int64_t ox0, Row&& row) {
  const DepthwiseGeom& g = *t.g;
  __m512 acc[TW];
#pragma GCC unroll 8
  for (int p = 0; p < TW; ++p) acc[p] = t.bias;
  for (int64_t i = 0; i < g.kh; ++i) {
    const int64_t iy = t.oy * g.sh - g.pt + i * g.dh;
    if (iy >= 0 && iy < g.h) row(i, t.x + iy * g.w * g.c + t.cb, acc);
  }
  store(t, ox0, acc);
}

// Any stride and dilation: each tap's weights loaded once per tile. kEdge: some tap of some
// pixel falls outside W; inside[j] says which.
template <int TW, bool kEdge>
inline void tile(const RowTask& t, int64_t ox0, const Inside* inside) {
  const DepthwiseGeom& g = *t.g;
  const int64_t c = g.c, sw = g.sw, kw = g.kw;
  accumulate<TW>(t, ox0, [&](int64_t i, const float* xrow, __m512(&acc)[TW]) __attribute__((always_inline)) {
    const float* taps = t.taps + i * kw * c;
    for (int64_t j = 0; j < kw; ++j) {
      const __m512 wv = _mm512_maskz_loadu_ps(t.m, taps + j * c);
      const int64_t ix0 = ox0 * sw - g.pl + j * g.dw;
      // The tile's pixels whose tap j falls inside the row: [plo, phi). (Unrolled, so that the
      // accumulators stay in registers and the bounds compare against constants.)
      const int64_t plo = kEdge ? inside[j].lo : 0, phi = kEdge ? inside[j].hi : TW;
      const float* src = xrow + ix0 * c;
      const int64_t step = sw * c;
#pragma GCC unroll 8
      for (int p = 0; p < TW; ++p)
        if (!kEdge || (p >= plo && p < phi))
          acc[p] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(t.m, src + p * step), wv, acc[p]);
    }
  });
}

// Stride S (1 or 2) and no dilation along W, with KW filter columns: each input pixel of the
// tile's span is loaded once and feeds the output pixels whose taps cover it (up to KW of them
// at stride 1, half that at stride 2), so that loads no longer bound the FMAs. Taps in the
// padding are skipped.
template <int TW, int KW, int S>
inline void tile_reusing_columns(const RowTask& t, int64_t ox0) {
  const DepthwiseGeom& g = *t.g;
  const int64_t c = g.c, w = g.w;
  accumulate<TW>(t, ox0, [&](int64_t i, const float* xrow, __m512(&acc)[TW]) __attribute__((always_inline)) {
    __m512 wv[KW];
#pragma GCC unroll 8
    for (int j = 0; j < KW; ++j) wv[j] = _mm512_maskz_loadu_ps(t.m, t.taps + (i * KW + j) * c);
    const int64_t ix0 = ox0 * S - g.pl;
#pragma GCC unroll 24
    for (int q = 0; q < (TW - 1) * S + KW; ++q) {
      const int64_t ix = ix0 + q;
      if (ix < 0 || ix >= w) continue;
      const __m512 xv = _mm512_maskz_loadu_ps(t.m, xrow + ix * c);
#pragma GCC unroll 8
      for (int j = 0; j < KW; ++j) {
        const int p = (q - j) / S;  // output pixel p reads input q = p * S + j
        if (q - j >= 0 && (q - j) % S == 0 && p < TW) acc[p] = _mm512_fmadd_ps(xv, wv[j], acc[p]);
      }
    }
  });
}

template <int KW, int S>
void column_reuse_tile(const RowTask& t, int64_t ox0, int64_t count) {
  switch (count) {
    case 1: return tile_reusing_columns<1, KW, S>(t, ox0);
    case 2: return tile_reusing_columns<2, KW, S>(t, ox0);
    case 3: return tile_reusing_columns<3, KW, S>(t, ox0);
    case 4: return tile_reusing_columns<4, KW, S>(t, ox0);
    case 5: return tile_reusing_columns<5, KW, S>(t, ox0);
    case 6: return tile_reusing_columns<6, KW, S>(t, ox0);
    case 7: return tile_reusing_columns<7, KW, S>(t, ox0);
    default: return tile_reusing_columns<8, KW, S>(t, ox0);
  }
}

// A tile of `count` (1 to 8) pixels.
template <bool kEdge>
void any_tile(const RowTask& t, int64_t ox0, int64_t count, const Inside* inside) {
  switch (count) {
    case 1: return tile<1, kEdge>(t, ox0, inside);
    case 2: return tile<2, kEdge>(t, ox0, inside);
    case 3: return tile<3, kEdge>(t, ox0, inside);
    case 4: return tile<4, kEdge>(t, ox0, inside);
    case 5: return tile<5, kEdge>(t, ox0, inside);
    case 6: return tile<6, kEdge>(t, ox0, inside);
    case 7: return tile<7, kEdge>(t, ox0, inside);
    default: return tile<8, kEdge>(t, ox0, inside);
  }
}

}  // namespace

void depthwise_conv2d_nhwc_f32_avx512f(const DepthwiseGeom& g, const float* x, const float* taps, float* y,
                                       const DepthwiseEpilogue& ep, const ParallelFor& parallel) {
  const int64_t blocks = (g.c + 15) / 16;
  // The output pixels whose taps all fall inside the row, [in_lo, in_hi), and per 8-pixel tile
  // those of each filter column.
  const DepthwiseNhwcRowPlan rp = depthwise_nhwc_row_plan(g);
  const int64_t in_lo = rp.in_lo, in_hi = rp.in_hi, tiles = rp.tiles;
  const std::vector<Inside>& inside = rp.inside;
  const bool clamp = ep.lo > -std::numeric_limits<float>::infinity() || ep.hi < std::numeric_limits<float>::infinity();
  const bool reuse = (g.sw == 1 || g.sw == 2) && g.dw == 1;
  // Rows inner when a 16-channel column of the image stays in L2 (14x14: 12.5 KiB), so that the
  // next row finds its input rows in L1; else blocks inner (measured: 0.85-0.9x the time at 7x7
  // and 14x14 with 384-960 channels; 2.3x at 112x112, where blocks inner wins).
  const bool rows_inner = g.h * g.w * 64 <= 256 * 1024;
  auto items = [&](int64_t begin, int64_t end) {
    for (int64_t it = begin; it < end; ++it) {
      const int64_t rows = g.n * g.ho;
      const int64_t row = rows_inner ? it % rows : it / blocks, b = rows_inner ? it / rows : it % blocks;
      const int64_t n = row / g.ho, oy = row % g.ho, cb = b * 16;
      RowTask t;
      t.g = &g;
      t.x = x + n * g.h * g.w * g.c;
      t.taps = taps + cb;
      t.y = y + (n * g.ho + oy) * g.wo * g.c + cb;
      t.oy = oy;
      t.cb = cb;
      t.m = first_lanes(g.c - cb);
      t.bias = ep.bias ? _mm512_maskz_loadu_ps(t.m, ep.bias + cb) : _mm512_setzero_ps();
      t.lo = _mm512_set1_ps(ep.lo);
      t.hi = _mm512_set1_ps(ep.hi);
      t.clamp = clamp;
      t.act = ep.act;
      // Tiles of 8 pixels (the last one shorter); those touching [0, in_lo) or [in_hi, wo)
      // check their taps against the row.
      for (int64_t k = 0, ox = 0; k < tiles; ++k, ox += 8) {
        const int64_t count = std::min<int64_t>(8, g.wo - ox);
        if (reuse && g.sw == 1 && g.kw == 3) column_reuse_tile<3, 1>(t, ox, count);
        else if (reuse && g.sw == 1 && g.kw == 5) column_reuse_tile<5, 1>(t, ox, count);
        else if (reuse && g.sw == 2 && g.kw == 3) column_reuse_tile<3, 2>(t, ox, count);
        else if (reuse && g.sw == 2 && g.kw == 5) column_reuse_tile<5, 2>(t, ox, count);
        else if (ox >= in_lo && ox + count <= in_hi) any_tile<false>(t, ox, count, nullptr);
        else any_tile<true>(t, ox, count, &inside[static_cast<size_t>(k * g.kw)]);
      }
    }
  };
  run_parallel(parallel, g.n * g.ho * blocks, items);
}

}  // namespace kiln::kernels
