// One vector-width abstraction for the kernels written once for AVX2 + FMA (F32x8, 8 lanes) and
// AVX-512F (F32x16, 16 lanes): a kernel is a template over S and each ISA's translation unit
// (*_avx2.cc, *_avx512f.cc, compiled with that ISA's flags) instantiates it with its own type.
// Include only from such translation units; each type exists only where its ISA is enabled.
//
// Everything here has internal linkage (an unnamed namespace): a template instantiated in an
// AVX-512 and an AVX2 unit alike must not be merged by the linker into one copy, which could
// then hold AVX-512 instructions an AVX2-only CPU cannot run.
#pragma once

#include <immintrin.h>

#include <cstdint>

#if defined(__AVX2__) && defined(__FMA__)
#include "kernels/x86/transpose8.h"
#endif
#if defined(__AVX512F__)
#include "kernels/x86/transpose16.h"
#endif

// Every operation is forced inline: a call would pass the vectors through memory (an
// out-of-line 16x16 transpose made the channel-blocked depthwise kernel 30% slower).
#define KILN_SIMD_FN static inline __attribute__((always_inline))

namespace kiln::kernels {
namespace {

#if defined(__AVX2__) && defined(__FMA__)
// 8 f32 lanes (ymm). Partial vectors use lane masks of 32-bit integers (vmaskmovps).
struct F32x8 {
  using V = __m256;
  using Mask = __m256i;
  static constexpr int kLanes = 8;
  static constexpr const char* kName = "avx2";

  KILN_SIMD_FN V zero() { return _mm256_setzero_ps(); }
  KILN_SIMD_FN V set1(float x) { return _mm256_set1_ps(x); }
  KILN_SIMD_FN V broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  KILN_SIMD_FN V loadu(const float* p) { return _mm256_loadu_ps(p); }
  KILN_SIMD_FN V load(const float* p) { return _mm256_load_ps(p); }
  KILN_SIMD_FN void storeu(float* p, V v) { _mm256_storeu_ps(p, v); }
  KILN_SIMD_FN void store(float* p, V v) { _mm256_store_ps(p, v); }
  KILN_SIMD_FN V add(V a, V b) { return _mm256_add_ps(a, b); }
  KILN_SIMD_FN V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  KILN_SIMD_FN V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  KILN_SIMD_FN V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }    // a b + c
  KILN_SIMD_FN V fnmadd(V a, V b, V c) { return _mm256_fnmadd_ps(a, b, c); }  // c - a b
  KILN_SIMD_FN V fmsub(V a, V b, V c) { return _mm256_fmsub_ps(a, b, c); }    // a b - c
  // min(a, b) / max(a, b) return b when either is NaN (minps / maxps).
  KILN_SIMD_FN V min(V a, V b) { return _mm256_min_ps(a, b); }
  KILN_SIMD_FN V max(V a, V b) { return _mm256_max_ps(a, b); }
  KILN_SIMD_FN V rcp(V a) { return _mm256_rcp_ps(a); }  // 12-bit estimate

  // The first n lanes (none for n <= 0, all for n >= 8).
  KILN_SIMD_FN Mask first(int64_t n) {
    const int32_t k = static_cast<int32_t>(n < 0 ? 0 : n > 8 ? 8 : n);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  // The lanes l with 0 <= lo + l < n.
  KILN_SIMD_FN Mask in_range(int64_t lo, int64_t n) { return _mm256_andnot_si256(first(-lo), first(n - lo)); }
  KILN_SIMD_FN bool none(Mask m) { return _mm256_testz_si256(m, m) != 0; }
  // Masked-off lanes are neither read nor written (and read as zero).
  KILN_SIMD_FN V load_masked(const float* p, Mask m) { return _mm256_maskload_ps(p, m); }
  KILN_SIMD_FN void store_masked(float* p, Mask m, V v) { _mm256_maskstore_ps(p, m, v); }
  KILN_SIMD_FN V load_first(const float* p, int64_t n) { return n >= 8 ? loadu(p) : load_masked(p, first(n)); }
  // The first n lanes of v, with plain 4-, 2- and 1-float stores: a masked store (vmaskmovps)
  // costs several times more on Zen 3.
  KILN_SIMD_FN void store_first(float* dst, V v, int64_t n) {
    if (n >= 8) return storeu(dst, v);
    __m128 rest = _mm256_castps256_ps128(v);
    if (n >= 4) {
      _mm_storeu_ps(dst, rest);
      rest = _mm256_extractf128_ps(v, 1);
      dst += 4;
      n -= 4;
    }
    if (n >= 2) {
      _mm_storel_pi(reinterpret_cast<__m64*>(dst), rest);
      rest = _mm_movehl_ps(rest, rest);
      dst += 2;
      n -= 2;
    }
    if (n >= 1) _mm_store_ss(dst, rest);
  }

  // Floats [col, col + 8) of an n-float row, those outside it `fill` (not read).
  KILN_SIMD_FN V load_range(const float* row, int64_t col, int64_t n, V fill) {
    if (col >= 0 && col + 8 <= n) return loadu(row + col);
    const Mask m = in_range(col, n);
    return _mm256_blendv_ps(fill, _mm256_maskload_ps(row + col, m), _mm256_castsi256_ps(m));
  }
  // The even and odd floats of lo then hi (16 floats), in order.
  KILN_SIMD_FN void deinterleave(V lo, V hi, V& even, V& odd) {
    // In-lane shuffles leave the pairs of 64 bits in the order 0 2 1 3.
    const V e = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
    const V o = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
    even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0)));
    odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), _MM_SHUFFLE(3, 1, 2, 0)));
  }
  // Lanes 1.. of a, then lane 0 of b: the vector one float further along.
  KILN_SIMD_FN V shift_in(V a, V b) {
    const V rot = _mm256_permutevar8x32_ps(a, _mm256_setr_epi32(1, 2, 3, 4, 5, 6, 7, 0));
    return _mm256_blend_ps(rot, _mm256_permutevar8x32_ps(b, _mm256_setzero_si256()), 0x80);
  }
  // In-register transpose of an 8x8 block: r[i][j] -> r[j][i].
  KILN_SIMD_FN void transpose(V r[8]) { avx2::transpose8(r); }
};
#endif

#if defined(__AVX512F__)
// 16 f32 lanes (zmm). Partial vectors use __mmask16. min/max/rcp use their full-mask forms (the
// same instructions): GCC 12 warns, falsely, that the plain ones read an uninitialized passthrough.
struct F32x16 {
  using V = __m512;
  using Mask = __mmask16;
  static constexpr int kLanes = 16;
  static constexpr const char* kName = "avx512f";
  static constexpr Mask kAll = 0xFFFF;

  KILN_SIMD_FN V zero() { return _mm512_setzero_ps(); }
  KILN_SIMD_FN V set1(float x) { return _mm512_set1_ps(x); }
  KILN_SIMD_FN V broadcast(const float* p) { return _mm512_set1_ps(*p); }
  KILN_SIMD_FN V loadu(const float* p) { return _mm512_loadu_ps(p); }
  KILN_SIMD_FN V load(const float* p) { return _mm512_load_ps(p); }
  KILN_SIMD_FN void storeu(float* p, V v) { _mm512_storeu_ps(p, v); }
  KILN_SIMD_FN void store(float* p, V v) { _mm512_store_ps(p, v); }
  KILN_SIMD_FN V add(V a, V b) { return _mm512_add_ps(a, b); }
  KILN_SIMD_FN V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  KILN_SIMD_FN V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  KILN_SIMD_FN V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  KILN_SIMD_FN V fnmadd(V a, V b, V c) { return _mm512_fnmadd_ps(a, b, c); }
  KILN_SIMD_FN V fmsub(V a, V b, V c) { return _mm512_fmsub_ps(a, b, c); }
  KILN_SIMD_FN V min(V a, V b) { return _mm512_maskz_min_ps(kAll, a, b); }
  KILN_SIMD_FN V max(V a, V b) { return _mm512_maskz_max_ps(kAll, a, b); }
  KILN_SIMD_FN V rcp(V a) { return _mm512_maskz_rcp14_ps(kAll, a); }  // 14-bit estimate

  KILN_SIMD_FN Mask first(int64_t n) { return n >= 16 ? kAll : n <= 0 ? Mask(0) : static_cast<Mask>((1u << n) - 1); }
  KILN_SIMD_FN Mask in_range(int64_t lo, int64_t n) { return static_cast<Mask>(first(n - lo) & ~first(-lo)); }
  KILN_SIMD_FN bool none(Mask m) { return m == 0; }
  KILN_SIMD_FN V load_masked(const float* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
  KILN_SIMD_FN void store_masked(float* p, Mask m, V v) { _mm512_mask_storeu_ps(p, m, v); }
  KILN_SIMD_FN V load_first(const float* p, int64_t n) { return load_masked(p, first(n)); }
  KILN_SIMD_FN void store_first(float* dst, V v, int64_t n) { store_masked(dst, first(n), v); }

  KILN_SIMD_FN V load_range(const float* row, int64_t col, int64_t n, V fill) {
    return _mm512_mask_loadu_ps(fill, in_range(col, n), row + col);
  }
  KILN_SIMD_FN void deinterleave(V lo, V hi, V& even, V& odd) {
    even = _mm512_permutex2var_ps(lo, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), hi);
    odd = _mm512_permutex2var_ps(lo, _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31), hi);
  }
  KILN_SIMD_FN V shift_in(V a, V b) {
    return _mm512_permutex2var_ps(a, _mm512_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16), b);
  }
  KILN_SIMD_FN void transpose(V r[16]) { transpose16(r); }
};
#endif

}  // namespace
}  // namespace kiln::kernels
