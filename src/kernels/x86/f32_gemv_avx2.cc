// f32 GEMV blocks for AVX2 + FMA (compiled with -mavx2 -mfma; called only when the CPU has them):
// each 64-column block's K x 8V packed weights are read once, as four concurrent streams over
// quarters of K, into V x P accumulator vectors; masked loads and stores at the column tail.
#include <immintrin.h>

#include <algorithm>

#include "kernels/x86/f32_gemv.h"
#include "kernels/x86/simd.h"

namespace kiln::kernels {
namespace {

// K is cut into this many consecutive parts, streamed side by side: one stream alone reaches
// ~47 GB/s from L2 or L3 on Zen 3 (the misses of one sequential stream do not overlap enough),
// four ~70 GB/s (K 1024 x N 1024 from L3: 270 -> 175 us; K 256 x N 512 in L2: 10.2 -> 6.3 us).
// Software prefetch on top of the streams measured slower, so there is none.
constexpr int64_t kStreams = 4;

// One block of V vectors of 8 columns. Stream s accumulates into set s % P; P sets keep at least
// 8 independent FMA chains while V * P <= 12 leaves ymm registers for the x broadcasts.
template <int V, int P>
void gemv_block(const float* x, float alpha, const float* p, int64_t K, const float* bias, bool relu,
                float* y, int64_t cols) {
  constexpr int W = 8 * V;
  __m256 acc[P][V];
#pragma GCC unroll 4
  for (int q = 0; q < P; ++q)
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) acc[q][v] = _mm256_setzero_ps();
  const int64_t part = K / kStreams;
  for (int64_t k = 0; k < part; ++k) {
#pragma GCC unroll 4
    for (int s = 0; s < kStreams; ++s) {
      const int64_t row = k + s * part;
      const __m256 xr = _mm256_broadcast_ss(x + row);
      const float* r = p + row * W;
#pragma GCC unroll 8
      for (int v = 0; v < V; ++v) acc[s % P][v] = _mm256_fmadd_ps(xr, _mm256_loadu_ps(r + 8 * v), acc[s % P][v]);
    }
  }
  for (int64_t row = kStreams * part; row < K; ++row) {
    const __m256 xr = _mm256_broadcast_ss(x + row);
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) acc[0][v] = _mm256_fmadd_ps(xr, _mm256_loadu_ps(p + row * W + 8 * v), acc[0][v]);
  }
  const __m256 va = _mm256_set1_ps(alpha), zero = _mm256_setzero_ps();
  // Fully unrolled (no early exit), so acc stays in registers instead of being mirrored to the
  // stack on every K step.
#pragma GCC unroll 8
  for (int v = 0; v < V; ++v) {
    const int64_t left = cols - 8 * v;
    if (left <= 0) continue;
    __m256 sum = acc[0][v];
#pragma GCC unroll 4
    for (int q = 1; q < P; ++q) sum = _mm256_add_ps(sum, acc[q][v]);
    __m256 out = _mm256_mul_ps(va, sum);
    if (left >= 8) {
      if (bias) out = _mm256_add_ps(out, _mm256_loadu_ps(bias + 8 * v));
      if (relu) out = _mm256_max_ps(out, zero);
      _mm256_storeu_ps(y + 8 * v, out);
    } else {
      const __m256i m = F32x8::first(left);
      if (bias) out = _mm256_add_ps(out, _mm256_maskload_ps(bias + 8 * v, m));
      if (relu) out = _mm256_max_ps(out, zero);
      _mm256_maskstore_ps(y + 8 * v, m, out);
    }
  }
}

}  // namespace

void gemv_blocks_avx2(const float* x, float alpha, const PackedGemvB& b, const float* bias, bool relu,
                      float* y, int64_t b0, int64_t b1) {
  for (int64_t blk = b0; blk < b1; ++blk) {
    const int64_t j0 = blk * PackedGemvB::kBlock, cols = std::min<int64_t>(PackedGemvB::kBlock, b.n - j0);
    const float* p = b.block_data(blk);
    const float* bb = bias ? bias + j0 : nullptr;
    // Block widths are multiples of 16: 2, 4, 6 or 8 vectors of 8.
    switch (b.block_width(blk) / 16) {
      case 4: gemv_block<8, 1>(x, alpha, p, b.k, bb, relu, y + j0, cols); break;
      case 3: gemv_block<6, 2>(x, alpha, p, b.k, bb, relu, y + j0, cols); break;
      case 2: gemv_block<4, 2>(x, alpha, p, b.k, bb, relu, y + j0, cols); break;
      default: gemv_block<2, 4>(x, alpha, p, b.k, bb, relu, y + j0, cols); break;
    }
  }
}

}  // namespace kiln::kernels
