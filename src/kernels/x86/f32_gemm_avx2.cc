// f32 GEMM microkernel for AVX2 + FMA (compiled with -mavx2 -mfma; called only when the CPU
// supports them): 6 rows x 16 columns, 12 ymm accumulators; row and column tails run narrower
// instantiations of the same loop and store through lane masks.
#include <immintrin.h>

#include <algorithm>

#include "kernels/x86/activation_simd.h"
#include "kernels/x86/f32_gemm.h"
#include "kernels/x86/simd.h"

namespace kiln::kernels {
namespace {

constexpr int kMr = 6;       // rows of a packed A micro-panel
constexpr int64_t kNr = 16;  // columns of a packed B panel
constexpr int64_t kPrefetchSteps = 12;

// The store of a whole tile (no lane masks) with each epilogue step chosen once per tile, not
// per vector: bias and row bias added as vectors (zero when absent), ReLU folded into the clamp's
// lower bound, the other steps template switches. The same operations in the same order as the
// general store below. K = 16..32 1x1-conv shapes 15-25% faster, K = 256 4% (interleaved reps).
template <int MR, int NV, bool kBeta, bool kResidual, bool kClamp, int kAct>
__attribute__((always_inline)) inline void store_whole_tile(const __m256 (&acc)[MR][NV], float* c, int64_t ldc,
                                                            const F32GemmParams& p) {
  const __m256 zero = _mm256_setzero_ps(), beta = _mm256_set1_ps(p.beta);
  const float inf = __builtin_inff();
  const __m256 lo = _mm256_set1_ps(std::max(p.clamp ? p.lo : -inf, p.relu ? 0.0f : -inf));
  const __m256 hi = _mm256_set1_ps(p.clamp ? p.hi : inf);
  __m256 bias[NV];
#pragma GCC unroll 2
  for (int j = 0; j < NV; ++j) bias[j] = p.bias ? _mm256_loadu_ps(p.bias + 8 * j) : zero;
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    float* row = c + i * ldc;
    const __m256 row_bias = p.row_bias ? _mm256_broadcast_ss(p.row_bias + i) : zero;
#pragma GCC unroll 2
    for (int j = 0; j < NV; ++j) {
      __m256 v = acc[i][j];
      if (kBeta) v = _mm256_fmadd_ps(beta, _mm256_loadu_ps(row + 8 * j), v);
      v = _mm256_add_ps(_mm256_add_ps(v, bias[j]), row_bias);
      if (kResidual) v = _mm256_add_ps(v, _mm256_loadu_ps(p.residual + i * p.ldr + 8 * j));
      if (kClamp) v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
      if (kAct != static_cast<int>(Activation::kNone)) v = activate_fixed<F32x8, kAct>(p.act, v);
      _mm256_storeu_ps(row + 8 * j, v);
    }
  }
}

template <int MR, int NV, bool kBeta, bool kResidual>
__attribute__((always_inline)) inline void store_whole_tile(const __m256 (&acc)[MR][NV], float* c, int64_t ldc,
                                                            const F32GemmParams& p) {
  const bool clamp = p.clamp || p.relu;
  // The activation a template argument: SiLU over a 16->96 1x1 conv at 112x112 cost 2x a
  // separate pass when each of the twelve vectors branched on it (now 20% less for the conv).
  with_fixed_activation(p.act, [&](auto act) __attribute__((always_inline)) {
    if (clamp) store_whole_tile<MR, NV, kBeta, kResidual, true, decltype(act)::value>(acc, c, ldc, p);
    else store_whole_tile<MR, NV, kBeta, kResidual, false, decltype(act)::value>(acc, c, ldc, p);
  });
}

// C[0:MR, 0:nr] (+)= A B over kc, for MR <= 6 rows and NV = 1 or 2 vectors of 8 columns (nr <=
// 8 * NV): a 7x40 image tail or a 1-row GEMV-like tile then costs its own width and height, not
// a whole 6x16 tile. A is read with the packed stride kMr whatever MR is.
template <int MR, int NV>
void gemm_tile(int64_t nr, int64_t kc, const float* a, const float* b, float* c, int64_t ldc,
               const F32GemmParams& p) {
  __m256 acc[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int j = 0; j < NV; ++j) acc[i][j] = _mm256_setzero_ps();
  const int64_t b_step = p.b_stride ? p.b_stride : kNr;
  // B rows a few steps ahead: a packed panel crosses a 4 KB page every 64 steps, where the
  // hardware stream prefetch stops, and a weight matrix streamed from memory then stalls. A B
  // read in place with few rows (a thin 1x1 conv's image, one row per input channel, each in its
  // own page) is fetched one panel ahead instead: the next 16 columns of the same rows, which the
  // hardware prefetchers lose among that many streams. MobileNetV2's 32->16 1x1 conv at 112x112,
  // 1 thread, share of the whole run in 8 alternated profiles: 2.6-3.0% vs 3.1-3.7%; alone
  // (interleaved reps, 16x32x12544 and 16x32x3136): 5-9% faster.
  const int64_t prefetch_ahead = p.b_stride && kc <= 32 ? kNr : kPrefetchSteps * b_step;
  int64_t k = 0;
  if constexpr (MR * NV < 8) {
    // Fewer than 8 accumulators cannot cover the FMA latency (4 cycles, 2 per cycle): a second
    // set takes the odd k, summed into the first at the end (the row tails of M = 49 or 128).
    __m256 odd[MR][NV];
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
      for (int j = 0; j < NV; ++j) odd[i][j] = _mm256_setzero_ps();
    for (; k + 2 <= kc; k += 2) {
      _mm_prefetch(reinterpret_cast<const char*>(b + prefetch_ahead), _MM_HINT_T0);
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) {
        const __m256 a0 = _mm256_broadcast_ss(a + i), a1 = _mm256_broadcast_ss(a + kMr + i);
#pragma GCC unroll 2
        for (int j = 0; j < NV; ++j) {
          acc[i][j] = _mm256_fmadd_ps(a0, _mm256_loadu_ps(b + 8 * j), acc[i][j]);
          odd[i][j] = _mm256_fmadd_ps(a1, _mm256_loadu_ps(b + b_step + 8 * j), odd[i][j]);
        }
      }
      a += 2 * kMr;
      b += 2 * b_step;
    }
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
      for (int j = 0; j < NV; ++j) acc[i][j] = _mm256_add_ps(acc[i][j], odd[i][j]);
  }
  for (; k < kc; ++k) {
    _mm_prefetch(reinterpret_cast<const char*>(b + prefetch_ahead), _MM_HINT_T0);
    __m256 bv[NV];
#pragma GCC unroll 2
    for (int j = 0; j < NV; ++j) bv[j] = _mm256_loadu_ps(b + 8 * j);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m256 ai = _mm256_broadcast_ss(a + i);
#pragma GCC unroll 2
      for (int j = 0; j < NV; ++j) acc[i][j] = _mm256_fmadd_ps(ai, bv[j], acc[i][j]);
    }
    a += kMr;
    b += b_step;
  }
  if (nr >= 8 * NV) {  // whole tiles: store_whole_tile
    if (p.beta != 0.0f) {
      if (p.residual) store_whole_tile<MR, NV, true, true>(acc, c, ldc, p);
      else store_whole_tile<MR, NV, true, false>(acc, c, ldc, p);
    } else {
      if (p.residual) store_whole_tile<MR, NV, false, true>(acc, c, ldc, p);
      else store_whole_tile<MR, NV, false, false>(acc, c, ldc, p);
    }
    return;
  }
  // Lanes of each column vector that lie inside the tile; the epilogue's loads use them too, so
  // nothing past column nr is read or written.
  __m256i mask[NV];
  bool full[NV];
#pragma GCC unroll 2
  for (int j = 0; j < NV; ++j) {
    full[j] = nr >= 8 * (j + 1);
    mask[j] = F32x8::first(nr - 8 * j);
  }
  auto load = [&](const float* src, int j) { return full[j] ? _mm256_loadu_ps(src) : _mm256_maskload_ps(src, mask[j]); };
  const __m256 zero = _mm256_setzero_ps();
  const __m256 beta = _mm256_set1_ps(p.beta), lo = _mm256_set1_ps(p.lo), hi = _mm256_set1_ps(p.hi);
  __m256 bias[NV];
#pragma GCC unroll 2
  for (int j = 0; j < NV; ++j) bias[j] = p.bias ? load(p.bias + 8 * j, j) : zero;
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    float* row = c + i * ldc;
#pragma GCC unroll 2
    for (int j = 0; j < NV; ++j) {
      __m256 v = acc[i][j];
      if (p.beta != 0.0f) v = _mm256_fmadd_ps(beta, load(row + 8 * j, j), v);
      if (p.bias) v = _mm256_add_ps(v, bias[j]);
      if (p.row_bias) v = _mm256_add_ps(v, _mm256_set1_ps(p.row_bias[i]));
      if (p.residual) v = _mm256_add_ps(v, load(p.residual + i * p.ldr + 8 * j, j));
      if (p.relu) v = _mm256_max_ps(v, zero);
      if (p.clamp) v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
      if (p.act != Activation::kNone) v = activate<F32x8>(p.act, v);
      if (full[j]) _mm256_storeu_ps(row + 8 * j, v);
      else _mm256_maskstore_ps(row + 8 * j, mask[j], v);
    }
  }
}

template <int NV>
void gemm_rows(int64_t mr, int64_t nr, int64_t kc, const float* a, const float* b, float* c, int64_t ldc,
               const F32GemmParams& p) {
  switch (mr) {
    case 1: return gemm_tile<1, NV>(nr, kc, a, b, c, ldc, p);
    case 2: return gemm_tile<2, NV>(nr, kc, a, b, c, ldc, p);
    case 3: return gemm_tile<3, NV>(nr, kc, a, b, c, ldc, p);
    case 4: return gemm_tile<4, NV>(nr, kc, a, b, c, ldc, p);
    case 5: return gemm_tile<5, NV>(nr, kc, a, b, c, ldc, p);
    default: return gemm_tile<6, NV>(nr, kc, a, b, c, ldc, p);
  }
}

}  // namespace

void f32_gemm_ukernel_6x16__avx2(int64_t mr, int64_t nr, int64_t kc, const float* a,
                                 const float* b, float* c, int64_t ldc, const F32GemmParams& p) {
  if (mr <= 0 || nr <= 0) return;
  if (nr <= 8) return gemm_rows<1>(mr, nr, kc, a, b, c, ldc, p);
  return gemm_rows<2>(mr, nr, kc, a, b, c, ldc, p);
}

void activate_inplace__avx2(Activation a, float* y, int64_t n) { activate_inplace<F32x8>(a, y, n); }

}  // namespace kiln::kernels
