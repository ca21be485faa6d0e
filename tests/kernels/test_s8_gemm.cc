// u8s8_gemm (kernels/x86/s8_gemm.h) against an exact int32 reference: M/N/K around the 14x32
// tile, the 4-deep K groups and the 1024 K block; extreme values (255 x -128), padded leading
// dims, 1 and 2 threads; the VNNI kernel where the CPU has it, else the AVX2 one (KILN_ISA=generic:
// the portable loop).
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "../common/two_threads.h"
#include "kernels/x86/s8_gemm.h"

namespace kiln::kernels {
namespace {

// B values in [lo, hi]: the full int8 range, or 7 bits (the AVX2 vpmaddubsw microkernel's).
void check(int64_t m, int64_t n, int64_t k, bool extremes, bool threaded, int lo = -128, int hi = 127) {
  std::mt19937 rng(static_cast<unsigned>(m * 7919 + n * 31 + k));
  const int64_t lda = k + 3, ldb = n + 5, ldc = n + 2;
  std::vector<uint8_t> a(m * lda);
  std::vector<int8_t> b(k * ldb);
  std::vector<int32_t> c(m * ldc, 12345);
  for (auto& v : a) v = extremes ? 255 : static_cast<uint8_t>(rng() % 256);
  for (auto& v : b) v = extremes ? static_cast<int8_t>(lo) : static_cast<int8_t>(lo + static_cast<int>(rng() % (hi - lo + 1)));
  u8s8_gemm(m, n, k, a.data(), lda, b.data(), ldb, c.data(), ldc, threaded ? testing::two_threads() : ParallelFor());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      int64_t want = 0;
      for (int64_t p = 0; p < k; ++p) want += int64_t(a[i * lda + p]) * int64_t(b[p * ldb + j]);
      ASSERT_EQ(c[i * ldc + j], want) << "m=" << m << " n=" << n << " k=" << k << " at " << i << "," << j;
    }
}

TEST(U8S8Gemm, MatchesExactReference) {
  RecordProperty("kernel", s8_gemm_kernel_name());
  std::printf("u8s8 microkernel: %s\n", s8_gemm_kernel_name());
  for (int64_t m : {1, 13, 14, 15, 29, 120})
    for (int64_t n : {1, 16, 31, 33, 70})
      for (int64_t k : {0, 1, 3, 4, 7, 64, 1029}) check(m, n, k, false, (m + n + k) % 2 == 1);
  // 255 * -128 summed over 2048 terms stays far inside int32.
  check(15, 33, 2048, true, true);
}

TEST(U8S8Gemm, SevenBitWeightsMatchExactReference) {
  // On AVX2 these take the vpmaddubsw microkernel: 255 * -64 * 2 = -32640 is the int16 extreme.
  for (int64_t m : {1, 4, 5, 14, 29})
    for (int64_t n : {1, 15, 16, 17, 33})
      for (int64_t k : {1, 4, 9, 1029}) check(m, n, k, false, (m + k) % 2 == 0, -64, 63);
  check(15, 33, 2048, true, true, -64, 63);
  check(15, 33, 100, true, false, 63, 63);
}

}  // namespace
}  // namespace kiln::kernels
