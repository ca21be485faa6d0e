// f32 GEMM microkernel for AVX2 + FMA (compiled with -mavx2 -mfma; called only when the CPU
// supports them): 6 rows x 16 columns, 12 ymm accumulators.
#include <immintrin.h>

#include "kernels/x86/activation_avx2.h"
#include "kernels/x86/f32_gemm.h"
#include "kernels/x86/f32_gemm_tile.h"

namespace kiln::kernels {

void f32_gemm_ukernel_6x16__avx2(int64_t mr, int64_t nr, int64_t kc, const float* a,
                                 const float* b, float* c, int64_t ldc, const F32GemmParams& p) {
  constexpr int kMr = 6;
  __m256 acc0[kMr], acc1[kMr];
#pragma GCC unroll 8
  for (int i = 0; i < kMr; ++i) {
    acc0[i] = _mm256_setzero_ps();
    acc1[i] = _mm256_setzero_ps();
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_loadu_ps(b);
    const __m256 b1 = _mm256_loadu_ps(b + 8);
#pragma GCC unroll 8
    for (int i = 0; i < kMr; ++i) {
      const __m256 ai = _mm256_broadcast_ss(a + i);
      acc0[i] = _mm256_fmadd_ps(ai, b0, acc0[i]);
      acc1[i] = _mm256_fmadd_ps(ai, b1, acc1[i]);
    }
    a += kMr;
    b += p.b_stride ? p.b_stride : 16;
  }
  if (mr == kMr && nr == 16) {
    const __m256 beta = _mm256_set1_ps(p.beta);
    const __m256 zero = _mm256_setzero_ps();
    const __m256 lo = _mm256_set1_ps(p.lo), hi = _mm256_set1_ps(p.hi);
    __m256 bias0 = zero, bias1 = zero;
    if (p.bias) {
      bias0 = _mm256_loadu_ps(p.bias);
      bias1 = _mm256_loadu_ps(p.bias + 8);
    }
#pragma GCC unroll 8
    for (int i = 0; i < kMr; ++i) {
      float* row = c + i * ldc;
      __m256 v0 = acc0[i], v1 = acc1[i];
      if (p.beta != 0.0f) {
        v0 = _mm256_fmadd_ps(beta, _mm256_loadu_ps(row), v0);
        v1 = _mm256_fmadd_ps(beta, _mm256_loadu_ps(row + 8), v1);
      }
      if (p.bias) {
        v0 = _mm256_add_ps(v0, bias0);
        v1 = _mm256_add_ps(v1, bias1);
      }
      if (p.row_bias) {
        const __m256 rb = _mm256_set1_ps(p.row_bias[i]);
        v0 = _mm256_add_ps(v0, rb);
        v1 = _mm256_add_ps(v1, rb);
      }
      if (p.residual) {
        v0 = _mm256_add_ps(v0, _mm256_loadu_ps(p.residual + i * p.ldr));
        v1 = _mm256_add_ps(v1, _mm256_loadu_ps(p.residual + i * p.ldr + 8));
      }
      if (p.relu) {
        v0 = _mm256_max_ps(v0, zero);
        v1 = _mm256_max_ps(v1, zero);
      }
      if (p.clamp) {
        v0 = _mm256_min_ps(_mm256_max_ps(v0, lo), hi);
        v1 = _mm256_min_ps(_mm256_max_ps(v1, lo), hi);
      }
      if (p.act != Activation::kNone) {
        v0 = activate8(p.act, v0);
        v1 = activate8(p.act, v1);
      }
      _mm256_storeu_ps(row, v0);
      _mm256_storeu_ps(row + 8, v1);
    }
    return;
  }
  alignas(32) float tile[kMr * 16];
#pragma GCC unroll 8
  for (int i = 0; i < kMr; ++i) {
    _mm256_store_ps(tile + i * 16, acc0[i]);
    _mm256_store_ps(tile + i * 16 + 8, acc1[i]);
  }
  f32_gemm_store_tile(tile, 16, mr, nr, c, ldc, p);
}

void activate_inplace__avx2(Activation a, float* y, int64_t n) {
  int64_t i = 0;
  // Four independent vectors per step: each is a long dependency chain (polynomials, reciprocal).
  for (; i + 32 <= n; i += 32) {
    const __m256 v0 = activate8(a, _mm256_loadu_ps(y + i)), v1 = activate8(a, _mm256_loadu_ps(y + i + 8));
    const __m256 v2 = activate8(a, _mm256_loadu_ps(y + i + 16)), v3 = activate8(a, _mm256_loadu_ps(y + i + 24));
    _mm256_storeu_ps(y + i, v0);
    _mm256_storeu_ps(y + i + 8, v1);
    _mm256_storeu_ps(y + i + 16, v2);
    _mm256_storeu_ps(y + i + 24, v3);
  }
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, activate8(a, _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] = apply_activation(a, y[i]);
}

}  // namespace kiln::kernels
