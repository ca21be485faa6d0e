// The stem conv kernel (f32_conv_stem.h), written once over simd.h's vector types and
// instantiated by f32_conv_stem_avx2.cc (8 lanes) and f32_conv_stem_avx512f.cc (16 lanes).
// Per image, every padded input row is first split into its even and odd columns (zero-padded
// "phase" rows): output column ox of a stride-2 conv reads padded column 2 * ox + j, which is
// element ox + j / 2 of phase j % 2, so L consecutive outputs read L consecutive floats. The
// outputs are then computed directly: StemTiling<S>::kChannels output channels x 3 vectors of
// output columns of one row in registers, each (input channel, tap) step one load per vector
// and one broadcast weight per channel, FMA-bound; bias, clamp and activation are applied in
// registers before the store. A fused max pool computes each band's conv rows into a per-thread
// scratch and pools them from there.
#pragma once

#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/x86/activation_simd.h"
#include "kernels/x86/f32_conv_stem.h"

namespace kiln::kernels {
namespace {

// Output channels per register tile, and whether the tap loop is unrolled. AVX-512: a whole
// packed block (8 x 3 = 24 of 32 registers), unrolled. AVX2: half a block (4 x 3 = 12 of 16);
// unrolled, GCC keeps the next taps' loads live and spills three accumulators inside the loop
// (7x7 stem: 3.1-3.3 against 2.8 ms).
template <class S>
struct StemTiling {
  static constexpr int kChannels = S::kLanes == 16 ? 8 : 4;
  static constexpr bool kUnrollTaps = S::kLanes == 16;
};
constexpr int kStemChunkVectors = 3;  // vectors of output columns per register tile

// Phase rows of padded row pr of channel plane `xc` ([h][w]): even[u] = xpad(2u), odd[u] = xpad(2u+1).
template <class S>
void fill_phase_row(const StemConvGeom& g, const StemPhaseLayout& l, const float* xc, int64_t pr, float* even) {
  constexpr int L = S::kLanes;
  float* odd = even + l.ur;
  const int64_t iy = pr - g.pt;
  if (iy < 0 || iy >= g.h) {
    std::fill(even, even + l.row_floats(), 0.0f);
    return;
  }
  const float* row = xc + iy * g.w;
  for (int64_t u0 = 0; u0 < l.ur; u0 += L) {
    const int64_t col = 2 * u0 - g.pl;  // input column of even[u0]
    typename S::V e, o;
    S::deinterleave(S::load_range(row, col, g.w, S::zero()), S::load_range(row, col + L, g.w, S::zero()), e, o);
    S::storeu(even + u0, e);
    S::storeu(odd + u0, o);
  }
}

struct StemTileArgs {
  const float* phases;  // channel 0, padded row 2 * oy
  int64_t channel_floats, row_floats, ur;
  int64_t c, kh;
  const float* w;  // this block's [c][kh][kw][kStemChannelBlock]
};

// One tap: acc[o][v] += w[o] * src[L v] (a function, not a lambda: through a lambda's captures
// GCC kept the accumulators in memory, 8-14% slower on AVX-512).
template <class S, int V>
__attribute__((always_inline)) inline void stem_tap(const float* src, const float* wk,
                                                    typename S::V (&acc)[StemTiling<S>::kChannels][V]) {
  constexpr int L = S::kLanes, C = StemTiling<S>::kChannels;
  typename S::V in[V];
#pragma GCC unroll 3
  for (int v = 0; v < V; ++v) in[v] = S::loadu(src + L * v);
#pragma GCC unroll 8
  for (int o = 0; o < C; ++o) {
    const typename S::V wv = S::broadcast(wk + o);
#pragma GCC unroll 3
    for (int v = 0; v < V; ++v) acc[o][v] = S::fmadd(wv, in[v], acc[o][v]);
  }
}

// acc[o][v] += sum over (c, i, j) of w[c][i][j][o0 + o] * input(ox0 + L v); KW > 0 fixed, else kw_rt.
template <class S, int KW, int V>
inline void stem_accumulate(const StemTileArgs& a, int64_t kw_rt, int64_t ox0, int o0,
                            typename S::V (&acc)[StemTiling<S>::kChannels][V]) {
  const int64_t kw = KW > 0 ? KW : kw_rt;
  const float* wk = a.w + o0;
  for (int64_t c = 0; c < a.c; ++c)
    for (int64_t i = 0; i < a.kh; ++i) {
      const float* even = a.phases + c * a.channel_floats + i * a.row_floats + ox0;
      const float* odd = even + a.ur;
      if constexpr (StemTiling<S>::kUnrollTaps) {
#pragma GCC unroll 7
        for (int64_t j = 0; j < kw; ++j, wk += kStemChannelBlock) stem_tap<S, V>(((j & 1) ? odd : even) + (j >> 1), wk, acc);
      } else {
#pragma GCC unroll 1
        for (int64_t j = 0; j < kw; ++j, wk += kStemChannelBlock) stem_tap<S, V>(((j & 1) ? odd : even) + (j >> 1), wk, acc);
      }
    }
}

template <class S>
struct StemStoreArgs {
  const float* bias;  // this block's first channel, or null
  int64_t channels;   // valid channels in the block
  typename S::V lo, hi;
  bool clamp;
  Activation act;
  float* y;       // this block's channel 0, output row oy
  int64_t plane;  // ho * wo
};

// `last`: how many lanes of the last vector to store (1-L). kAct: the activation as a template
// argument (activate_fixed), so the tile's vectors run it as one straight-line block. Never
// inlined: inlined into the band loop, GCC spills most of the accumulators inside the tap loop
// (AVX2: 2.2x slower; AVX-512: 12%).
template <class S, int KW, int V, int kAct>
__attribute__((noinline)) void stem_tile(const StemTileArgs& a, int64_t kw_rt, const StemStoreArgs<S>& s,
                                         int64_t ox0, int64_t last) {
  constexpr int L = S::kLanes, C = StemTiling<S>::kChannels;
  for (int o0 = 0; o0 < s.channels; o0 += C) {
    typename S::V acc[C][V];
#pragma GCC unroll 8
    for (int o = 0; o < C; ++o)
#pragma GCC unroll 3
      for (int v = 0; v < V; ++v) acc[o][v] = S::zero();
    stem_accumulate<S, KW, V>(a, kw_rt, ox0, o0, acc);
#pragma GCC unroll 8
    for (int o = 0; o < C; ++o) {
      if (o0 + o >= s.channels) break;
      const typename S::V b = s.bias ? S::set1(s.bias[o0 + o]) : S::zero();
      float* out = s.y + (o0 + o) * s.plane + ox0;
#pragma GCC unroll 3
      for (int v = 0; v < V; ++v) {
        typename S::V r = S::add(acc[o][v], b);
        if (s.clamp) r = S::min(s.hi, S::max(s.lo, r));
        r = activate_fixed<S, kAct>(s.act, r);
        if (v == V - 1 && last < L) S::store_first(out + L * v, r, last);
        else S::storeu(out + L * v, r);
      }
    }
  }
}

// One output row of one channel block: chunks of 3 vectors of columns, then the remainder.
template <class S, int KW, int kAct>
void stem_row(const StemTileArgs& a, int64_t kw_rt, const StemStoreArgs<S>& s, int64_t wo) {
  constexpr int L = S::kLanes, V = kStemChunkVectors;
  int64_t ox0 = 0;
  for (; ox0 + L * V <= wo; ox0 += L * V) stem_tile<S, KW, V, kAct>(a, kw_rt, s, ox0, L);
  const int64_t rest = wo - ox0;
  if (rest <= 0) return;
  const int64_t last = rest - (rest - 1) / L * L;
  if (rest > 2 * L) stem_tile<S, KW, 3, kAct>(a, kw_rt, s, ox0, last);
  else if (rest > L) stem_tile<S, KW, 2, kAct>(a, kw_rt, s, ox0, last);
  else stem_tile<S, KW, 1, kAct>(a, kw_rt, s, ox0, last);
}

// One row of the 3x3 / stride 2 / pad 1 max pool of `channels` conv planes held in `conv`
// (rows [r0, r0 + rows) of the conv output, row stride `ld`, channel stride `cs`): pooled row py of
// each channel into out (channel stride `plane`).
template <class S>
void stem_pool_row(const float* conv, int64_t r0, int64_t rows, int64_t ld, int64_t cs, int64_t channels,
                   int64_t wo, int64_t py, int64_t wp, float* out, int64_t plane) {
  constexpr int L = S::kLanes;
  const typename S::V ninf = S::set1(-std::numeric_limits<float>::infinity());
  const int64_t y0 = std::max<int64_t>(2 * py - 1, r0), y1 = std::min<int64_t>(2 * py + 2, r0 + rows);
  for (int64_t o = 0; o < channels; ++o)
    for (int64_t px0 = 0; px0 < wp; px0 += L) {
      typename S::V acc = ninf;
      const int64_t c0 = 2 * px0 - 1;  // conv column of tap 0 of output px0
      for (int64_t yy = y0; yy < y1; ++yy) {
        const float* row = conv + o * cs + (yy - r0) * ld;
        // Taps 0 and 1: the even and odd floats of 2L from c0; tap 2 of lane l is column c0 + 2 l + 2,
        // lane l + 1 of tap 0 (the last lane: the first float of the next 2L).
        typename S::V t0, t1;
        S::deinterleave(S::load_range(row, c0, wo, ninf), S::load_range(row, c0 + L, wo, ninf), t0, t1);
        const typename S::V t2 = S::shift_in(t0, S::load_range(row, c0 + 2 * L, wo, ninf));
        acc = S::max(acc, S::max(t0, S::max(t1, t2)));
      }
      S::store_first(out + o * plane + py * wp + px0, acc, wp - px0);
    }
}

template <class S>
void conv_stem_f32_simd(const StemConvGeom& g, const float* x, const float* packed_w, float* y,
                        const DepthwiseEpilogue& ep, const ParallelFor& parallel, StemMaxPool pool) {
  constexpr int64_t kCb = kStemChannelBlock, L = S::kLanes;
  const StemPhaseLayout l = stem_phase_layout(g, L);
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
  const int64_t ld = (g.wo + L - 1) / L * L;  // conv row stride in the pool's scratch
  const bool clamp = ep.lo > -std::numeric_limits<float>::infinity() || ep.hi < std::numeric_limits<float>::infinity();
  for (int64_t img = 0; img < g.n; ++img) {
    const float* xi = x + img * g.c * g.h * g.w;
    run_parallel(parallel, g.c * l.rows, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t c = t / l.rows, pr = t % l.rows;
        fill_phase_row<S>(g, l, xi + c * g.h * g.w, pr, phases + c * l.channel_floats() + pr * l.row_floats());
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
        StemTileArgs a{nullptr, l.channel_floats(), l.row_floats(), l.ur, g.c, g.kh, packed_w + b * taps * kCb};
        StemStoreArgs<S> s{ep.bias ? ep.bias + b * kCb : nullptr, channels, S::set1(ep.lo), S::set1(ep.hi),
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
          with_fixed_activation(ep.act, [&](auto act) {
            constexpr int kAct = decltype(act)::value;
            switch (g.kw) {
              case 3: stem_row<S, 3, kAct>(a, 3, s, g.wo); break;
              case 5: stem_row<S, 5, kAct>(a, 5, s, g.wo); break;
              case 7: stem_row<S, 7, kAct>(a, 7, s, g.wo); break;
              default: stem_row<S, 0, kAct>(a, g.kw, s, g.wo); break;
            }
          });
        }
        if (pool.on)
          for (int64_t py = y0; py < y1; ++py)
            stem_pool_row<S>(conv, oy0, oy1 - oy0, ld, (oy1 - oy0) * ld, channels, g.wo, py, wp,
                             y + (img * g.co + b * kCb) * hp * wp, hp * wp);
      }
    });
  }
}

}  // namespace
}  // namespace kiln::kernels
