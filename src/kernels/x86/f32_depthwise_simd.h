// The NCHW depthwise conv's per-plane and channel-blocked kernels (f32_depthwise.h), written once
// over simd.h's vector types and instantiated by f32_depthwise_avx2.cc (8 lanes) and
// f32_depthwise_avx512f.cc (16 lanes), which keep their own stride-2 kernels and dispatch.
// - per plane: the input plane is copied into a zero-padded scratch split into `sw` column phases
//   (phase p holds padded columns p, p+sw, ...), so every tap reads a contiguous, in-bounds run
//   for L consecutive outputs of a row; R rows x V vectors of outputs accumulate in registers
//   over all taps.
// - channel-blocked: per block of L channels of one image, the L input planes are transposed (LxL
//   in registers, over the flattened plane) into a zero-bordered scratch [hq][wp][L]; every tap of
//   every output is then one contiguous vector load + FMA with a [tap][L] weight vector, for any
//   stride, padding or dilation, with no per-row setup. The [ho*wo][L] result is transposed back
//   into the L output planes. Wins on small and medium planes, where the per-plane path's per-row
//   scratch fill and short rows dominate, and on strided convs. With fewer than 8 channel blocks
//   the output rows are split into parts too (parallelism).
// Both apply bias, clamp and activation in registers before the store.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/x86/activation_simd.h"
#include "kernels/x86/f32_depthwise.h"

namespace kiln::kernels {
namespace {

inline int64_t dw_round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

// The fused epilogue (clamp, then the activation) of a tile, see clamp_activate_all.
template <class S>
struct DwEpilogue {
  typename S::V lo = S::zero(), hi = S::zero();
  bool clamp = false;
  Activation act = Activation::kNone;
  DwEpilogue() = default;
  explicit DwEpilogue(const DepthwiseEpilogue& ep)
      : lo(S::set1(ep.lo)),
        hi(S::set1(ep.hi)),
        clamp(ep.lo > -std::numeric_limits<float>::infinity() || ep.hi < std::numeric_limits<float>::infinity()),
        act(ep.act) {}
  template <int N>
  __attribute__((always_inline)) inline void apply(typename S::V (&o)[N]) const {
    clamp_activate_all<S>(clamp, lo, hi, act, o);
  }
};

// 64-byte aligned float buffer reused by a thread across calls.
inline float* dw_thread_scratch(size_t floats) {
  thread_local std::vector<float> buf;
  if (buf.size() < floats + 16) buf.assign(floats + 16, 0.0f);
  auto p = reinterpret_cast<uintptr_t>(buf.data());
  return reinterpret_cast<float*>((p + 63) & ~uintptr_t(63));
}

// ---- Per-plane path -------------------------------------------------------------------------------

struct DwPlaneLayout {
  int64_t hq = 0;       // padded rows actually read
  int64_t wq = 0;       // columns per phase row (covers every vector load, tails included)
  int64_t phase = 0;    // floats per phase plane (hq * wq)
  int64_t row_len = 0;  // padded row buffer before the phase split
  std::vector<int64_t> tap_off;  // per tap (i, j): offset of output (0, 0)'s input in scratch
};

inline DwPlaneLayout make_dw_plane_layout(const DepthwiseGeom& g, int64_t lanes) {
  DwPlaneLayout l;
  l.hq = (g.ho - 1) * g.sh + (g.kh - 1) * g.dh + 1;
  l.wq = dw_round_up(g.wo, lanes) + (g.kw - 1) * g.dw / g.sw + 1;
  l.phase = l.hq * l.wq;
  l.row_len = dw_round_up(l.wq, lanes) * g.sw;
  for (int64_t i = 0; i < g.kh; ++i)
    for (int64_t j = 0; j < g.kw; ++j) {
      const int64_t col = j * g.dw;
      l.tap_off.push_back((col % g.sw) * l.phase + i * g.dh * l.wq + col / g.sw);
    }
  return l;
}

// Fills the phase-split padded copy of one input plane.
template <class S>
void fill_dw_plane_scratch(const DepthwiseGeom& g, const DwPlaneLayout& l, const float* xp, float* q, float* row) {
  constexpr int L = S::kLanes;
  for (int64_t yq = 0; yq < l.hq; ++yq) {
    const int64_t iy = yq - g.pt;
    if (iy < 0 || iy >= g.h) {
      for (int64_t p = 0; p < g.sw; ++p) std::memset(q + p * l.phase + yq * l.wq, 0, sizeof(float) * l.wq);
      continue;
    }
    const float* xr = xp + iy * g.w;
    // Padded row: columns [0, len) of the padded input, zeros outside the input.
    float* dst = g.sw == 1 ? q + yq * l.wq : row;
    const int64_t len = g.sw == 1 ? l.wq : l.row_len;
    const int64_t lead = std::min(g.pl, len);
    const int64_t body = std::max<int64_t>(0, std::min(g.w, len - g.pl));
    std::memset(dst, 0, sizeof(float) * lead);
    std::memcpy(dst + lead, xr, sizeof(float) * body);
    std::memset(dst + lead + body, 0, sizeof(float) * (len - lead - body));
    if (g.sw == 1) continue;
    float* q0 = q + yq * l.wq;
    if (g.sw == 2) {
      float* q1 = q0 + l.phase;
      int64_t xq = 0;
      for (; xq + L <= l.wq; xq += L) {
        typename S::V even, odd;
        S::deinterleave(S::loadu(row + 2 * xq), S::loadu(row + 2 * xq + L), even, odd);
        S::storeu(q0 + xq, even);
        S::storeu(q1 + xq, odd);
      }
      for (; xq < l.wq; ++xq) {
        q0[xq] = row[2 * xq];
        q1[xq] = row[2 * xq + 1];
      }
    } else {
      for (int64_t p = 0; p < g.sw; ++p)
        for (int64_t xq = 0; xq < l.wq; ++xq) q0[p * l.phase + xq] = row[xq * g.sw + p];
    }
  }
}

template <class S>
struct DwPlaneTile {
  const float* q;      // scratch of this plane
  const float* wp;     // kh*kw filter taps
  const int64_t* off;  // tap offsets
  int64_t ntaps;
  int64_t row_step;    // scratch floats between consecutive output rows (sh * wq)
  float* y;            // output plane
  int64_t wo;
  typename S::V bias;
  DwEpilogue<S> ep;
};

// R output rows x V vectors starting at (oy0, ox0); the final vector stores `last` lanes.
template <class S, int R, int V>
inline void dw_plane_tile(const DwPlaneTile<S>& a, int64_t oy0, int64_t ox0, int64_t last) {
  constexpr int L = S::kLanes;
  typename S::V acc[R][V];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[r][v] = a.bias;
  const float* base = a.q + oy0 * a.row_step + ox0;
  for (int64_t t = 0; t < a.ntaps; ++t) {
    const typename S::V wv = S::broadcast(a.wp + t);
    const float* src = base + a.off[t];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) acc[r][v] = S::fmadd(S::loadu(src + r * a.row_step + L * v), wv, acc[r][v]);
  }
  typename S::V o[R * V];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) o[r * V + v] = acc[r][v];
  a.ep.apply(o);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    float* dst = a.y + (oy0 + r) * a.wo + ox0;
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      if (v == V - 1) S::store_first(dst + L * v, o[r * V + v], last);
      else S::storeu(dst + L * v, o[r * V + v]);
    }
  }
}

// All rows of one column chunk of V vectors: blocks of R rows, then single rows.
template <class S, int R, int V>
void dw_plane_columns(const DwPlaneTile<S>& a, int64_t ho, int64_t ox0, int64_t last) {
  int64_t oy = 0;
  for (; oy + R <= ho; oy += R) dw_plane_tile<S, R, V>(a, oy, ox0, last);
  for (; oy < ho; ++oy) dw_plane_tile<S, 1, V>(a, oy, ox0, last);
}

// Chunks of 4 vectors, then one of the remaining 1-3; fewer vectors per row take more rows per
// tile, so that 6-8 independent accumulators hide the FMA latency.
template <class S>
void dw_plane(const DwPlaneTile<S>& a, int64_t ho) {
  constexpr int L = S::kLanes;
  const int64_t nvec = (a.wo + L - 1) / L;
  const int64_t tail = a.wo - (nvec - 1) * L;
  int64_t v0 = 0;
  for (; v0 + 4 <= nvec; v0 += 4) dw_plane_columns<S, 2, 4>(a, ho, v0 * L, v0 + 4 == nvec ? tail : L);
  switch (nvec - v0) {
    case 3: dw_plane_columns<S, 2, 3>(a, ho, v0 * L, tail); break;
    case 2: dw_plane_columns<S, 4, 2>(a, ho, v0 * L, tail); break;
    case 1: dw_plane_columns<S, 8, 1>(a, ho, v0 * L, tail); break;
    default: break;
  }
}

template <class S>
void depthwise_planes(const DepthwiseGeom& g, const float* x, const float* w, float* y, const DepthwiseEpilogue& ep,
                      const ParallelFor& parallel) {
  const DwPlaneLayout l = make_dw_plane_layout(g, S::kLanes);
  const DwEpilogue<S> e(ep);
  auto planes = [&](int64_t begin, int64_t end) {
    // The phase planes plus one padded row (for the phase split).
    float* q = dw_thread_scratch(static_cast<size_t>(g.sw * l.phase + l.row_len + S::kLanes));
    float* row = q + g.sw * l.phase;
    for (int64_t p = begin; p < end; ++p) {
      const int64_t ch = p % g.c;
      fill_dw_plane_scratch<S>(g, l, x + p * g.h * g.w, q, row);
      DwPlaneTile<S> a{q, w + ch * g.kh * g.kw, l.tap_off.data(), static_cast<int64_t>(l.tap_off.size()),
                       g.sh * l.wq, y + p * g.ho * g.wo, g.wo, S::set1(ep.bias ? ep.bias[ch] : 0.0f), e};
      dw_plane<S>(a, g.ho);
    }
  };
  run_parallel(parallel, g.n * g.c, planes);
}

// ---- Channel-blocked path -------------------------------------------------------------------------

// Whether a square filter's tile loads each input vector of a filter row once and feeds every
// output and tap that uses it ((V-1)*S + K loads per row instead of V*K): with 32 registers
// (AVX-512) they fit beside the accumulators; with 16 (AVX2) each tap loads its own.
template <class S>
struct DwTiling {
  static constexpr bool kReuseRowLoads = S::kLanes == 16;
};

// Transposes pixels [f_begin, f_end) of planes [0, nc) of xb (plane stride hw) into the scratch
// interior; dst[f] is the scratch offset of input pixel f (-1: not read by any output).
template <class S>
void fill_dw_blocked(const DepthwiseGeom& g, const DepthwiseBlockedLayout& l, const float* xb, int64_t nc, float* s,
                     int64_t f_begin, int64_t f_end) {
  constexpr int L = S::kLanes;
  const int64_t hw = g.h * g.w;
  const int32_t* dst = l.dst.data();
  for (int64_t f0 = f_begin; f0 < f_end; f0 += L) {
    const int64_t nv = std::min<int64_t>(L, f_end - f0);
    const typename S::Mask m = S::first(nv);
    typename S::V r[L];
#pragma GCC unroll 16
    for (int c = 0; c < L; ++c)
      r[c] = c >= nc ? S::zero() : nv == L ? S::loadu(xb + c * hw + f0) : S::load_masked(xb + c * hw + f0, m);
    S::transpose(r);
    if (nv == L && l.run[f0]) {
      // All L pixels in one row, inside the scratch.
      float* d = s + dst[f0];
#pragma GCC unroll 16
      for (int k = 0; k < L; ++k) S::storeu(d + L * k, r[k]);
      continue;
    }
    for (int64_t k = 0; k < nv; ++k)
      if (dst[f0 + k] >= 0) S::storeu(s + dst[f0 + k], r[k]);
  }
}

template <class S>
struct DwBlockedArgs {
  const float* s;      // input scratch
  const int64_t* off;  // tap offsets
  int64_t ntaps;
  const float* wt;     // [tap][L] weights
  int64_t step;        // scratch floats between horizontally adjacent outputs (sw * L)
  int64_t row;         // scratch floats per row (wp * L)
  typename S::V bias;
  DwEpilogue<S> ep;
};

template <class S, int V>
__attribute__((always_inline)) inline void dw_blocked_store(const DwBlockedArgs<S>& a, typename S::V (&acc)[V],
                                                            float* out) {
  a.ep.apply(acc);
#pragma GCC unroll 8
  for (int v = 0; v < V; ++v) S::storeu(out + S::kLanes * v, acc[v]);
}

// Square K x K filter, stride SW, dilation 1: the taps unrolled, offsets constant.
template <class S, int K, int SW>
struct DwSquareTile {
  template <int V>
  static inline void run(const DwBlockedArgs<S>& a, const float* src, float* out) {
    constexpr int L = S::kLanes, N = (V - 1) * SW + K;
    typename S::V acc[V];
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) acc[v] = a.bias;
#pragma GCC unroll 7
    for (int i = 0; i < K; ++i) {
      const float* p = src + i * a.row;
      if constexpr (DwTiling<S>::kReuseRowLoads) {
        typename S::V in[N];
#pragma GCC unroll 32
        for (int n = 0; n < N; ++n) in[n] = S::loadu(p + L * n);
#pragma GCC unroll 7
        for (int j = 0; j < K; ++j) {
          const typename S::V wv = S::loadu(a.wt + L * (i * K + j));
#pragma GCC unroll 8
          for (int v = 0; v < V; ++v) acc[v] = S::fmadd(in[v * SW + j], wv, acc[v]);
        }
      } else {
#pragma GCC unroll 7
        for (int j = 0; j < K; ++j) {
          const typename S::V wv = S::load(a.wt + L * (i * K + j));
#pragma GCC unroll 8
          for (int v = 0; v < V; ++v) acc[v] = S::fmadd(S::loadu(p + L * (v * SW + j)), wv, acc[v]);
        }
      }
    }
    dw_blocked_store<S, V>(a, acc, out);
  }
};

// Any filter: taps through the offset table.
template <class S>
struct DwAnyTile {
  template <int V>
  static inline void run(const DwBlockedArgs<S>& a, const float* src, float* out) {
    typename S::V acc[V];
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) acc[v] = a.bias;
    for (int64_t t = 0; t < a.ntaps; ++t) {
      const typename S::V wv = S::load(a.wt + S::kLanes * t);
      const float* p = src + a.off[t];
#pragma GCC unroll 8
      for (int v = 0; v < V; ++v) acc[v] = S::fmadd(S::loadu(p + v * a.step), wv, acc[v]);
    }
    dw_blocked_store<S, V>(a, acc, out);
  }
};

// One output row: tiles of 8 outputs, then one tile of the remaining 1-7.
template <class S, class Tile>
void dw_blocked_row(const DwBlockedArgs<S>& a, const float* src, int64_t wo, float* out) {
  constexpr int L = S::kLanes;
  int64_t ox = 0;
  for (; ox + 8 <= wo; ox += 8) Tile::template run<8>(a, src + ox * a.step, out + ox * L);
  const float* p = src + ox * a.step;
  float* o = out + ox * L;
  switch (wo - ox) {
    case 7: Tile::template run<7>(a, p, o); break;
    case 6: Tile::template run<6>(a, p, o); break;
    case 5: Tile::template run<5>(a, p, o); break;
    case 4: Tile::template run<4>(a, p, o); break;
    case 3: Tile::template run<3>(a, p, o); break;
    case 2: Tile::template run<2>(a, p, o); break;
    case 1: Tile::template run<1>(a, p, o); break;
    default: break;
  }
}

// Not inlined: inlined into the driver's task loop (all five tile kinds), GCC spills the tiles'
// inputs and accumulators to the stack (AVX-512 7x7 planes: 20% slower).
template <class S, class Tile>
__attribute__((noinline)) void dw_blocked_rows(const DwBlockedArgs<S>& a, int64_t oy0, int64_t oy1, int64_t wo, int64_t sh, float* out) {
  for (int64_t oy = oy0; oy < oy1; ++oy)
    dw_blocked_row<S, Tile>(a, a.s + oy * sh * a.row, wo, out + oy * wo * S::kLanes);
}

// Transposes out[f_begin, f_end)[L] back into planes [0, nc) of yb (plane stride howo).
template <class S>
void store_dw_blocked(const float* out, int64_t f_begin, int64_t f_end, int64_t howo, int64_t nc, float* yb) {
  constexpr int L = S::kLanes;
  for (int64_t f0 = f_begin; f0 < f_end; f0 += L) {
    const int64_t nv = std::min<int64_t>(L, f_end - f0);
    typename S::V r[L];
#pragma GCC unroll 16
    for (int k = 0; k < L; ++k) r[k] = S::loadu(out + (f0 + k) * L);  // rows past f_end: slack
    S::transpose(r);
    // Plain stores where possible: masked stores to lines not in cache are much slower.
    if (nv == L && nc == L) {
#pragma GCC unroll 16
      for (int c = 0; c < L; ++c) S::storeu(yb + c * howo + f0, r[c]);
    } else {
      for (int64_t c = 0; c < nc; ++c) S::store_first(yb + c * howo + f0, r[c], nv);
    }
  }
}

// How the blocked driver reads and writes one tensor layout: NCHW (planes transposed into and out
// of the [pixel][L] scratch) or NHWC (a pixel's L channels are one vector already).
template <class S>
struct DwNchwIo {
  // wt[t][c] for the block's nc channels from the [c][kh * kw] weight (zero past nc), L taps at a
  // time through an in-register transpose: a scalar gather costs as much as a 7x7 plane's conv.
  static void weights(const DepthwiseGeom& g, const float* w, int64_t c0, int64_t nc, float* wt) {
    constexpr int L = S::kLanes;
    const int64_t ntaps = g.kh * g.kw;
    for (int64_t t0 = 0; t0 < ntaps; t0 += L) {
      const int64_t nt = std::min<int64_t>(L, ntaps - t0);
      typename S::V r[L];
#pragma GCC unroll 16
      for (int c = 0; c < L; ++c) r[c] = c < nc ? S::load_first(w + (c0 + c) * ntaps + t0, nt) : S::zero();
      S::transpose(r);
      for (int64_t t = 0; t < nt; ++t) S::store(wt + (t0 + t) * L, r[t]);
    }
  }
  static void fill(const DepthwiseGeom& g, const DepthwiseBlockedLayout& l, const float* x, int64_t img, int64_t c0,
                   int64_t nc, float* s, int64_t f_begin, int64_t f_end) {
    fill_dw_blocked<S>(g, l, x + (img * g.c + c0) * g.h * g.w, nc, s, f_begin, f_end);
  }
  static void store(const DepthwiseGeom& g, const float* out, int64_t img, int64_t c0, int64_t nc, float* y,
                    int64_t f_begin, int64_t f_end) {
    store_dw_blocked<S>(out, f_begin, f_end, g.ho * g.wo, nc, y + (img * g.c + c0) * g.ho * g.wo);
  }
};

template <class S>
struct DwNhwcIo {
  // wt[t][c] from the [kh * kw][c] taps.
  static void weights(const DepthwiseGeom& g, const float* taps, int64_t c0, int64_t nc, float* wt) {
    const typename S::Mask m = S::first(nc);
    for (int64_t t = 0; t < g.kh * g.kw; ++t) S::store(wt + t * S::kLanes, S::load_masked(taps + t * g.c + c0, m));
  }
  static void fill(const DepthwiseGeom& g, const DepthwiseBlockedLayout& l, const float* x, int64_t img, int64_t c0,
                   int64_t nc, float* s, int64_t f_begin, int64_t f_end) {
    const float* xb = x + img * g.h * g.w * g.c + c0;
    const int32_t* dst = l.dst.data();
    if (nc == S::kLanes) {
      for (int64_t f = f_begin; f < f_end; ++f)
        if (dst[f] >= 0) S::storeu(s + dst[f], S::loadu(xb + f * g.c));
    } else {
      const typename S::Mask m = S::first(nc);
      for (int64_t f = f_begin; f < f_end; ++f)
        if (dst[f] >= 0) S::storeu(s + dst[f], S::load_masked(xb + f * g.c, m));
    }
  }
  static void store(const DepthwiseGeom& g, const float* out, int64_t img, int64_t c0, int64_t nc, float* y,
                    int64_t f_begin, int64_t f_end) {
    float* yb = y + img * g.ho * g.wo * g.c + c0;
    if (nc == S::kLanes) {
      for (int64_t f = f_begin; f < f_end; ++f) S::storeu(yb + f * g.c, S::load(out + f * S::kLanes));
    } else {
      const typename S::Mask m = S::first(nc);
      for (int64_t f = f_begin; f < f_end; ++f) S::store_masked(yb + f * g.c, m, S::load(out + f * S::kLanes));
    }
  }
};

// Scratch offsets are int32 (and the scratch must stay modest).
inline bool dw_blocked_fits(const DepthwiseGeom& g, int64_t lanes) {
  return (g.h + g.pt + (g.kh - 1) * g.dh) * (g.w + g.pl + (g.kw - 1) * g.dw) * lanes <= (int64_t(1) << 28);
}

// The channel-blocked driver: per task (image, L-channel block, band of output rows) the block's
// input into the scratch, the tiles into out[pixel][L] (epilogue applied), out into the output.
template <class S, class Io>
void depthwise_blocked(const DepthwiseGeom& g, const float* x, const float* w, float* y, const DepthwiseEpilogue& ep,
                       const ParallelFor& parallel) {
  constexpr int L = S::kLanes;
  const DepthwiseBlockedLayout& l = depthwise_blocked_layout(g, L);
  const DwEpilogue<S> e(ep);
  const int64_t blocks = (g.c + L - 1) / L, ntaps = g.kh * g.kw;
  // Few channel blocks: split the output rows too, so that two threads (or more) get work.
  const int64_t parts = g.n * blocks >= 8 ? 1 : std::min(g.ho, (8 + g.n * blocks - 1) / (g.n * blocks));
  const bool square = g.kh == g.kw && g.dh == 1 && g.dw == 1 && g.sh == g.sw;
  auto run = [&](int64_t begin, int64_t end) {
    float* s = dw_thread_scratch(static_cast<size_t>(l.in_floats + l.out_floats + ntaps * L));
    float* out = s + l.in_floats;
    float* wt = out + l.out_floats;  // vector-aligned: in_floats and out_floats are multiples of L
    depthwise_zero_border(g, l, L, s);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t part = task % parts, img = task / parts / blocks, c0 = (task / parts % blocks) * L;
      const int64_t nc = std::min<int64_t>(L, g.c - c0);
      // Output rows [oy0, oy1) of this part and the input rows [iy0, iy1) they read.
      const int64_t oy0 = part * g.ho / parts, oy1 = (part + 1) * g.ho / parts;
      const int64_t iy0 = std::clamp<int64_t>(oy0 * g.sh - g.pt, 0, g.h);
      const int64_t iy1 = std::clamp<int64_t>((oy1 - 1) * g.sh + (g.kh - 1) * g.dh - g.pt + 1, iy0, g.h);
      Io::weights(g, w, c0, nc, wt);
      Io::fill(g, l, x, img, c0, nc, s, iy0 * g.w, iy1 * g.w);
      const DwBlockedArgs<S> a{s,      l.tap_off.data(), ntaps,
                               wt,     g.sw * L,         l.wp * L,
                               ep.bias ? S::load_masked(ep.bias + c0, S::first(nc)) : S::zero(), e};
      if (square && g.kh == 3 && g.sw == 1) dw_blocked_rows<S, DwSquareTile<S, 3, 1>>(a, oy0, oy1, g.wo, g.sh, out);
      else if (square && g.kh == 3 && g.sw == 2) dw_blocked_rows<S, DwSquareTile<S, 3, 2>>(a, oy0, oy1, g.wo, g.sh, out);
      else if (square && g.kh == 5 && g.sw == 1) dw_blocked_rows<S, DwSquareTile<S, 5, 1>>(a, oy0, oy1, g.wo, g.sh, out);
      else if (square && g.kh == 5 && g.sw == 2) dw_blocked_rows<S, DwSquareTile<S, 5, 2>>(a, oy0, oy1, g.wo, g.sh, out);
      else dw_blocked_rows<S, DwAnyTile<S>>(a, oy0, oy1, g.wo, g.sh, out);
      Io::store(g, out, img, c0, nc, y, oy0 * g.wo, oy1 * g.wo);
    }
  };
  run_parallel(parallel, g.n * blocks * parts, run);
}

// ---- Stride-2 plane kernels (their row functions per ISA) ------------------------------------------

// What a row of one plane needs: input and output planes, the filter, the epilogue.
template <class S>
struct DwS2Plane {
  const float* x;  // input plane
  const float* w;  // kh x kw taps
  float* y;        // output plane
  int64_t h, wi, kh, pt, pl, wo;
  typename S::V bias;
  DwEpilogue<S> ep;
};

// Every plane (image, channel) in parallel, each output row through every chunk's row function:
// chunk.row(plane, chunk, oy).
template <class S, class Chunk>
void depthwise_s2_planes(const DepthwiseGeom& g, const float* x, const float* w, float* y, const DepthwiseEpilogue& ep,
                         const ParallelFor& parallel, const std::vector<Chunk>& chunks) {
  const DwEpilogue<S> e(ep);
  auto planes = [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const int64_t ch = p % g.c;
      const DwS2Plane<S> pl{x + p * g.h * g.w, w + ch * g.kh * g.kw,          y + p * g.ho * g.wo, g.h, g.w, g.kh,
                            g.pt,              g.pl,                          g.wo,
                            S::set1(ep.bias ? ep.bias[ch] : 0.0f),           e};
      for (int64_t oy = 0; oy < g.ho; ++oy)
        for (const Chunk& c : chunks) c.row(pl, c, oy);
    }
  };
  run_parallel(parallel, g.n * g.c, planes);
}

}  // namespace
}  // namespace kiln::kernels
