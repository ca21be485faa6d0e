// SGEMM with a pre-packed A (see f32_gemm_prepacked_a.h). Blocking: a task owns a chunk of
// NC columns of C and a group of A's M blocks; per K block it packs its B block (KC x NC, in L2;
// or, for few rows of A, reads B's rows in place) and walks its M blocks of the pre-packed A, running the microkernel over MR x NR tiles; the
// per-row epilogue (bias, residual, clamp) runs in the microkernel's store of the last K block.
// The chunk/group split comes from choose_gemm_split (f32_gemm.h).
#include "kernels/x86/f32_gemm_prepacked_a.h"

#include <algorithm>

#include "core/error.h"

namespace kiln::kernels {
namespace {

// The epilogue over all of C when there is no K block to run it in (K == 0).
void epilogue_only(float* c, int64_t ldc, int64_t rows, int64_t cols, const RowEpilogue& ep) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) {
      float v = c[r * ldc + j] + (ep.bias ? ep.bias[r] : 0.0f) + (ep.residual ? ep.residual[r * ep.ldr + j] : 0.0f);
      c[r * ldc + j] = apply_activation(ep.act, std::min(std::max(v, ep.lo), ep.hi));
    }
}

// The driver of both overloads: B read in place (b_rows non-null, row-major with leading dim
// ldb) where that pays, else packed by pack_b.
void sgemm_prepacked_a_impl(const PackedA& A, int64_t N, const PackBFn& pack_b, const float* b_rows, int64_t ldb,
                            float* C, int64_t ldc, const RowEpilogue& ep, const ParallelFor& parallel, int threads,
                            const GemmSplit* forced) {
  KILN_CHECK(A.kernel != nullptr, "sgemm_prepacked_a: A is not packed");
  const F32GemmUkernel& uk = *A.kernel;
  const int64_t M = A.m, K = A.k, mr = uk.mr, nr = uk.nr;
  if (M <= 0 || N <= 0) return;
  const bool clamp = ep.lo > -std::numeric_limits<float>::infinity() || ep.hi < std::numeric_limits<float>::infinity();
  if (K == 0) {
    for (int64_t i = 0; i < M; ++i) std::fill(C + i * ldc, C + i * ldc + N, 0.0f);
    epilogue_only(C, ldc, M, N, ep);
    return;
  }
  const int64_t panels = ceil_div(N, nr), upanels = ceil_div(M, mr);
  const int64_t kblocks = ceil_div(K, static_cast<int64_t>(uk.kc));
  // Few micro-panel rows read each packed B element only that often: copying B into panels then
  // costs more than the microkernel's strided reads of its rows (prefetched ahead). Full panels
  // are read in place; a partial last panel (reads past N) is still packed.
  // Measured on 1x1 convs: 256->64 at 56x56 0.84 -> 0.73 ms, 144->24 at 56x56 0.23 -> 0.15 ms,
  // 192->32 at 28x28 0.083 -> 0.064 ms (1 thread); level at 14x14 and 7x7; worse from ~26 rows
  // of micro-panels (64->256 at 56x56: 0.76 -> 0.82 ms).
  const bool direct_b = b_rows != nullptr && upanels <= 16;
  // B small enough to share (up to L2 in all): packed once, in parallel, before the tasks, so
  // that row groups cost nothing extra. Otherwise each task packs its chunk's B block, and
  // another row group packs it again (~8 GB/s); another column chunk streams A again (unless it
  // stays in L2).
  // (Not for fewer than 16 micro-panel rows: column chunks alone split those, each task packing its own
  // B panels in its own core's cache; sharing would make every task read panels the other core
  // packed. MobileNetV2's 1x1 projections with 24-96 output channels were slower on 2 threads
  // than on 1 with a shared B.)
  const bool share_b = !direct_b && parallel && threads != 1 && upanels >= 16 && 4 * K * panels * nr <= l2_cache_bytes();
  // The last column panel's width (N % NR, or NR) decides whether it runs on the column-tail kernel.
  const bool coltail = f32_gemm_coltail_pays(uk, N - (panels - 1) * nr);
  const GemmSplit split =
      forced ? GemmSplit{std::clamp<int64_t>(forced->chunks, 1, panels), std::clamp<int64_t>(forced->groups, 1, upanels)}
             : choose_gemm_split(M, N, K, uk, parallel ? threads : 1, gemm_split_stream_ns(4.0 * double(M) * double(K)),
                                 share_b ? 0.0 : 4.0 * double(K) * double(N) / 8.0);
  const int64_t chunks = split.chunks, mgroups = split.groups;
  const int64_t max_chunk_panels = ceil_div(panels, chunks);
  // shared_b: per K block, all panels (panel q of block k0 at k0 * panels * nr + q * kc * nr).
  thread_local std::vector<float> shared_b_buf;
  float* shared_b = nullptr;
  if (share_b && mgroups > 1) {
    if (shared_b_buf.size() < static_cast<size_t>(K * panels * nr))
      shared_b_buf.resize(static_cast<size_t>(K * panels * nr));
    shared_b = shared_b_buf.data();  // (tasks on other threads must not name the thread_local)
    parallel(kblocks * panels, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t k0 = t / panels * uk.kc, q = t % panels;
        const int64_t kc = std::min<int64_t>(uk.kc, K - k0);
        pack_b(k0, kc, q * nr, std::min(nr, N - q * nr), static_cast<int>(nr), shared_b + k0 * panels * nr + q * kc * nr);
      }
    });
  }
  // With a residual, rows outermost: each micro-panel row's C and residual lines stream in
  // order (14 streams each) instead of one 32-column step of every row of the M block
  // (ResNet-50's 64->256 1x1 convs at 56x56: 20% faster).
  const bool rows_outer = ep.residual != nullptr;
  auto task = [&](int64_t begin, int64_t end) {
    // Grown, never shrunk: a resize back up would zero-fill it again on every call.
    thread_local std::vector<float> b_buf;
    if (!shared_b && b_buf.size() < static_cast<size_t>(uk.kc * max_chunk_panels * nr))
      b_buf.resize(static_cast<size_t>(uk.kc * max_chunk_panels * nr));
    for (int64_t t = begin; t < end; ++t) {
      const int64_t chunk = t / mgroups, group = t % mgroups;
      const int64_t j0 = chunk * panels / chunks * nr;
      const int64_t nc = std::min((chunk + 1) * panels / chunks * nr, N) - j0;
      // Rows [m_begin, m_end) of this group: whole micro-panels, possibly parts of M blocks.
      const int64_t m_begin = group * upanels / mgroups * mr;
      const int64_t m_end = std::min(M, (group + 1) * upanels / mgroups * mr);
      for (int64_t k0 = 0; k0 < K; k0 += uk.kc) {
        const int64_t kc = std::min<int64_t>(uk.kc, K - k0);
        const bool last = k0 + kc >= K;
        const float* b_block = shared_b + k0 * panels * nr + j0 / nr * kc * nr;
        const int64_t full_cols = direct_b ? nc / nr * nr : 0;  // read in place
        if (direct_b) {
          if (full_cols < nc) pack_b(k0, kc, j0 + full_cols, nc - full_cols, static_cast<int>(nr), b_buf.data());
          b_block = b_buf.data();  // the packed panels from full_cols / nr on
        } else if (!shared_b) {
          pack_b(k0, kc, j0, nc, static_cast<int>(nr), b_buf.data());
          b_block = b_buf.data();
        }
        F32GemmParams params;
        params.beta = k0 == 0 ? 0.0f : 1.0f;
        params.clamp = last && clamp;
        params.act = last ? ep.act : Activation::kNone;
        params.lo = ep.lo;
        params.hi = ep.hi;
        params.ldr = ep.ldr;
        for (int64_t i0 = m_begin / A.mc * A.mc; i0 < m_end; i0 += A.mc) {
          const int64_t r_begin = std::max(i0, m_begin) - i0, rows = std::min(i0 + A.mc, m_end) - i0;
          const float* a_block = A.block(i0, k0);
          auto tile = [&](int64_t ii, int64_t q) {
            const int64_t cols = std::min(nr, nc - q * nr), mr_eff = std::min(mr, rows - ii);
            if (last) {  // the epilogue runs in the microkernel's store, on the tile in registers
              params.row_bias = ep.bias ? ep.bias + i0 + ii : nullptr;
              params.residual = ep.residual ? ep.residual + (i0 + ii) * ep.ldr + j0 + q * nr : nullptr;
            }
            const bool in_place = q * nr < full_cols;
            params.b_stride = in_place ? ldb : 0;
            const float* b_panel = in_place ? b_rows + k0 * ldb + j0 + q * nr : b_block + (q - full_cols / nr) * kc * nr;
            if (cols < nr && coltail)  // (a partial panel is always packed)
              f32_gemm_coltail(uk, mr_eff, cols, kc, a_block + ii * kc, b_panel, nr, C + (i0 + ii) * ldc + j0 + q * nr,
                               ldc, params);
            else
              uk.fn(mr_eff, cols, kc, a_block + ii * kc, b_panel, C + (i0 + ii) * ldc + j0 + q * nr, ldc, params);
          };
          if (rows_outer) {
            for (int64_t ii = r_begin; ii < rows; ii += mr)
              for (int64_t q = 0; q * nr < nc; ++q) tile(ii, q);
          } else {
            // Column panels in groups whose B (group_panels x kc x NR) stays in half of L1, micro-panel
            // rows outside: each of C's rows then gets a group's columns per visit instead of
            // one 64-byte line, so a thin-K conv's many output rows (96 at 112x112, 4.8 MB) are
            // written in runs the prefetchers follow. MobileNetV2, share of the run (6 alternated
            // profiles): 32->16 at 112x112 2.9-3.4% -> 2.3-2.5% (1 thread), 2.8-3.9% -> 1.8-2.3%
            // (2 threads); 16->96 7.4-8.3% -> 6.1-7.0%; level from K = 96 (one panel a group).
            const int64_t group_panels = std::clamp<int64_t>(16384 / (kc * nr * 4), 1, 16);
            const int64_t panels_here = ceil_div(nc, nr);
            for (int64_t g0 = 0; g0 < panels_here; g0 += group_panels)
              for (int64_t ii = r_begin; ii < rows; ii += mr)
                for (int64_t q = g0; q < std::min(panels_here, g0 + group_panels); ++q) tile(ii, q);
          }
        }
      }
    }
  };
  const int64_t tasks = chunks * mgroups;
  if (parallel && tasks > 1) parallel(tasks, task);
  else task(0, tasks);
}

}  // namespace

PackedA pack_a(int64_t M, int64_t K, const float* A, int64_t lda, const F32GemmUkernel* kernel) {
  PackedA p;
  p.kernel = kernel ? kernel : &f32_gemm_for_rows(M);
  p.m = M;
  p.k = K;
  const int64_t mr = p.kernel->mr;
  const int64_t mblocks = std::max<int64_t>(1, ceil_div(M, p.kernel->mc));
  p.mc = std::min(ceil_div(ceil_div(M, mblocks), mr) * mr, ceil_div(M, mr) * mr);
  p.mc = std::max<int64_t>(p.mc, mr);
  p.data.assign(static_cast<size_t>(ceil_div(M, p.mc) * p.mc * K), 0.0f);
  for (int64_t i0 = 0; i0 < M; i0 += p.mc)
    for (int64_t k0 = 0; k0 < K; k0 += p.kernel->kc) {
      const int64_t kc = std::min<int64_t>(p.kernel->kc, K - k0);
      f32_gemm_pack_a(false, std::min(p.mc, M - i0), kc, A + i0 * lda + k0, lda, 1.0f, static_cast<int>(mr),
                      const_cast<float*>(p.block(i0, k0)));
    }
  return p;
}

namespace {

// One micro-panel [kc][MR] scaled per k; MR a constant so that each k's row is one or two vector
// multiplies, not MR scalar ones.
template <int MR>
void scale_micro_panel(int64_t kc, const float* scale, const float* src, float* dst) {
  for (int64_t k = 0; k < kc; ++k) {
    const float s = scale[k];
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) dst[k * MR + r] = src[k * MR + r] * s;
  }
}

void scale_micro_panel(int64_t mr, int64_t kc, const float* scale, const float* src, float* dst) {
  switch (mr) {
    case 4: return scale_micro_panel<4>(kc, scale, src, dst);
    case 6: return scale_micro_panel<6>(kc, scale, src, dst);
    case 8: return scale_micro_panel<8>(kc, scale, src, dst);
    case 10: return scale_micro_panel<10>(kc, scale, src, dst);
    case 12: return scale_micro_panel<12>(kc, scale, src, dst);
    case 14: return scale_micro_panel<14>(kc, scale, src, dst);
    default:
      for (int64_t k = 0; k < kc; ++k)
        for (int64_t r = 0; r < mr; ++r) dst[k * mr + r] = src[k * mr + r] * scale[k];
  }
}

}  // namespace

void scale_packed_a_columns(const PackedA& a, const float* col_scale, PackedA& out, const ParallelFor& parallel) {
  const int64_t mr = a.kernel->mr, kcmax = a.kernel->kc;
  const int64_t mblocks = ceil_div(a.m, a.mc), kblocks = ceil_div(a.k, kcmax), panels = a.mc / mr;
  // Per block mc / mr micro-panels of [kc][mr] (rows past M are zeros and stay zeros). Memory-bound,
  // on every run of a conv with a fused squeeze-and-excitation scale (EfficientNet-B0: 1.3% of
  // the run on one thread, with scalar loops): spread over the threads in micro-panels.
  run_parallel(a.m * a.k >= (1 << 14) ? parallel : ParallelFor(), mblocks * kblocks * panels,
               [&](int64_t begin, int64_t end) {
                 for (int64_t t = begin; t < end; ++t) {
                   const int64_t block = t / panels, p = t % panels;
                   const int64_t i0 = block / kblocks * a.mc, k0 = block % kblocks * kcmax;
                   const int64_t kc = std::min(kcmax, a.k - k0);
                   const float* src = a.block(i0, k0) + p * kc * mr;
                   float* dst = out.data.data() + (src - a.data.data());
                   scale_micro_panel(mr, kc, col_scale + k0, src, dst);
                 }
               });
}

void sgemm_prepacked_a(const PackedA& A, int64_t N, const float* B, int64_t ldb, float* C, int64_t ldc,
                       const RowEpilogue& ep, const ParallelFor& parallel, int threads, const GemmSplit* split) {
  sgemm_prepacked_a_impl(
      A, N,
      [&](int64_t k0, int64_t kc, int64_t j0, int64_t nc, int nr, float* dst) {
        f32_gemm_pack_b(false, kc, nc, B + k0 * ldb + j0, ldb, nr, dst);
      },
      B, ldb, C, ldc, ep, parallel, threads, split);
}

void sgemm_prepacked_a(const PackedA& A, int64_t N, const PackBFn& pack_b, float* C, int64_t ldc,
                       const RowEpilogue& ep, const ParallelFor& parallel, int threads, const GemmSplit* split) {
  sgemm_prepacked_a_impl(A, N, pack_b, nullptr, 0, C, ldc, ep, parallel, threads, split);
}


}  // namespace kiln::kernels
