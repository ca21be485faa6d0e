// f32 GEMV (kernels/x86/f32_gemv.h) vs a naive loop: K and N tails (N not a multiple of 16 or
// 64, N = 1, K = 1, odd K), transposed and plain B, alpha, bias, relu; generic, AVX2 and AVX-512 blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "kernels/x86/f32_gemv.h"

namespace kiln::kernels {
namespace {

using BlocksFn = void (*)(const float*, float, const PackedGemvB&, const float*, bool, float*, int64_t, int64_t);

void check_gemv(int64_t K, int64_t N, bool trans_b, float alpha, bool with_bias, bool relu) {
  std::mt19937_64 rng(K * 1000 + N);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> x(K), b(K * N), bias(N);
  for (float& v : x) v = uni(rng);
  for (float& v : b) v = uni(rng);
  for (float& v : bias) v = uni(rng);
  std::vector<float> want(N);
  for (int64_t j = 0; j < N; ++j) {
    double acc = 0;
    for (int64_t k = 0; k < K; ++k) acc += double(x[k]) * (trans_b ? b[j * K + k] : b[k * N + j]);
    double v = alpha * acc + (with_bias ? bias[j] : 0.0);
    want[j] = static_cast<float>(relu ? std::max(v, 0.0) : v);
  }
  const PackedGemvB p = pack_gemv_b(trans_b, K, N, b.data(), trans_b ? K : N);
  std::vector<BlocksFn> fns;  // every kernel of the family's list that the CPU runs
  for (const auto& k : gemv_f32_kernels())
    if (isa_supported(k.isa)) fns.push_back(k.fn);
  for (BlocksFn fn : fns) {
    // Sentinel past the end: the kernels must not write beyond N.
    std::vector<float> y(N + 1, 12345.0f);
    fn(x.data(), alpha, p, with_bias ? bias.data() : nullptr, relu, y.data(), 0, p.blocks());
    EXPECT_EQ(y[N], 12345.0f);
    for (int64_t j = 0; j < N; ++j)
      ASSERT_NEAR(y[j], want[j], 1e-4 + 1e-4 * std::fabs(want[j])) << "K=" << K << " N=" << N << " j=" << j;
  }
  // The dispatching entry point: serial, through a serial parallel hook, and on two threads.
  ParallelFor serial = [](int64_t n, std::function<void(int64_t, int64_t)> fn) {
    for (int64_t i = 0; i < n; ++i) fn(i, i + 1);
  };
  ParallelFor two_threads = [](int64_t n, std::function<void(int64_t, int64_t)> fn) {
    std::thread second([&] { fn(n / 2, n); });
    fn(0, n / 2);
    second.join();
  };
  for (const ParallelFor& par : {ParallelFor(), serial, two_threads}) {
    std::vector<float> y(N);
    gemv_packed(x.data(), alpha, p, with_bias ? bias.data() : nullptr, relu, y.data(), par);
    for (int64_t j = 0; j < N; ++j) ASSERT_NEAR(y[j], want[j], 1e-4 + 1e-4 * std::fabs(want[j]));
  }
}

TEST(Gemv, ShapesAndTails) {
  for (int64_t K : {1, 2, 7, 64, 129}) {
    for (int64_t N : {1, 15, 16, 17, 48, 63, 64, 65, 100, 1000}) {
      check_gemv(K, N, false, 1.0f, false, false);
      check_gemv(K, N, true, 1.0f, false, false);
    }
  }
}

TEST(Gemv, AlphaBiasRelu) {
  check_gemv(1280, 1000, true, 0.5f, true, false);
  check_gemv(33, 77, false, -2.0f, true, true);
  check_gemv(5, 130, true, 1.0f, false, true);
}

TEST(Gemv, EpilogueSweep) {
  // Every epilogue combination over block widths 16..64 with a column tail in the last vector.
  for (int64_t N : {9, 23, 40, 57, 64, 200})
    for (int64_t K : {3, 300})
      for (int trans = 0; trans < 2; ++trans)
        for (int with_bias = 0; with_bias < 2; ++with_bias)
          for (int relu = 0; relu < 2; ++relu) check_gemv(K, N, trans, -0.75f, with_bias, relu);
}

TEST(Gemv, KZeroGivesBias) {
  std::vector<float> bias = {1.0f, -2.0f, 3.0f};
  const PackedGemvB p = pack_gemv_b(false, 0, 3, nullptr, 3);
  std::vector<float> y(3, 7.0f);
  gemv_packed(nullptr, 1.0f, p, bias.data(), false, y.data());
  EXPECT_EQ(y, bias);
}

}  // namespace
}  // namespace kiln::kernels
