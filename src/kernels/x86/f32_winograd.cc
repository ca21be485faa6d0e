// Winograd F(4x4, 3x3) and F(2x2, 3x3): tile blocking, the weight transforms and their packing
// (see f32_winograd.h), and the family's list of the transforms of f32_winograd_avx512f.cc and
// f32_winograd_avx2.cc.
#include "kernels/x86/f32_winograd.h"

#include <algorithm>

namespace kiln::kernels {

namespace {

// G of F(2x2, 3x3) (4x3; points 0, +-1, infinity) and of F(4x4, 3x3) (6x3; points 0, +-1, +-2,
// infinity). In double: the transformed weights are rounded to float once.
constexpr double kG2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
constexpr double kG4[6][3] = {{1.0 / 4, 0, 0},
                             {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                             {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                             {1.0 / 24, 1.0 / 12, 1.0 / 6},
                             {1.0 / 24, -1.0 / 12, 1.0 / 6},
                             {0, 0, 1}};

// g: [co, c, 3, 3] -> u: points x [co, c] (e = alpha * row + col of the input tile).
void winograd_weights(int64_t m, int64_t co, int64_t c, const float* g, float* u) {
  const int a = static_cast<int>(m + 2);
  const double(*G)[3] = m == 2 ? kG2 : kG4;
  const int64_t plane = co * c;
  for (int64_t o = 0; o < co; ++o)
    for (int64_t ci = 0; ci < c; ++ci) {
      const float* k = g + (o * c + ci) * 9;
      double tmp[6][3];  // G g
      for (int i = 0; i < a; ++i)
        for (int j = 0; j < 3; ++j) tmp[i][j] = G[i][0] * k[j] + G[i][1] * k[3 + j] + G[i][2] * k[6 + j];
      for (int i = 0; i < a; ++i)
        for (int j = 0; j < a; ++j)
          u[(i * a + j) * plane + o * c + ci] =
              static_cast<float>(tmp[i][0] * G[j][0] + tmp[i][1] * G[j][1] + tmp[i][2] * G[j][2]);
    }
}

}  // namespace

WinogradBlocking winograd_blocking(const WinogradGeom& g) {
  WinogradBlocking b;
  const int64_t th = g.tiles_h(), tw = g.tiles_w();
  b.panel = th * tw <= 16 ? 16 : 32;
  // Whole tile rows per block when a row fits in a panel, else equal pieces of a row.
  if (tw <= b.panel) {
    b.cols = tw;
    b.rows = std::min<int64_t>(th, b.panel / tw);
  } else {
    b.cols = ceil_div(tw, ceil_div(tw, b.panel));
    b.rows = 1;
  }
  b.blocks_x = ceil_div(tw, b.cols);
  b.blocks_y = ceil_div(th, b.rows);
  return b;
}

int64_t winograd_point_floats(const WinogradGeom& g, const WinogradBlocking& b, Isa isa) {
  const int64_t floats = g.c * b.panel, lines = floats / 16;
  return isa == Isa::kAvx2 && lines % 2 == 0 ? floats + 16 : floats;
}

const std::vector<IsaKernel<const WinogradKernels*>>& winograd_f32_kernels() {
  static const std::vector<IsaKernel<const WinogradKernels*>> list = {KILN_WINOGRAD_F32_KERNELS(KILN_ISA_KERNEL_ENTRY)};
  return list;
}

const WinogradKernels& winograd_host_kernels() {
  static const WinogradKernels* host = [] {
    const Isa isa = f32_gemm_default().isa;
    for (const auto& k : winograd_f32_kernels())
      if (k.isa == isa) return k.fn;
    return &winograd_avx2;  // (never used: winograd_available() is false then)
  }();
  return *host;
}

bool winograd_available() {
  const F32GemmUkernel& uk = f32_gemm_default();
  return (uk.isa == Isa::kAvx512 && uk.nr == 32) || uk.isa == Isa::kAvx2;
}

WinogradWeights winograd_pack_weights(const WinogradGeom& geom, const float* g, const WinogradBlocking& b,
                                      const WinogradKernels& k) {
  const int64_t co = geom.co, c = geom.c, points = geom.points();
  WinogradWeights w;
  w.kernels = &k;
  w.points = points;
  if (k.isa == Isa::kAvx2) {
    w.mr = kWinogradAvx2Rows;  // for both panel widths (a 32-column panel is two halves)
  } else if (b.panel == 32) {
    w.kernel = &f32_gemm_for_rows(co);
    w.mr = w.kernel->mr;
  } else {
    // The 16-column kernel's row counts (f32_winograd_avx512f.cc): the one padding co least,
    // the most rows on ties.
    for (int64_t mr : {28, 24, 16})
      if (w.mr == 0 || ceil_div(co, mr) * mr < ceil_div(co, w.mr) * w.mr) w.mr = mr;
  }
  w.co = co, w.c = c;
  const int64_t mr = w.mr;
  w.panels = ceil_div(co, mr);
  std::vector<float> u(static_cast<size_t>(points * co * c));
  winograd_weights(geom.m, co, c, g, u.data());
  std::vector<float> packed(static_cast<size_t>(w.panels * mr * c));
  w.data.resize(static_cast<size_t>(points * w.panels * mr * c));
  for (int64_t e = 0; e < points; ++e) {
    f32_gemm_pack_a(false, co, c, u.data() + e * co * c, c, 1.0f, static_cast<int>(mr), packed.data());
    for (int64_t p = 0; p < w.panels; ++p)
      std::copy_n(packed.data() + p * c * mr, c * mr, w.data.data() + (p * points + e) * c * mr);
  }
  return w;
}

void winograd_input_block(const WinogradGeom& g, const WinogradBlocking& b, const WinogradWeights& u, const float* x,
                          int64_t block, int64_t c0, int64_t c1, float* v) {
  u.kernels->input_block(g, b, x, block, c0, c1, v);
}

void winograd_gemm_output_block(const WinogradGeom& g, const WinogradBlocking& b, const WinogradWeights& u,
                                const float* v, int64_t block, int64_t p0, int64_t p1, const RowEpilogue& ep,
                                float* y) {
  u.kernels->gemm_output_block(g, b, u, v, block, p0, p1, ep, y);
}

}  // namespace kiln::kernels
