// The fused activations of the AVX2 kernels on 8 lanes (GEMM store, depthwise and conv epilogues):
// the same formulas as activation_avx512f.h. Include only from translation units compiled for
// AVX2 + FMA (*_avx2.cc).
#pragma once

#include <immintrin.h>

#include <type_traits>

#include "kernels/x86/f32_gemm.h"

namespace kiln::kernels {

// 1 / (1 + e^-v) as 0.5 + v p(v^2) / q(v^2) on [-18, 18] (MLAS's rational form, as sigmoid16),
// with the 12-bit reciprocal estimate and one Newton step: absolute error <= 1.5e-7.
inline __m256 sigmoid8(__m256 v) {
  const __m256 x = _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(-18.0f)), _mm256_set1_ps(18.0f));
  const __m256 x2 = _mm256_mul_ps(x, x);
  __m256 p = _mm256_fmadd_ps(x2, _mm256_set1_ps(4.37031012579801e-11f), _mm256_set1_ps(1.15627324459942e-07f));
  p = _mm256_fmadd_ps(x2, p, _mm256_set1_ps(6.08574864600143e-05f));
  p = _mm256_fmadd_ps(x2, p, _mm256_set1_ps(8.51377133304701e-03f));
  p = _mm256_fmadd_ps(x2, p, _mm256_set1_ps(2.48287947061529e-01f));
  p = _mm256_mul_ps(x, p);
  __m256 q = _mm256_fmadd_ps(x2, _mm256_set1_ps(6.10247389755681e-13f), _mm256_set1_ps(5.76102136993427e-09f));
  q = _mm256_fmadd_ps(x2, q, _mm256_set1_ps(6.29106785017040e-06f));
  q = _mm256_fmadd_ps(x2, q, _mm256_set1_ps(1.70198817374094e-03f));
  q = _mm256_fmadd_ps(x2, q, _mm256_set1_ps(1.16817656904453e-01f));
  q = _mm256_fmadd_ps(x2, q, _mm256_set1_ps(9.93151921023180e-01f));
  const __m256 r = _mm256_rcp_ps(q);
  const __m256 inv = _mm256_mul_ps(r, _mm256_fnmadd_ps(q, r, _mm256_set1_ps(2.0f)));
  return _mm256_fmadd_ps(p, inv, _mm256_set1_ps(0.5f));
}

inline __m256 activate8(Activation a, __m256 v) {
  switch (a) {
    case Activation::kNone: return v;
    case Activation::kSilu: return _mm256_mul_ps(v, sigmoid8(v));
    case Activation::kSigmoid: return sigmoid8(v);
    case Activation::kTanh: {  // 2 sigmoid(2v) - 1
      const __m256 two = _mm256_set1_ps(2.0f);
      return _mm256_fmsub_ps(two, sigmoid8(_mm256_mul_ps(two, v)), _mm256_set1_ps(1.0f));
    }
    case Activation::kHardSwish: {
      const __m256 t = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(v, _mm256_set1_ps(3.0f)), _mm256_setzero_ps()),
                                     _mm256_set1_ps(6.0f));
      return _mm256_mul_ps(_mm256_mul_ps(v, t), _mm256_set1_ps(1.0f / 6.0f));
    }
  }
  return v;
}

// The activation as a compile-time constant where a kernel instantiates its store per kind:
// straight-line code over several vectors with no branch between them, which the compiler
// interleaves (a runtime switch per vector keeps each one's long dependency chain apart). The
// common kinds are constants; kRuntimeActivation keeps the runtime switch for the rest.
constexpr int kRuntimeActivation = -1;

template <int kAct>
__attribute__((always_inline)) inline __m256 activate8_fixed(Activation runtime, __m256 v) {
  if constexpr (kAct == kRuntimeActivation) return activate8(runtime, v);
  else return activate8(static_cast<Activation>(kAct), v);
}

// fn(std::integral_constant<int, kAct>{}) with kAct the activation for activate8_fixed.
template <class Fn>
__attribute__((always_inline)) inline decltype(auto) with_fixed_activation(Activation a, Fn&& fn) {
  switch (a) {
    case Activation::kNone: return fn(std::integral_constant<int, static_cast<int>(Activation::kNone)>{});
    case Activation::kSilu: return fn(std::integral_constant<int, static_cast<int>(Activation::kSilu)>{});
    case Activation::kHardSwish: return fn(std::integral_constant<int, static_cast<int>(Activation::kHardSwish)>{});
    default: return fn(std::integral_constant<int, kRuntimeActivation>{});
  }
}

// v[0, N) = activation(v) with one switch for all N vectors (a kernel's tile of accumulators).
template <int N>
__attribute__((always_inline)) inline void activate8_all(Activation a, __m256 (&v)[N]) {
  with_fixed_activation(a, [&](auto act) __attribute__((always_inline)) {
    constexpr int kAct = decltype(act)::value;
    if constexpr (kAct != static_cast<int>(Activation::kNone)) {
#pragma GCC unroll 32
      for (int i = 0; i < N; ++i) v[i] = activate8_fixed<kAct>(a, v[i]);
    }
  });
}

// The fused epilogue of a kernel's tile: v = act(clamp(v, lo, hi)) when `clamp` (max/min return
// v when it is NaN, so NaN propagates like the reference clamp), the activation switched on once.
template <int N>
__attribute__((always_inline)) inline void clamp_activate8_all(bool clamp, __m256 lo, __m256 hi, Activation a,
                                                               __m256 (&v)[N]) {
  if (clamp) {
#pragma GCC unroll 32
    for (int i = 0; i < N; ++i) v[i] = _mm256_min_ps(hi, _mm256_max_ps(lo, v[i]));
  }
  activate8_all(a, v);
}

}  // namespace kiln::kernels
