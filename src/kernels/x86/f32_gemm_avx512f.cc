// f32 GEMM microkernels for AVX-512F (compiled with -mavx512f -mavx512vl -mfma; called only
// when the CPU supports them). NR = 32 (two zmm per row), MR rows of accumulators.
#include <immintrin.h>

#include "kernels/x86/f32_gemm.h"

namespace kiln::kernels {
namespace {

template <int MR>
inline void gemm_mrx32(int64_t mr, int64_t nr, int64_t kc, const float* a, const float* b,
                       float* c, int64_t ldc, const F32GemmParams& p) {
  __m512 acc0[MR], acc1[MR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    acc0[i] = _mm512_setzero_ps();
    acc1[i] = _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 b0 = _mm512_loadu_ps(b);
    const __m512 b1 = _mm512_loadu_ps(b + 16);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const __m512 ai = _mm512_set1_ps(a[i]);
      acc0[i] = _mm512_fmadd_ps(ai, b0, acc0[i]);
      acc1[i] = _mm512_fmadd_ps(ai, b1, acc1[i]);
    }
    a += MR;
    b += 32;
  }
  const __mmask16 m0 = nr >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << nr) - 1);
  const __mmask16 m1 = nr >= 32 ? __mmask16(0xFFFF) : nr <= 16 ? __mmask16(0)
                                                               : __mmask16((1u << (nr - 16)) - 1);
  const __m512 beta = _mm512_set1_ps(p.beta);
  const __m512 zero = _mm512_setzero_ps();
  const __m512 lo = _mm512_set1_ps(p.lo), hi = _mm512_set1_ps(p.hi);
  __m512 bias0 = zero, bias1 = zero;
  if (p.bias) {
    bias0 = _mm512_maskz_loadu_ps(m0, p.bias);
    bias1 = _mm512_maskz_loadu_ps(m1, p.bias + 16);
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    if (i >= mr) break;
    float* row = c + i * ldc;
    __m512 v0 = acc0[i], v1 = acc1[i];
    if (p.beta != 0.0f) {
      v0 = _mm512_fmadd_ps(beta, _mm512_maskz_loadu_ps(m0, row), v0);
      v1 = _mm512_fmadd_ps(beta, _mm512_maskz_loadu_ps(m1, row + 16), v1);
    }
    if (p.bias) {
      v0 = _mm512_add_ps(v0, bias0);
      v1 = _mm512_add_ps(v1, bias1);
    }
    if (p.row_bias) {
      const __m512 rb = _mm512_set1_ps(p.row_bias[i]);
      v0 = _mm512_add_ps(v0, rb);
      v1 = _mm512_add_ps(v1, rb);
    }
    if (p.residual) {
      const float* res = p.residual + i * p.ldr;
      v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, res));
      v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, res + 16));
    }
    // (GCC 12 warns on plain min/max of these values; full-mask forms are the same instruction.)
    if (p.relu) {
      v0 = _mm512_maskz_max_ps(__mmask16(0xFFFF), v0, zero);
      v1 = _mm512_maskz_max_ps(__mmask16(0xFFFF), v1, zero);
    }
    if (p.clamp) {
      v0 = _mm512_maskz_min_ps(__mmask16(0xFFFF), _mm512_maskz_max_ps(__mmask16(0xFFFF), v0, lo), hi);
      v1 = _mm512_maskz_min_ps(__mmask16(0xFFFF), _mm512_maskz_max_ps(__mmask16(0xFFFF), v1, lo), hi);
    }
    _mm512_mask_storeu_ps(row, m0, v0);
    _mm512_mask_storeu_ps(row + 16, m1, v1);
  }
}

}  // namespace

void f32_gemm_pack_b_panel32__avx512f(int64_t kc, const float* b, int64_t ldb, float* out) {
  for (int64_t k = 0; k < kc; ++k) {
    _mm512_storeu_ps(out + k * 32, _mm512_loadu_ps(b + k * ldb));
    _mm512_storeu_ps(out + k * 32 + 16, _mm512_loadu_ps(b + k * ldb + 16));
  }
}

void f32_gemm_ukernel_14x32__avx512f(int64_t mr, int64_t nr, int64_t kc, const float* a_packed,
                                     const float* b_packed, float* c, int64_t ldc,
                                     const F32GemmParams& params) {
  gemm_mrx32<14>(mr, nr, kc, a_packed, b_packed, c, ldc, params);
}

void f32_gemm_ukernel_8x32__avx512f(int64_t mr, int64_t nr, int64_t kc, const float* a_packed,
                                    const float* b_packed, float* c, int64_t ldc,
                                    const F32GemmParams& params) {
  gemm_mrx32<8>(mr, nr, kc, a_packed, b_packed, c, ldc, params);
}

}  // namespace kiln::kernels
