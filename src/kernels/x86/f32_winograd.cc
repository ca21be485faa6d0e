// Winograd F(4x4, 3x3) and F(2x2, 3x3): tile blocking, the weight transforms and their packing
// (see f32_winograd.h), and the family's list of the transforms of f32_winograd_avx512f.cc and
// f32_winograd_avx2.cc.
#include "kernels/x86/f32_winograd.h"

#include <algorithm>
#include <vector>

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

// g: [co, c, 3, 3] -> u: points x [co, c] (e = alpha * row + col of the input tile), u = G g G^T.
// Per output channel the c kernels are first transposed to 9 rows of c values, so that every
// loop after runs over the input channels with contiguous loads and stores and vectorizes (in
// the [c, 3, 3] order the taps are 9 floats apart, and each kernel scatters its 36 points over
// 36 planes): ResNet-50's 3x3 weights transform about 8x faster. The arithmetic is the same
// per element and in the same order, so the results are bit for bit those of the scalar loop.
void winograd_weights(int64_t m, int64_t co, int64_t c, const float* g, float* u) {
  const int a = static_cast<int>(m + 2);
  const double(*G)[3] = m == 2 ? kG2 : kG4;
  const int64_t plane = co * c;
  std::vector<double> taps(static_cast<size_t>(9 * c)), gg(static_cast<size_t>(a * 3 * c));  // [tap][ci], (G g)[i][j][ci]
  for (int64_t o = 0; o < co; ++o) {
    const float* k = g + o * c * 9;
    for (int64_t ci = 0; ci < c; ++ci)
      for (int tap = 0; tap < 9; ++tap) taps[static_cast<size_t>(tap * c + ci)] = k[ci * 9 + tap];
    for (int i = 0; i < a; ++i)
      for (int j = 0; j < 3; ++j) {
        const double *k0 = &taps[static_cast<size_t>(j * c)], *k1 = k0 + 3 * c, *k2 = k0 + 6 * c;
        double* t = &gg[static_cast<size_t>((i * 3 + j) * c)];
        for (int64_t ci = 0; ci < c; ++ci) t[ci] = G[i][0] * k0[ci] + G[i][1] * k1[ci] + G[i][2] * k2[ci];
      }
    for (int i = 0; i < a; ++i) {
      const double *t0 = &gg[static_cast<size_t>(i * 3 * c)], *t1 = t0 + c, *t2 = t0 + 2 * c;
      for (int j = 0; j < a; ++j) {
        float* dst = u + (i * a + j) * plane + o * c;
        for (int64_t ci = 0; ci < c; ++ci) dst[ci] = static_cast<float>(t0[ci] * G[j][0] + t1[ci] * G[j][1] + t2[ci] * G[j][2]);
      }
    }
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
  w.data.resize(static_cast<size_t>(points * w.panels * mr * c));
  // One panel of mr output channels at a time: its transformed weights (points x [rows, c], a
  // few hundred KB) stay in cache between the transform and the packing, and no transformed copy
  // of the whole weight (4x the weight for F(4x4, 3x3)) is allocated.
  std::vector<float> u(static_cast<size_t>(points * mr * c));
  for (int64_t p = 0; p < w.panels; ++p) {
    const int64_t rows = std::min(mr, co - p * mr);
    winograd_weights(geom.m, rows, c, g + p * mr * c * 9, u.data());
    for (int64_t e = 0; e < points; ++e)
      f32_gemm_pack_a(false, rows, c, u.data() + e * rows * c, c, 1.0f, static_cast<int>(mr),
                      w.data.data() + (p * points + e) * c * mr);
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
