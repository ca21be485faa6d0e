// Every f32 GEMM microkernel the CPU supports, through sgemm and pre-packed B, against a
// double-precision naive reference: odd M/N/K and tails, transposes, alpha/beta, padded
// leading dimensions, bias+relu epilogue. Kernels the CPU lacks are skipped.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../common/two_threads.h"
#include "kernels/x86/f32_gemm.h"

namespace kiln::kernels {
namespace {

struct Case {
  int64_t m, n, k;
  bool ta, tb;
  float alpha, beta;
  int64_t pad;  // extra leading-dimension elements for A, B, C
  bool epilogue;  // bias + relu, and with `residual` a residual [M, N] and a clamp to [-0.3, 0.4]
  bool residual = false;
};

void reference(const Case& c, const std::vector<float>& a, int64_t lda,
               const std::vector<float>& b, int64_t ldb, const std::vector<float>& bias,
               const std::vector<float>& res, std::vector<double>& out, int64_t ldc) {
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < c.k; ++p) {
        const double av = c.ta ? a[p * lda + i] : a[i * lda + p];
        const double bv = c.tb ? b[j * ldb + p] : b[p * ldb + j];
        s += av * bv;
      }
      double v = c.alpha * s + (c.beta != 0.0f ? c.beta * out[i * ldc + j] : 0.0);
      if (c.epilogue) v = std::max(v + bias[j] + (c.residual ? res[i * c.n + j] : 0.0), 0.0);
      if (c.epilogue && c.residual) v = std::min(std::max(v, -0.3), 0.4);
      out[i * ldc + j] = v;
    }
}

// Runs one case with `kernel`; prepacked selects pack_b + sgemm_packed.
void check(const Case& c, const F32GemmUkernel& kernel, bool prepacked, const ParallelFor& par) {
  std::mt19937 rng(static_cast<unsigned>(c.m * 131 + c.n * 17 + c.k));
  std::uniform_real_distribution<float> dist(-1, 1);
  const int64_t a_rows = c.ta ? c.k : c.m, a_cols = c.ta ? c.m : c.k;
  const int64_t b_rows = c.tb ? c.n : c.k, b_cols = c.tb ? c.k : c.n;
  const int64_t lda = a_cols + c.pad, ldb = b_cols + c.pad, ldc = c.n + c.pad;
  std::vector<float> a(a_rows * lda), b(b_rows * ldb), cm(c.m * ldc), bias(c.n);
  for (auto& v : a) v = dist(rng);
  for (auto& v : b) v = dist(rng);
  for (auto& v : cm) v = c.beta != 0.0f ? dist(rng) : NAN;  // beta == 0 must not read C
  for (auto& v : bias) v = dist(rng);
  std::vector<float> res(c.m * c.n);
  for (auto& v : res) v = dist(rng);
  std::vector<double> want(cm.begin(), cm.end());
  reference(c, a, lda, b, ldb, bias, res, want, ldc);
  GemmEpilogue ep;
  if (c.epilogue) ep.bias = bias.data(), ep.relu = true;
  if (c.epilogue && c.residual) ep.residual = res.data(), ep.ldr = c.n, ep.clamp = true, ep.lo = -0.3f, ep.hi = 0.4f;
  if (prepacked) {
    const PackedB packed = pack_b(c.tb, c.k, c.n, b.data(), ldb, &kernel, par);
    sgemm_packed(c.ta, c.m, a.data(), lda, c.alpha, packed, c.beta, cm.data(), ldc, par, ep);
  } else {
    sgemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, a.data(), lda, b.data(), ldb, c.beta, cm.data(),
          ldc, par, ep, &kernel);
  }
  const double tol = 1e-5 * (c.k + 4);
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j)
      ASSERT_NEAR(cm[i * ldc + j], want[i * ldc + j], tol)
          << kernel.name << " m=" << c.m << " n=" << c.n << " k=" << c.k << " ta=" << c.ta
          << " tb=" << c.tb << " alpha=" << c.alpha << " beta=" << c.beta << " pad=" << c.pad
          << " epilogue=" << c.epilogue << " at (" << i << "," << j << ")";
  if (c.beta == 0.0f) return;
  for (int64_t i = 0; i < c.m; ++i)  // padding columns are untouched
    for (int64_t j = c.n; j < ldc; ++j)
      ASSERT_EQ(cm[i * ldc + j], static_cast<float>(want[i * ldc + j]));
}

class F32Gemm : public ::testing::TestWithParam<size_t> {
 protected:
  const F32GemmUkernel& kernel() {
    const auto& k = f32_gemm_ukernels()[GetParam()];
    return k;
  }
  bool skip() { return !isa_supported(kernel().isa); }
};

TEST_P(F32Gemm, ShapeSweep) {
  if (skip()) GTEST_SKIP() << kernel().name << ": CPU lacks " << isa_name(kernel().isa);
  const int64_t sizes[] = {1, 2, 7, 16, 31, 33, 64, 100, 257};
  for (int64_t m : sizes)
    for (int64_t n : sizes)
      for (int64_t k : sizes) {
        const bool odd = (m + n + k) % 2 == 1;
        check({m, n, k, false, false, 1.0f, 0.0f, 0, false}, kernel(), odd, nullptr);
        if (HasFatalFailure()) return;
      }
}

TEST_P(F32Gemm, TransposesAlphaBetaStridesEpilogue) {
  if (skip()) GTEST_SKIP() << kernel().name << ": CPU lacks " << isa_name(kernel().isa);
  const int64_t sizes[] = {1, 7, 33, 100, 257};
  int variant = 0;
  for (int64_t m : sizes)
    for (int64_t n : sizes)
      for (int64_t k : sizes) {
        ++variant;
        for (int t = 0; t < 4; ++t) {
          const Case c{m, n, k, (t & 1) != 0, (t & 2) != 0, variant % 3 == 0 ? 1.0f : -0.75f,
                       variant % 2 == 0 ? 0.0f : (variant % 4 == 1 ? 1.0f : 0.5f),
                       variant % 5 == 0 ? 0 : 3, variant % 3 == 1, variant % 2 == 1};
          check(c, kernel(), t == 3, variant % 2 == 0 ? testing::two_threads() : nullptr);
          if (HasFatalFailure()) return;
        }
      }
}

TEST_P(F32Gemm, SeveralKBlocksAccumulate) {
  if (skip()) GTEST_SKIP() << kernel().name << ": CPU lacks " << isa_name(kernel().isa);
  // K past one and two cache blocks: later blocks add onto C, the epilogue runs on the last.
  const int64_t kc = kernel().kc;
  int variant = 0;
  for (int64_t m : {int64_t{7}, int64_t{33}})
    for (int64_t k : {kc + 1, 2 * kc + 3})
      for (int t = 0; t < 4; ++t) {
        ++variant;
        const Case c{m, 37, k, (t & 1) != 0, (t & 2) != 0, 1.0f, variant % 2 == 0 ? 0.0f : 0.5f, 0,
                     variant % 3 == 1, variant % 2 == 1};
        check(c, kernel(), t == 3, variant % 2 == 0 ? testing::two_threads() : nullptr);
        if (HasFatalFailure()) return;
      }
}

TEST_P(F32Gemm, RawBOnTwoThreadsWideAndTall) {
  if (skip()) GTEST_SKIP() << kernel().name << ": CPU lacks " << isa_name(kernel().isa);
  // A wide C splits into column chunks only (each task packs its own B panels per K block); a
  // tall, narrow one into row groups too (B packed once for all of them). Both, past one K block.
  const int64_t k = kernel().kc + 5;
  for (const auto& [m, n] : {std::pair<int64_t, int64_t>{61, 1000}, std::pair<int64_t, int64_t>{1000, 45}})
    for (int t = 0; t < 2; ++t) {
      check({m, n, k, false, t == 1, 1.0f, t == 1 ? 0.5f : 0.0f, t == 1 ? 3 : 0, true, t == 1}, kernel(), false,
            testing::two_threads());
      if (HasFatalFailure()) return;
    }
}

TEST_P(F32Gemm, EmptyKAppliesBetaAndEpilogue) {
  if (skip()) GTEST_SKIP() << kernel().name << ": CPU lacks " << isa_name(kernel().isa);
  check({5, 9, 0, false, false, 1.0f, 0.5f, 2, true}, kernel(), false, nullptr);
  check({5, 9, 0, false, false, 1.0f, 0.5f, 2, true, true}, kernel(), true, nullptr);
}

INSTANTIATE_TEST_SUITE_P(Kernels, F32Gemm,
                         ::testing::Range<size_t>(0, f32_gemm_ukernels().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           std::string name = f32_gemm_ukernels()[info.param].name;
                           return name.substr(std::string("f32_gemm_ukernel_").size());
                         });

TEST(F32GemmDispatch, DefaultIsSupported) {
  EXPECT_TRUE(isa_supported(f32_gemm_default().isa)) << f32_gemm_default().name;
}

}  // namespace
}  // namespace kiln::kernels
