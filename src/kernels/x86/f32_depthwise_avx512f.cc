// Depthwise conv for AVX-512F (compiled with -mavx512f -mavx512vl -mfma; called only when the
// CPU supports them). Two kernels, picked by depthwise_blocked_preferred():
// - per plane (large stride-1 planes): copy the input plane into a zero-padded scratch split into
//   `sw` column phases (phase p holds padded columns p, p+sw, ...), so every filter tap reads a
//   contiguous, in-bounds run for 16 consecutive outputs of a row; R rows x V vectors of outputs
//   accumulate in registers over all taps; bias + clamp in the store, the activation after.
// - channel-blocked (small planes, strides > 1): 16 channels in the vector lanes, see below.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/x86/f32_depthwise.h"
#include "kernels/x86/lane_mask.h"
#include "kernels/x86/transpose16.h"

namespace kiln::kernels {
namespace {

int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

// Scratch layout shared by all planes of one call.
struct Layout {
  int64_t hq = 0;      // padded rows actually read
  int64_t wq = 0;      // columns per phase row (covers every vector load, tails included)
  int64_t phase = 0;   // floats per phase plane (hq * wq)
  int64_t row_len = 0; // padded row buffer before the phase split
  std::vector<int64_t> tap_off;  // per tap (i, j): offset of output (0, 0)'s input in scratch
};

Layout make_layout(const DepthwiseGeom& g) {
  Layout l;
  l.hq = (g.ho - 1) * g.sh + (g.kh - 1) * g.dh + 1;
  l.wq = round_up(g.wo, 16) + (g.kw - 1) * g.dw / g.sw + 1;
  l.phase = l.hq * l.wq;
  l.row_len = round_up(l.wq * g.sw, 32);
  for (int64_t i = 0; i < g.kh; ++i)
    for (int64_t j = 0; j < g.kw; ++j) {
      const int64_t col = j * g.dw;
      l.tap_off.push_back((col % g.sw) * l.phase + i * g.dh * l.wq + col / g.sw);
    }
  return l;
}

// Fills the phase-split padded copy of one input plane.
void fill_scratch(const DepthwiseGeom& g, const Layout& l, const float* xp, float* q, float* row) {
  for (int64_t yq = 0; yq < l.hq; ++yq) {
    const int64_t iy = yq - g.pt;
    if (iy < 0 || iy >= g.h) {
      for (int64_t p = 0; p < g.sw; ++p) std::memset(q + p * l.phase + yq * l.wq, 0, sizeof(float) * l.wq);
      continue;
    }
    const float* xr = xp + iy * g.w;
    // Padded row: columns [0, row_len) of the padded input, zeros outside the input.
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
      const __m512i even = even_lanes(), odd = odd_lanes();
      float* q1 = q0 + l.phase;
      int64_t xq = 0;
      for (; xq + 16 <= l.wq; xq += 16) {
        const __m512 a = _mm512_loadu_ps(row + 2 * xq), b = _mm512_loadu_ps(row + 2 * xq + 16);
        _mm512_storeu_ps(q0 + xq, _mm512_permutex2var_ps(a, even, b));
        _mm512_storeu_ps(q1 + xq, _mm512_permutex2var_ps(a, odd, b));
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

struct TileArgs {
  const float* q;      // scratch of this plane
  const float* wp;     // kh*kw filter taps
  const int64_t* off;  // tap offsets
  int64_t ntaps;
  int64_t row_step;    // scratch floats between consecutive output rows (sh * wq)
  float* y;            // output plane
  int64_t wo;
  __m512 bias, lo, hi;
  bool clamp;
};

// R output rows x V vectors starting at (oy0, ox0); `last` masks the final vector's store.
template <int R, int V>
inline void tile(const TileArgs& a, int64_t oy0, int64_t ox0, __mmask16 last) {
  __m512 acc[R][V];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[r][v] = a.bias;
  const float* base = a.q + oy0 * a.row_step + ox0;
  for (int64_t t = 0; t < a.ntaps; ++t) {
    const __m512 wv = _mm512_set1_ps(a.wp[t]);
    const float* src = base + a.off[t];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v)
        acc[r][v] = _mm512_fmadd_ps(_mm512_loadu_ps(src + r * a.row_step + 16 * v), wv, acc[r][v]);
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    float* dst = a.y + (oy0 + r) * a.wo + ox0;
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      __m512 o = acc[r][v];
      // max(lo, o) / min(hi, o) return o when o is NaN, so NaN propagates like the reference.
      // Full-mask forms: GCC 12 warns (falsely) that plain _mm512_min/max_ps read an
      // uninitialized passthrough.
      if (a.clamp) o = _mm512_maskz_min_ps(__mmask16(0xFFFF), a.hi, _mm512_maskz_max_ps(__mmask16(0xFFFF), a.lo, o));
      if (v == V - 1) _mm512_mask_storeu_ps(dst + 16 * v, last, o);
      else _mm512_storeu_ps(dst + 16 * v, o);
    }
  }
}

// All rows of one column chunk of V vectors: blocks of R rows, then single rows.
template <int R, int V>
void column_chunk(const TileArgs& a, int64_t ho, int64_t ox0, __mmask16 last) {
  int64_t oy = 0;
  for (; oy + R <= ho; oy += R) tile<R, V>(a, oy, ox0, last);
  for (; oy < ho; ++oy) tile<1, V>(a, oy, ox0, last);
}

void plane(const TileArgs& a, int64_t ho) {
  const int64_t nvec = (a.wo + 15) / 16;
  const int64_t rem = a.wo - (nvec - 1) * 16;
  const __mmask16 tail = F32x16::first(rem);
  int64_t v0 = 0;
  // Four-vector chunks, then one chunk of the remaining 1-3 vectors; fewer vectors per row
  // take more rows per tile so that 6-8 independent accumulators hide the FMA latency.
  for (; v0 + 4 <= nvec; v0 += 4) column_chunk<2, 4>(a, ho, v0 * 16, v0 + 4 == nvec ? tail : 0xFFFF);
  switch (nvec - v0) {
    case 3: column_chunk<2, 3>(a, ho, v0 * 16, tail); break;
    case 2: column_chunk<4, 2>(a, ho, v0 * 16, tail); break;
    case 1: column_chunk<8, 1>(a, ho, v0 * 16, tail); break;
    default: break;
  }
}

// ---- Channel-blocked path: 16 channels in the vector lanes -------------------------------------
// Per block of 16 channels of one image, the 16 input planes are transposed (16x16 in registers,
// over the flattened plane) into a zero-bordered scratch [hq][wp][16]; every tap of every output is
// then one full contiguous vector load + FMA with a [tap][16] weight vector, for any stride,
// padding or dilation, with no per-row setup. The [ho*wo][16] result (bias, clamp, activation
// applied) is transposed back into the 16 NCHW output planes. Wins on small and medium planes,
// where the per-plane path's per-row scratch fill and short rows dominate, and on strided convs.
// With fewer than 8 channel blocks the output rows are split into parts too (parallelism).

// Transposes pixels [f_begin, f_end) of planes [0, nc) of xb (plane stride hw) into the scratch
// interior; dst[f] is the scratch offset of input pixel f (-1: not read by any output).
void fill_blocked(const DepthwiseGeom& g, const DepthwiseBlockedLayout& l, const float* xb, int64_t nc, float* s,
                  int64_t f_begin, int64_t f_end) {
  const int64_t hw = g.h * g.w;
  const int32_t* dst = l.dst.data();
  for (int64_t f0 = f_begin; f0 < f_end; f0 += 16) {
    const int64_t nv = std::min<int64_t>(16, f_end - f0);
    const __mmask16 m = F32x16::first(nv);
    __m512 r[16];
    load_transposed16(xb + f0, hw, nc, m, r);
    if (nv == 16 && l.run[f0]) {
      // All 16 pixels in one row, inside the scratch.
      float* d = s + dst[f0];
#pragma GCC unroll 16
      for (int k = 0; k < 16; ++k) _mm512_storeu_ps(d + 16 * k, r[k]);
      continue;
    }
    for (int64_t k = 0; k < nv; ++k)
      if (dst[f0 + k] >= 0) _mm512_storeu_ps(s + dst[f0 + k], r[k]);
  }
}

struct BlockedArgs {
  const float* s;       // input scratch
  const int64_t* off;   // tap offsets
  int64_t ntaps;
  const float* wt;      // [tap][16] weights
  int64_t step;         // scratch floats between horizontally adjacent outputs (sw * 16)
  int64_t row;          // scratch floats per row (wp * 16)
  __m512 bias, lo, hi;
  bool clamp;
};

// V consecutive outputs of one row, 16 channels each, into out[V][16].
template <int V>
inline void blocked_tile(const BlockedArgs& a, const float* src, float* out) {
  __m512 acc[V];
#pragma GCC unroll 8
  for (int v = 0; v < V; ++v) acc[v] = a.bias;
  for (int64_t t = 0; t < a.ntaps; ++t) {
    const __m512 wv = _mm512_loadu_ps(a.wt + 16 * t);
    const float* p = src + a.off[t];
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) acc[v] = _mm512_fmadd_ps(_mm512_loadu_ps(p + v * a.step), wv, acc[v]);
  }
#pragma GCC unroll 8
  for (int v = 0; v < V; ++v) {
    __m512 o = acc[v];
    if (a.clamp) o = _mm512_maskz_min_ps(kAll16, a.hi, _mm512_maskz_max_ps(kAll16, a.lo, o));
    _mm512_storeu_ps(out + 16 * v, o);
  }
}

// Square K x K filter, stride S, dilation 1: each input vector of a filter row is loaded once and
// feeds every output and tap that uses it ((V-1)*S + K loads per row instead of V*K).
template <int K, int S>
struct SquareTile {
  template <int V>
  static inline void run(const BlockedArgs& a, const float* src, float* out) {
    constexpr int N = (V - 1) * S + K;
    __m512 acc[V];
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) acc[v] = a.bias;
#pragma GCC unroll 5
    for (int i = 0; i < K; ++i) {
      const float* p = src + i * a.row;
      __m512 in[N];
#pragma GCC unroll 32
      for (int n = 0; n < N; ++n) in[n] = _mm512_loadu_ps(p + 16 * n);
#pragma GCC unroll 5
      for (int j = 0; j < K; ++j) {
        const __m512 wv = _mm512_loadu_ps(a.wt + 16 * (i * K + j));
#pragma GCC unroll 8
        for (int v = 0; v < V; ++v) acc[v] = _mm512_fmadd_ps(in[v * S + j], wv, acc[v]);
      }
    }
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) {
      __m512 o = acc[v];
      if (a.clamp) o = _mm512_maskz_min_ps(kAll16, a.hi, _mm512_maskz_max_ps(kAll16, a.lo, o));
      _mm512_storeu_ps(out + 16 * v, o);
    }
  }
};

// Any filter: taps through the offset table.
struct AnyTile {
  template <int V>
  static inline void run(const BlockedArgs& a, const float* src, float* out) { blocked_tile<V>(a, src, out); }
};

// One output row: tiles of 8 outputs, then one tile of the remaining 1-7.
template <class Tile>
void blocked_row(const BlockedArgs& a, const float* src, int64_t wo, float* out) {
  int64_t ox = 0;
  for (; ox + 8 <= wo; ox += 8) Tile::template run<8>(a, src + ox * a.step, out + ox * 16);
  const float* p = src + ox * a.step;
  float* o = out + ox * 16;
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

template <class Tile>
void blocked_rows(const BlockedArgs& a, int64_t oy0, int64_t oy1, int64_t wo, int64_t sh, float* out) {
  for (int64_t oy = oy0; oy < oy1; ++oy) blocked_row<Tile>(a, a.s + oy * sh * a.row, wo, out + oy * wo * 16);
}

// Transposes out[f_begin, f_end)[16] back into planes [0, nc) of yb (plane stride howo).
void store_blocked(const float* out, int64_t f_begin, int64_t f_end, int64_t howo, int64_t nc, float* yb) {
  for (int64_t f0 = f_begin; f0 < f_end; f0 += 16) {
    const int64_t nv = std::min<int64_t>(16, f_end - f0);
    const __mmask16 m = F32x16::first(nv);
    __m512 r[16];
#pragma GCC unroll 16
    for (int k = 0; k < 16; ++k) r[k] = _mm512_loadu_ps(out + (f0 + k) * 16);  // rows past f_end: slack
    transpose16(r);
    // Plain stores where possible: masked stores to lines not in cache are much slower.
    if (nv == 16 && nc == 16) {
#pragma GCC unroll 16
      for (int c = 0; c < 16; ++c) _mm512_storeu_ps(yb + c * howo + f0, r[c]);
    } else {
      for (int64_t c = 0; c < nc; ++c) _mm512_mask_storeu_ps(yb + c * howo + f0, m, r[c]);
    }
  }
}

// wt[t][c] = w[c][t] for the block's nc channels (zero for the rest), 16 taps at a time.
void repack_weights(const float* w, int64_t ntaps, int64_t nc, float* wt) {
  for (int64_t t0 = 0; t0 < ntaps; t0 += 16) {
    const int64_t nt = std::min<int64_t>(16, ntaps - t0);
    const __mmask16 m = F32x16::first(nt);
    __m512 r[16];
    load_transposed16(w + t0, ntaps, nc, m, r);
    for (int64_t t = 0; t < nt; ++t) _mm512_storeu_ps(wt + (t0 + t) * 16, r[t]);
  }
}

// 64-byte aligned float buffer reused by a thread across calls.
float* thread_scratch(size_t floats) {
  thread_local std::vector<float> buf;
  if (buf.size() < floats + 16) buf.assign(floats + 16, 0.0f);
  auto p = reinterpret_cast<uintptr_t>(buf.data());
  return reinterpret_cast<float*>((p + 63) & ~uintptr_t(63));
}

}  // namespace

void depthwise_conv2d_f32_avx512f_blocked(const DepthwiseGeom& g, const float* x, const float* w, float* y,
                                          const DepthwiseEpilogue& ep, const ParallelFor& parallel) {
  // Scratch offsets are int32 (and the scratch must stay modest): huge planes go per plane.
  if ((g.h + g.pt + (g.kh - 1) * g.dh) * (g.w + g.pl + (g.kw - 1) * g.dw) * 16 > (int64_t(1) << 28))
    return depthwise_conv2d_f32_avx512f_planes(g, x, w, y, ep, parallel);
  const DepthwiseBlockedLayout& l = depthwise_blocked_layout(g, 16);
  const bool clamp = ep.lo > -std::numeric_limits<float>::infinity() || ep.hi < std::numeric_limits<float>::infinity();
  const int64_t blocks = (g.c + 15) / 16, ntaps = g.kh * g.kw;
  // Few channel blocks: split the output rows too, so that two threads (or more) get work.
  const int64_t parts = g.n * blocks >= 8 ? 1 : std::min(g.ho, (8 + g.n * blocks - 1) / (g.n * blocks));
  auto run = [&](int64_t begin, int64_t end) {
    float* s = thread_scratch(static_cast<size_t>(l.in_floats + l.out_floats + ntaps * 16));
    float* out = s + l.in_floats;
    float* wt = out + l.out_floats;
    depthwise_zero_border(g, l, 16, s);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t part = task % parts, img = task / parts / blocks, c0 = (task / parts % blocks) * 16;
      const int64_t nc = std::min<int64_t>(16, g.c - c0);
      // Output rows [oy0, oy1) of this part and the input rows [iy0, iy1) they read.
      const int64_t oy0 = part * g.ho / parts, oy1 = (part + 1) * g.ho / parts;
      const int64_t iy0 = std::clamp<int64_t>(oy0 * g.sh - g.pt, 0, g.h);
      const int64_t iy1 = std::clamp<int64_t>((oy1 - 1) * g.sh + (g.kh - 1) * g.dh - g.pt + 1, iy0, g.h);
      const __mmask16 cm = F32x16::first(nc);
      repack_weights(w + c0 * ntaps, ntaps, nc, wt);
      fill_blocked(g, l, x + (img * g.c + c0) * g.h * g.w, nc, s, iy0 * g.w, iy1 * g.w);
      BlockedArgs a;
      a.s = s;
      a.off = l.tap_off.data();
      a.ntaps = ntaps;
      a.wt = wt;
      a.step = g.sw * 16;
      a.bias = ep.bias ? _mm512_maskz_loadu_ps(cm, ep.bias + c0) : _mm512_setzero_ps();
      a.lo = _mm512_set1_ps(ep.lo);
      a.hi = _mm512_set1_ps(ep.hi);
      a.clamp = clamp;
      a.row = l.wp * 16;
      const bool square = g.kh == g.kw && g.dh == 1 && g.dw == 1 && g.sh == g.sw;
      if (square && g.kh == 3 && g.sw == 1) blocked_rows<SquareTile<3, 1>>(a, oy0, oy1, g.wo, g.sh, out);
      else if (square && g.kh == 3 && g.sw == 2) blocked_rows<SquareTile<3, 2>>(a, oy0, oy1, g.wo, g.sh, out);
      else if (square && g.kh == 5 && g.sw == 1) blocked_rows<SquareTile<5, 1>>(a, oy0, oy1, g.wo, g.sh, out);
      else if (square && g.kh == 5 && g.sw == 2) blocked_rows<SquareTile<5, 2>>(a, oy0, oy1, g.wo, g.sh, out);
      else blocked_rows<AnyTile>(a, oy0, oy1, g.wo, g.sh, out);
      if (ep.act != Activation::kNone) apply_activation_inplace(ep.act, out + oy0 * g.wo * 16, (oy1 - oy0) * g.wo * 16);
      store_blocked(out, oy0 * g.wo, oy1 * g.wo, g.ho * g.wo, nc, y + (img * g.c + c0) * g.ho * g.wo);
    }
  };
  const int64_t n = g.n * blocks * parts;
  run_parallel(parallel, n, run);
}

// ---- Stride-2 path: per plane, straight from the input ---------------------------------------
// 16 outputs of a row need inputs 2*ox + j - pl: for an even tap offset the even lanes of two
// vectors loaded there, for the odd tap after it the odd lanes of the same two vectors (one
// permute each); loads are masked to the row, so padding costs nothing and no scratch copy or
// transpose is made.

namespace {

// What a row chunk of one plane needs: input and output planes, the filter, the epilogue.
struct S2Plane {
  const float* x;  // input plane
  const float* w;  // kh x kw taps
  float* y;        // output plane
  int64_t h, wi, kh, pt, pl, wo;
  __m512 bias, lo, hi;
  bool clamp;
};

// A chunk of up to 4 output vectors of every row: its columns, the masks of the two input
// vectors per vector and even tap column j (at 2 * ox + j - pl; lanes outside the row read as
// zero; they depend on the columns only, so they are made once per call), and its row function.
constexpr int kS2MaxTaps = 7;
struct S2Chunk;
using S2RowFn = void (*)(const S2Plane& p, const S2Chunk& c, int64_t oy);
struct S2Chunk {
  int64_t ox0 = 0;
  __mmask16 last = 0;  // the last vector's store mask
  __mmask16 m0[4][(kS2MaxTaps + 1) / 2] = {}, m1[4][(kS2MaxTaps + 1) / 2] = {};
  S2RowFn row = nullptr;
};

// One output row of chunk c: V vectors of 16 outputs, KW taps per filter row, bias and clamp in
// the store.
template <int V, int KW>
void s2_row(const S2Plane& p, const S2Chunk& c, int64_t oy) {
  const __m512i even = even_lanes(), odd = odd_lanes();
  __m512 acc[V];
#pragma GCC unroll 4
  for (int v = 0; v < V; ++v) acc[v] = p.bias;
  for (int64_t i = 0; i < p.kh; ++i) {
    const int64_t iy = 2 * oy + i - p.pt;
    if (iy < 0 || iy >= p.h) continue;
    const float* row = p.x + iy * p.wi + 2 * c.ox0 - p.pl;
#pragma GCC unroll 4
    for (int j = 0; j < KW; j += 2) {
      const __m512 w0 = _mm512_set1_ps(p.w[i * KW + j]);
      const __m512 w1 = _mm512_set1_ps(j + 1 < KW ? p.w[i * KW + j + 1] : 0.0f);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) {
        const float* src = row + 32 * v + j;
        const __m512 a = _mm512_maskz_loadu_ps(c.m0[v][j / 2], src);
        const __m512 b = _mm512_maskz_loadu_ps(c.m1[v][j / 2], src + 16);
        acc[v] = _mm512_fmadd_ps(_mm512_permutex2var_ps(a, even, b), w0, acc[v]);
        if (j + 1 < KW) acc[v] = _mm512_fmadd_ps(_mm512_permutex2var_ps(a, odd, b), w1, acc[v]);
      }
    }
  }
  float* dst = p.y + oy * p.wo + c.ox0;
#pragma GCC unroll 4
  for (int v = 0; v < V; ++v) {
    __m512 o = acc[v];
    if (p.clamp) o = _mm512_maskz_min_ps(kAll16, p.hi, _mm512_maskz_max_ps(kAll16, p.lo, o));
    _mm512_mask_storeu_ps(dst + 16 * v, v == V - 1 ? c.last : kAll16, o);
  }
}

// s2_row for nv vectors (1-4) and kw taps (3, 5 or 7).
S2RowFn s2_row_fn(int nv, int64_t kw) {
  static const S2RowFn table[4][3] = {{s2_row<1, 3>, s2_row<1, 5>, s2_row<1, 7>},
                                      {s2_row<2, 3>, s2_row<2, 5>, s2_row<2, 7>},
                                      {s2_row<3, 3>, s2_row<3, 5>, s2_row<3, 7>},
                                      {s2_row<4, 3>, s2_row<4, 5>, s2_row<4, 7>}};
  return table[nv - 1][(kw - 3) / 2];
}

}  // namespace

void depthwise_conv2d_f32_avx512f_s2(const DepthwiseGeom& g, const float* x, const float* w, float* y,
                                     const DepthwiseEpilogue& ep, const ParallelFor& parallel) {
  const int64_t nvec = (g.wo + 15) / 16;
  std::vector<S2Chunk> chunks;
  for (int64_t v0 = 0; v0 < nvec; v0 += 4) {
    S2Chunk c;
    const int nv = static_cast<int>(std::min<int64_t>(4, nvec - v0));
    c.ox0 = v0 * 16;
    c.last = F32x16::first(g.wo - (v0 + nv - 1) * 16);
    for (int v = 0; v < nv; ++v)
      for (int64_t j = 0; j < g.kw; j += 2) {
        const int64_t start = 2 * (c.ox0 + 16 * v) + j - g.pl;
        c.m0[v][j / 2] = F32x16::in_range(start, g.w);
        c.m1[v][j / 2] = F32x16::in_range(start + 16, g.w);
      }
    c.row = s2_row_fn(nv, g.kw);
    chunks.push_back(c);
  }
  auto planes = [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const int64_t ch = p % g.c;
      S2Plane pl;
      pl.x = x + p * g.h * g.w;
      pl.w = w + ch * g.kh * g.kw;
      pl.y = y + p * g.ho * g.wo;
      pl.h = g.h, pl.wi = g.w, pl.kh = g.kh, pl.pt = g.pt, pl.pl = g.pl, pl.wo = g.wo;
      pl.bias = _mm512_set1_ps(ep.bias ? ep.bias[ch] : 0.0f);
      pl.lo = _mm512_set1_ps(ep.lo), pl.hi = _mm512_set1_ps(ep.hi);
      pl.clamp = ep.lo > -std::numeric_limits<float>::infinity() || ep.hi < std::numeric_limits<float>::infinity();
      for (int64_t oy = 0; oy < g.ho; ++oy)
        for (const S2Chunk& c : chunks) c.row(pl, c, oy);
      if (ep.act != Activation::kNone) apply_activation_inplace(ep.act, pl.y, g.ho * g.wo);
    }
  };
  const int64_t n = g.n * g.c;
  run_parallel(parallel, n, planes);
}

void depthwise_conv2d_f32_avx512f(const DepthwiseGeom& g, const float* x, const float* w, float* y,
                                  const DepthwiseEpilogue& ep, const ParallelFor& parallel) {
  if (depthwise_s2_preferred(g)) depthwise_conv2d_f32_avx512f_s2(g, x, w, y, ep, parallel);
  else if (depthwise_blocked_preferred(g)) depthwise_conv2d_f32_avx512f_blocked(g, x, w, y, ep, parallel);
  else depthwise_conv2d_f32_avx512f_planes(g, x, w, y, ep, parallel);
}

void depthwise_conv2d_f32_avx512f_planes(const DepthwiseGeom& g, const float* x, const float* w, float* y,
                                         const DepthwiseEpilogue& ep, const ParallelFor& parallel) {
  const Layout l = make_layout(g);
  const bool clamp = ep.lo > -std::numeric_limits<float>::infinity() || ep.hi < std::numeric_limits<float>::infinity();
  auto planes = [&](int64_t begin, int64_t end) {
    // Scratch per task: the phase planes plus one padded row (for the phase split).
    std::vector<float> buf(static_cast<size_t>(g.sw * l.phase + l.row_len + 16));
    float* q = buf.data();
    float* row = q + g.sw * l.phase;
    for (int64_t p = begin; p < end; ++p) {
      const int64_t ch = p % g.c;
      fill_scratch(g, l, x + p * g.h * g.w, q, row);
      TileArgs a;
      a.q = q;
      a.wp = w + ch * g.kh * g.kw;
      a.off = l.tap_off.data();
      a.ntaps = static_cast<int64_t>(l.tap_off.size());
      a.row_step = g.sh * l.wq;
      a.y = y + p * g.ho * g.wo;
      a.wo = g.wo;
      a.bias = _mm512_set1_ps(ep.bias ? ep.bias[ch] : 0.0f);
      a.lo = _mm512_set1_ps(ep.lo);
      a.hi = _mm512_set1_ps(ep.hi);
      a.clamp = clamp;
      plane(a, g.ho);
      if (ep.act != Activation::kNone) apply_activation_inplace(ep.act, a.y, g.ho * g.wo);
    }
  };
  const int64_t n = g.n * g.c;
  run_parallel(parallel, n, planes);
}

}  // namespace kiln::kernels
