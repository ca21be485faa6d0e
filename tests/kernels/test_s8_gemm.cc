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

// The weight-stationary GEMM's requantizing epilogue (VNNI) against requantize_value, the scalar
// definition with a true division: per-row and scalar scales, bias, Relu, zero points, a
// correction, and scales that put many quotients on or next to .5 ties (y_scale = 2 * scale), tiny
// and huge y_scales (those divide with vdivps). Also checks the int32 sums the epilogue starts
// from against s8u8_gemm_quads.
TEST(S8U8GemmQuads, RequantizeMatchesTheScalarDefinition) {
  if (!s8_gemm_has_vnni()) GTEST_SKIP() << "needs AVX-512 VNNI";
  std::mt19937 rng(5);
  const int64_t m = 31, k = 12, p = 200, kq = 3;
  std::vector<int8_t> w(m * k);
  for (auto& v : w) v = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
  const PackedW8 packed = pack_w_s8(m, k, w.data(), k);
  // Quad q of column j at q * stride + 4 * j (columns up to 7 panels of 32 are read).
  const int64_t stride = 4 * 7 * 32;
  std::vector<uint8_t> x(static_cast<size_t>(kq * stride));
  for (auto& v : x) v = static_cast<uint8_t>(rng() % 256);
  std::vector<int64_t> offsets;
  for (int64_t q = 0; q < kq; ++q) offsets.push_back(q * stride);
  const QuadColumns cols{x.data(), offsets.data()};
  std::vector<int32_t> sums(m * p);
  s8u8_gemm_quads(packed, p, cols, {}, sums.data(), p);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < p; ++j) {
      int32_t want = 0;
      for (int64_t q = 0; q < k; ++q) want += int32_t(w[i * k + q]) * int32_t(x[q / 4 * stride + 4 * j + q % 4]);
      ASSERT_EQ(sums[i * p + j], want) << i << "," << j;
    }
  std::vector<float> scale(m), bias(m);
  std::vector<int32_t> correction(m);
  for (const float y_scale : {0.1f, 0.0037f, 1.0f / 3.0f, 7.5f, 1e-30f, 1e30f}) {
    for (int variant = 0; variant < 4; ++variant) {
      for (int64_t i = 0; i < m; ++i) {
        // variant 0: quotients at ties (scale = y_scale / 2); others spread around.
        scale[i] = variant == 0 ? y_scale / 2 : y_scale * (0.001f + static_cast<float>(rng() % 1000) / 50000.0f);
        bias[i] = y_scale * (static_cast<float>(rng() % 2001) / 10.0f - 100.0f);
        correction[i] = static_cast<int32_t>(rng() % 2001) - 1000;
      }
      Requantize rq;
      rq.scale = scale.data();
      rq.bias = variant % 2 ? bias.data() : nullptr;
      rq.correction = variant >= 2 ? correction.data() : nullptr;
      rq.relu = variant == 3;
      rq.y_scale = y_scale;
      rq.y_zero_point = static_cast<uint8_t>(variant * 60);
      std::vector<uint8_t> y(m * p, 7);
      s8u8_gemm_quads_requantize(packed, p, cols, {}, rq, y.data(), p, testing::two_threads());
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < p; ++j)
          ASSERT_EQ(y[i * p + j], requantize_value(rq, i, sums[i * p + j]))
              << "y_scale " << y_scale << " variant " << variant << " at " << i << "," << j;
    }
  }
}

}  // namespace
}  // namespace kiln::kernels
