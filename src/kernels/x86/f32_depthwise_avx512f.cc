// Depthwise conv for AVX-512F (compiled with -mavx512f -mavx512vl -mfma; called only when the
// CPU supports them). Per channel plane: copy the input into a zero-padded scratch plane split
// into `sw` column phases (phase p holds padded columns p, p+sw, ...), so every filter tap reads
// a contiguous, in-bounds run for 16 consecutive outputs of a row; then R rows x V vectors of
// outputs accumulate in registers over all taps, and bias + clamp are applied in the store.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/x86/f32_depthwise.h"

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
      const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
      const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
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
  const __mmask16 tail = static_cast<__mmask16>(rem >= 16 ? 0xFFFF : (1u << rem) - 1);
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

}  // namespace

void depthwise_conv2d_f32_avx512f(const DepthwiseGeom& g, const float* x, const float* w, float* y,
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
    }
  };
  const int64_t n = g.n * g.c;
  if (parallel && n > 1) parallel(n, planes);
  else planes(0, n);
}

}  // namespace kiln::kernels
