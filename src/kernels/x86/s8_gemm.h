// int8 GEMM for quantized inference: C[M,N] (int32) = A[M,K] (uint8) x B[K,N] (int8), exact.
// AVX-512 VNNI microkernel (vpdpbusd: four u8*s8 products summed into each int32 lane) over
// panels packed once; on AVX2 an exact microkernel on int16-widened operands (vpmaddwd); a
// portable loop elsewhere. Zero points are the caller's; the weight-stationary conv GEMM (VNNI)
// can requantize to uint8 in its microkernel (Requantize).
// Tests: tests/kernels/test_s8_gemm.cc. Benchmark: bench/peak_flops.cc (int8 line).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/large_alloc.h"
#include "kernels/x86/f32_gemm.h"

namespace kiln::kernels {

// True when this CPU runs the VNNI microkernel (KILN_ISA other than avx512 turns it off).
bool s8_gemm_has_vnni();
// "avx512vnni", "avx2" or "portable": the microkernel u8s8_gemm runs here.
const char* s8_gemm_kernel_name();

// B [K, N] packed for the microkernel: 32-column panels, K in groups of 4 (zero-padded).
// On AVX2 without VNNI the values are stored widened to int16 instead (`wide`, same layout), so
// the microkernel loads them ready for vpmaddwd — unless they all lie within [-64, 63]
// (`seven_bit`: 7-bit weights), which the faster vpmaddubsw microkernel reads as int8.
struct PackedB8 {
  int64_t k = 0, n = 0;
  LargeVector<int8_t> data;   // [panel][k/4][32][4]
  LargeVector<int16_t> wide;  // the same, int16 (AVX2, B beyond 7 bits; then `data` is empty)
  bool seven_bit = false;     // AVX2: every value within [-64, 63], packed in `data`
};
PackedB8 pack_b_s8(int64_t K, int64_t N, const int8_t* B, int64_t ldb);

// Called by the task that finished C's block rows [i0, i0 + rows) x columns [j0, j0 + cols), all
// of K summed: an epilogue (zero-point correction, dequantization) runs there while the block is
// still in cache.
using S8BlockDone = std::function<void(int64_t i0, int64_t rows, int64_t j0, int64_t cols)>;
// C = A * B (int32, row-major, leading dims lda / ldc); B pre-packed; then done(block) per block.
void u8s8_gemm_packed(int64_t M, const uint8_t* A, int64_t lda, const PackedB8& B, int32_t* C, int64_t ldc,
                      const ParallelFor& parallel = nullptr, const S8BlockDone& done = nullptr);
// Weight-stationary int8 GEMM for NCHW convolutions (VNNI only: s8_gemm_has_vnni()): the int8
// weights W [M, K] packed once in 14-row panels (K in groups of 4, zero-padded), the uint8
// activations X [K, P] in quads (rows 4q..4q+3 of a column interleaved), so that Y [M, P] comes
// out row-major: NCHW for a conv.
struct PackedW8 {
  int64_t m = 0, k = 0;
  LargeVector<int8_t> data;  // [panel][k/4][14][4]
};
PackedW8 pack_w_s8(int64_t M, int64_t K, const int8_t* W, int64_t ldw);
// Where the GEMM reads X: quad q (rows 4q..4q+3) of column p at x + quad_offsets[q] + 4 * p —
// for an implicit convolution, the taps of padded quad-interleaved images. The columns up to the
// next multiple of 32 are read, their results dropped.
struct QuadColumns {
  const uint8_t* x = nullptr;
  const int64_t* quad_offsets = nullptr;  // K/4 entries
};
// Columns on a padded grid (an implicit convolution computes rows of `pitch` columns of which the
// first `width` are output pixels): column p is Y's column (p / pitch) * width + p % pitch,
// dropped when p % pitch >= width. pitch 0: column p is Y's column p.
struct ColumnGrid {
  int64_t pitch = 0, width = 0;
};
// Y (int32, leading dim ldy) = W x X over P columns (of the grid).
void s8u8_gemm_quads(const PackedW8& W, int64_t P, const QuadColumns& X, const ColumnGrid& grid, int32_t* Y,
                     int64_t ldy, const ParallelFor& parallel = nullptr);
// The requantizing epilogue of the weight-stationary GEMM (ConvInteger followed by Cast, Mul,
// Add, Relu and QuantizeLinear): row m's int32 sum s becomes the uint8
//   saturate(round_half_even(relu(float(s - correction[m]) * scale[m] + bias[m]) / y_scale) + y_zero_point),
// each float step rounded as those nodes round it (no fused multiply-add), so bit for bit theirs.
struct Requantize {
  const int32_t* correction = nullptr;  // per row (null: none)
  const float* scale = nullptr;         // per row
  const float* bias = nullptr;          // per row (null: none)
  bool relu = false;
  float y_scale = 1.0f;
  uint8_t y_zero_point = 0;
};
// One value as Requantize computes it (row m): the scalar definition the tests check against.
uint8_t requantize_value(const Requantize& rq, int64_t m, int32_t sum);
// Y (uint8, leading dim ldy) = requantized W x X: s8u8_gemm_quads with each 14x32 int32 tile kept
// in L1 and requantized there (never written out as int32).
void s8u8_gemm_quads_requantize(const PackedW8& W, int64_t P, const QuadColumns& X, const ColumnGrid& grid,
                                const Requantize& rq, uint8_t* Y, int64_t ldy, const ParallelFor& parallel = nullptr);
// An integer GEMM's epilogue on one row of C, in place: the sum s = row[j] + corr[j] - zb[j] *
// rowsum (corr null: s = row[j]; zb null: no rowsum term); dequantizing (scale not null), the
// float bias[j] + float(s) * scale[j] (bias null: no add), each step rounded on its own as the
// Cast, Mul and Add nodes round it, stored in s's place. Needs AVX2 (every CPU with a non-portable
// int8 GEMM has it).
struct S8RowEpilogue {
  const int32_t *corr = nullptr, *zb = nullptr;
  const float *scale = nullptr, *bias = nullptr;
};
void s8_finish_row__avx2(const S8RowEpilogue& e, int32_t rowsum, int32_t* row, int64_t cols);
// Four rows of X interleaved into quads: dst[4p + t] = rows[t][p], p < n. Needs AVX2 (every CPU
// with VNNI has it).
void interleave_quads_u8__avx2(const uint8_t* const rows[4], int64_t n, uint8_t* dst);
// Packs B and runs u8s8_gemm_packed.
void u8s8_gemm(int64_t M, int64_t N, int64_t K, const uint8_t* A, int64_t lda, const int8_t* B, int64_t ldb,
               int32_t* C, int64_t ldc, const ParallelFor& parallel = nullptr);

}  // namespace kiln::kernels
