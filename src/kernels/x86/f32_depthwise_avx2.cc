// Depthwise conv (NCHW) for AVX2 + FMA machines without AVX-512 (compiled with -mavx2 -mfma;
// called only when the CPU has them): the channel-blocked and per-plane kernels of
// f32_depthwise_simd.h on 8 lanes, their NHWC variant of the blocked kernel, and the stride-2
// plane kernel below.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/x86/f32_depthwise_simd.h"

namespace kiln::kernels {
namespace {

// ---- Stride-2 path: per plane, straight from the input ---------------------------------------
// 8 outputs of a row need inputs 2*ox + j - pl, j the filter column: the even floats of the 16
// loaded there for tap j, the odd ones for tap j + 1. One in-lane shuffle each leaves the outputs
// in the order 0 1 4 5 2 3 6 7, the same for every tap, so the accumulators stay in that order and
// one cross-lane permute per vector fixes it at the store. Only the vectors that reach past the
// row's ends use masked loads; filter rows outside the image are skipped. No scratch copy.

constexpr int kS2MaxPairs = 4;  // column pairs of the widest filter handled (7 columns)
constexpr int kS2MaxVectors = 8;

using S2Plane = DwS2Plane<F32x8>;

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
  depthwise_planes<F32x8>(g, x, w, y, ep, parallel);
}

void depthwise_conv2d_f32_avx2_blocked(const DepthwiseGeom& g, const float* x, const float* w, float* y,
                                       const DepthwiseEpilogue& ep, const ParallelFor& parallel) {
  if (dw_blocked_fits(g, 8)) depthwise_blocked<F32x8, DwNchwIo<F32x8>>(g, x, w, y, ep, parallel);
  else depthwise_planes<F32x8>(g, x, w, y, ep, parallel);
}

bool depthwise_nhwc_avx2_blocked_fits(const DepthwiseGeom& g) { return dw_blocked_fits(g, 8); }

void depthwise_conv2d_nhwc_f32_avx2_blocked(const DepthwiseGeom& g, const float* x, const float* taps, float* y,
                                            const DepthwiseEpilogue& ep, const ParallelFor& parallel) {
  depthwise_blocked<F32x8, DwNhwcIo<F32x8>>(g, x, taps, y, ep, parallel);
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
  depthwise_s2_planes<F32x8>(g, x, w, y, ep, parallel, chunks);
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
