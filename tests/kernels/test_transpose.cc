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

using TransposeFn = void (*)(int64_t, int64_t, const float*, int64_t, float*, int64_t);

TEST(Transpose, MatchesDefinition) {
  std::vector<TransposeFn> fns = {&transpose_f32_generic, &transpose_f32};
  if (isa_supported(Isa::kAvx2)) fns.push_back(&transpose_f32_avx2);
  if (isa_supported(Isa::kAvx512)) fns.push_back(&transpose_f32_avx512f);
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

}  // namespace
}  // namespace kiln::kernels
