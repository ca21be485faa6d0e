// f32 transpose (kernels/x86/f32_transpose.h): the portable loop, the dispatched kernel and each
// ISA kernel the CPU runs against the definition, over sizes around the 8x8 and 16x16 blocks
// (edges in both dims), strided source and destination; destination padding stays untouched.
#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

#include "kernels/x86/f32_gemm.h"
#include "kernels/x86/f32_transpose.h"

namespace kiln::kernels {
namespace {

TEST(Transpose, MatchesDefinition) {
  std::vector<TransposeFn> fns = {&transpose_f32};  // the dispatch, then the family's list
  for (const auto& k : transpose_f32_kernels())
    if (isa_supported(k.isa)) fns.push_back(k.fn);
  std::vector<std::pair<int64_t, int64_t>> shapes;
  for (int64_t rows : {1, 7, 8, 9, 16, 17, 49, 64})
    for (int64_t cols : {1, 5, 8, 15, 16, 31, 48, 50, 130}) shapes.emplace_back(rows, cols);
  shapes.emplace_back(403, 333);  // large enough for the AVX2 kernel's narrower column panels
  for (auto [rows, cols] : shapes)
    for (size_t f = 0; f < fns.size(); ++f) {
      const int64_t lds = cols + 3, ldd = rows + 5;
      std::vector<float> src(static_cast<size_t>(rows * lds)), dst(static_cast<size_t>(cols * ldd), NAN);
      for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i) * 0.5f - 7.0f;
      fns[f](rows, cols, src.data(), lds, dst.data(), ldd);
      for (int64_t j = 0; j < cols; ++j)
        for (int64_t i = 0; i < ldd; ++i) {
          const float got = dst[static_cast<size_t>(j * ldd + i)];
          if (i < rows)
            ASSERT_EQ(got, src[static_cast<size_t>(i * lds + j)])
                << "kernel " << f << ": " << rows << "x" << cols << " at " << i << "," << j;
          else
            ASSERT_TRUE(std::isnan(got)) << "kernel " << f << " wrote padding: " << rows << "x" << cols << " at " << i
                                         << "," << j;
        }
    }
}

TEST(Transpose, PackRowsKMajorMatchesGemmPackA) {
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "no AVX2";
  for (int mr = 1; mr <= 8; ++mr)
    for (int64_t rows = 1; rows <= mr; ++rows)
      for (int64_t kc : {1, 3, 7, 8, 9, 16, 17, 64, 197})
        for (float alpha : {1.0f, -0.5f}) {
          const int64_t lda = kc + 2;
          std::vector<float> a(static_cast<size_t>(rows * lda));
          for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 97) * 0.25f - 3.0f;
          // One float past the panel must stay untouched.
          std::vector<float> want(static_cast<size_t>(kc * mr + 1), NAN), got(want.size(), NAN);
          f32_gemm_pack_a(false, rows, kc, a.data(), lda, alpha, mr, want.data());
          pack_rows_k_major_avx2(mr, rows, kc, a.data(), lda, alpha, got.data());
          for (size_t i = 0; i + 1 < want.size(); ++i)
            ASSERT_EQ(got[i], want[i]) << "mr " << mr << " rows " << rows << " kc " << kc << " at " << i;
          ASSERT_TRUE(std::isnan(got.back())) << "mr " << mr << " rows " << rows << " kc " << kc << ": wrote past the panel";
        }
}

}  // namespace
}  // namespace kiln::kernels
