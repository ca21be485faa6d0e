// f32 transpose (kernels/x86/f32_transpose.h): generic and AVX-512 kernels against the
// definition over sizes around the 16x16 block (1..40 rows and columns) with padded leading dims.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/x86/f32_gemm.h"
#include "kernels/x86/f32_transpose.h"

namespace kiln::kernels {
namespace {

using TransposeFn = void (*)(int64_t, int64_t, const float*, int64_t, float*, int64_t);

void check(TransposeFn fn) {
  for (int64_t rows : {1, 3, 15, 16, 17, 33, 40})
    for (int64_t cols : {1, 2, 16, 19, 32, 37}) {
      const int64_t lds = cols + 3, ldd = rows + 5;
      std::vector<float> src(static_cast<size_t>(rows * lds)), dst(static_cast<size_t>(cols * ldd), -7.0f);
      for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i) * 0.5f;
      fn(rows, cols, src.data(), lds, dst.data(), ldd);
      for (int64_t j = 0; j < cols; ++j)
        for (int64_t i = 0; i < ldd; ++i) {
          const float want = i < rows ? src[static_cast<size_t>(i * lds + j)] : -7.0f;  // padding untouched
          ASSERT_EQ(dst[static_cast<size_t>(j * ldd + i)], want) << rows << "x" << cols << " at " << j << "," << i;
        }
    }
}

TEST(Transpose, Generic) { check(transpose_f32_generic); }

TEST(Transpose, Avx512) {
  if (!isa_supported(Isa::kAvx512)) GTEST_SKIP() << "no AVX-512";
  check(transpose_f32_avx512f);
}

}  // namespace
}  // namespace kiln::kernels
