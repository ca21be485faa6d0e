// Depthwise conv (NCHW) for AVX2 + FMA machines without AVX-512: the channel-blocked kernel (8
// channels in the lanes), the per-plane kernel (8 outputs of a row per vector) and the stride-2
// plane kernel, the designs of f32_depthwise_avx512f.cc on 8 lanes. Compiled with -mavx2 -mfma;
// called only when the CPU has them.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/x86/activation_simd.h"
#include "kernels/x86/f32_depthwise.h"
#include "kernels/x86/simd.h"
#include "kernels/x86/transpose8.h"

namespace kiln::kernels {
namespace {

int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

using avx2::transpose8;

// The fused epilogue (clamp, then the activation) of a tile, see clamp_activate8_all.
struct Epilogue8 {
  __m256 lo, hi;
  bool clamp;
  Activation act;
  template <int N>
  __attribute__((always_inline)) inline void apply(__m256 (&o)[N]) const {
    clamp_activate_all<F32x8>(clamp, lo, hi, act, o);
  }
};

Epilogue8 make_epilogue8(const DepthwiseEpilogue& ep) {
  Epilogue8 e;
  e.lo = _mm256_set1_ps(ep.lo);
  e.hi = _mm256_set1_ps(ep.hi);
  e.clamp = ep.lo > -std::numeric_limits<float>::infinity() || ep.hi < std::numeric_limits<float>::infinity();
  e.act = ep.act;
  return e;
}

// 32-byte aligned float buffer reused by a thread across calls.
float* thread_scratch(size_t floats) {
  thread_local std::vector<float> buf;
  if (buf.size() < floats + 8) buf.assign(floats + 8, 0.0f);
  auto p = reinterpret_cast<uintptr_t>(buf.data());
  return reinterpret_cast<float*>((p + 31) & ~uintptr_t(31));
}

// ---- Per-plane path ------------------------------------------------------------------------------
// The input plane is copied into a zero-padded scratch split into `sw` column phases (phase p holds
// padded columns p, p+sw, ...), so every tap reads a contiguous, in-bounds run for 8 consecutive
// outputs of a row; R rows x V vectors of outputs accumulate in registers over all taps.

struct PlaneLayout {
  int64_t hq = 0;       // padded rows actually read
  int64_t wq = 0;       // columns per phase row (covers every vector load, tails included)
  int64_t phase = 0;    // floats per phase plane (hq * wq)
  int64_t row_len = 0;  // padded row buffer before the phase split
  std::vector<int64_t> tap_off;  // per tap (i, j): offset of output (0, 0)'s input in scratch
};

PlaneLayout make_plane_layout(const DepthwiseGeom& g) {
  PlaneLayout l;
  l.hq = (g.ho - 1) * g.sh + (g.kh - 1) * g.dh + 1;
  l.wq = round_up(g.wo, 8) + (g.kw - 1) * g.dw / g.sw + 1;
  l.phase = l.hq * l.wq;
  l.row_len = round_up(l.wq, 8) * g.sw;
  for (int64_t i = 0; i < g.kh; ++i)
    for (int64_t j = 0; j < g.kw; ++j) {
      const int64_t col = j * g.dw;
      l.tap_off.push_back((col % g.sw) * l.phase + i * g.dh * l.wq + col / g.sw);
    }
  return l;
}

void fill_plane_scratch(const DepthwiseGeom& g, const PlaneLayout& l, const float* xp, float* q, float* row) {
  for (int64_t yq = 0; yq < l.hq; ++yq) {
    const int64_t iy = yq - g.pt;
    if (iy < 0 || iy >= g.h) {
      for (int64_t p = 0; p < g.sw; ++p) std::memset(q + p * l.phase + yq * l.wq, 0, sizeof(float) * l.wq);
      continue;
    }
    const float* xr = xp + iy * g.w;
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
      // Even and odd floats of 16: shuffle within 128-bit lanes, then put the 64-bit pairs in order.
      float* q1 = q0 + l.phase;
      int64_t xq = 0;
      for (; xq + 8 <= l.wq; xq += 8) {
        const __m256 a = _mm256_loadu_ps(row + 2 * xq), b = _mm256_loadu_ps(row + 2 * xq + 8);
        const __m256d even = _mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88));
        const __m256d odd = _mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD));
        _mm256_storeu_ps(q0 + xq, _mm256_castpd_ps(_mm256_permute4x64_pd(even, 0xD8)));
        _mm256_storeu_ps(q1 + xq, _mm256_castpd_ps(_mm256_permute4x64_pd(odd, 0xD8)));
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

struct PlaneTile {
  const float* q;      // scratch of this plane
  const float* wp;     // kh*kw filter taps
  const int64_t* off;  // tap offsets
  int64_t ntaps;
  int64_t row_step;    // scratch floats between consecutive output rows (sh * wq)
  float* y;            // output plane
  int64_t wo;
  __m256 bias;
  Epilogue8 ep;
};

// R output rows x V vectors starting at (oy0, ox0); the final vector stores `last` lanes.
template <int R, int V>
inline void plane_tile(const PlaneTile& a, int64_t oy0, int64_t ox0, int64_t last) {
  __m256 acc[R][V];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[r][v] = a.bias;
  const float* base = a.q + oy0 * a.row_step + ox0;
  for (int64_t t = 0; t < a.ntaps; ++t) {
    const __m256 wv = _mm256_broadcast_ss(a.wp + t);
    const float* src = base + a.off[t];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v)
        acc[r][v] = _mm256_fmadd_ps(_mm256_loadu_ps(src + r * a.row_step + 8 * v), wv, acc[r][v]);
  }
  __m256 o[R * V];
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
      if (v == V - 1) F32x8::store_first(dst + 8 * v, o[r * V + v], last);
      else _mm256_storeu_ps(dst + 8 * v, o[r * V + v]);
    }
  }
}

template <int R, int V>
void plane_columns(const PlaneTile& a, int64_t ho, int64_t ox0, int64_t last) {
  int64_t oy = 0;
  for (; oy + R <= ho; oy += R) plane_tile<R, V>(a, oy, ox0, last);
  for (; oy < ho; ++oy) plane_tile<1, V>(a, oy, ox0, last);
}

// Chunks of 4 vectors, then one of the remaining 1-3; fewer vectors per row take more rows per
// tile, so that 6-8 independent accumulators hide the FMA latency (16 registers in all).
void plane(const PlaneTile& a, int64_t ho) {
  const int64_t nvec = (a.wo + 7) / 8;
  const int64_t tail = a.wo - (nvec - 1) * 8;
  int64_t v0 = 0;
  for (; v0 + 4 <= nvec; v0 += 4) plane_columns<2, 4>(a, ho, v0 * 8, v0 + 4 == nvec ? tail : 8);
  switch (nvec - v0) {
    case 3: plane_columns<2, 3>(a, ho, v0 * 8, tail); break;
    case 2: plane_columns<4, 2>(a, ho, v0 * 8, tail); break;
    case 1: plane_columns<8, 1>(a, ho, v0 * 8, tail); break;
    default: break;
  }
}

// ---- Channel-blocked path: 8 channels in the vector lanes ---------------------------------------
// Per block of 8 channels of one image, the 8 input planes are transposed (8x8 in registers, over
// the flattened plane) into a zero-bordered scratch [hq][wp][8]; every tap of every output is then
// one contiguous vector load + FMA with a [tap][8] weight vector, for any stride, padding or
// dilation. The [ho*wo][8] result (epilogue applied) is transposed back into the 8 output planes.

// Planes [0, nc) of xb (plane stride hw), pixels f0 .. f0 + nv - 1, transposed: r[k] is pixel k's
// 8 channels (zero past nc).
__attribute__((always_inline)) inline void load_pixels(const float* xb, int64_t hw, int64_t nc, int64_t f0,
                                                       int64_t nv, __m256 r[8]) {
  if (nv == 8) {
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) r[c] = c < nc ? _mm256_loadu_ps(xb + c * hw + f0) : _mm256_setzero_ps();
  } else {
    const __m256i m = F32x8::first(nv);
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) r[c] = c < nc ? _mm256_maskload_ps(xb + c * hw + f0, m) : _mm256_setzero_ps();
  }
  transpose8(r);
}

// Transposes pixels [f_begin, f_end) of planes [0, nc) of xb into the scratch interior.
void fill_blocked(const DepthwiseGeom& g, const DepthwiseBlockedLayout& l, const float* xb, int64_t nc, float* s,
                  int64_t f_begin, int64_t f_end) {
  const int64_t hw = g.h * g.w;
  const int32_t* dst = l.dst.data();
  for (int64_t f0 = f_begin; f0 < f_end; f0 += 8) {
    const int64_t nv = std::min<int64_t>(8, f_end - f0);
    __m256 r[8];
    load_pixels(xb, hw, nc, f0, nv, r);
    if (nv == 8 && l.run[f0]) {
      float* d = s + dst[f0];
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) _mm256_storeu_ps(d + 8 * k, r[k]);
      continue;
    }
    for (int64_t k = 0; k < nv; ++k)
      if (dst[f0 + k] >= 0) _mm256_storeu_ps(s + dst[f0 + k], r[k]);
  }
}

struct BlockedArgs {
  const float* s;      // input scratch
  const int64_t* off;  // tap offsets
  int64_t ntaps;
  const float* wt;     // [tap][8] weights
  int64_t step;        // scratch floats between horizontally adjacent outputs (sw * 8)
  int64_t row;         // scratch floats per row (wp * 8)
  __m256 bias;
  Epilogue8 ep;
};

template <int V>
__attribute__((always_inline)) inline void blocked_store(const BlockedArgs& a, const __m256 (&acc)[V], float* out) {
  __m256 o[V];
#pragma GCC unroll 8
  for (int v = 0; v < V; ++v) o[v] = acc[v];
  a.ep.apply(o);
#pragma GCC unroll 8
  for (int v = 0; v < V; ++v) _mm256_storeu_ps(out + 8 * v, o[v]);
}

// Square K x K filter, stride S, dilation 1: the taps unrolled, offsets constant.
template <int K, int S>
struct SquareTile {
  template <int V>
  static inline void run(const BlockedArgs& a, const float* src, float* out) {
    __m256 acc[V];
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) acc[v] = a.bias;
#pragma GCC unroll 7
    for (int i = 0; i < K; ++i) {
      const float* p = src + i * a.row;
#pragma GCC unroll 7
      for (int j = 0; j < K; ++j) {
        const __m256 wv = _mm256_load_ps(a.wt + 8 * (i * K + j));
#pragma GCC unroll 8
        for (int v = 0; v < V; ++v) acc[v] = _mm256_fmadd_ps(_mm256_loadu_ps(p + 8 * (v * S + j)), wv, acc[v]);
      }
    }
    blocked_store<V>(a, acc, out);
  }
};

// Any filter: taps through the offset table.
struct AnyTile {
  template <int V>
  static inline void run(const BlockedArgs& a, const float* src, float* out) {
    __m256 acc[V];
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) acc[v] = a.bias;
    for (int64_t t = 0; t < a.ntaps; ++t) {
      const __m256 wv = _mm256_load_ps(a.wt + 8 * t);
      const float* p = src + a.off[t];
#pragma GCC unroll 8
      for (int v = 0; v < V; ++v) acc[v] = _mm256_fmadd_ps(_mm256_loadu_ps(p + v * a.step), wv, acc[v]);
    }
    blocked_store<V>(a, acc, out);
  }
};

// One output row: tiles of 8 outputs, then one tile of the remaining 1-7.
template <class Tile>
void blocked_row(const BlockedArgs& a, const float* src, int64_t wo, float* out) {
  int64_t ox = 0;
  for (; ox + 8 <= wo; ox += 8) Tile::template run<8>(a, src + ox * a.step, out + ox * 8);
  const float* p = src + ox * a.step;
  float* o = out + ox * 8;
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
  for (int64_t oy = oy0; oy < oy1; ++oy) blocked_row<Tile>(a, a.s + oy * sh * a.row, wo, out + oy * wo * 8);
}

// Transposes out[f_begin, f_end)[8] back into planes [0, nc) of yb (plane stride howo).
void store_blocked(const float* out, int64_t f_begin, int64_t f_end, int64_t howo, int64_t nc, float* yb) {
  for (int64_t f0 = f_begin; f0 < f_end; f0 += 8) {
    const int64_t nv = std::min<int64_t>(8, f_end - f0);
    __m256 r[8];
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) r[k] = _mm256_loadu_ps(out + (f0 + k) * 8);  // rows past f_end: slack
    transpose8(r);
    if (nv == 8 && nc == 8) {
#pragma GCC unroll 8
      for (int c = 0; c < 8; ++c) _mm256_storeu_ps(yb + c * howo + f0, r[c]);
    } else {
      for (int64_t c = 0; c < nc; ++c) F32x8::store_first(yb + c * howo + f0, r[c], nv);
    }
  }
}

// ---- Stride-2 path: per plane, straight from the input ---------------------------------------
// 8 outputs of a row need inputs 2*ox + j - pl, j the filter column: the even floats of the 16
// loaded there for tap j, the odd ones for tap j + 1. One in-lane shuffle each leaves the outputs
// in the order 0 1 4 5 2 3 6 7, the same for every tap, so the accumulators stay in that order and
// one cross-lane permute per vector fixes it at the store. Only the vectors that reach past the
// row's ends use masked loads; filter rows outside the image are skipped. No scratch copy.

constexpr int kS2MaxPairs = 4;  // column pairs of the widest filter handled (7 columns)
constexpr int kS2MaxVectors = 8;

struct S2Plane {
  const float* x;  // input plane
  const float* w;  // kh x kw taps
  float* y;        // output plane
  int64_t h, wi, kh, pt, pl, wo;
  __m256 bias;
  Epilogue8 ep;
};

// Up to 8 output vectors of every row: their columns, which of them read past the row (and the
// masks of their two loads per column pair), and the row function.
struct S2Chunk;
using S2RowFn = void (*)(const S2Plane& p, const S2Chunk& c, int64_t oy);
struct S2Chunk {
  int64_t ox0 = 0, last = 8;  // first column; lanes stored of the last vector
  bool edge[kS2MaxVectors] = {};
  __m256i m0[kS2MaxVectors][kS2MaxPairs], m1[kS2MaxVectors][kS2MaxPairs];
  S2RowFn row = nullptr;
};

// The lanes l with 0 <= lo + l < n, as a maskload mask.
__m256i lanes_in_row(int64_t lo, int64_t n) {
  const __m256i lane = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int32_t>(std::clamp<int64_t>(lo, -64, n + 64))),
                                        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  return _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_setzero_si256(), lane),
                             _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(n)), lane));
}

template <int V, int KW>
void s2_row(const S2Plane& p, const S2Chunk& c, int64_t oy) {
  __m256 acc[V];
#pragma GCC unroll 8
  for (int v = 0; v < V; ++v) acc[v] = p.bias;
  for (int64_t i = 0; i < p.kh; ++i) {
    const int64_t iy = 2 * oy + i - p.pt;
    if (iy < 0 || iy >= p.h) continue;
    const float* row = p.x + iy * p.wi + 2 * c.ox0 - p.pl;
#pragma GCC unroll 4
    for (int j = 0; j < KW; j += 2) {
      const __m256 w0 = _mm256_broadcast_ss(p.w + i * KW + j);
      const __m256 w1 = _mm256_set1_ps(j + 1 < KW ? p.w[i * KW + j + 1] : 0.0f);
#pragma GCC unroll 8
      for (int v = 0; v < V; ++v) {
        const float* src = row + 16 * v + j;
        __m256 a, b;
        if (c.edge[v]) {
          a = _mm256_maskload_ps(src, c.m0[v][j / 2]);
          b = _mm256_maskload_ps(src + 8, c.m1[v][j / 2]);
        } else {
          a = _mm256_loadu_ps(src);
          b = _mm256_loadu_ps(src + 8);
        }
        acc[v] = _mm256_fmadd_ps(_mm256_shuffle_ps(a, b, 0x88), w0, acc[v]);
        if (j + 1 < KW) acc[v] = _mm256_fmadd_ps(_mm256_shuffle_ps(a, b, 0xDD), w1, acc[v]);
      }
    }
  }
  float* dst = p.y + oy * p.wo + c.ox0;
  __m256 o[V];
#pragma GCC unroll 8
  for (int v = 0; v < V; ++v) o[v] = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(acc[v]), 0xD8));
  p.ep.apply(o);
#pragma GCC unroll 8
  for (int v = 0; v < V; ++v) {
    if (v == V - 1) F32x8::store_first(dst + 8 * v, o[v], c.last);
    else _mm256_storeu_ps(dst + 8 * v, o[v]);
  }
}

template <int KW>
S2RowFn s2_row_for(int nv) {
  switch (nv) {
    case 1: return s2_row<1, KW>;
    case 2: return s2_row<2, KW>;
    case 3: return s2_row<3, KW>;
    case 4: return s2_row<4, KW>;
    case 5: return s2_row<5, KW>;
    case 6: return s2_row<6, KW>;
    case 7: return s2_row<7, KW>;
    default: return s2_row<8, KW>;
  }
}

S2RowFn s2_row_fn(int nv, int64_t kw) {
  return kw == 3 ? s2_row_for<3>(nv) : kw == 5 ? s2_row_for<5>(nv) : s2_row_for<7>(nv);
}

}  // namespace

void depthwise_conv2d_f32_avx2_planes(const DepthwiseGeom& g, const float* x, const float* w, float* y,
                                      const DepthwiseEpilogue& ep, const ParallelFor& parallel) {
  const PlaneLayout l = make_plane_layout(g);
  const Epilogue8 e = make_epilogue8(ep);
  auto planes = [&](int64_t begin, int64_t end) {
    float* q = thread_scratch(static_cast<size_t>(g.sw * l.phase + l.row_len + 8));
    float* row = q + g.sw * l.phase;
    for (int64_t p = begin; p < end; ++p) {
      const int64_t ch = p % g.c;
      fill_plane_scratch(g, l, x + p * g.h * g.w, q, row);
      PlaneTile a;
      a.q = q;
      a.wp = w + ch * g.kh * g.kw;
      a.off = l.tap_off.data();
      a.ntaps = static_cast<int64_t>(l.tap_off.size());
      a.row_step = g.sh * l.wq;
      a.y = y + p * g.ho * g.wo;
      a.wo = g.wo;
      a.bias = _mm256_set1_ps(ep.bias ? ep.bias[ch] : 0.0f);
      a.ep = e;
      plane(a, g.ho);
    }
  };
  run_parallel(parallel, g.n * g.c, planes);
}

namespace {

// How the blocked driver reads and writes one tensor layout: NCHW (planes transposed into and out
// of the [pixel][8] scratch) or NHWC (a pixel's 8 channels are one vector already).
struct NchwIo {
  // wt[t][c] for the block's nc channels from the [c][kh * kw] weight.
  static void weights(const DepthwiseGeom& g, const float* w, int64_t c0, int64_t nc, float* wt) {
    const int64_t ntaps = g.kh * g.kw;
    for (int64_t t = 0; t < ntaps; ++t)
      for (int64_t c = 0; c < 8; ++c) wt[t * 8 + c] = c < nc ? w[(c0 + c) * ntaps + t] : 0.0f;
  }
  static void fill(const DepthwiseGeom& g, const DepthwiseBlockedLayout& l, const float* x, int64_t img, int64_t c0,
                   int64_t nc, float* s, int64_t f_begin, int64_t f_end) {
    fill_blocked(g, l, x + (img * g.c + c0) * g.h * g.w, nc, s, f_begin, f_end);
  }
  static void store(const DepthwiseGeom& g, const float* out, int64_t img, int64_t c0, int64_t nc, float* y,
                    int64_t f_begin, int64_t f_end) {
    store_blocked(out, f_begin, f_end, g.ho * g.wo, nc, y + (img * g.c + c0) * g.ho * g.wo);
  }
};

struct NhwcIo {
  // wt[t][c] from the [kh * kw][c] taps.
  static void weights(const DepthwiseGeom& g, const float* taps, int64_t c0, int64_t nc, float* wt) {
    const __m256i m = F32x8::first(nc);
    for (int64_t t = 0; t < g.kh * g.kw; ++t) _mm256_store_ps(wt + t * 8, _mm256_maskload_ps(taps + t * g.c + c0, m));
  }
  static void fill(const DepthwiseGeom& g, const DepthwiseBlockedLayout& l, const float* x, int64_t img, int64_t c0,
                   int64_t nc, float* s, int64_t f_begin, int64_t f_end) {
    const float* xb = x + img * g.h * g.w * g.c + c0;
    const int32_t* dst = l.dst.data();
    if (nc == 8) {
      for (int64_t f = f_begin; f < f_end; ++f)
        if (dst[f] >= 0) _mm256_storeu_ps(s + dst[f], _mm256_loadu_ps(xb + f * g.c));
    } else {
      const __m256i m = F32x8::first(nc);
      for (int64_t f = f_begin; f < f_end; ++f)
        if (dst[f] >= 0) _mm256_storeu_ps(s + dst[f], _mm256_maskload_ps(xb + f * g.c, m));
    }
  }
  static void store(const DepthwiseGeom& g, const float* out, int64_t img, int64_t c0, int64_t nc, float* y,
                    int64_t f_begin, int64_t f_end) {
    float* yb = y + img * g.ho * g.wo * g.c + c0;
    if (nc == 8) {
      for (int64_t f = f_begin; f < f_end; ++f) _mm256_storeu_ps(yb + f * g.c, _mm256_load_ps(out + f * 8));
    } else {
      const __m256i m = F32x8::first(nc);
      for (int64_t f = f_begin; f < f_end; ++f) _mm256_maskstore_ps(yb + f * g.c, m, _mm256_load_ps(out + f * 8));
    }
  }
};

// The channel-blocked driver: per task (image, 8-channel block, band of output rows) the block's
// input into the scratch, the tiles into out[pixel][8] (epilogue applied), out into the output.
template <class Io>
void blocked(const DepthwiseGeom& g, const float* x, const float* w, float* y, const DepthwiseEpilogue& ep,
             const ParallelFor& parallel) {
  const DepthwiseBlockedLayout& l = depthwise_blocked_layout(g, 8);
  const Epilogue8 e = make_epilogue8(ep);
  const int64_t blocks = (g.c + 7) / 8, ntaps = g.kh * g.kw;
  // Few channel blocks: split the output rows too, so that two threads (or more) get work.
  const int64_t parts = g.n * blocks >= 8 ? 1 : std::min(g.ho, (8 + g.n * blocks - 1) / (g.n * blocks));
  const bool square = g.kh == g.kw && g.dh == 1 && g.dw == 1 && g.sh == g.sw;
  auto run = [&](int64_t begin, int64_t end) {
    float* s = thread_scratch(static_cast<size_t>(l.in_floats + l.out_floats + ntaps * 8));
    float* out = s + l.in_floats;
    float* wt = out + l.out_floats;  // 32-byte aligned: in_floats and out_floats are multiples of 8
    depthwise_zero_border(g, l, 8, s);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t part = task % parts, img = task / parts / blocks, c0 = (task / parts % blocks) * 8;
      const int64_t nc = std::min<int64_t>(8, g.c - c0);
      // Output rows [oy0, oy1) of this part and the input rows [iy0, iy1) they read.
      const int64_t oy0 = part * g.ho / parts, oy1 = (part + 1) * g.ho / parts;
      const int64_t iy0 = std::clamp<int64_t>(oy0 * g.sh - g.pt, 0, g.h);
      const int64_t iy1 = std::clamp<int64_t>((oy1 - 1) * g.sh + (g.kh - 1) * g.dh - g.pt + 1, iy0, g.h);
      Io::weights(g, w, c0, nc, wt);
      Io::fill(g, l, x, img, c0, nc, s, iy0 * g.w, iy1 * g.w);
      BlockedArgs a;
      a.s = s;
      a.off = l.tap_off.data();
      a.ntaps = ntaps;
      a.wt = wt;
      a.step = g.sw * 8;
      a.row = l.wp * 8;
      a.bias = ep.bias ? _mm256_maskload_ps(ep.bias + c0, F32x8::first(nc)) : _mm256_setzero_ps();
      a.ep = e;
      if (square && g.kh == 3 && g.sw == 1) blocked_rows<SquareTile<3, 1>>(a, oy0, oy1, g.wo, g.sh, out);
      else if (square && g.kh == 3 && g.sw == 2) blocked_rows<SquareTile<3, 2>>(a, oy0, oy1, g.wo, g.sh, out);
      else if (square && g.kh == 5 && g.sw == 1) blocked_rows<SquareTile<5, 1>>(a, oy0, oy1, g.wo, g.sh, out);
      else if (square && g.kh == 5 && g.sw == 2) blocked_rows<SquareTile<5, 2>>(a, oy0, oy1, g.wo, g.sh, out);
      else blocked_rows<AnyTile>(a, oy0, oy1, g.wo, g.sh, out);
      Io::store(g, out, img, c0, nc, y, oy0 * g.wo, oy1 * g.wo);
    }
  };
  run_parallel(parallel, g.n * blocks * parts, run);
}

// Scratch offsets are int32 (and the scratch must stay modest).
bool blocked_fits(const DepthwiseGeom& g) {
  return (g.h + g.pt + (g.kh - 1) * g.dh) * (g.w + g.pl + (g.kw - 1) * g.dw) * 8 <= (int64_t(1) << 28);
}

}  // namespace

void depthwise_conv2d_f32_avx2_blocked(const DepthwiseGeom& g, const float* x, const float* w, float* y,
                                       const DepthwiseEpilogue& ep, const ParallelFor& parallel) {
  if (blocked_fits(g)) blocked<NchwIo>(g, x, w, y, ep, parallel);
  else depthwise_conv2d_f32_avx2_planes(g, x, w, y, ep, parallel);
}

bool depthwise_nhwc_avx2_blocked_fits(const DepthwiseGeom& g) { return blocked_fits(g); }

void depthwise_conv2d_nhwc_f32_avx2_blocked(const DepthwiseGeom& g, const float* x, const float* taps, float* y,
                                            const DepthwiseEpilogue& ep, const ParallelFor& parallel) {
  blocked<NhwcIo>(g, x, taps, y, ep, parallel);
}

void depthwise_conv2d_f32_avx2_s2(const DepthwiseGeom& g, const float* x, const float* w, float* y,
                                  const DepthwiseEpilogue& ep, const ParallelFor& parallel) {
  const int64_t nvec = (g.wo + 7) / 8;
  std::vector<S2Chunk> chunks;
  for (int64_t v0 = 0; v0 < nvec; v0 += kS2MaxVectors) {
    S2Chunk c;
    const int nv = static_cast<int>(std::min<int64_t>(kS2MaxVectors, nvec - v0));
    c.ox0 = v0 * 8;
    c.last = g.wo - (v0 + nv - 1) * 8;
    for (int v = 0; v < nv; ++v)
      for (int64_t j = 0; j < g.kw; j += 2) {
        const int64_t start = 2 * (c.ox0 + 8 * v) + j - g.pl;
        c.m0[v][j / 2] = lanes_in_row(start, g.w);
        c.m1[v][j / 2] = lanes_in_row(start + 8, g.w);
        c.edge[v] = c.edge[v] || start < 0 || start + 16 > g.w;
      }
    c.row = s2_row_fn(nv, g.kw);
    chunks.push_back(c);
  }
  const Epilogue8 e = make_epilogue8(ep);
  auto planes = [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const int64_t ch = p % g.c;
      S2Plane pl;
      pl.x = x + p * g.h * g.w;
      pl.w = w + ch * g.kh * g.kw;
      pl.y = y + p * g.ho * g.wo;
      pl.h = g.h, pl.wi = g.w, pl.kh = g.kh, pl.pt = g.pt, pl.pl = g.pl, pl.wo = g.wo;
      pl.bias = _mm256_set1_ps(ep.bias ? ep.bias[ch] : 0.0f);
      pl.ep = e;
      for (int64_t oy = 0; oy < g.ho; ++oy)
        for (const S2Chunk& c : chunks) c.row(pl, c, oy);
    }
  };
  run_parallel(parallel, g.n * g.c, planes);
}

// Measured (1 thread, blocked path's time in parentheses): 96 channels 112x112 3x3 0.27 (0.34) ms,
// 16 channels 0.044 (0.072), 32 at 224x224 0.37 (0.54); 144 at 56x56 3x3 0.14 (0.12-0.14) with the
// input in cache, 0.19 (0.25) with it cold; 28x28 0.044 (0.092); 5x5 at 112x112 a tie, at 56x56
// 0.26 (0.19). Large 3x3 planes are bandwidth-bound; the s2 path reads the input once, no scratch.
// Below 96 columns only where the output row is whole vectors: with a partial last vector (56x56
// -> 28x28) the blocked path is ahead (1 thread, interleaved runs, input warm in L3 as after the
// expansion conv that feeds it; the s2 time in parentheses): 144 channels 0.120-0.122 (0.139) ms,
// 72 channels 0.062-0.063 (0.070); input cold from DRAM 0.132-0.135 (0.137-0.142). At 64x64 and
// 48x48 (whole vectors) s2 stays ahead: 64 channels 0.068-0.069 (0.079-0.084).
bool s2_preferred(const DepthwiseGeom& g) {
  return g.sh == 2 && g.sw == 2 && g.dh == 1 && g.dw == 1 && g.kw == 3 && (g.w >= 96 || (g.w >= 48 && g.wo % 8 == 0));
}

void depthwise_conv2d_f32_avx2(const DepthwiseGeom& g, const float* x, const float* w, float* y,
                               const DepthwiseEpilogue& ep, const ParallelFor& parallel) {
  // Unlike AVX-512's, the blocked path wins on large stride-1 planes too (1 thread, per-plane
  // path in parentheses): 32 channels 112x112 0.23-0.25 (0.25-0.36) ms, 144 at 56x56 0.22-0.24
  // (0.31-0.41).
  if (s2_preferred(g)) depthwise_conv2d_f32_avx2_s2(g, x, w, y, ep, parallel);
  else depthwise_conv2d_f32_avx2_blocked(g, x, w, y, ep, parallel);
}

}  // namespace kiln::kernels
