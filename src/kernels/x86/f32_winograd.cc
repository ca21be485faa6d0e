// Winograd F(4x4, 3x3) weight / input / output transforms (see f32_winograd.h). Each transform
// runs as two 1-D passes: one along image rows (contiguous, vectorized across x) and one across
// the tiles of a tile row (vectorized across tiles); cloned for AVX-512 / AVX2 at load time.
#include "kernels/x86/f32_winograd.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace kiln::kernels {
namespace {

// B^T (6x6), G (6x3), A^T (4x6) of F(4x4, 3x3).
constexpr float kBT[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                             {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
constexpr float kG[6][3] = {{1.0f / 4, 0, 0},
                            {-1.0f / 6, -1.0f / 6, -1.0f / 6},
                            {-1.0f / 6, 1.0f / 6, -1.0f / 6},
                            {1.0f / 24, 1.0f / 12, 1.0f / 6},
                            {1.0f / 24, -1.0f / 12, 1.0f / 6},
                            {0, 0, 1}};
constexpr float kAT[4][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};

#define KILN_WINOGRAD_CLONES __attribute__((target_clones("avx512f", "arch=haswell", "default")))

// t[k][x] = sum_i BT[k][i] * r[i][x] over a padded strip of 6 input rows.
KILN_WINOGRAD_CLONES void rows_bt(const float* const* r, int64_t n, float* t, int64_t ldt) {
  for (int k = 0; k < 6; ++k) {
    float* tk = t + k * ldt;
    const float b0 = kBT[k][0], b1 = kBT[k][1], b2 = kBT[k][2], b3 = kBT[k][3], b4 = kBT[k][4], b5 = kBT[k][5];
    for (int64_t x = 0; x < n; ++x)
      tk[x] = b0 * r[0][x] + b1 * r[1][x] + b2 * r[2][x] + b3 * r[3][x] + b4 * r[4][x] + b5 * r[5][x];
  }
}

// v[(k*6+l)*ldv + tx] = sum_j BT[l][j] * t[k][4*tx + j] for the tiles of one tile row.
KILN_WINOGRAD_CLONES void cols_bt(const float* t, int64_t ldt, int64_t tw, float* v, int64_t ldv) {
  for (int k = 0; k < 6; ++k) {
    const float* tk = t + k * ldt;
    for (int l = 0; l < 6; ++l) {
      float* out = v + (k * 6 + l) * ldv;
      const float b0 = kBT[l][0], b1 = kBT[l][1], b2 = kBT[l][2], b3 = kBT[l][3], b4 = kBT[l][4], b5 = kBT[l][5];
      for (int64_t tx = 0; tx < tw; ++tx) {
        const float* d = tk + 4 * tx;
        out[tx] = b0 * d[0] + b1 * d[1] + b2 * d[2] + b3 * d[3] + b4 * d[4] + b5 * d[5];
      }
    }
  }
}

// s[a][l][tx] = sum_k AT[a][k] * m[(k*6+l)*ldm + tx].
KILN_WINOGRAD_CLONES void rows_at(const float* m, int64_t ldm, int64_t tw, float* s) {
  for (int a = 0; a < 4; ++a)
    for (int l = 0; l < 6; ++l) {
      float* out = s + (a * 6 + l) * tw;
      const float a0 = kAT[a][0], a1 = kAT[a][1], a2 = kAT[a][2], a3 = kAT[a][3], a4 = kAT[a][4], a5 = kAT[a][5];
      const float* m0 = m + l * ldm;
      for (int64_t tx = 0; tx < tw; ++tx)
        out[tx] = a0 * m0[tx] + a1 * m0[6 * ldm + tx] + a2 * m0[12 * ldm + tx] + a3 * m0[18 * ldm + tx] +
                  a4 * m0[24 * ldm + tx] + a5 * m0[30 * ldm + tx];
    }
}

// row[4*tx + b] = clamp(sum_l AT[b][l] * s[a][l][tx] + bias) for output row a of a tile row.
KILN_WINOGRAD_CLONES void cols_at(const float* s, int64_t tw, float bias, float lo, float hi, float* row) {
  for (int b = 0; b < 4; ++b) {
    const float a0 = kAT[b][0], a1 = kAT[b][1], a2 = kAT[b][2], a3 = kAT[b][3], a4 = kAT[b][4], a5 = kAT[b][5];
    for (int64_t tx = 0; tx < tw; ++tx) {
      const float v = a0 * s[tx] + a1 * s[tw + tx] + a2 * s[2 * tw + tx] + a3 * s[3 * tw + tx] +
                      a4 * s[4 * tw + tx] + a5 * s[5 * tw + tx] + bias;
      row[4 * tx + b] = std::min(std::max(v, lo), hi);
    }
  }
}

}  // namespace

void winograd_f43_weights(int64_t co, int64_t c, const float* g, float* u) {
  const int64_t plane = co * c;
  for (int64_t o = 0; o < co; ++o)
    for (int64_t ci = 0; ci < c; ++ci) {
      const float* k = g + (o * c + ci) * 9;
      float tmp[6][3];  // G g
      for (int i = 0; i < 6; ++i)
        for (int j = 0; j < 3; ++j) tmp[i][j] = kG[i][0] * k[j] + kG[i][1] * k[3 + j] + kG[i][2] * k[6 + j];
      for (int i = 0; i < 6; ++i)
        for (int j = 0; j < 6; ++j)
          u[(i * 6 + j) * plane + o * c + ci] = tmp[i][0] * kG[j][0] + tmp[i][1] * kG[j][1] + tmp[i][2] * kG[j][2];
    }
}

void winograd_f43_input(const WinogradGeom& g, const float* x, int64_t c0, int64_t c1, float* v) {
  const int64_t th = g.tiles_h(), tw = g.tiles_w(), tiles = th * tw;
  const int64_t strip = tw * 4 + 2;  // padded columns one tile row reads
  const int64_t ld = (strip + 15) / 16 * 16;
  std::vector<float> buf(static_cast<size_t>(12 * ld));
  float* rows = buf.data();  // 6 padded input rows
  float* t = rows + 6 * ld;  // 6 row-transformed rows
  const float* r[6];
  for (int i = 0; i < 6; ++i) r[i] = rows + i * ld;
  // Columns of the strip that hold input: x' = ix + pl for ix in [0, w).
  const int64_t lead = std::min(g.pl, strip), body = std::max<int64_t>(0, std::min(g.w, strip - g.pl));
  for (int64_t ci = c0; ci < c1; ++ci) {
    const float* xc = x + ci * g.h * g.w;
    for (int64_t ty = 0; ty < th; ++ty) {
      for (int i = 0; i < 6; ++i) {
        float* dst = rows + i * ld;
        const int64_t iy = ty * 4 - g.pt + i;
        if (iy < 0 || iy >= g.h) {
          std::memset(dst, 0, sizeof(float) * static_cast<size_t>(strip));
          continue;
        }
        std::memset(dst, 0, sizeof(float) * static_cast<size_t>(lead));
        std::memcpy(dst + lead, xc + iy * g.w, sizeof(float) * static_cast<size_t>(body));
        std::memset(dst + lead + body, 0, sizeof(float) * static_cast<size_t>(strip - lead - body));
      }
      rows_bt(r, strip, t, ld);
      cols_bt(t, ld, tw, v + ci * tiles + ty * tw, g.c * tiles);
    }
  }
}

void winograd_f43_output(const WinogradGeom& g, const float* m, const float* bias, float lo, float hi, int64_t o0,
                         int64_t o1, float* y) {
  const int64_t th = g.tiles_h(), tw = g.tiles_w(), tiles = th * tw;
  std::vector<float> buf(static_cast<size_t>(24 * tw + 4 * tw + 16));
  float* s = buf.data();
  float* row = s + 24 * tw;
  for (int64_t o = o0; o < o1; ++o) {
    const float b = bias ? bias[o] : 0.0f;
    for (int64_t ty = 0; ty < th; ++ty) {
      rows_at(m + o * tiles + ty * tw, g.co * tiles, tw, s);
      for (int a = 0; a < 4; ++a) {
        const int64_t oy = ty * 4 + a;
        if (oy >= g.ho) break;
        cols_at(s + a * 6 * tw, tw, b, lo, hi, row);
        std::memcpy(y + (o * g.ho + oy) * g.wo, row, sizeof(float) * static_cast<size_t>(g.wo));
      }
    }
  }
}

}  // namespace kiln::kernels
