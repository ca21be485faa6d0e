// sgemm_prepacked_a (kernels/x86/f32_gemm_prepacked_a.h) against a double-precision naive
// reference for every microkernel the CPU supports: M/N/K around the MR/NR/KC/MC blocking,
// padded leading dimensions, per-row bias, residual, clamp, 1 and 2 threads; and
// scale_packed_a_columns against packing the column-scaled matrix.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <thread>
#include <vector>

#include "../common/two_threads.h"
#include "kernels/x86/f32_gemm_prepacked_a.h"

namespace kiln::kernels {
namespace {

void check(int64_t m, int64_t n, int64_t k, bool bias, bool clamp, const F32GemmUkernel& uk, bool threaded,
           int threads = 0, Activation act = Activation::kNone) {
  std::mt19937 rng(static_cast<unsigned>(m * 1009 + n * 31 + k));
  std::uniform_real_distribution<float> dist(-1, 1);
  const int64_t lda = k + 3, ldb = n + 5, ldc = n + 2;
  const bool residual = (m + 2 * n + k) % 3 == 0;
  const int64_t ldr = n + 1;
  std::vector<float> a(m * lda), b(k * ldb), c(m * ldc, 1e30f), bv(m), res(m * ldr);
  for (auto& v : a) v = dist(rng);
  for (auto& v : b) v = dist(rng);
  for (auto& v : bv) v = dist(rng);
  for (auto& v : res) v = dist(rng);
  PackedA pa = pack_a(m, k, a.data(), lda, &uk);
  RowEpilogue ep;
  if (bias) ep.bias = bv.data();
  if (clamp) ep.lo = -0.5f, ep.hi = 1.0f;
  if (residual) ep.residual = res.data(), ep.ldr = ldr;
  ep.act = act;
  sgemm_prepacked_a(pa, n, b.data(), ldb, c.data(), ldc, ep, threaded ? testing::two_threads() : ParallelFor(),
                    threads);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = (bias ? bv[i] : 0.0) + (residual ? res[i * ldr + j] : 0.0);
      for (int64_t p = 0; p < k; ++p) s += double(a[i * lda + p]) * b[p * ldb + j];
      if (clamp) s = std::min(std::max(s, -0.5), 1.0);
      s = apply_activation(act, static_cast<float>(s));
      ASSERT_NEAR(c[i * ldc + j], s, 1e-4 * (1 + std::abs(s)) + 1e-4 * k / 64.0)
          << uk.name << " act=" << static_cast<int>(act) << " m=" << m << " n=" << n << " k=" << k << " at " << i << "," << j;
    }
}

TEST(SgemmPrepackedA, MatchesReference) {
  for (const auto& uk : f32_gemm_ukernels()) {
    if (!isa_supported(uk.isa)) continue;
    for (int64_t m : {1, 7, 14, 17, 64, 113, 250})
      for (int64_t n : {1, 9, 32, 38, 49, 300})  // tails of 1, 9, 6, 17 and 12 columns
        for (int64_t k : {int64_t{1}, int64_t{27}, int64_t{257}, int64_t{uk.kc} + 5})  // the last: two K blocks
          check(m, n, k, (m + n) % 2 == 0, n % 3 == 0, uk, (m + k) % 2 == 1);
    check(37, 41, 0, true, true, uk, false);
  }
}

// Every fused activation through whole tiles (each kind its own store instantiation) and the
// masked tails, with and without clamp and residual.
TEST(SgemmPrepackedA, FusedActivations) {
  for (const auto& uk : f32_gemm_ukernels()) {
    if (!isa_supported(uk.isa)) continue;
    for (Activation act : {Activation::kNone, Activation::kSilu, Activation::kHardSwish, Activation::kSigmoid,
                           Activation::kTanh})
      for (int64_t n : {40, 35})
        for (int64_t k : {16, 300}) check(13, n, k, true, k == 16, uk, false, 0, act);
  }
}

// Splits into row groups that cut M blocks and into column chunks, for thread counts 1-3.
TEST(SgemmPrepackedA, SplitsOverThreads) {
  const F32GemmUkernel& uk = f32_gemm_default();
  for (int threads : {1, 2, 3})
    for (int64_t m : {int64_t{600}, int64_t{2 * uk.mc + 3}})
      for (int64_t n : {1, 49, 1100}) check(m, n, 300, true, threads == 2, uk, true, threads);
  // Thin K (a 1x1 conv's few input channels): column panels run in groups of up to 16 with the
  // micro-panel rows outside; groups cut by column chunks and ending in a partial panel.
  for (int threads : {1, 2})
    for (int64_t k : {16, 24})
      for (int64_t n : {500, 2051}) check(96, n, k, true, k == 24, uk, true, threads);
  const double a_cost = gemm_split_stream_ns(4.0 * 512 * 4608), b_cost = 4.0 * 4608 * 49 / 8.0;
  const GemmSplit one = choose_gemm_split(512, 49, 4608, uk, 1, a_cost, b_cost);
  EXPECT_EQ(one.chunks, 1);
  EXPECT_EQ(one.groups, 1);
  // Small N and a large A: threads share A's rows rather than re-streaming all of it.
  const GemmSplit two = choose_gemm_split(512, 49, 4608, uk, 2, a_cost, b_cost);
  EXPECT_EQ(two.chunks, 1);
  EXPECT_GE(two.groups, 2);
}

// A * diag(s) by scaling the packed A equals packing the scaled A, bit for bit (one rounding
// either way), over several M and K blocks and partial micro-panels, for every microkernel.
TEST(SgemmPrepackedA, ScaleColumns) {
  for (const auto& uk : f32_gemm_ukernels()) {
    if (!isa_supported(uk.isa)) continue;
    for (int64_t m : {int64_t{1}, int64_t{13}, int64_t{2 * uk.mc + 5}})
      for (int64_t k : {int64_t{1}, int64_t{40}, int64_t{uk.kc} + 7, int64_t{2 * uk.kc} + 70}) {
        std::mt19937 rng(static_cast<unsigned>(m * 7 + k));
        std::uniform_real_distribution<float> dist(-2, 2);
        std::vector<float> a(m * k), s(k), as(m * k);
        for (auto& v : a) v = dist(rng);
        for (auto& v : s) v = dist(rng);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t p = 0; p < k; ++p) as[i * k + p] = a[i * k + p] * s[p];
        const PackedA pa = pack_a(m, k, a.data(), k, &uk), want = pack_a(m, k, as.data(), k, &uk);
        for (bool threaded : {false, true}) {  // threaded: micro-panels spread over two threads
          PackedA got = pa;
          std::fill(got.data.begin(), got.data.end(), 1e30f);
          scale_packed_a_columns(pa, s.data(), got, threaded ? testing::two_threads() : ParallelFor());
          ASSERT_EQ(got.data, want.data) << uk.name << " m=" << m << " k=" << k << " threaded=" << threaded;
        }
      }
  }
}

}  // namespace
}  // namespace kiln::kernels
