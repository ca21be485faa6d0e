// f32 GEMM microkernels for AVX-512F (compiled with -mavx512f -mavx512vl -mfma; called only
// when the CPU supports them). NR = 32 (two zmm per row), MR rows of accumulators.
#include <immintrin.h>

#include <algorithm>

#include "kernels/x86/activation_simd.h"
#include "kernels/x86/f32_gemm.h"
#include "kernels/x86/lane_mask.h"
#include "kernels/x86/transpose16.h"

namespace kiln::kernels {
namespace {

template <int MR>
void store_tile32(const __m512* acc0, const __m512* acc1, int64_t mr, int64_t nr, float* c, int64_t ldc,
                  const F32GemmParams& p);

constexpr int64_t kPrefetchSteps = 24;

template <int MR>
inline void gemm_mrx32(int64_t mr, int64_t nr, int64_t kc, const float* a, const float* b,
                       float* c, int64_t ldc, const F32GemmParams& p) {
  __m512 acc0[MR], acc1[MR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    acc0[i] = _mm512_setzero_ps();
    acc1[i] = _mm512_setzero_ps();
  }
  // C's tile is read (beta, residual) and written after the K loop; its lines are cold (each K
  // block revisits the whole C), so they are requested now and arrive while the loop runs.
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    if (i >= mr) break;
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T1);
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 31), _MM_HINT_T1);
  }
  const int64_t b_step = p.b_stride ? p.b_stride : 32;
  for (int64_t k = 0; k < kc; ++k) {
    // A often streams from beyond L2 (conv weights used for few output columns): fetch ahead.
    _mm_prefetch(reinterpret_cast<const char*>(a + kPrefetchSteps * MR), _MM_HINT_T0);
    // So may a packed B (weights of a MatMul): its next rows, two lines each.
    _mm_prefetch(reinterpret_cast<const char*>(b + kPrefetchSteps * b_step), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(b + kPrefetchSteps * b_step + 16), _MM_HINT_T0);
    const __m512 b0 = _mm512_loadu_ps(b);
    const __m512 b1 = _mm512_loadu_ps(b + 16);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const __m512 ai = _mm512_set1_ps(a[i]);
      acc0[i] = _mm512_fmadd_ps(ai, b0, acc0[i]);
      acc1[i] = _mm512_fmadd_ps(ai, b1, acc1[i]);
    }
    a += MR;
    b += b_step;
  }
  store_tile32<MR>(acc0, acc1, mr, nr, c, ldc, p);
}

// Stores rows [0, mr) x columns [0, nr) of an MR x 32 tile held as two vectors per row (columns
// 0-15 in acc0[i], 16-31 in acc1[i]) with the epilogue.
template <int MR>
inline void store_tile32(const __m512* acc0, const __m512* acc1, int64_t mr, int64_t nr,
                                                        float* c, int64_t ldc, const F32GemmParams& p) {
  const __mmask16 m0 = F32x16::first(nr), m1 = F32x16::first(nr - 16);
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
    if (p.act != Activation::kNone) {
      v0 = activate<F32x16>(p.act, v0);
      v1 = activate<F32x16>(p.act, v1);
    }
    _mm512_mask_storeu_ps(row, m0, v0);
    _mm512_mask_storeu_ps(row + 16, m1, v1);
  }
}

}  // namespace

void activate_inplace__avx512f(Activation a, float* y, int64_t n) { activate_inplace<F32x16>(a, y, n); }

void f32_gemm_pack_b_panel32__avx512f(int64_t kc, const float* b, int64_t ldb, float* out) {
  for (int64_t k = 0; k < kc; ++k) {
    _mm512_storeu_ps(out + k * 32, _mm512_loadu_ps(b + k * ldb));
    _mm512_storeu_ps(out + k * 32 + 16, _mm512_loadu_ps(b + k * ldb + 16));
  }
}

void f32_gemm_pack_a_panel__avx512f(int mr, int64_t rows, int64_t kc, const float* a, int64_t lda, float alpha,
                                    float* out) {
  const __mmask16 row_mask = F32x16::first(mr);
  const __m512 scale = _mm512_set1_ps(alpha);
  for (int64_t k0 = 0; k0 < kc; k0 += 16) {
    const int64_t n = std::min<int64_t>(16, kc - k0);
    const __mmask16 m = F32x16::first(n);
    __m512 r[16];
    load_transposed16(a + k0, lda, rows, m, r);
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) {
      if (j >= n) break;
      _mm512_mask_storeu_ps(out + (k0 + j) * mr, row_mask, alpha == 1.0f ? r[j] : _mm512_mul_ps(r[j], scale));
    }
  }
}

namespace {

// The column-tail tile (see f32_gemm_coltail__avx512f) for up to T columns: B's columns past
// `cols` must be readable (a packed panel's zero padding), they are computed and dropped.
template <int T>
void coltail(int64_t a_rows, int64_t mr, int64_t cols, int64_t kc, const float* a, const float* b, int64_t b_stride,
             float* c, int64_t ldc, const F32GemmParams& p) {
  __m512 acc[T];
#pragma GCC unroll 24
  for (int j = 0; j < T; ++j) acc[j] = _mm512_setzero_ps();
  const __mmask16 rows = F32x16::first(a_rows);
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 av = _mm512_maskz_loadu_ps(rows, a);
#pragma GCC unroll 24
    for (int j = 0; j < T; ++j) acc[j] = _mm512_fmadd_ps(_mm512_set1_ps(b[j]), av, acc[j]);
    a += a_rows;
    b += b_stride;
  }
  // acc[j] is column j over the rows: two in-register 16x16 transposes give row vectors.
  __m512 lo[16], hi[16];
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j) {
    lo[j] = j < T ? acc[j] : _mm512_setzero_ps();
    hi[j] = j + 16 < T ? acc[j + 16 < T ? j + 16 : 0] : _mm512_setzero_ps();
  }
  transpose16(lo);
  if (T > 16) transpose16(hi);
  store_tile32<16>(lo, hi, mr, cols, c, ldc, p);
}

}  // namespace

void f32_gemm_coltail__avx512f(int64_t a_rows, int64_t mr, int64_t cols, int64_t kc, const float* a, const float* b,
                               int64_t b_stride, float* c, int64_t ldc, const F32GemmParams& p) {
  switch ((cols + 3) / 4) {
    case 1: return coltail<4>(a_rows, mr, cols, kc, a, b, b_stride, c, ldc, p);
    case 2: return coltail<8>(a_rows, mr, cols, kc, a, b, b_stride, c, ldc, p);
    case 3: return coltail<12>(a_rows, mr, cols, kc, a, b, b_stride, c, ldc, p);
    case 4: return coltail<16>(a_rows, mr, cols, kc, a, b, b_stride, c, ldc, p);
    case 5: return coltail<20>(a_rows, mr, cols, kc, a, b, b_stride, c, ldc, p);
    case 6: return coltail<24>(a_rows, mr, cols, kc, a, b, b_stride, c, ldc, p);
    default: break;
  }
}

void f32_gemm_ukernel_14x32__avx512f(int64_t mr, int64_t nr, int64_t kc, const float* a_packed,
                                     const float* b_packed, float* c, int64_t ldc,
                                     const F32GemmParams& params) {
  gemm_mrx32<14>(mr, nr, kc, a_packed, b_packed, c, ldc, params);
}

void f32_gemm_ukernel_12x32__avx512f(int64_t mr, int64_t nr, int64_t kc, const float* a_packed,
                                     const float* b_packed, float* c, int64_t ldc,
                                     const F32GemmParams& params) {
  gemm_mrx32<12>(mr, nr, kc, a_packed, b_packed, c, ldc, params);
}

void f32_gemm_ukernel_10x32__avx512f(int64_t mr, int64_t nr, int64_t kc, const float* a_packed,
                                     const float* b_packed, float* c, int64_t ldc,
                                     const F32GemmParams& params) {
  gemm_mrx32<10>(mr, nr, kc, a_packed, b_packed, c, ldc, params);
}

void f32_gemm_ukernel_8x32__avx512f(int64_t mr, int64_t nr, int64_t kc, const float* a_packed,
                                    const float* b_packed, float* c, int64_t ldc,
                                    const F32GemmParams& params) {
  gemm_mrx32<8>(mr, nr, kc, a_packed, b_packed, c, ldc, params);
}

}  // namespace kiln::kernels
