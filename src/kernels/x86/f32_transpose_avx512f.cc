// f32 transpose in 16x16 AVX-512 register blocks (see f32_transpose.h); edge blocks use masked
// loads and stores.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/x86/f32_transpose.h"
#include "kernels/x86/lane_mask.h"
#include "kernels/x86/transpose16.h"

namespace kiln::kernels {

void transpose_f32_avx512f(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst, int64_t ldd) {
  for (int64_t i0 = 0; i0 < rows; i0 += 16) {
    const int64_t nr = std::min<int64_t>(16, rows - i0);
    const __mmask16 row_mask = F32x16::first(nr);
    for (int64_t j0 = 0; j0 < cols; j0 += 16) {
      const int64_t nc = std::min<int64_t>(16, cols - j0);
      const __mmask16 col_mask = F32x16::first(nc);
      __m512 r[16];
      load_transposed16(src + i0 * lds + j0, lds, nr, col_mask, r);
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j)
        if (j < nc) _mm512_mask_storeu_ps(dst + (j0 + j) * ldd + i0, row_mask, r[j]);
    }
  }
}

}  // namespace kiln::kernels
