// The fused activations of the AVX-512 kernels on 16 lanes (GEMM store, stem conv, activation
// pass). Include only from translation units compiled for AVX-512F.
#pragma once

#include <immintrin.h>

#include "kernels/x86/f32_gemm.h"
#include "kernels/x86/transpose16.h"

namespace kiln::kernels {

// (The maskz forms with every lane on avoid GCC 12's false uninitialized-passthrough warnings.)
// 1 / (1 + e^-v) as 0.5 + v p(v^2) / q(v^2) on [-18, 18], the rational form of ONNX Runtime's
// MLAS, with a 14-bit reciprocal estimate and one Newton step for the division. Absolute error
// <= 1.5e-7 (SiLU: x * sigmoid(x) within 1.5e-7 * max(1, |x|)); the relative error grows only where
// the sigmoid is tiny (6.5e-5 at sigmoid = 1e-3). 30% faster than e^-v by a degree-6 polynomial
// and scalef (~1 ulp), which measured ~24 cycles per 16 lanes here.
inline __m512 sigmoid16(__m512 v) {
  const __m512 x = _mm512_maskz_min_ps(kAll16, _mm512_maskz_max_ps(kAll16, v, _mm512_set1_ps(-18.0f)), _mm512_set1_ps(18.0f));
  const __m512 x2 = _mm512_mul_ps(x, x);
  __m512 p = _mm512_fmadd_ps(x2, _mm512_set1_ps(4.37031012579801e-11f), _mm512_set1_ps(1.15627324459942e-07f));
  p = _mm512_fmadd_ps(x2, p, _mm512_set1_ps(6.08574864600143e-05f));
  p = _mm512_fmadd_ps(x2, p, _mm512_set1_ps(8.51377133304701e-03f));
  p = _mm512_fmadd_ps(x2, p, _mm512_set1_ps(2.48287947061529e-01f));
  p = _mm512_mul_ps(x, p);
  __m512 q = _mm512_fmadd_ps(x2, _mm512_set1_ps(6.10247389755681e-13f), _mm512_set1_ps(5.76102136993427e-09f));
  q = _mm512_fmadd_ps(x2, q, _mm512_set1_ps(6.29106785017040e-06f));
  q = _mm512_fmadd_ps(x2, q, _mm512_set1_ps(1.70198817374094e-03f));
  q = _mm512_fmadd_ps(x2, q, _mm512_set1_ps(1.16817656904453e-01f));
  q = _mm512_fmadd_ps(x2, q, _mm512_set1_ps(9.93151921023180e-01f));
  const __m512 r = _mm512_maskz_rcp14_ps(kAll16, q);
  const __m512 inv = _mm512_mul_ps(r, _mm512_fnmadd_ps(q, r, _mm512_set1_ps(2.0f)));
  return _mm512_fmadd_ps(p, inv, _mm512_set1_ps(0.5f));
}

inline __m512 activate16(Activation a, __m512 v) {
  switch (a) {
    case Activation::kNone: return v;
    case Activation::kSilu: return _mm512_mul_ps(v, sigmoid16(v));
    case Activation::kSigmoid: return sigmoid16(v);
    case Activation::kTanh: {  // 2 sigmoid(2v) - 1: absolute error <= 3e-7
      const __m512 two = _mm512_set1_ps(2.0f);
      return _mm512_fmsub_ps(two, sigmoid16(_mm512_mul_ps(two, v)), _mm512_set1_ps(1.0f));
    }
    case Activation::kHardSwish: {
      const __m512 t = _mm512_maskz_min_ps(
          __mmask16(0xFFFF), _mm512_maskz_max_ps(__mmask16(0xFFFF), _mm512_add_ps(v, _mm512_set1_ps(3.0f)), _mm512_setzero_ps()),
          _mm512_set1_ps(6.0f));
      return _mm512_mul_ps(_mm512_mul_ps(v, t), _mm512_set1_ps(1.0f / 6.0f));
    }
  }
  return v;
}

}  // namespace kiln::kernels
