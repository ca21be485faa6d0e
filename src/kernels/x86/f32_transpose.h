// f32 matrix transpose (rows x cols, strided) for ops that compute in one orientation and store
// in the other (a 1x1 conv computed with the pixels as GEMM rows, stored NCHW): 16x16 blocks
// transposed in AVX-512 registers or 8x8 in AVX2 ones, masked at the edges; a portable loop
// elsewhere.
// Tests: tests/kernels/test_transpose.cc.
#pragma once

#include <cstdint>

namespace kiln::kernels {

// dst[j * ldd + i] = src[i * lds + j] for i < rows, j < cols.
void transpose_f32(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst, int64_t ldd);
// The portable loop alone (the reference for tests), and the ISA kernels (call only when the CPU
// has the ISA: isa_supported in f32_gemm.h).
void transpose_f32_generic(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst, int64_t ldd);
void transpose_f32_avx2(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst, int64_t ldd);
void transpose_f32_avx512f(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst, int64_t ldd);

// out[k * mr + i] = alpha * a[i * lda + k] for i < rows, 0 for rows <= i < mr, k < kc (1 <= rows
// <= mr <= 8): one MR-row micro-panel of a GEMM's A in the layout f32_gemm_pack_a writes (the same
// values), from 8x8 AVX2 register transposes. Call only when the CPU has AVX2 and FMA.
void pack_rows_k_major_avx2(int mr, int64_t rows, int64_t kc, const float* a, int64_t lda, float alpha, float* out);

}  // namespace kiln::kernels
