// f32 matrix transpose, dst[j][i] = src[i][j]: 16x16 in-register blocks on AVX-512 (masked at
// the edges), plain loops elsewhere. Used to bring pixel-major GEMM results back to NCHW.
// Tests: tests/kernels/test_transpose.cc.
#pragma once

#include <cstdint>

namespace kiln::kernels {

// src: rows x cols with leading dim lds; dst: cols x rows with leading dim ldd.
void transpose_f32(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst, int64_t ldd);
void transpose_f32_generic(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst, int64_t ldd);
// Only when isa_supported(Isa::kAvx512).
void transpose_f32_avx512f(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst, int64_t ldd);

}  // namespace kiln::kernels
