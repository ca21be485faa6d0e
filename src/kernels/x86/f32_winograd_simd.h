// The Winograd transforms of f32_winograd.h written once over simd.h's vector types (used by
// f32_winograd_avx2.cc and f32_winograd_avx512f.cc, whose block layouts, deinterleaves and GEMM
// loops differ per ISA): B^T of the input tiles, A^T of the products, and the store of one output
// channel's output transform with the conv epilogue.
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

// The conv epilogue after the bias, per output row: + the residual (or none), the clamp (max(lo,
// v) / min(hi, v) keep a NaN v, like the reference clamp), the activation; columns from x_end on
// are not written.
template <class S>
struct WinogradRowEpilogue {
  bool clamp;
  typename S::V lo, hi;
  Activation act;
  int64_t x_end;
};

// Output row columns [xo, x_end) from `row` (M vectors of consecutive columns, bias added).
template <class S, int M>
inline void winograd_store_row(const typename S::V* row, int64_t xo, const float* rrow,
                               const WinogradRowEpilogue<S>& ep, float* yrow) {
  constexpr int L = S::kLanes;
  for (int i = 0; i < M; ++i) {
    const int64_t x0 = xo + L * i;
    if (x0 >= ep.x_end) break;
    typename S::V val = row[i];
    if (rrow) val = S::add(val, S::load_first(rrow + x0, ep.x_end - x0));
    if (ep.clamp) val = S::min(ep.hi, S::max(ep.lo, val));
    val = activate<S>(ep.act, val);
    S::store_first(yrow + x0, val, ep.x_end - x0);
  }
}

// One output channel of a block: A^T (.) A^T of its products, point e of tile column col at
// mr_row[e * estride + col], for L tiles at a time; Interleave(o, row) turns the M x L outputs
// of one output row, o[j][tile] (column M * tile + j), into M vectors of consecutive columns.
// yk / rk: the channel's output plane and residual plane (or null).
template <class S, int M, void (*Interleave)(const typename S::V*, typename S::V*)>
void winograd_output_channel(const WinogradGeom& g, const WinogradBlocking& b, const WinogradBlockSpan& s,
                             const float* mr_row, int64_t estride, float bias, const WinogradRowEpilogue<S>& ep,
                             const float* rk, float* yk) {
  constexpr int A = M + 2, L = S::kLanes;
  const typename S::V bias_v = S::set1(bias);
  for (int64_t ty = s.ty0; ty < s.ty1; ++ty) {
    const int64_t col0 = (ty - s.ty0) * b.cols;
    for (int64_t gi = 0; gi < s.groups; ++gi) {
      const float* mp = mr_row + col0 + L * gi;
      typename S::V sa[M][A];
      for (int l = 0; l < A; ++l) {
        typename S::V col[A], out[M];
        for (int j = 0; j < A; ++j) col[j] = S::loadu(mp + (j * A + l) * estride);
        winograd_at<S, M>(col, out);
        for (int a = 0; a < M; ++a) sa[a][l] = out[a];
      }
      const int64_t xo = M * (s.tx0 + L * gi);
      for (int a = 0; a < M; ++a) {
        const int64_t oy = M * ty + a;
        if (oy >= g.ho) break;
        typename S::V o[M], row[M];
        winograd_at<S, M>(sa[a], o);
        for (int i = 0; i < M; ++i) o[i] = S::add(o[i], bias_v);
        Interleave(o, row);
        winograd_store_row<S, M>(row, xo, rk ? rk + oy * g.wo : nullptr, ep, yk + oy * g.wo);
      }
    }
  }
}

}  // namespace
}  // namespace kiln::kernels
