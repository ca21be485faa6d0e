// The reference GEMM (ops/gemm_ref.h) against a direct triple loop in long double: every
// transpose combination, the few-rows path (M <= 4) and the blocked one, K across the 8-wide
// partial sums and the 256-deep panels, alpha/beta, and C not read when beta is 0 (NaNs there
// do not propagate); float and double.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "ops/gemm_ref.h"

namespace kiln {
namespace {

template <class T>
void check_all(double tol) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> uni(-1, 1);
  int cases = 0;
  for (int64_t M : {1, 2, 3, 4, 5, 9, 70})
    for (int64_t N : {1, 7, 33})
      for (int64_t K : {1, 8, 13, 300})
        for (int ta = 0; ta < 2; ++ta)
          for (int tb = 0; tb < 2; ++tb)
            for (auto [alpha, beta] : {std::pair<double, double>{1, 0}, {0.5, 1}, {-2, 0.25}}) {
              const int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 2, ldc = N + 1;
              std::vector<T> a(static_cast<size_t>((ta ? K : M) * lda)), b(static_cast<size_t>((tb ? N : K) * ldb));
              std::vector<T> c(static_cast<size_t>(M * ldc));
              for (T& v : a) v = static_cast<T>(uni(rng));
              for (T& v : b) v = static_cast<T>(uni(rng));
              for (T& v : c) v = beta == 0 ? std::numeric_limits<T>::quiet_NaN() : static_cast<T>(uni(rng));
              std::vector<T> want = c;
              for (int64_t m = 0; m < M; ++m)
                for (int64_t n = 0; n < N; ++n) {
                  long double s = 0;
                  for (int64_t k = 0; k < K; ++k)
                    s += static_cast<long double>(ta ? a[k * lda + m] : a[m * lda + k]) *
                         static_cast<long double>(tb ? b[n * ldb + k] : b[k * ldb + n]);
                  const long double old = beta == 0 ? 0.0L : static_cast<long double>(c[m * ldc + n]);
                  want[m * ldc + n] = static_cast<T>(alpha * s + beta * old);
                }
              gemm_ref(ta != 0, tb != 0, M, N, K, static_cast<T>(alpha), a.data(), lda, b.data(), ldb,
                       static_cast<T>(beta), c.data(), ldc);
              for (int64_t m = 0; m < M; ++m)
                for (int64_t n = 0; n < N; ++n)
                  ASSERT_NEAR(c[m * ldc + n], want[m * ldc + n], tol * std::sqrt(double(K)))
                      << "M " << M << " N " << N << " K " << K << " trans " << ta << tb << " beta " << beta;
              ++cases;
            }
  EXPECT_EQ(cases, 7 * 3 * 4 * 4 * 3);
}

TEST(GemmRef, FloatMatchesDirectLoop) { check_all<float>(1e-5); }
TEST(GemmRef, DoubleMatchesDirectLoop) { check_all<double>(1e-13); }

}  // namespace
}  // namespace kiln
