// f32 GEMV blocks for AVX-512F (compiled with -mavx512f -mfma; called only when the CPU has them):
// per 64-column block, V accumulator vectors x 2 K-parities (independent FMA chains) stream the
// block's K x 16V packed weights once, front to back, prefetched 4 KiB ahead.
#include <immintrin.h>

#include <algorithm>

#include "kernels/x86/f32_gemv.h"
#include "kernels/x86/lane_mask.h"

namespace kiln::kernels {
namespace {

// Software prefetch into L1 this far ahead of the stream (4 KiB): with weights in L2 (a
// recurrent step's R, read every step) the L1 misses otherwise cap the stream at ~25 B/cycle.
// Measured (K 256, N 1024, in L2): 16.0 -> 13.1 us; weights from memory: level.
constexpr int64_t kPrefetchFloats = 1024;

template <int V>
void gemv_block(const float* x, float alpha, const float* p, int64_t K, const float* bias, bool relu,
                float* y, int64_t cols) {
  constexpr int W = 16 * V;
  __m512 acc0[V], acc1[V];
  for (int v = 0; v < V; ++v) acc0[v] = acc1[v] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 2 <= K; k += 2) {
    const __m512 x0 = _mm512_set1_ps(x[k]), x1 = _mm512_set1_ps(x[k + 1]);
    const float* r = p + k * W;
    for (int v = 0; v < 2 * V; ++v) _mm_prefetch(reinterpret_cast<const char*>(r + kPrefetchFloats + 16 * v), _MM_HINT_T0);
    for (int v = 0; v < V; ++v) acc0[v] = _mm512_fmadd_ps(x0, _mm512_loadu_ps(r + 16 * v), acc0[v]);
    for (int v = 0; v < V; ++v) acc1[v] = _mm512_fmadd_ps(x1, _mm512_loadu_ps(r + W + 16 * v), acc1[v]);
  }
  if (k < K) {
    const __m512 x0 = _mm512_set1_ps(x[k]);
    for (int v = 0; v < V; ++v) acc0[v] = _mm512_fmadd_ps(x0, _mm512_loadu_ps(p + k * W + 16 * v), acc0[v]);
  }
  const __m512 va = _mm512_set1_ps(alpha), zero = _mm512_setzero_ps();
  for (int v = 0; v < V; ++v) {
    const int64_t left = cols - 16 * v;
    if (left <= 0) break;
    const __mmask16 m = F32x16::first(left);
    __m512 r = _mm512_mul_ps(va, _mm512_add_ps(acc0[v], acc1[v]));
    if (bias) r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(m, bias + 16 * v));
    if (relu) r = _mm512_maskz_max_ps(__mmask16(0xFFFF), r, zero);  // (GCC 12 warns on plain max)
    _mm512_mask_storeu_ps(y + 16 * v, m, r);
  }
}

}  // namespace

void gemv_blocks_avx512f(const float* x, float alpha, const PackedGemvB& b, const float* bias,
                         bool relu, float* y, int64_t b0, int64_t b1) {
  for (int64_t blk = b0; blk < b1; ++blk) {
    const int64_t j0 = blk * PackedGemvB::kBlock, cols = std::min<int64_t>(PackedGemvB::kBlock, b.n - j0);
    const float* p = b.block_data(blk);
    const float* bb = bias ? bias + j0 : nullptr;
    switch (b.block_width(blk) / 16) {
      case 4: gemv_block<4>(x, alpha, p, b.k, bb, relu, y + j0, cols); break;
      case 3: gemv_block<3>(x, alpha, p, b.k, bb, relu, y + j0, cols); break;
      case 2: gemv_block<2>(x, alpha, p, b.k, bb, relu, y + j0, cols); break;
      default: gemv_block<1>(x, alpha, p, b.k, bb, relu, y + j0, cols); break;
    }
  }
}

}  // namespace kiln::kernels
