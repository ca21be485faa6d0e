// The f32 GEMM kernel table, run-time dispatch, packing and the blocked SGEMM driver.
// Blocking: each task owns an MC x (chunk of NR panels) tile of C and walks all K blocks,
// reading its A block (MC x KC, packed once, in L2) and streaming B micro-panels: pre-packed, or,
// for a raw B, packed by the task itself per K block (sgemm).
#include "kernels/x86/f32_gemm.h"
#include "kernels/x86/f32_transpose.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include <xmmintrin.h>

#include "core/error.h"

namespace kiln::kernels {

bool isa_supported(Isa isa) {
  static const target::CpuFeatures cpu = target::CpuFeatures::detect();
  return cpu.supports(isa);
}

const std::vector<F32GemmUkernel>& f32_gemm_ukernels() {
#define KILN_F32_GEMM_ENTRY(MR, NR, SUFFIX, ISA, KC, MC) \
  F32GemmUkernel{"f32_gemm_ukernel_" #MR "x" #NR "__" #SUFFIX, ISA, MR, NR, KC, MC,  \
                 &f32_gemm_ukernel_##MR##x##NR##__##SUFFIX},
  static const std::vector<F32GemmUkernel> table = {KILN_F32_GEMM_UKERNELS(KILN_F32_GEMM_ENTRY)};
#undef KILN_F32_GEMM_ENTRY
  return table;
}

namespace {

const F32GemmUkernel* choose_default() {
  const Isa isa = target::Target::host().isa;
  for (const auto& k : f32_gemm_ukernels())
    if (k.isa == isa) return &k;
  return &f32_gemm_ukernels().back();
}

}  // namespace

void run_parallel(const ParallelFor& parallel, int64_t n,
                  const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (parallel && n > 1) {
    parallel(n, fn);
  } else {
    fn(0, n);
  }
}

const F32GemmUkernel& f32_gemm_default() {
  static const F32GemmUkernel* chosen = choose_default();
  return *chosen;
}

double gemm_split_compute_ns(int64_t M, int64_t N, int64_t K) {
  return 2.0 * double(M) * double(N) * double(K) / 100.0;  // ~100 GFLOP/s per thread
}

double gemm_split_stream_ns(double bytes) { return double(bytes) <= double(l2_cache_bytes()) / 2 ? 0.0 : bytes / 10.0; }

int64_t l2_cache_bytes() { return target::Target::host().l2_bytes; }

const F32GemmUkernel* f32_gemm_with_rows(int mr, const F32GemmUkernel& base) {
  for (const auto& k : f32_gemm_ukernels())
    if (k.isa == base.isa && k.nr == base.nr && k.kc == base.kc && k.mr == mr) return &k;
  return nullptr;
}

const F32GemmUkernel& f32_gemm_for_rows(int64_t M, const F32GemmUkernel& base) {
  // Padded rows decide: 10 to 14 rows compute at the same rate per padded row here, 8 rows about
  // 3% slower (more B loads per FMA), hence its handicap; ties go to the longer kernel (first in
  // the table). Only kernels that read the same packed B qualify.
  const F32GemmUkernel* best = &base;
  double best_rows = std::numeric_limits<double>::infinity();
  for (const auto& k : f32_gemm_ukernels()) {
    if (k.isa != base.isa || k.nr != base.nr || k.kc != base.kc) continue;
    const double rows = double(ceil_div(std::max<int64_t>(M, 1), k.mr) * k.mr) * (k.mr < 10 ? 1.03 : 1.0);
    if (rows < best_rows) {
      best = &k;
      best_rows = rows;
    }
  }
  return *best;
}

GemmSplit choose_gemm_split(int64_t M, int64_t N, int64_t K, const F32GemmUkernel& uk, int threads,
                            double chunk_cost, double group_cost) {
  const int64_t T = threads <= 0 ? 4 : threads;
  const int64_t panels = ceil_div(N, uk.nr), upanels = ceil_div(M, uk.mr);
  const int64_t kc = std::max<int64_t>(1, std::min<int64_t>(uk.kc, K));
  const int64_t max_chunk_panels = std::max<int64_t>(1, l2_cache_bytes() / 2 / (kc * uk.nr * 4));
  const int64_t min_chunks = ceil_div(panels, max_chunk_panels);
  const double compute = gemm_split_compute_ns(M, N, K);
  // With several threads, at least 3 tasks per thread when each still gets >= ~20 us of work: a
  // thread that is descheduled (a busy shared machine) then holds up only a small share.
  const int64_t max_chunks = std::min(panels, min_chunks + 4 * T), max_groups = std::min(upanels, 4 * T);
  const int64_t want_tasks =
      T > 1 && compute >= double(3 * T) * 20000.0 ? std::min(3 * T, max_chunks * max_groups) : 1;
  GemmSplit best;
  double best_cost = std::numeric_limits<double>::infinity();
  for (int64_t c = min_chunks; c <= max_chunks; ++c)
    for (int64_t g = 1; g <= max_groups; ++g) {
      const int64_t tasks = c * g;
      if (tasks < want_tasks) continue;
      // The largest task's share of the compute, times the rounds each thread runs.
      const double largest = double(ceil_div(panels, c)) / double(panels) * double(ceil_div(upanels, g)) / double(upanels);
      const double cost = compute * largest * double(ceil_div(tasks, T)) + (chunk_cost * double(c) + group_cost * double(g)) / double(T);
      if (cost < best_cost * 0.999) {
        best = {c, g};
        best_cost = cost;
      }
    }
  return best;
}

namespace {

// One MR-row panel of op(A)^T layout (rows contiguous in memory, K strided): a fixed-width copy
// per k that the compiler turns into vector moves (the generic loop below stays scalar).
template <int MR>
void pack_a_trans_panel(int64_t kc, const float* src, int64_t lda, float alpha, float* dst) {
  for (int64_t k = 0; k < kc; ++k) {
    const float* s = src + k * lda;
    float* d = dst + k * MR;
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) d[i] = alpha * s[i];
  }
}

bool pack_a_trans_full(int mr, int64_t kc, const float* src, int64_t lda, float alpha, float* dst) {
  switch (mr) {
    case 14: pack_a_trans_panel<14>(kc, src, lda, alpha, dst); return true;
    case 12: pack_a_trans_panel<12>(kc, src, lda, alpha, dst); return true;
    case 10: pack_a_trans_panel<10>(kc, src, lda, alpha, dst); return true;
    case 8: pack_a_trans_panel<8>(kc, src, lda, alpha, dst); return true;
    case 6: pack_a_trans_panel<6>(kc, src, lda, alpha, dst); return true;
    case 4: pack_a_trans_panel<4>(kc, src, lda, alpha, dst); return true;
    default: return false;
  }
}

}  // namespace

// A micro-panel of up to 16 rows of row-major A (`rows` <= mr rows read, the rest zero) with
// 16x16 in-register transposes (f32_gemm_avx512f.cc): the portable loop gathers one float per
// row and k.
void f32_gemm_pack_a_panel__avx512f(int mr, int64_t rows, int64_t kc, const float* a, int64_t lda, float alpha,
                                    float* out);

void f32_gemm_pack_a(bool trans_a, int64_t mc, int64_t kc, const float* a, int64_t lda, float alpha,
                     int mr, float* out) {
  static const bool avx512 = isa_supported(Isa::kAvx512);
  static const bool avx2 = isa_supported(Isa::kAvx2);
  for (int64_t i0 = 0; i0 < mc; i0 += mr) {
    const int64_t rows = std::min<int64_t>(mr, mc - i0);
    if (!trans_a && avx512 && mr <= 16) {
      f32_gemm_pack_a_panel__avx512f(mr, rows, kc, a + i0 * lda, lda, alpha, out);
      out += kc * mr;
      continue;
    }
    // 8x8 register transposes: 4x faster than the scalar loop (197x768: 106 -> 25 us).
    if (!trans_a && avx2 && mr <= 8) {
      pack_rows_k_major_avx2(mr, rows, kc, a + i0 * lda, lda, alpha, out);
      out += kc * mr;
      continue;
    }
    if (trans_a && rows == mr && pack_a_trans_full(mr, kc, a + i0, lda, alpha, out)) {
      out += kc * mr;
      continue;
    }
    if (!trans_a) {
      for (int64_t k = 0; k < kc; ++k) {
        float* dst = out + k * mr;
        for (int64_t i = 0; i < rows; ++i) dst[i] = alpha * a[(i0 + i) * lda + k];
        for (int64_t i = rows; i < mr; ++i) dst[i] = 0.0f;
      }
    } else {
      for (int64_t k = 0; k < kc; ++k) {
        const float* src = a + k * lda + i0;
        float* dst = out + k * mr;
        for (int64_t i = 0; i < rows; ++i) dst[i] = alpha * src[i];
        for (int64_t i = rows; i < mr; ++i) dst[i] = 0.0f;
      }
    }
    out += kc * mr;
  }
}

// A full 32-column panel of row-major B with AVX-512 moves (f32_gemm_avx512f.cc): twice as
// fast as a memcpy call per 128-byte row.
void f32_gemm_pack_b_panel32__avx512f(int64_t kc, const float* b, int64_t ldb, float* out);
void activate_inplace__avx512f(Activation a, float* y, int64_t n);
void activate_inplace__avx2(Activation a, float* y, int64_t n);

void f32_gemm_coltail__avx512f(int64_t a_rows, int64_t mr, int64_t cols, int64_t kc, const float* a, const float* b,
                               int64_t b_stride, float* c, int64_t ldc, const F32GemmParams& p);

bool f32_gemm_coltail_pays(const F32GemmUkernel& uk, int64_t cols) {
  // Rounded up to 4 columns, (width + 1) / 2 load cycles per k step against MR FMA cycles, with
  // a margin the measurements ask for: a 14x14 image's 4-column tail gains (1x1 convs 7% faster),
  // a 7x7 image's 17 columns at 12 rows, though estimated cheaper, lost 2%.
  const int64_t width = (cols + 3) / 4 * 4;
  return uk.isa == Isa::kAvx512 && uk.mr <= 16 && cols < uk.nr && width <= 24 && double(width + 1) / 2.0 < 0.6 * uk.mr;
}

void f32_gemm_coltail(const F32GemmUkernel& uk, int64_t mr, int64_t cols, int64_t kc, const float* a_packed,
                      const float* b, int64_t b_stride, float* c, int64_t ldc, const F32GemmParams& params) {
  f32_gemm_coltail__avx512f(uk.mr, mr, cols, kc, a_packed, b, b_stride, c, ldc, params);
}

void apply_activation_inplace(Activation a, float* y, int64_t n) {
  if (a == Activation::kNone) return;
  static const Isa isa = f32_gemm_default().isa;
  if (isa == Isa::kAvx512) return activate_inplace__avx512f(a, y, n);
  if (isa == Isa::kAvx2) return activate_inplace__avx2(a, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] = apply_activation(a, y[i]);
}

void f32_gemm_pack_b(bool trans_b, int64_t kc, int64_t nc, const float* b, int64_t ldb, int nr,
                     float* out) {
  for (int64_t j0 = 0; j0 < nc; j0 += nr) {
    const int64_t cols = std::min<int64_t>(nr, nc - j0);
    static const bool avx512 = isa_supported(Isa::kAvx512);
    if (!trans_b && cols == 32 && nr == 32 && avx512) {
      f32_gemm_pack_b_panel32__avx512f(kc, b + j0, ldb, out);
      out += kc * nr;
      continue;
    }
    for (int64_t k = 0; k < kc; ++k) {
      float* dst = out + k * nr;
      if (!trans_b) {
        std::memcpy(dst, b + k * ldb + j0, sizeof(float) * cols);
      } else {
        for (int64_t j = 0; j < cols; ++j) dst[j] = b[(j0 + j) * ldb + k];
      }
      for (int64_t j = cols; j < nr; ++j) dst[j] = 0.0f;
    }
    out += kc * nr;
  }
}

int64_t PackedB::panel_offset(int64_t k0, int64_t panel) const {
  const int64_t nr = kernel->nr;
  const int64_t kc = std::min<int64_t>(kernel->kc, k - k0);
  return k0 * ceil_div(n, nr) * nr + panel * kc * nr;
}

void pack_b_into(bool trans_b, int64_t K, int64_t N, const float* B, int64_t ldb, PackedB& packed,
                 const F32GemmUkernel* kernel, const ParallelFor& parallel) {
  packed.kernel = kernel ? kernel : &f32_gemm_default();
  packed.pinned = kernel != nullptr;
  packed.k = K;
  packed.n = N;
  const int64_t nr = packed.kernel->nr, kcb = packed.kernel->kc;
  const int64_t panels = ceil_div(N, nr), kblocks = ceil_div(K, kcb);
  // Grown, never shrunk (a resize back up would zero-fill it again).
  if (packed.data.size() < static_cast<size_t>(K * panels * nr)) packed.data.resize(static_cast<size_t>(K * panels * nr));
  // Packing is a copy: only worth the pool for a large B.
  run_parallel(K * N >= (1 << 16) ? parallel : ParallelFor(), kblocks * panels, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t k0 = (t / panels) * kcb, q = t % panels;
      const int64_t kc = std::min(kcb, K - k0), j0 = q * nr;
      const float* src = trans_b ? B + j0 * ldb + k0 : B + k0 * ldb + j0;
      f32_gemm_pack_b(trans_b, kc, std::min(nr, N - j0), src, ldb, static_cast<int>(nr),
                      packed.data.data() + packed.panel_offset(k0, q));
    }
  });
}

void scale_packed_b_rows(const PackedB& src, const float* s, PackedB& dst) {
  dst.kernel = src.kernel;
  dst.pinned = src.pinned;
  dst.k = src.k;
  dst.n = src.n;
  if (dst.data.size() < src.data.size()) dst.data.resize(src.data.size());
  const int64_t nr = src.kernel->nr, kcb = src.kernel->kc, panels = ceil_div(src.n, nr);
  for (int64_t k0 = 0; k0 < src.k; k0 += kcb) {
    const int64_t kc = std::min(kcb, src.k - k0);
    for (int64_t q = 0; q < panels; ++q) {
      const int64_t at = src.panel_offset(k0, q);
      for (int64_t r = 0; r < kc; ++r) {
        const float f = s[k0 + r];
        const float* in = src.data.data() + at + r * nr;
        float* out = dst.data.data() + at + r * nr;
        for (int64_t j = 0; j < nr; ++j) out[j] = in[j] * f;
      }
    }
  }
}

PackedB pack_b(bool trans_b, int64_t K, int64_t N, const float* B, int64_t ldb,
               const F32GemmUkernel* kernel, const ParallelFor& parallel) {
  PackedB packed;
  pack_b_into(trans_b, K, N, B, ldb, packed, kernel, parallel);
  return packed;
}

namespace {

// op(B) as the driver reads it: pre-packed, or raw and packed by the tasks themselves (each
// task owning a column chunk over all rows packs its chunk's panels of each K block into a
// buffer in its L2 just before using them: no separate pass, barrier or trip through memory).
struct BSource {
  const PackedB* packed = nullptr;
  bool trans = false;
  const float* data = nullptr;
  int64_t ldb = 0;
};

void sgemm_blocked(bool trans_a, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, float alpha,
                   const F32GemmUkernel& uk, const BSource& b, float beta, float* C, int64_t ldc,
                   const ParallelFor& parallel, const GemmEpilogue& epilogue, int threads,
                   const GemmSplit* forced = nullptr) {
  const int64_t mr = uk.mr, nr = uk.nr;
  if (K == 0) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        float v = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
        if (epilogue.bias) v += epilogue.bias[j];
        if (epilogue.residual) v += epilogue.residual[i * epilogue.ldr + j];
        if (epilogue.relu) v = std::max(v, 0.0f);
        if (epilogue.clamp) v = std::min(std::max(v, epilogue.lo), epilogue.hi);
        C[i * ldc + j] = apply_activation(epilogue.act, v);
      }
    return;
  }
  // A is packed once, in parallel, into [M block][K][mc] (M blocks of mc rows, a multiple of MR,
  // sized for L2); then each task (a column chunk x a row group of whole micro-panels, see
  // choose_gemm_split) walks K blocks, its M blocks, its B panels (L1) and its micro-panels.
  const int64_t mblocks = ceil_div(M, uk.mc);
  const int64_t mc = std::min(ceil_div(ceil_div(M, mblocks), mr) * mr, ceil_div(M, mr) * mr);
  const int64_t kblocks = ceil_div(K, static_cast<int64_t>(uk.kc));
  thread_local std::vector<float> packed_a_buf;
  // Grown, never shrunk: a resize back up would zero-fill it again on every call.
  if (packed_a_buf.size() < static_cast<size_t>(mblocks * mc * K)) packed_a_buf.resize(static_cast<size_t>(mblocks * mc * K));
  float* const packed_a = packed_a_buf.data();  // (tasks on other threads must not name the thread_local)
  run_parallel(parallel, mblocks * kblocks, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t i0 = (t / kblocks) * mc, k0 = (t % kblocks) * uk.kc;
      const int64_t kc = std::min<int64_t>(uk.kc, K - k0);
      const float* a_src = trans_a ? A + k0 * lda + i0 : A + i0 * lda + k0;
      f32_gemm_pack_a(trans_a, std::min(mc, M - i0), kc, a_src, lda, alpha, static_cast<int>(mr),
                      packed_a + (i0 / mc) * mc * K + k0 * mc);
    }
  });
  const int64_t panels = ceil_div(N, nr), upanels = ceil_div(M, mr);
  // Another column chunk re-reads packed A, another row group re-reads B (each free in L2) or,
  // for a raw B, packs it again. A chunk re-reads A one mc x kc block at a time, each then used
  // for the chunk's whole width, so the prefetchers hide most of it: charged a quarter of a
  // plain stream. At 2 threads this picks more column chunks over row groups (1024^3: 8x1 not
  // 4x2, 512^3: 4x2 not 2x3), alternated A/B: 1024^3 min 172.7 vs 165.4 GFLOP/s, 512^3 raw B
  // median 122 vs 107, 196x1024x256 median 42.4 vs 39.7 on a noisy host.
  const double b_bytes = 4.0 * double(K) * double(panels * nr);
  const GemmSplit split =
      forced ? GemmSplit{std::clamp<int64_t>(forced->chunks, 1, panels), std::clamp<int64_t>(forced->groups, 1, upanels)}
             : choose_gemm_split(M, N, K, uk, parallel ? threads : 1,
                                 gemm_split_stream_ns(4.0 * double(mblocks * mc) * double(K)) / 4.0,
                                 b.packed ? gemm_split_stream_ns(b_bytes) : b_bytes / 10.0);
  const int64_t chunks = split.chunks, groups = split.groups;
  const PackedB* packed_b = b.packed;
  if (!packed_b && groups > 1) {  // row groups would pack the same panels again: pack B once
    thread_local PackedB shared_b;
    pack_b_into(b.trans, K, N, b.data, b.ldb, shared_b, &uk, parallel);
    packed_b = &shared_b;
  }
  run_parallel(parallel, chunks * groups, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> chunk_b;
    for (int64_t t = begin; t < end; ++t) {
      const int64_t chunk = t / groups, group = t % groups;
      const int64_t q0 = chunk * panels / chunks, q1 = (chunk + 1) * panels / chunks;
      const int64_t m_begin = group * upanels / groups * mr;
      const int64_t m_end = std::min(M, (group + 1) * upanels / groups * mr);
      for (int64_t k0 = 0; k0 < K; k0 += uk.kc) {
        const int64_t kc = std::min<int64_t>(uk.kc, K - k0);
        const bool last = k0 + kc >= K;
        if (!packed_b) {
          if (chunk_b.size() < static_cast<size_t>(kc * (q1 - q0) * nr)) chunk_b.resize(static_cast<size_t>(kc * (q1 - q0) * nr));
          const int64_t j0 = q0 * nr;
          f32_gemm_pack_b(b.trans, kc, std::min(N, q1 * nr) - j0, b.trans ? b.data + j0 * b.ldb + k0 : b.data + k0 * b.ldb + j0,
                          b.ldb, static_cast<int>(nr), chunk_b.data());
        }
        F32GemmParams params;
        params.beta = k0 == 0 ? beta : 1.0f;
        params.relu = last && epilogue.relu;
        params.clamp = last && epilogue.clamp;
        params.act = last ? epilogue.act : Activation::kNone;
        params.lo = epilogue.lo;
        params.hi = epilogue.hi;
        params.ldr = epilogue.ldr;
        for (int64_t i0 = m_begin / mc * mc; i0 < m_end; i0 += mc) {
          const int64_t r_begin = std::max(i0, m_begin) - i0, rows = std::min(i0 + mc, m_end) - i0;
          const float* a_block = packed_a + (i0 / mc) * mc * K + k0 * mc;
          for (int64_t q = q0; q < q1; ++q) {
            const int64_t j0 = q * nr, cols = std::min(nr, N - j0);
            const float* b_panel = packed_b ? packed_b->data.data() + packed_b->panel_offset(k0, q)
                                            : chunk_b.data() + (q - q0) * kc * nr;
            params.bias = last && epilogue.bias ? epilogue.bias + j0 : nullptr;
            // The next pre-packed panel this task reads (the next column panel, or the chunk's
            // first of the next K block), fetched into L2 a slice per micro-panel row: a weight
            // matrix streamed from memory (BERT's 340 MB) then waits on memory only at the panel
            // the task starts with. BERT-like, alternated runs (6 pairs): median 2% lower on 1
            // and on 2 threads.
            const char* next = nullptr;
            int64_t next_lines = 0, lines_per_call = 0;
            const bool same_k_block = q + 1 < q1;
            if (packed_b && i0 == m_begin / mc * mc && (same_k_block || !last)) {
              const int64_t next_k0 = same_k_block ? k0 : k0 + kc;
              next = reinterpret_cast<const char*>(packed_b->data.data() +
                                                   packed_b->panel_offset(next_k0, same_k_block ? q + 1 : q0));
              next_lines = std::min<int64_t>(uk.kc, K - next_k0) * nr * 4 / 64;
              lines_per_call = ceil_div(next_lines, ceil_div(rows - r_begin, mr));
            }
            for (int64_t ii = r_begin; ii < rows; ii += mr) {
              for (int64_t l = 0; l < lines_per_call && next_lines > 0; ++l, --next_lines, next += 64)
                _mm_prefetch(next, _MM_HINT_T1);
              if (last && epilogue.residual) params.residual = epilogue.residual + (i0 + ii) * epilogue.ldr + j0;
              uk.fn(std::min(mr, rows - ii), cols, kc, a_block + ii * kc, b_panel, C + (i0 + ii) * ldc + j0, ldc,
                    params);
            }
          }
        }
      }
    }
  });
}

}  // namespace

void sgemm_packed(bool trans_a, int64_t M, const float* A, int64_t lda, float alpha,
                  const PackedB& B, float beta, float* C, int64_t ldc, const ParallelFor& parallel,
                  const GemmEpilogue& epilogue, int threads, const F32GemmUkernel* kernel, const GemmSplit* split) {
  KILN_CHECK(B.kernel != nullptr, "sgemm_packed: B is not packed");
  const bool fits = kernel && kernel->isa == B.kernel->isa && kernel->nr == B.kernel->nr && kernel->kc == B.kernel->kc;
  const F32GemmUkernel& uk = fits ? *kernel : B.pinned ? *B.kernel : f32_gemm_for_rows(M, *B.kernel);
  if (M <= 0 || B.n <= 0) return;
  BSource b;
  b.packed = &B;
  sgemm_blocked(trans_a, M, B.n, B.k, A, lda, alpha, uk, b, beta, C, ldc, parallel, epilogue, threads, split);
}

void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
           const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
           int64_t ldc, const ParallelFor& parallel, const GemmEpilogue& epilogue,
           const F32GemmUkernel* kernel, int threads) {
  if (M <= 0 || N <= 0) return;
  BSource b;
  b.trans = trans_b;
  b.data = B;
  b.ldb = ldb;
  sgemm_blocked(trans_a, M, N, K, A, lda, alpha, kernel ? *kernel : f32_gemm_for_rows(M), b, beta, C, ldc, parallel,
                epilogue, threads);
}

}  // namespace kiln::kernels
