// The fused activations of the vector kernels (GEMM stores, depthwise and conv epilogues, the
// activation pass), written once over simd.h's vector types: the same formulas on 8 lanes (AVX2)
// and 16 (AVX-512). Include only from *_avx2.cc / *_avx512f.cc translation units.
#pragma once

#include <type_traits>

#include "kernels/x86/f32_gemm.h"
#include "kernels/x86/simd.h"

namespace kiln::kernels {
namespace {

// 1 / (1 + e^-v) as 0.5 + v p(v^2) / q(v^2) on [-18, 18], the rational form of ONNX Runtime's
// MLAS, with the reciprocal estimate (12 bits on AVX2, 14 on AVX-512) and one Newton step for the
// division. Absolute error <= 1.5e-7 (SiLU: x * sigmoid(x) within 1.5e-7 * max(1, |x|)); the
// relative error grows only where the sigmoid is tiny (6.5e-5 at sigmoid = 1e-3). 30% faster on
// AVX-512 than e^-v by a degree-6 polynomial and scalef (~1 ulp, ~24 cycles per 16 lanes).
template <class S>
inline typename S::V sigmoid(typename S::V v) {
  using V = typename S::V;
  const V x = S::min(S::max(v, S::set1(-18.0f)), S::set1(18.0f));
  const V x2 = S::mul(x, x);
  V p = S::fmadd(x2, S::set1(4.37031012579801e-11f), S::set1(1.15627324459942e-07f));
  p = S::fmadd(x2, p, S::set1(6.08574864600143e-05f));
  p = S::fmadd(x2, p, S::set1(8.51377133304701e-03f));
  p = S::fmadd(x2, p, S::set1(2.48287947061529e-01f));
  p = S::mul(x, p);
  V q = S::fmadd(x2, S::set1(6.10247389755681e-13f), S::set1(5.76102136993427e-09f));
  q = S::fmadd(x2, q, S::set1(6.29106785017040e-06f));
  q = S::fmadd(x2, q, S::set1(1.70198817374094e-03f));
  q = S::fmadd(x2, q, S::set1(1.16817656904453e-01f));
  q = S::fmadd(x2, q, S::set1(9.93151921023180e-01f));
  const V r = S::rcp(q);
  const V inv = S::mul(r, S::fnmadd(q, r, S::set1(2.0f)));
  return S::fmadd(p, inv, S::set1(0.5f));
}

template <class S>
inline typename S::V activate(Activation a, typename S::V v) {
  switch (a) {
    case Activation::kNone: return v;
    case Activation::kSilu: return S::mul(v, sigmoid<S>(v));
    case Activation::kSigmoid: return sigmoid<S>(v);
    case Activation::kTanh: {  // 2 sigmoid(2v) - 1: absolute error <= 3e-7
      const typename S::V two = S::set1(2.0f);
      return S::fmsub(two, sigmoid<S>(S::mul(two, v)), S::set1(1.0f));
    }
    case Activation::kHardSwish: {
      const typename S::V t = S::min(S::max(S::add(v, S::set1(3.0f)), S::zero()), S::set1(6.0f));
      return S::mul(S::mul(v, t), S::set1(1.0f / 6.0f));
    }
  }
  return v;
}

// The activation as a compile-time constant where a kernel instantiates its store per kind:
// straight-line code over several vectors with no branch between them, which the compiler
// interleaves (a runtime switch per vector keeps each one's long dependency chain apart). The
// common kinds are constants; kRuntimeActivation keeps the runtime switch for the rest.
constexpr int kRuntimeActivation = -1;

template <class S, int kAct>
__attribute__((always_inline)) inline typename S::V activate_fixed(Activation runtime, typename S::V v) {
  if constexpr (kAct == kRuntimeActivation) return activate<S>(runtime, v);
  else return activate<S>(static_cast<Activation>(kAct), v);
}

// fn(std::integral_constant<int, kAct>{}) with kAct the activation for activate_fixed.
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
template <class S, int N>
__attribute__((always_inline)) inline void activate_all(Activation a, typename S::V (&v)[N]) {
  with_fixed_activation(a, [&](auto act) __attribute__((always_inline)) {
    constexpr int kAct = decltype(act)::value;
    if constexpr (kAct != static_cast<int>(Activation::kNone)) {
#pragma GCC unroll 32
      for (int i = 0; i < N; ++i) v[i] = activate_fixed<S, kAct>(a, v[i]);
    }
  });
}

// The fused epilogue of a kernel's tile: v = act(clamp(v, lo, hi)) when `clamp` (max/min return
// v when it is NaN, so NaN propagates like the reference clamp), the activation switched on once.
template <class S, int N>
__attribute__((always_inline)) inline void clamp_activate_all(bool clamp, typename S::V lo, typename S::V hi,
                                                              Activation a, typename S::V (&v)[N]) {
  if (clamp) {
#pragma GCC unroll 32
    for (int i = 0; i < N; ++i) v[i] = S::min(hi, S::max(lo, v[i]));
  }
  activate_all<S, N>(a, v);
}

// y[0, n) = activation(y) in place: the pass after kernels that do not fuse it.
template <class S>
void activate_inplace(Activation a, float* y, int64_t n) {
  constexpr int L = S::kLanes;
  int64_t i = 0;
  // Four independent vectors per step: each is a ~70-cycle dependency chain (polynomials, reciprocal).
  for (; i + 4 * L <= n; i += 4 * L) {
    const typename S::V v0 = activate<S>(a, S::loadu(y + i)), v1 = activate<S>(a, S::loadu(y + i + L));
    const typename S::V v2 = activate<S>(a, S::loadu(y + i + 2 * L)), v3 = activate<S>(a, S::loadu(y + i + 3 * L));
    S::storeu(y + i, v0);
    S::storeu(y + i + L, v1);
    S::storeu(y + i + 2 * L, v2);
    S::storeu(y + i + 3 * L, v3);
  }
  for (; i + L <= n; i += L) S::storeu(y + i, activate<S>(a, S::loadu(y + i)));
  if (i < n) {
    const typename S::Mask m = S::first(n - i);
    S::store_masked(y + i, m, activate<S>(a, S::load_masked(y + i, m)));
  }
}

}  // namespace
}  // namespace kiln::kernels
