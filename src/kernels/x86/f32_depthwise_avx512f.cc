// Depthwise conv (NCHW) for AVX-512F (compiled with -mavx512f -mavx512vl -mfma; called only when
// the CPU supports them): the per-plane and channel-blocked kernels of f32_depthwise_simd.h on 16
// lanes, picked by depthwise_blocked_preferred(), and the stride-2 plane kernel below.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/x86/f32_depthwise_simd.h"
#include "kernels/x86/lane_mask.h"

namespace kiln::kernels {

void depthwise_conv2d_f32_avx512f_blocked(const DepthwiseGeom& g, const float* x, const float* w, float* y,
                                          const DepthwiseEpilogue& ep, const ParallelFor& parallel) {
  // Scratch offsets are int32 (and the scratch must stay modest): huge planes go per plane.
  if (dw_blocked_fits(g, 16)) depthwise_blocked<F32x16, DwNchwIo<F32x16>>(g, x, w, y, ep, parallel);
  else depthwise_planes<F32x16>(g, x, w, y, ep, parallel);
}

// ---- Stride-2 path: per plane, straight from the input ---------------------------------------
// 16 outputs of a row need inputs 2*ox + j - pl: for an even tap offset the even lanes of two
// vectors loaded there, for the odd tap after it the odd lanes of the same two vectors (one
// permute each); loads are masked to the row, so padding costs nothing and no scratch copy or
// transpose is made.

namespace {

// What a row chunk of one plane needs: input and output planes, the filter, the epilogue.
using S2Plane = DwS2Plane<F32x16>;

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

// One output row of chunk c: V vectors of 16 outputs, KW taps per filter row, the epilogue in
// registers before the store.
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
  p.ep.apply(acc);
#pragma GCC unroll 4
  for (int v = 0; v < V; ++v) _mm512_mask_storeu_ps(dst + 16 * v, v == V - 1 ? c.last : F32x16::kAll, acc[v]);
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
  depthwise_s2_planes<F32x16>(g, x, w, y, ep, parallel, chunks);
}

void depthwise_conv2d_f32_avx512f(const DepthwiseGeom& g, const float* x, const float* w, float* y,
                                  const DepthwiseEpilogue& ep, const ParallelFor& parallel) {
  if (depthwise_s2_preferred(g)) depthwise_conv2d_f32_avx512f_s2(g, x, w, y, ep, parallel);
  else if (depthwise_blocked_preferred(g)) depthwise_conv2d_f32_avx512f_blocked(g, x, w, y, ep, parallel);
  else depthwise_conv2d_f32_avx512f_planes(g, x, w, y, ep, parallel);
}

void depthwise_conv2d_f32_avx512f_planes(const DepthwiseGeom& g, const float* x, const float* w, float* y,
                                         const DepthwiseEpilogue& ep, const ParallelFor& parallel) {
  depthwise_planes<F32x16>(g, x, w, y, ep, parallel);
}

}  // namespace kiln::kernels
