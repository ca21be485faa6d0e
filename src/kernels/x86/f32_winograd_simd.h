// The Winograd transforms of f32_winograd.h written once over simd.h's vector types (used by
// f32_winograd_avx2.cc and f32_winograd_avx512f.cc, whose block layouts, deinterleaves and GEMM
// loops differ per ISA): B^T of the input tiles, A^T of the products, and the store of one output
// row segment with the conv epilogue.
#pragma once

#include "kernels/x86/activation_simd.h"
#include "kernels/x86/f32_winograd.h"

namespace kiln::kernels {
namespace {

// out[k] = sum_i BT[k][i] d[i] (B^T of F(4x4, 3x3)).
template <class S>
inline void winograd_bt6(const typename S::V d[6], typename S::V out[6]) {
  const typename S::V two = S::set1(2.0f), four = S::set1(4.0f), five = S::set1(5.0f);
  out[0] = S::fmadd(four, d[0], S::fnmadd(five, d[2], d[4]));
  const typename S::V a = S::fnmadd(four, d[2], d[4]);  // d4 - 4 d2
  const typename S::V b = S::fnmadd(four, d[1], d[3]);  // d3 - 4 d1
  out[1] = S::add(a, b);
  out[2] = S::sub(a, b);
  const typename S::V c = S::sub(d[4], d[2]);
  const typename S::V e = S::mul(two, S::sub(d[3], d[1]));
  out[3] = S::add(c, e);
  out[4] = S::sub(c, e);
  out[5] = S::fmadd(four, d[1], S::fnmadd(five, d[3], d[5]));
}

// out[k] = sum_i BT[k][i] d[i] (B^T of F(2x2, 3x3)).
template <class S>
inline void winograd_bt4(const typename S::V d[4], typename S::V out[4]) {
  out[0] = S::sub(d[0], d[2]);
  out[1] = S::add(d[1], d[2]);
  out[2] = S::sub(d[2], d[1]);
  out[3] = S::sub(d[1], d[3]);
}

// out[a] = sum_k AT[a][k] m[k] (A^T of F(2x2, 3x3)).
template <class S>
inline void winograd_at2(const typename S::V m[4], typename S::V out[2]) {
  out[0] = S::add(S::add(m[0], m[1]), m[2]);
  out[1] = S::sub(S::sub(m[1], m[2]), m[3]);
}

// out[a] = sum_k AT[a][k] m[k] (A^T of F(4x4, 3x3)).
template <class S>
inline void winograd_at4(const typename S::V m[6], typename S::V out[4]) {
  const typename S::V two = S::set1(2.0f), four = S::set1(4.0f), eight = S::set1(8.0f);
  const typename S::V p1 = S::add(m[1], m[2]), d1 = S::sub(m[1], m[2]);
  const typename S::V p3 = S::add(m[3], m[4]), d3 = S::sub(m[3], m[4]);
  out[0] = S::add(S::add(m[0], p1), p3);
  out[1] = S::fmadd(two, d3, d1);
  out[2] = S::fmadd(four, p3, p1);
  out[3] = S::add(S::fmadd(eight, d3, d1), m[5]);
}

// B^T for F(M x M, 3x3): M + 2 rows in and out.
template <class S, int M>
inline void winograd_bt(const typename S::V* d, typename S::V* out) {
  if constexpr (M == 4) winograd_bt6<S>(d, out);
  else winograd_bt4<S>(d, out);
}

// A^T for F(M x M, 3x3): M + 2 rows in, M out.
template <class S, int M>
inline void winograd_at(const typename S::V* m, typename S::V* out) {
  if constexpr (M == 4) winograd_at4<S>(m, out);
  else winograd_at2<S>(m, out);
}

// Output row columns [xo, x_end) from `row` (M vectors of consecutive columns, bias added) with
// the rest of the epilogue: + residual row `rrow` (or null), the clamp (max(lo, v) / min(hi, v)
// keep a NaN v, like the reference clamp), the activation; lanes past x_end are not written.
template <class S, int M>
inline void winograd_store_row(const typename S::V* row, int64_t xo, int64_t x_end, const float* rrow, bool clamp,
                               typename S::V lo, typename S::V hi, Activation act, float* yrow) {
  constexpr int L = S::kLanes;
  for (int i = 0; i < M; ++i) {
    const int64_t x0 = xo + L * i;
    if (x0 >= x_end) break;
    typename S::V val = row[i];
    if (rrow) val = S::add(val, S::load_first(rrow + x0, x_end - x0));
    if (clamp) val = S::min(hi, S::max(lo, val));
    val = activate<S>(act, val);
    S::store_first(yrow + x0, val, x_end - x0);
  }
}

}  // namespace
}  // namespace kiln::kernels
