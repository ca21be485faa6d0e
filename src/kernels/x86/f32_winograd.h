// Winograd F(4x4, 3x3) and F(2x2, 3x3) for f32 stride-1 3x3 convs (Lavin & Gray): each m x m
// output tile (m = 4 or 2) comes from an (m+2) x (m+2) input tile as A^T [(G g G^T) .* (B^T d B)] A,
// i.e. 36 (or 16) independent GEMMs over channels, [Co, C] x [C, tiles], with 4x (2.25x) fewer
// multiplies than the direct conv. F(2x2) is for small images (7x7: 16 tiles instead of 4).
// The tiles of an image go in blocks of at most 32 (a rectangle of tile rows x tile columns), one
// GEMM micro-panel wide, so a block's transformed input (36 x [C, 32]) is written straight in the
// f32 microkernel's packed-B layout and stays in L2 while the 36 (16) GEMMs and the output transform
// (bias, residual, clamp, activation fused) run over it one micro-panel of output channels at
// a time. Images of at most 16 tiles (13x13 to 16x16 outputs) use 16-column panels and a
// 16-column microkernel of this file instead of half-empty 32-column ones. Transforms and the
// driver exist for AVX-512 (32-column microkernel) and AVX2 (a 6x16 GEMM loop of its own, a
// 32-column panel read as two 16-column halves), picked like the default f32 microkernel.
// Tests: tests/runtime/test_conv_winograd.cc.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/large_alloc.h"
#include "kernels/x86/f32_gemm.h"
#include "kernels/x86/f32_gemm_prepacked_a.h"
#include "kernels/x86/isa_list.h"

namespace kiln::kernels {

struct WinogradGeom {
  int64_t m = 4;           // output tile size: 4 (F(4x4, 3x3)) or 2 (F(2x2, 3x3))
  int64_t c = 0, co = 0;   // input / output channels
  int64_t h = 0, w = 0;    // input plane
  int64_t ho = 0, wo = 0;  // output plane
  int64_t pt = 0, pl = 0;  // top / left padding
  int64_t alpha() const { return m + 2; }              // input tile size
  int64_t points() const { return alpha() * alpha(); }  // GEMMs: 36 or 16
  int64_t tiles_h() const { return (ho + m - 1) / m; }
  int64_t tiles_w() const { return (wo + m - 1) / m; }
  int64_t tiles() const { return tiles_h() * tiles_w(); }
};

// Tiles per block: `rows` tile rows x `cols` tile columns (rows * cols <= panel), panel = 16 or
// 32 GEMM columns.
struct WinogradBlocking {
  int64_t panel = 32;
  int64_t rows = 1, cols = 1;
  int64_t blocks_y = 1, blocks_x = 1;
  int64_t count() const { return blocks_y * blocks_x; }
};
WinogradBlocking winograd_blocking(const WinogradGeom& g);

// The tiles of one block: its tile rows, first tile column and tile columns, and the groups of
// `group` tiles (the transforms' vector width: AVX2 8, AVX-512 16) per tile row.
struct WinogradBlockSpan {
  int64_t ty0, ty1;
  int64_t tx0, ncol;
  int64_t groups;
};
inline WinogradBlockSpan winograd_block_span(const WinogradGeom& g, const WinogradBlocking& b, int64_t block,
                                             int64_t group) {
  WinogradBlockSpan s;
  const int64_t by = block / b.blocks_x, bx = block % b.blocks_x;
  s.ty0 = by * b.rows;
  s.ty1 = std::min(g.tiles_h(), s.ty0 + b.rows);
  s.tx0 = bx * b.cols;
  s.ncol = std::min(g.tiles_w(), s.tx0 + b.cols) - s.tx0;
  s.groups = (s.ncol + group - 1) / group;
  return s;
}

// Floats from one point's [C, panel] to the next in a block's transformed input: C * panel on
// AVX-512; on AVX2 one cache line more where C * panel is an even number of lines, so that the
// transforms' 36 (16) loads or stores of one tile, one per point, fall in different L1 sets (a
// power-of-two stride keeps them in one set of 8 ways).
int64_t winograd_point_floats(const WinogradGeom& g, const WinogradBlocking& b, target::Isa isa);
// Floats of one block's transformed input (points x [C, panel]).
inline int64_t winograd_block_floats(const WinogradGeom& g, const WinogradBlocking& b, target::Isa isa) {
  return g.points() * winograd_point_floats(g, b, isa);
}

// Rows per A panel of the AVX2 driver's own 6x16 GEMM loop (f32_winograd_avx2.cc).
inline constexpr int64_t kWinogradAvx2Rows = 6;

// Transformed weights packed as microkernel A panels, [panel][e][c][mr], for the blocking's
// panel width: the 32-column AVX-512 f32 microkernel `kernel`, or the transforms' own GEMM loop
// with mr rows (AVX-512 16-column panels: 16-28 rows; AVX2, both widths: kWinogradAvx2Rows).
struct WinogradKernels;
struct WinogradWeights {
  const WinogradKernels* kernels = nullptr;  // the entry the weights were packed for
  const F32GemmUkernel* kernel = nullptr;  // AVX-512 32-column panels only
  int64_t mr = 0, points = 36;
  int64_t co = 0, c = 0, panels = 0;
  LargeVector<float> data;
  const float* panel(int64_t p, int64_t e) const { return data.data() + (p * points + e) * c * mr; }
};

// One ISA's transforms and GEMM driver (f32_winograd_avx512f.cc, f32_winograd_avx2.cc). The
// family's list (isa_list.h); the weights' layout (mr) and the transformed input's point stride
// follow the entry, so packing and both block functions take the same one. An entry runs only
// when the CPU has its ISA (isa_supported), the AVX-512 one only with the 32-column AVX-512
// microkernel as the default (its 32-column panels' GEMMs).
struct WinogradKernels {
  void (*input_block)(const WinogradGeom& g, const WinogradBlocking& b, const float* x, int64_t block, int64_t c0,
                      int64_t c1, float* v);
  void (*gemm_output_block)(const WinogradGeom& g, const WinogradBlocking& b, const WinogradWeights& u,
                            const float* v, int64_t block, int64_t p0, int64_t p1, const RowEpilogue& ep, float* y);
  target::Isa isa;
};
#define KILN_WINOGRAD_F32_KERNELS(X)            \
  X(winograd_avx512f, ::kiln::target::Isa::kAvx512) \
  X(winograd_avx2, ::kiln::target::Isa::kAvx2)
#define KILN_DECLARE_WINOGRAD(NAME, ISA) extern const WinogradKernels NAME;
KILN_WINOGRAD_F32_KERNELS(KILN_DECLARE_WINOGRAD)
#undef KILN_DECLARE_WINOGRAD
const std::vector<IsaKernel<const WinogradKernels*>>& winograd_f32_kernels();

// True when the CPU and KILN_ISA give a default microkernel the transforms have a driver for
// (32-column AVX-512, or AVX2).
bool winograd_available();
// The entry of the default microkernel's ISA (KILN_ISA may make it AVX2 on AVX-512). Requires
// winograd_available().
const WinogradKernels& winograd_host_kernels();

// Requires the entry to run here (see WinogradKernels).
WinogradWeights winograd_pack_weights(const WinogradGeom& g, const float* w, const WinogradBlocking& b,
                                      const WinogradKernels& k = winograd_host_kernels());

// Channels [c0, c1) of block `block` of image x ([c, h, w]) -> v (points x [c, panel]), with
// the transforms of the weights' entry.
void winograd_input_block(const WinogradGeom& g, const WinogradBlocking& b, const WinogradWeights& u, const float* x,
                          int64_t block, int64_t c0, int64_t c1, float* v);

// Output-channel panels [p0, p1) of block `block`: the GEMMs over v, then the output
// transform into y ([co, ho, wo]) with ep's bias (per channel), residual ([co, ho, wo], ldr =
// plane), clamp and activation.
void winograd_gemm_output_block(const WinogradGeom& g, const WinogradBlocking& b, const WinogradWeights& u,
                                const float* v, int64_t block, int64_t p0, int64_t p1, const RowEpilogue& ep, float* y);

}  // namespace kiln::kernels
