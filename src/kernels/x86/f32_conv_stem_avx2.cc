// Stem conv kernel for AVX2 + FMA (compiled with -mavx2 -mfma; called when the default f32
// microkernel is the AVX2 one; see f32_conv_stem.h). The scheme of f32_conv_stem_avx512f.cc on
// 8-lane vectors: padded input rows split into even / odd "phase" rows, so 8 consecutive outputs
// of a stride-2 conv read 8 consecutive floats; then 4 output channels x 24 output columns of one
// row in 12 accumulators (each (input channel, tap) step: 3 loads, 4 broadcasts, 12 FMAs), bias,
// clamp and activation in registers before the store. A fused max pool computes each band's conv
// rows into a per-thread scratch and pools them from there.
#include <immintrin.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/x86/activation_avx2.h"
#include "kernels/x86/f32_conv_stem.h"
#include "kernels/x86/lane_mask_avx2.h"

namespace kiln::kernels {
namespace {

constexpr int64_t kCb = kStemChannelBlock;
// Output channels per register tile: half a packed block, so 3 vectors of columns fit beside them.
constexpr int kTileChannels = 4;
constexpr int kChunkVectors = 3;  // 24 output columns per register tile

// Lanes l with 0 <= lo + l < n.
inline __m256i lanes_in_range8(int64_t lo, int64_t n) {
  return _mm256_andnot_si256(first_lanes8(-lo), first_lanes8(n - lo));
}

// The even and odd floats of lo then hi (16 floats), in order.
inline void deinterleave(__m256 lo, __m256 hi, __m256& even, __m256& odd) {
  // In-lane shuffles leave the pairs of 64 bits in the order 0 2 1 3.
  const __m256 e = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
  const __m256 o = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
  even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0)));
  odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), _MM_SHUFFLE(3, 1, 2, 0)));
}

// Floats [col, col + 8) of an n-float row, those outside it `fill`.
inline __m256 load_or(const float* row, int64_t col, int64_t n, __m256 fill) {
  if (col >= 0 && col + 8 <= n) return _mm256_loadu_ps(row + col);
  const __m256i m = lanes_in_range8(col, n);
  // Masked-off lanes are not read.
  return _mm256_blendv_ps(fill, _mm256_maskload_ps(row + col, m), _mm256_castsi256_ps(m));
}

// Phase rows of padded row pr of channel plane `xc` ([h][w]): even[u] = xpad(2u), odd[u] = xpad(2u+1).
void fill_phase_row(const StemConvGeom& g, const StemPhaseLayout& l, const float* xc, int64_t pr, float* even) {
  float* odd = even + l.ur;
  const int64_t iy = pr - g.pt;
  if (iy < 0 || iy >= g.h) {
    std::fill(even, even + l.row_floats(), 0.0f);
    return;
  }
  const float* row = xc + iy * g.w;
  const __m256 zero = _mm256_setzero_ps();
  for (int64_t u0 = 0; u0 < l.ur; u0 += 8) {
    const int64_t col = 2 * u0 - g.pl;  // input column of even[u0]
    __m256 e, o;
    deinterleave(load_or(row, col, g.w, zero), load_or(row, col + 8, g.w, zero), e, o);
    _mm256_storeu_ps(even + u0, e);
    _mm256_storeu_ps(odd + u0, o);
  }
}

struct TileArgs {
  const float* phases;  // channel 0, padded row 2 * oy
  int64_t channel_floats, row_floats, ur;
  int64_t c, kh;
  const float* w;  // this block's [c][kh][kw][kCb]
};

// acc[o][v] += sum over (c, i, j) of w[c][i][j][o0 + o] * input(ox0 + 8 v); KW > 0 fixed, else kw_rt.
template <int KW, int V>
inline void accumulate(const TileArgs& a, int64_t kw_rt, int64_t ox0, int o0, __m256 (&acc)[kTileChannels][V]) {
  const int64_t kw = KW > 0 ? KW : kw_rt;
  const float* wk = a.w + o0;
  for (int64_t c = 0; c < a.c; ++c)
    for (int64_t i = 0; i < a.kh; ++i) {
      const float* even = a.phases + c * a.channel_floats + i * a.row_floats + ox0;
      const float* odd = even + a.ur;
      // Not unrolled: unrolled, GCC keeps the next taps' loads live and spills three of the 12
      // accumulators to the stack inside the loop (7x7 stem: 3.1-3.3 against 2.8 ms).
#pragma GCC unroll 1
      for (int64_t j = 0; j < kw; ++j, wk += kCb) {
        const float* src = ((j & 1) ? odd : even) + (j >> 1);
        __m256 in[V];
#pragma GCC unroll 3
        for (int v = 0; v < V; ++v) in[v] = _mm256_loadu_ps(src + 8 * v);
#pragma GCC unroll 4
        for (int o = 0; o < kTileChannels; ++o) {
          const __m256 wv = _mm256_broadcast_ss(wk + o);
#pragma GCC unroll 3
          for (int v = 0; v < V; ++v) acc[o][v] = _mm256_fmadd_ps(wv, in[v], acc[o][v]);
        }
      }
    }
}

struct StoreArgs {
  const float* bias;  // this block's first channel, or null
  int64_t channels;   // valid channels in the block
  __m256 lo, hi;
  bool clamp;
  Activation act;
  float* y;       // this block's channel 0, output row oy
  int64_t plane;  // ho * wo
};

// `last`: how many lanes of the last vector to store (1-8). Never inlined: inlined into the
// band loop, GCC spills most of the 12 accumulators inside the tap loop (2.2x slower).
template <int KW, int V>
__attribute__((noinline)) void tile(const TileArgs& a, int64_t kw_rt, const StoreArgs& s, int64_t ox0, int64_t last) {
  for (int o0 = 0; o0 < s.channels; o0 += kTileChannels) {
    __m256 acc[kTileChannels][V];
#pragma GCC unroll 4
    for (int o = 0; o < kTileChannels; ++o)
#pragma GCC unroll 3
      for (int v = 0; v < V; ++v) acc[o][v] = _mm256_setzero_ps();
    accumulate<KW, V>(a, kw_rt, ox0, o0, acc);
    // The activation a template argument: the tile's vectors then run it as one straight-line
    // block (see with_fixed_activation).
    with_fixed_activation(s.act, [&](auto act) __attribute__((always_inline)) {
#pragma GCC unroll 4
      for (int o = 0; o < kTileChannels; ++o) {
        if (o0 + o >= s.channels) break;
        const __m256 b = s.bias ? _mm256_set1_ps(s.bias[o0 + o]) : _mm256_setzero_ps();
        float* out = s.y + (o0 + o) * s.plane + ox0;
#pragma GCC unroll 3
        for (int v = 0; v < V; ++v) {
          __m256 r = _mm256_add_ps(acc[o][v], b);
          // max(lo, r) / min(hi, r) return r when it is NaN, like the reference clamp.
          if (s.clamp) r = _mm256_min_ps(s.hi, _mm256_max_ps(s.lo, r));
          r = activate8_fixed<decltype(act)::value>(s.act, r);
          if (v == V - 1 && last < 8) store_first(out + 8 * v, r, last);
          else _mm256_storeu_ps(out + 8 * v, r);
        }
      }
    });
  }
}

// One output row of one channel block: chunks of 24 columns, then the remainder.
template <int KW>
void stem_row(const TileArgs& a, int64_t kw_rt, const StoreArgs& s, int64_t wo) {
  int64_t ox0 = 0;
  for (; ox0 + 8 * kChunkVectors <= wo; ox0 += 8 * kChunkVectors) tile<KW, kChunkVectors>(a, kw_rt, s, ox0, 8);
  const int64_t rest = wo - ox0;
  if (rest <= 0) return;
  const int64_t last = rest - (rest - 1) / 8 * 8;
  if (rest > 16) tile<KW, 3>(a, kw_rt, s, ox0, last);
  else if (rest > 8) tile<KW, 2>(a, kw_rt, s, ox0, last);
  else tile<KW, 1>(a, kw_rt, s, ox0, last);
}

// One row of the 3x3 / stride 2 / pad 1 max pool of `channels` conv planes held in `conv`
// (rows [r0, r0 + rows) of the conv output, row stride `ld`, channel stride `cs`): pooled row py of
// each channel into out (channel stride `plane`).
void pool_row(const float* conv, int64_t r0, int64_t rows, int64_t ld, int64_t cs, int64_t channels, int64_t wo,
              int64_t py, int64_t wp, float* out, int64_t plane) {
  const __m256 ninf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  const int64_t y0 = std::max<int64_t>(2 * py - 1, r0), y1 = std::min<int64_t>(2 * py + 2, r0 + rows);
  for (int64_t o = 0; o < channels; ++o)
    for (int64_t px0 = 0; px0 < wp; px0 += 8) {
      __m256 acc = ninf;
      const int64_t c0 = 2 * px0 - 1;  // conv column of tap 0 of output px0
      for (int64_t yy = y0; yy < y1; ++yy) {
        const float* row = conv + o * cs + (yy - r0) * ld;
        // Taps 0 and 1: the even and odd floats of 16 from c0; tap 2: the even floats from c0 + 2.
        __m256 t0, t1, t2, unused;
        deinterleave(load_or(row, c0, wo, ninf), load_or(row, c0 + 8, wo, ninf), t0, t1);
        deinterleave(load_or(row, c0 + 2, wo, ninf), load_or(row, c0 + 10, wo, ninf), t2, unused);
        acc = _mm256_max_ps(acc, _mm256_max_ps(t0, _mm256_max_ps(t1, t2)));
      }
      float* dst = out + o * plane + py * wp + px0;
      if (px0 + 8 <= wp) _mm256_storeu_ps(dst, acc);
      else store_first(dst, acc, wp - px0);
    }
}

}  // namespace

void conv_stem_f32__avx2(const StemConvGeom& g, const float* x, const float* packed_w, float* y,
                         const DepthwiseEpilogue& ep, const ParallelFor& parallel, StemMaxPool pool) {
  const StemPhaseLayout l = stem_phase_layout(g, 8);
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
  const int64_t ld = (g.wo + 7) / 8 * 8;  // conv row stride in the pool's scratch
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
        StoreArgs s{ep.bias ? ep.bias + b * kCb : nullptr, channels, _mm256_set1_ps(ep.lo), _mm256_set1_ps(ep.hi),
                    clamp, ep.act, nullptr, g.ho * g.wo};
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
