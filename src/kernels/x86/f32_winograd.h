// Winograd F(4x4, 3x3) transforms for f32 conv (Lavin & Gray): a 3x3 stride-1 conv computes each
// 4x4 output tile from a 6x6 input tile as A^T [(G g G^T) .* (B^T d B)] A, i.e. 36 independent
// GEMMs over channels, [Co, C] x [C, tiles] (4x fewer multiplies than the direct conv).
// Layout: transformed weights u[e][co][c], transformed input v[e][c][t], GEMM output m[e][co][t]
// with e = 6*row + col of the 6x6 tile and t = tile_y * tiles_w + tile_x.
// Tests: tests/kernels/test_winograd.cc.
#pragma once

#include <cstdint>
#include <limits>

namespace kiln::kernels {

struct WinogradGeom {
  int64_t c = 0, co = 0;      // input / output channels
  int64_t h = 0, w = 0;       // input plane
  int64_t ho = 0, wo = 0;     // output plane
  int64_t pt = 0, pl = 0;     // top / left padding
  int64_t tiles_h() const { return (ho + 3) / 4; }
  int64_t tiles_w() const { return (wo + 3) / 4; }
  int64_t tiles() const { return tiles_h() * tiles_w(); }
};

// g: [co, c, 3, 3] -> u: 36 x [co, c].
void winograd_f43_weights(int64_t co, int64_t c, const float* g, float* u);

// Channels [c0, c1) of image x ([c, h, w]) -> v (36 x [c, tiles]).
void winograd_f43_input(const WinogradGeom& g, const float* x, int64_t c0, int64_t c1, float* v);

// Output channels [o0, o1): y[co, ho, wo] = A^T m A + bias, clamped to [lo, hi].
void winograd_f43_output(const WinogradGeom& g, const float* m, const float* bias, float lo, float hi, int64_t o0,
                         int64_t o1, float* y);

}  // namespace kiln::kernels
