// int8 GEMM: packing, dispatch and the blocked driver (see s8_gemm.h). Blocking like sgemm: a
// task owns an M block x a chunk of B panels; per K block it packs its A block (u8 quads per
// row) and runs the 14x32 VNNI microkernel over the panels, accumulating into C after the first.
// A model's packed weights outgrow the last-level cache (BERT-like: 85 MB), so each panel comes
// from memory: the VNNI tiles of a panel prefetch the next one into L2 as they go, a share each
// (128 x 3072 x 768 with B from memory: 0.79 -> 0.68 ms; 0.66 with B in cache; AMD EPYC Zen 5).
#include "kernels/x86/s8_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/error.h"

namespace kiln::kernels {

void s8_gemm_ukernel_14x32__avx512vnni(int64_t mr, int64_t nr, int64_t kq, const uint8_t* a, const int8_t* b,
                                       int32_t* c, int64_t ldc, bool accumulate);
void s8_gemm_ukernel_14x32_rows__avx512vnni(int64_t mr, int64_t nr, int64_t kq, const uint8_t* a, int64_t lda,
                                            const int8_t* b, int32_t* c, int64_t ldc, bool accumulate,
                                            const int8_t* prefetch, int64_t prefetch_lines);
void s8_gemm_ukernel_14x32_wx__avx512vnni(int64_t mr, int64_t nr, int64_t kq, const int8_t* w, const uint8_t* x,
                                          const int64_t* x_offsets, int32_t* c, int64_t ldc);
void s8_gemm_ukernel_14x32_wx_requantize__avx512vnni(int64_t mr, int64_t nr, int64_t kq, const int8_t* w,
                                                     const uint8_t* x, const int64_t* x_offsets, const Requantize& rq,
                                                     int64_t row0, uint8_t* y, int64_t ldy);
void s8_gemm_ukernel_14x32__avx2(int64_t mr, int64_t nr, int64_t kq, const int16_t* a, const int16_t* b, int32_t* c,
                                 int64_t ldc, bool accumulate);
void s8_gemm_ukernel_rows_x32__avx2_7bit(int64_t mr, int64_t nr, int64_t kq, const uint8_t* a, int64_t lda,
                                         const int8_t* b, int32_t* c, int64_t ldc, bool accumulate);
void s8_gemm_ukernel_14x32__avx2_7bit(int64_t mr, int64_t nr, int64_t kq, const uint8_t* a, const int8_t* b,
                                      int32_t* c, int64_t ldc, bool accumulate);

namespace {

constexpr int64_t kMr = 14, kNr = 32;
constexpr int64_t kKc = 1024;  // K block (a multiple of 4): one 32 KB B panel block stays in L1
constexpr int64_t kMc = 8 * kMr;

// Rows [i0, i0+rows) x K [k0, k0+kc) of A as micro-panels [kc/4][14][4] of T (u8, or int16 for
// the AVX2 microkernel), zero-padded. Whole quads of whole panels copy without per-element
// checks (this runs once per K block and column chunk: in a 128-row GEMM it was a third of the
// time when checked per element).
template <typename T>
void pack_a(const uint8_t* A, int64_t lda, int64_t M, int64_t K, int64_t i0, int64_t rows, int64_t k0, int64_t kc,
            T* out) {
  const int64_t kq = ceil_div(kc, 4), full_q = std::min(kc, K - k0) / 4;
  for (int64_t ii = 0; ii < rows; ii += kMr) {
    T* panel = out + ii * kq * 4;
    for (int64_t i = 0; i < kMr; ++i) {
      const int64_t r = i0 + ii + i;
      const bool live = r < M && ii + i < rows;
      const uint8_t* src = live ? A + r * lda + k0 : nullptr;
      for (int64_t q = 0; q < kq; ++q) {
        T* dst = panel + (q * kMr + i) * 4;
        if (live && q < full_q) {
          for (int64_t t = 0; t < 4; ++t) dst[t] = src[4 * q + t];
        } else {
          for (int64_t t = 0; t < 4; ++t) {
            const int64_t k = k0 + 4 * q + t;
            dst[t] = live && k < K && k < k0 + kc ? src[4 * q + t] : 0;
          }
        }
      }
    }
  }
}

enum class S8Path { kPortable, kAvx2, kVnni };

}  // namespace

bool s8_gemm_has_vnni() {
  const target::Target& t = target::Target::host();
  return t.isa == Isa::kAvx512 && t.features.avx512vnni;
}

namespace {
// The microkernel for this CPU: VNNI, else the exact AVX2 one (int16 products), else a loop.
S8Path s8_path() {
  if (s8_gemm_has_vnni()) return S8Path::kVnni;
  return target::Target::host().isa != Isa::kGeneric ? S8Path::kAvx2 : S8Path::kPortable;
}
}  // namespace

const char* s8_gemm_kernel_name() {
  switch (s8_path()) {
    case S8Path::kVnni: return "avx512vnni";
    case S8Path::kAvx2: return "avx2";
    case S8Path::kPortable: break;
  }
  return "portable";
}

PackedB8 pack_b_s8(int64_t K, int64_t N, const int8_t* B, int64_t ldb) {
  PackedB8 p;
  p.k = K;
  p.n = N;
  const int64_t kq = ceil_div(K, 4), panels = ceil_div(N, kNr);
  bool seven_bit = s8_path() == S8Path::kAvx2;
  for (int64_t k = 0; k < K && seven_bit; ++k)
    for (int64_t j = 0; j < N; ++j) seven_bit = seven_bit && B[k * ldb + j] >= -64 && B[k * ldb + j] <= 63;
  p.seven_bit = seven_bit;
  const bool wide = s8_path() == S8Path::kAvx2 && !seven_bit;
  const size_t size = static_cast<size_t>(panels * kq * kNr * 4);
  if (wide) p.wide.assign(size, 0);
  else p.data.assign(size, 0);
  for (int64_t panel = 0; panel < panels; ++panel)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < kNr && panel * kNr + j < N; ++j) {
        const size_t at = static_cast<size_t>(((panel * kq + k / 4) * kNr + j) * 4 + k % 4);
        if (wide) p.wide[at] = B[k * ldb + panel * kNr + j];
        else p.data[at] = B[k * ldb + panel * kNr + j];
      }
  return p;
}

void u8s8_gemm_packed(int64_t M, const uint8_t* A, int64_t lda, const PackedB8& B, int32_t* C, int64_t ldc,
                      const ParallelFor& parallel, const S8BlockDone& done) {
  const int64_t N = B.n, K = B.k;
  if (M <= 0 || N <= 0) return;
  const int64_t kq_total = ceil_div(K, 4), panels = ceil_div(N, kNr);
  auto b_at = [&](int64_t k, int64_t j) {
    return B.data[static_cast<size_t>(((j / kNr * kq_total + k / 4) * kNr + j % kNr) * 4 + k % 4)];
  };
  const S8Path path = s8_path();
  if (path == S8Path::kPortable || K == 0) {
    run_parallel(parallel, M, [&](int64_t r0, int64_t r1) {
      for (int64_t i = r0; i < r1; ++i)
        for (int64_t j = 0; j < N; ++j) {
          int32_t s = 0;
          for (int64_t k = 0; k < K; ++k) s += int32_t(A[i * lda + k]) * int32_t(b_at(k, j));
          C[i * ldc + j] = s;
        }
      if (done && r1 > r0) done(r0, r1 - r0, 0, N);
    });
    return;
  }
  const bool wide = path == S8Path::kAvx2 && !B.seven_bit;
  if (wide == B.wide.empty() || (path == S8Path::kVnni && B.seven_bit))
    throw Error(ErrorKind::kInternal, "u8s8_gemm: B was packed for another microkernel");
  // VNNI and the AVX2 7-bit kernel read whole quads of A's rows in place when K has no partial
  // quad: packing A cost as much as the microkernel in a conv's narrow GEMMs (64 output channels:
  // 64 products per byte packed) and an eighth of a dynamically quantized BERT-like's time.
  const bool in_place = K % 4 == 0 && (path == S8Path::kVnni || (path == S8Path::kAvx2 && B.seven_bit));
  const bool rows_x32 = in_place && path == S8Path::kAvx2;  // any rows, four at a time
  // Equal M blocks (whole micro-panels, or quads of rows for rows_x32), so that tasks weigh the
  // same: 128 rows are 70 + 58, not 112 + 16 (which left one of two threads mostly idle).
  const int64_t granule = rows_x32 ? 4 : kMr;
  const int64_t mblocks = ceil_div(M, kMc);
  const int64_t mc = std::min(kMc, ceil_div(ceil_div(M, mblocks), granule) * granule);
  const int64_t chunks = std::min<int64_t>(panels, std::max<int64_t>(1, ceil_div(8, mblocks)));
  const int64_t mtasks = ceil_div(M, mc);
  run_parallel(parallel, mtasks * chunks, [&](int64_t begin, int64_t end) {
    thread_local std::vector<uint8_t> a_buf;
    thread_local std::vector<int16_t> a_wide;
    if (wide) a_wide.resize(static_cast<size_t>(kMc * kKc));
    else if (!in_place) a_buf.resize(static_cast<size_t>(kMc * kKc));
    for (int64_t t = begin; t < end; ++t) {
      const int64_t i0 = t / chunks * mc, rows = std::min(mc, M - i0);
      if (rows <= 0) continue;
      const int64_t p0 = t % chunks * panels / chunks, p1 = (t % chunks + 1) * panels / chunks;
      for (int64_t k0 = 0; k0 < K; k0 += kKc) {
        const int64_t kc = std::min(kKc, K - k0), kq = ceil_div(kc, 4);
        if (wide) pack_a(A, lda, M, K, i0, rows, k0, kc, a_wide.data());
        else if (!in_place) pack_a(A, lda, M, K, i0, rows, k0, kc, a_buf.data());
        for (int64_t p = p0; p < p1; ++p) {
          const int64_t b_at_panel = ((p * kq_total + k0 / 4) * kNr) * 4;
          const int64_t cols = std::min(kNr, N - p * kNr);
          if (rows_x32) {
            s8_gemm_ukernel_rows_x32__avx2_7bit(rows, cols, kq, A + i0 * lda + k0, lda, B.data.data() + b_at_panel,
                                                C + i0 * ldc + p * kNr, ldc, k0 > 0);
            continue;
          }
          // The next panel's lines (2 per K quad), shared out over this panel's tiles.
          const int64_t tiles = ceil_div(rows, kMr), next_lines = p + 1 < p1 ? 2 * kq : 0;
          for (int64_t ii = 0; ii < rows; ii += kMr) {
            int32_t* c = C + (i0 + ii) * ldc + p * kNr;
            if (wide)
              s8_gemm_ukernel_14x32__avx2(std::min(kMr, rows - ii), cols, kq, a_wide.data() + ii * kq * 4,
                                          B.wide.data() + b_at_panel, c, ldc, k0 > 0);
            else if (path == S8Path::kAvx2)
              s8_gemm_ukernel_14x32__avx2_7bit(std::min(kMr, rows - ii), cols, kq, a_buf.data() + ii * kq * 4,
                                               B.data.data() + b_at_panel, c, ldc, k0 > 0);
            else if (in_place) {
              const int64_t t = ii / kMr, first = t * next_lines / tiles, last = (t + 1) * next_lines / tiles;
              s8_gemm_ukernel_14x32_rows__avx512vnni(std::min(kMr, rows - ii), cols, kq, A + (i0 + ii) * lda + k0, lda,
                                                     B.data.data() + b_at_panel, c, ldc, k0 > 0,
                                                     B.data.data() + b_at_panel + kq_total * kNr * 4 + 64 * first,
                                                     last - first);
            } else {
              s8_gemm_ukernel_14x32__avx512vnni(std::min(kMr, rows - ii), cols, kq, a_buf.data() + ii * kq * 4,
                                                B.data.data() + b_at_panel, c, ldc, k0 > 0);
            }
          }
        }
      }
      if (done && p1 > p0) done(i0, rows, p0 * kNr, std::min(N, p1 * kNr) - p0 * kNr);
    }
  });
}

PackedW8 pack_w_s8(int64_t M, int64_t K, const int8_t* W, int64_t ldw) {
  PackedW8 p;
  p.m = M;
  p.k = K;
  const int64_t kq = ceil_div(K, 4), panels = ceil_div(M, kMr);
  p.data.assign(static_cast<size_t>(panels * kq * kMr * 4), 0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k)
      p.data[static_cast<size_t>(((i / kMr * kq + k / 4) * kMr + i % kMr) * 4 + k % 4)] = W[i * ldw + k];
  return p;
}

namespace {
// The weight-stationary GEMM's tasks: up to 4 pixel panels (128 columns, their quads about 128 * K
// bytes, in L2) x a chunk of the weight panels; small planes (7x7: 2 pixel panels) split the
// weight panels so that there are at least 8 tasks to share out. tile(wp, xp) runs one 14x32 tile.
template <typename Tile>
void run_quad_tiles(const PackedW8& W, int64_t P, const ParallelFor& parallel, const Tile& tile) {
  if (!s8_gemm_has_vnni()) throw Error(ErrorKind::kInternal, "s8u8_gemm_quads: needs AVX-512 VNNI");
  const int64_t wpanels = ceil_div(W.m, kMr), xpanels = ceil_div(P, kNr);
  constexpr int64_t kPanelsPerTask = 4;
  const int64_t xtasks = ceil_div(xpanels, kPanelsPerTask);
  const int64_t wchunks = std::min(wpanels, std::max<int64_t>(1, ceil_div(8, xtasks)));
  run_parallel(parallel, xtasks * wchunks, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t xt = t / wchunks, wc = t % wchunks;
      for (int64_t wp = wc * wpanels / wchunks; wp < (wc + 1) * wpanels / wchunks; ++wp)
        for (int64_t xp = xt * kPanelsPerTask; xp < std::min(xpanels, (xt + 1) * kPanelsPerTask); ++xp) tile(wp, xp);
    }
  });
}
}  // namespace

namespace {
// Rows x columns [p0, p0 + nr) of a tile (leading dim kNr) into Y on the grid: each run of
// columns that lands on one output row is one copy.
template <typename T>
void scatter_tile(int64_t rows, int64_t p0, int64_t nr, const T* tile, const ColumnGrid& grid, T* Y, int64_t ldy) {
  for (int64_t p = p0; p < p0 + nr;) {
    const int64_t oy = p / grid.pitch, ox = p % grid.pitch;
    const int64_t end = std::min(p0 + nr, oy * grid.pitch + grid.width);
    if (ox < grid.width)
      for (int64_t i = 0; i < rows; ++i)
        std::memcpy(Y + i * ldy + oy * grid.width + ox, tile + i * kNr + (p - p0), static_cast<size_t>(end - p) * sizeof(T));
    p = (oy + 1) * grid.pitch;
  }
}

// Runs every tile of the weight-stationary GEMM: tile(mr, nr, kq, w, x, row0, out, ld) computes
// W's rows [row0, row0 + mr) times nr columns of X into `out` (leading dim ld): straight into Y,
// or, on a grid, into a staging tile that is then scattered into Y.
template <typename T, typename Tile>
void quad_gemm(const PackedW8& W, int64_t P, const QuadColumns& X, const ColumnGrid& grid, T* Y, int64_t ldy,
               const ParallelFor& parallel, const Tile& tile) {
  const int64_t kq = ceil_div(W.k, 4);
  run_quad_tiles(W, P, parallel, [&](int64_t wp, int64_t xp) {
    const int64_t mr = std::min(kMr, W.m - wp * kMr), nr = std::min(kNr, P - xp * kNr);
    const int8_t* w = W.data.data() + wp * kq * kMr * 4;
    const uint8_t* x = X.x + xp * kNr * 4;
    T* y = Y + wp * kMr * ldy;
    if (!grid.pitch) {
      tile(mr, nr, kq, w, x, wp * kMr, y + xp * kNr, ldy);
      return;
    }
    alignas(64) T staging[kMr * kNr];
    tile(mr, nr, kq, w, x, wp * kMr, staging, kNr);
    scatter_tile(mr, xp * kNr, nr, staging, grid, y, ldy);
  });
}
}  // namespace

void s8u8_gemm_quads(const PackedW8& W, int64_t P, const QuadColumns& X, const ColumnGrid& grid, int32_t* Y,
                     int64_t ldy, const ParallelFor& parallel) {
  quad_gemm(W, P, X, grid, Y, ldy, parallel,
            [&](int64_t mr, int64_t nr, int64_t kq, const int8_t* w, const uint8_t* x, int64_t, int32_t* out, int64_t ld) {
              s8_gemm_ukernel_14x32_wx__avx512vnni(mr, nr, kq, w, x, X.quad_offsets, out, ld);
            });
}

uint8_t requantize_value(const Requantize& rq, int64_t m, int32_t sum) {
  float v = static_cast<float>(sum - (rq.correction ? rq.correction[m] : 0)) * rq.scale[m];
  if (rq.bias) v = v + rq.bias[m];
  if (rq.relu) v = std::max(v, 0.0f);
  const float q = std::nearbyint(v / rq.y_scale) + static_cast<float>(rq.y_zero_point);
  return static_cast<uint8_t>(std::clamp(q, 0.0f, 255.0f));
}

void s8u8_gemm_quads_requantize(const PackedW8& W, int64_t P, const QuadColumns& X, const ColumnGrid& grid,
                                const Requantize& rq, uint8_t* Y, int64_t ldy, const ParallelFor& parallel) {
  quad_gemm(W, P, X, grid, Y, ldy, parallel,
            [&](int64_t mr, int64_t nr, int64_t kq, const int8_t* w, const uint8_t* x, int64_t row0, uint8_t* out,
                int64_t ld) {
              s8_gemm_ukernel_14x32_wx_requantize__avx512vnni(mr, nr, kq, w, x, X.quad_offsets, rq, row0, out, ld);
            });
}

void u8s8_gemm(int64_t M, int64_t N, int64_t K, const uint8_t* A, int64_t lda, const int8_t* B, int64_t ldb,
               int32_t* C, int64_t ldc, const ParallelFor& parallel) {
  if (M <= 0 || N <= 0) return;
  u8s8_gemm_packed(M, A, lda, pack_b_s8(K, N, B, ldb), C, ldc, parallel);
}

}  // namespace kiln::kernels
