// sgemm_prepacked_a (kernels/x86/f32_gemm_prepacked_a.h) against a double-precision naive
// reference for every microkernel the CPU supports: M/N/K around the MR/NR/KC/MC blocking,
// padded leading dimensions, per-row bias, clamp, 1 and 2 threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <thread>
#include <vector>

#include "kernels/x86/f32_gemm_prepacked_a.h"

namespace kiln::kernels {
namespace {

void two_threads(int64_t n, std::function<void(int64_t, int64_t)> fn) {
  std::thread t([&] { fn(0, n / 2); });
  fn(n / 2, n);
  t.join();
}

void check(int64_t m, int64_t n, int64_t k, bool bias, bool clamp, const F32GemmUkernel& uk, bool threaded) {
  std::mt19937 rng(static_cast<unsigned>(m * 1009 + n * 31 + k));
  std::uniform_real_distribution<float> dist(-1, 1);
  const int64_t lda = k + 3, ldb = n + 5, ldc = n + 2;
  std::vector<float> a(m * lda), b(k * ldb), c(m * ldc, 1e30f), bv(m);
  for (auto& v : a) v = dist(rng);
  for (auto& v : b) v = dist(rng);
  for (auto& v : bv) v = dist(rng);
  PackedA pa = pack_a(m, k, a.data(), lda, &uk);
  RowEpilogue ep;
  if (bias) ep.bias = bv.data();
  if (clamp) ep.lo = -0.5f, ep.hi = 1.0f;
  sgemm_prepacked_a(pa, n, b.data(), ldb, c.data(), ldc, ep, threaded ? ParallelFor(two_threads) : ParallelFor());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = bias ? bv[i] : 0.0;
      for (int64_t p = 0; p < k; ++p) s += double(a[i * lda + p]) * b[p * ldb + j];
      if (clamp) s = std::min(std::max(s, -0.5), 1.0);
      ASSERT_NEAR(c[i * ldc + j], s, 1e-4 * (1 + std::abs(s)) + 1e-4 * k / 64.0)
          << uk.name << " m=" << m << " n=" << n << " k=" << k << " at " << i << "," << j;
    }
}

TEST(SgemmPrepackedA, MatchesReference) {
  for (const auto& uk : f32_gemm_ukernels()) {
    if (!isa_supported(uk.isa)) continue;
    for (int64_t m : {1, 7, 14, 17, 64, 113, 250})
      for (int64_t n : {1, 9, 32, 49, 300})
        for (int64_t k : {1, 27, 257}) check(m, n, k, (m + n) % 2 == 0, n % 3 == 0, uk, (m + k) % 2 == 1);
    check(37, 41, 0, true, true, uk, false);
  }
}

}  // namespace
}  // namespace kiln::kernels
