// Stem conv kernel for AVX-512F (compiled with -mavx512f -mavx512vl -mfma; called when the
// default f32 microkernel is an AVX-512 one; see f32_conv_stem.h).
// Per image, every padded input row is first split into its even and odd columns (zero-padded
// "phase" rows): output column ox of a stride-2 conv reads padded column 2 * ox + j, which is
// element ox + j / 2 of phase j % 2, so 16 consecutive outputs read 16 consecutive floats. The
// outputs are then computed directly: 8 output channels x 48 output columns of one row in 24
// accumulators, each (input channel, tap) step one load per 16 columns and 8 broadcast weights,
// FMA-bound; bias, clamp and activation are applied in registers before the store. A fused max
// pool computes each band's conv rows into a per-thread scratch and pools them from there.
#include <immintrin.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/x86/activation_avx512f.h"
#include "kernels/x86/f32_conv_stem.h"
#include "kernels/x86/lane_mask.h"

namespace kiln::kernels {
namespace {

constexpr int64_t kCb = kStemChannelBlock;
constexpr int kChunkVectors = 3;  // 48 output columns per register tile

// Phase rows of padded row pr of channel plane `xc` ([h][w]): even[u] = xpad(2u), odd[u] = xpad(2u+1).
void fill_phase_row(const StemConvGeom& g, const StemPhaseLayout& l, const float* xc, int64_t pr, float* even) {
  float* odd = even + l.ur;
  const int64_t iy = pr - g.pt;
  if (iy < 0 || iy >= g.h) {
    std::fill(even, even + l.row_floats(), 0.0f);
    return;
  }
  const float* row = xc + iy * g.w;
  const __m512i ev = even_lanes(), od = odd_lanes();
  for (int64_t u0 = 0; u0 < l.ur; u0 += 16) {
    const int64_t col = 2 * u0 - g.pl;  // input column of even[u0]
    const __m512 lo = _mm512_maskz_loadu_ps(lanes_in_range(col, g.w), row + col);
    const __m512 hi = _mm512_maskz_loadu_ps(lanes_in_range(col + 16, g.w), row + col + 16);
    _mm512_storeu_ps(even + u0, _mm512_permutex2var_ps(lo, ev, hi));
    _mm512_storeu_ps(odd + u0, _mm512_permutex2var_ps(lo, od, hi));
  }
}

struct TileArgs {
  const float* phases;  // channel 0, padded row 2 * oy
  int64_t channel_floats, row_floats, ur;
  int64_t c, kh;
  const float* w;  // this block's [c][kh][kw][kCb]
};

// acc[co][v] += sum over (c, i, j) of w[c][i][j][co] * input(ox0 + 16 v); KW > 0 fixed, else a.kw.
template <int KW, int V>
inline void accumulate(const TileArgs& a, int64_t kw_rt, int64_t ox0, __m512 (&acc)[kCb][V]) {
  const int64_t kw = KW > 0 ? KW : kw_rt;
  const float* wk = a.w;
  for (int64_t c = 0; c < a.c; ++c)
    for (int64_t i = 0; i < a.kh; ++i) {
      const float* even = a.phases + c * a.channel_floats + i * a.row_floats + ox0;
      const float* odd = even + a.ur;
#pragma GCC unroll 7
      for (int64_t j = 0; j < kw; ++j, wk += kCb) {
        const float* src = ((j & 1) ? odd : even) + (j >> 1);
        __m512 in[V];
#pragma GCC unroll 3
        for (int v = 0; v < V; ++v) in[v] = _mm512_loadu_ps(src + 16 * v);
#pragma GCC unroll 8
        for (int o = 0; o < kCb; ++o) {
          const __m512 wv = _mm512_set1_ps(wk[o]);
#pragma GCC unroll 3
          for (int v = 0; v < V; ++v) acc[o][v] = _mm512_fmadd_ps(wv, in[v], acc[o][v]);
        }
      }
    }
}

struct StoreArgs {
  const float* bias;  // this block's first channel, or null
  int64_t channels;   // valid channels in the block
  __m512 lo, hi;
  bool clamp;
  Activation act;
  float* y;  // this block's channel 0, output row oy
  int64_t plane;  // ho * wo
};

template <int KW, int V>
void tile(const TileArgs& a, int64_t kw_rt, const StoreArgs& s, int64_t ox0, __mmask16 last) {
  __m512 acc[kCb][V];
#pragma GCC unroll 8
  for (int o = 0; o < kCb; ++o)
#pragma GCC unroll 3
    for (int v = 0; v < V; ++v) acc[o][v] = _mm512_setzero_ps();
  accumulate<KW, V>(a, kw_rt, ox0, acc);
#pragma GCC unroll 8
  for (int o = 0; o < kCb; ++o) {
    if (o >= s.channels) break;
    const __m512 b = s.bias ? _mm512_set1_ps(s.bias[o]) : _mm512_setzero_ps();
    float* out = s.y + o * s.plane + ox0;
#pragma GCC unroll 3
    for (int v = 0; v < V; ++v) {
      __m512 r = _mm512_add_ps(acc[o][v], b);
      if (s.clamp) r = _mm512_maskz_min_ps(kAll16, _mm512_maskz_max_ps(kAll16, r, s.lo), s.hi);
      r = activate16(s.act, r);
      if (v == V - 1) _mm512_mask_storeu_ps(out + 16 * v, last, r);
      else _mm512_storeu_ps(out + 16 * v, r);
    }
  }
}

// One output row of one channel block: chunks of 48 columns, then the remainder.
template <int KW>
void stem_row(const TileArgs& a, int64_t kw_rt, const StoreArgs& s, int64_t wo) {
  int64_t ox0 = 0;
  for (; ox0 + 16 * kChunkVectors <= wo; ox0 += 16 * kChunkVectors)
    tile<KW, kChunkVectors>(a, kw_rt, s, ox0, kAll16);
  const int64_t rest = wo - ox0;
  if (rest <= 0) return;
  const __mmask16 last = first_lanes(rest - (rest - 1) / 16 * 16);
  if (rest > 32) tile<KW, 3>(a, kw_rt, s, ox0, last);
  else if (rest > 16) tile<KW, 2>(a, kw_rt, s, ox0, last);
  else tile<KW, 1>(a, kw_rt, s, ox0, last);
}

// One row of the 3x3 / stride 2 / pad 1 max pool of `channels` conv planes held in `conv`
// (rows [r0, r0 + rows) of the conv output, row stride `ld`, channel stride `cs`): pooled row py of
// each channel into out (channel stride `plane`).
void pool_row(const float* conv, int64_t r0, int64_t rows, int64_t ld, int64_t cs, int64_t channels, int64_t wo,
              int64_t py, int64_t wp, float* out, int64_t plane) {
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __m512i ev = even_lanes(), od = odd_lanes();
  const __m512i next = _mm512_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
  const int64_t y0 = std::max<int64_t>(2 * py - 1, r0), y1 = std::min<int64_t>(2 * py + 2, r0 + rows);
  for (int64_t o = 0; o < channels; ++o)
    for (int64_t px0 = 0; px0 < wp; px0 += 16) {
      __m512 acc = ninf;
      const int64_t c0 = 2 * px0 - 1;  // conv column of tap 0 of output px0
      for (int64_t yy = y0; yy < y1; ++yy) {
        const float* row = conv + o * cs + (yy - r0) * ld;
        // Taps 0 and 1: the even and odd floats of 32 from c0; tap 2 of lane l is column
        // c0 + 2 l + 2: lane l + 1 of tap 0, the last one the first float of the next 16.
        const __m512 a = _mm512_mask_loadu_ps(ninf, lanes_in_range(c0, wo), row + c0);
        const __m512 b = _mm512_mask_loadu_ps(ninf, lanes_in_range(c0 + 16, wo), row + c0 + 16);
        const __m512 c = _mm512_mask_loadu_ps(ninf, lanes_in_range(c0 + 32, wo), row + c0 + 32);
        const __m512 t0 = _mm512_permutex2var_ps(a, ev, b), t1 = _mm512_permutex2var_ps(a, od, b);
        const __m512 t2 = _mm512_permutex2var_ps(t0, next, c);
        acc = _mm512_maskz_max_ps(kAll16, acc, _mm512_maskz_max_ps(kAll16, t0, _mm512_maskz_max_ps(kAll16, t1, t2)));
      }
      _mm512_mask_storeu_ps(out + o * plane + py * wp + px0, first_lanes(wp - px0), acc);
    }
}

}  // namespace

void conv_stem_f32__avx512f(const StemConvGeom& g, const float* x, const float* packed_w, float* y,
                            const DepthwiseEpilogue& ep, const ParallelFor& parallel, StemMaxPool pool) {
  const StemPhaseLayout l = stem_phase_layout(g, 16);
  // The calling thread's buffer, grown and never shrunk (tasks on other threads get the pointer).
  thread_local std::vector<float> phase_buf;
  const size_t need = static_cast<size_t>(g.c * l.channel_floats());
  if (phase_buf.size() < need) phase_buf.resize(need);
  float* phases = phase_buf.data();
  const int64_t blocks = (g.co + kCb - 1) / kCb, taps = g.c * g.kh * g.kw;
  // Enough tasks for the threads to balance: bands of output rows (pooled rows with the pool)
  // per channel block, blocks outermost (the first share of the tasks gets the first channels).
  const int64_t hp = pool.on ? StemMaxPool::pooled(g.ho) : g.ho, wp = pool.on ? StemMaxPool::pooled(g.wo) : g.wo;
  const int64_t bands = std::min(hp, std::max<int64_t>(1, (16 + blocks - 1) / blocks));
  const int64_t ld = (g.wo + 15) / 16 * 16;  // conv row stride in the pool's scratch
  const bool clamp = ep.lo > -std::numeric_limits<float>::infinity() || ep.hi < std::numeric_limits<float>::infinity();
  for (int64_t img = 0; img < g.n; ++img) {
    const float* xi = x + img * g.c * g.h * g.w;
    run_parallel(parallel, g.c * l.rows, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t c = t / l.rows, pr = t % l.rows;
        fill_phase_row(g, l, xi + c * g.h * g.w, pr, phases + c * l.channel_floats() + pr * l.row_floats());
      }
    });
    run_parallel(parallel, blocks * bands, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t b = t / bands, band = t % bands;
        const int64_t channels = std::min(kCb, g.co - b * kCb);
        // Output rows [y0, y1) of this band; with the pool, the conv rows its pooled rows read.
        const int64_t y0 = band * hp / bands, y1 = (band + 1) * hp / bands;
        const int64_t oy0 = pool.on ? std::max<int64_t>(2 * y0 - 1, 0) : y0;
        const int64_t oy1 = pool.on ? std::min<int64_t>(2 * y1, g.ho) : y1;
        TileArgs a{nullptr, l.channel_floats(), l.row_floats(), l.ur, g.c, g.kh, packed_w + b * taps * kCb};
        StoreArgs s{ep.bias ? ep.bias + b * kCb : nullptr, channels, _mm512_set1_ps(ep.lo),
                    _mm512_set1_ps(ep.hi), clamp, ep.act, nullptr, g.ho * g.wo};
        // With the pool the conv rows go to this thread's scratch ([channel][row][ld]), in cache.
        float* conv = nullptr;
        if (pool.on) {
          thread_local std::vector<float> conv_buf;
          const size_t floats = static_cast<size_t>(kCb * (oy1 - oy0) * ld);
          if (conv_buf.size() < floats) conv_buf.resize(floats);
          conv = conv_buf.data();
          s.plane = (oy1 - oy0) * ld;
        }
        for (int64_t oy = oy0; oy < oy1; ++oy) {
          a.phases = phases + 2 * oy * l.row_floats();
          s.y = pool.on ? conv + (oy - oy0) * ld : y + ((img * g.co + b * kCb) * g.ho + oy) * g.wo;
          switch (g.kw) {
            case 3: stem_row<3>(a, 3, s, g.wo); break;
            case 5: stem_row<5>(a, 5, s, g.wo); break;
            case 7: stem_row<7>(a, 7, s, g.wo); break;
            default: stem_row<0>(a, g.kw, s, g.wo); break;
          }
        }
        if (pool.on)
          for (int64_t py = y0; py < y1; ++py)
            pool_row(conv, oy0, oy1 - oy0, ld, (oy1 - oy0) * ld, channels, g.wo, py, wp,
                     y + (img * g.co + b * kCb) * hp * wp, hp * wp);
      }
    });
  }
}

}  // namespace kiln::kernels
