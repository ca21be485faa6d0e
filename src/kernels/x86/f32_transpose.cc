// f32 transpose: the ISA dispatch and the portable loop (see f32_transpose.h).
#include "kernels/x86/f32_transpose.h"

#include <algorithm>

#include "kernels/x86/f32_gemm.h"

namespace kiln::kernels {

void transpose_f32_generic(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst, int64_t ldd) {
  constexpr int64_t kBlock = 16;  // cache blocks: both sides stay within a few lines per row
  for (int64_t i0 = 0; i0 < rows; i0 += kBlock)
    for (int64_t j0 = 0; j0 < cols; j0 += kBlock)
      for (int64_t j = j0; j < std::min(cols, j0 + kBlock); ++j)
        for (int64_t i = i0; i < std::min(rows, i0 + kBlock); ++i) dst[j * ldd + i] = src[i * lds + j];
}

const std::vector<IsaKernel<TransposeFn>>& transpose_f32_kernels() {
  static const std::vector<IsaKernel<TransposeFn>> list = {KILN_TRANSPOSE_F32_KERNELS(KILN_ISA_KERNEL_ENTRY)};
  return list;
}

void transpose_f32(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst, int64_t ldd) {
  static const TransposeFn fn = host_kernel(transpose_f32_kernels());
  fn(rows, cols, src, lds, dst, ldd);
}

}  // namespace kiln::kernels
