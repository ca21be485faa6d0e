// f32 transpose (kernels/x86/f32_transpose.h): the dispatched kernel and the portable loop
// against the definition, over sizes around the 16x16 blocks (edges in both dims), strided
// source and destination; destination padding stays untouched.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/x86/f32_transpose.h"

namespace kiln::kernels {
namespace {

TEST(Transpose, MatchesDefinition) {
  for (int64_t rows : {1, 7, 16, 17, 49, 64})
    for (int64_t cols : {1, 5, 16, 31, 48, 50})
      for (int generic = 0; generic < 2; ++generic) {
        const int64_t lds = cols + 3, ldd = rows + 5;
        std::vector<float> src(static_cast<size_t>(rows * lds)), dst(static_cast<size_t>(cols * ldd), NAN);
        for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i) * 0.5f - 7.0f;
        if (generic)
          transpose_f32_generic(rows, cols, src.data(), lds, dst.data(), ldd);
        else
          transpose_f32(rows, cols, src.data(), lds, dst.data(), ldd);
        for (int64_t j = 0; j < cols; ++j)
          for (int64_t i = 0; i < ldd; ++i) {
            const float got = dst[static_cast<size_t>(j * ldd + i)];
            if (i < rows)
              ASSERT_EQ(got, src[static_cast<size_t>(i * lds + j)]) << rows << "x" << cols << " at " << i << "," << j;
            else
              ASSERT_TRUE(std::isnan(got)) << "padding written: " << rows << "x" << cols << " at " << i << "," << j;
          }
      }
}

}  // namespace
}  // namespace kiln::kernels
