// The f32 GEMM kernel table, run-time dispatch, packing and the blocked SGEMM driver.
// Blocking: each task owns an MC x (chunk of NR panels) tile of C and walks all K blocks,
// packing its A block (MC x KC, in L2) and streaming the pre-packed B micro-panels (L1).
#include "kernels/x86/f32_gemm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/error.h"

namespace kiln::kernels {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kGeneric: return "generic";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "?";
}

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::kGeneric: return true;
    case Isa::kAvx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Isa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("fma");
  }
  return false;
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
  const auto& table = f32_gemm_ukernels();
  const char* env = std::getenv("KILN_ISA");
  if (env && *env) {
    for (const auto& k : table)
      if (std::string(env) == isa_name(k.isa) && isa_supported(k.isa)) return &k;
  }
  for (const auto& k : table)
    if (isa_supported(k.isa)) return &k;
  return &table.back();
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

void run_parallel(const ParallelFor& parallel, int64_t n,
                  const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (parallel && n > 1) {
    parallel(n, fn);
  } else {
    fn(0, n);
  }
}

}  // namespace

const F32GemmUkernel& f32_gemm_default() {
  static const F32GemmUkernel* chosen = choose_default();
  return *chosen;
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
    case 8: pack_a_trans_panel<8>(kc, src, lda, alpha, dst); return true;
    case 6: pack_a_trans_panel<6>(kc, src, lda, alpha, dst); return true;
    case 4: pack_a_trans_panel<4>(kc, src, lda, alpha, dst); return true;
    default: return false;
  }
}

}  // namespace

void f32_gemm_pack_a(bool trans_a, int64_t mc, int64_t kc, const float* a, int64_t lda, float alpha,
                     int mr, float* out) {
  for (int64_t i0 = 0; i0 < mc; i0 += mr) {
    const int64_t rows = std::min<int64_t>(mr, mc - i0);
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

void f32_gemm_pack_b(bool trans_b, int64_t kc, int64_t nc, const float* b, int64_t ldb, int nr,
                     float* out) {
  for (int64_t j0 = 0; j0 < nc; j0 += nr) {
    const int64_t cols = std::min<int64_t>(nr, nc - j0);
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

PackedB pack_b(bool trans_b, int64_t K, int64_t N, const float* B, int64_t ldb,
               const F32GemmUkernel* kernel, const ParallelFor& parallel) {
  PackedB packed;
  packed.kernel = kernel ? kernel : &f32_gemm_default();
  packed.k = K;
  packed.n = N;
  const int64_t nr = packed.kernel->nr, kcb = packed.kernel->kc;
  const int64_t panels = ceil_div(N, nr), kblocks = ceil_div(K, kcb);
  packed.data.resize(static_cast<size_t>(K * panels * nr));
  run_parallel(parallel, kblocks * panels, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t k0 = (t / panels) * kcb, q = t % panels;
      const int64_t kc = std::min(kcb, K - k0), j0 = q * nr;
      const float* src = trans_b ? B + j0 * ldb + k0 : B + k0 * ldb + j0;
      f32_gemm_pack_b(trans_b, kc, std::min(nr, N - j0), src, ldb, static_cast<int>(nr),
                      packed.data.data() + packed.panel_offset(k0, q));
    }
  });
  return packed;
}

void sgemm_packed(bool trans_a, int64_t M, const float* A, int64_t lda, float alpha,
                  const PackedB& B, float beta, float* C, int64_t ldc, const ParallelFor& parallel,
                  const GemmEpilogue& epilogue) {
  KILN_CHECK(B.kernel != nullptr, "sgemm_packed: B is not packed");
  const F32GemmUkernel& uk = *B.kernel;
  const int64_t N = B.n, K = B.k, mr = uk.mr, nr = uk.nr;
  if (M <= 0 || N <= 0) return;
  if (K == 0) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        float v = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
        if (epilogue.bias) v += epilogue.bias[j];
        if (epilogue.relu) v = std::max(v, 0.0f);
        C[i * ldc + j] = v;
      }
    return;
  }
  // M blocks of equal size (a multiple of MR); N split into chunks of panels for parallelism.
  const int64_t mblocks = ceil_div(M, uk.mc);
  const int64_t mc = std::min(ceil_div(ceil_div(M, mblocks), mr) * mr, ceil_div(M, mr) * mr);
  const int64_t panels = ceil_div(N, nr);
  const int64_t nchunks = std::clamp<int64_t>(ceil_div(16, mblocks), 1, panels);
  const int64_t chunk_panels = ceil_div(panels, nchunks);
  const int64_t tasks = mblocks * ceil_div(panels, chunk_panels);
  const int64_t nchunks_real = ceil_div(panels, chunk_panels);
  // With one N chunk per M block each task packs its A block right before use (it stays in
  // cache). With several, the chunks of one M block would each repack the same A block, so all
  // of A is packed once up front, in parallel, into `shared_a` ([M block][K] at stride mc).
  const bool prepack = nchunks_real > 1;
  thread_local std::vector<float> shared_a;
  if (prepack) {
    shared_a.resize(static_cast<size_t>(mblocks * mc * K));
    const int64_t kblocks = ceil_div(K, static_cast<int64_t>(uk.kc));
    float* dst = shared_a.data();
    run_parallel(parallel, mblocks * kblocks, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t i0 = (t / kblocks) * mc, k0 = (t % kblocks) * uk.kc;
        if (i0 >= M) continue;
        const int64_t kc = std::min<int64_t>(uk.kc, K - k0);
        const float* a_src = trans_a ? A + k0 * lda + i0 : A + i0 * lda + k0;
        f32_gemm_pack_a(trans_a, std::min(mc, M - i0), kc, a_src, lda, alpha, static_cast<int>(mr),
                        dst + (i0 / mc) * mc * K + k0 * mc);
      }
    });
  }
  const float* packed_a = shared_a.data();
  run_parallel(parallel, tasks, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> a_buf;
    if (!prepack) a_buf.resize(static_cast<size_t>(mc * uk.kc));
    for (int64_t t = begin; t < end; ++t) {
      const int64_t i0 = (t / nchunks_real) * mc;
      if (i0 >= M) continue;
      const int64_t rows = std::min(mc, M - i0);
      const int64_t q0 = (t % nchunks_real) * chunk_panels;
      const int64_t q1 = std::min(panels, q0 + chunk_panels);
      for (int64_t k0 = 0; k0 < K; k0 += uk.kc) {
        const int64_t kc = std::min<int64_t>(uk.kc, K - k0);
        const bool last = k0 + kc >= K;
        const float* a_block = packed_a + (i0 / mc) * mc * K + k0 * mc;
        if (!prepack) {
          const float* a_src = trans_a ? A + k0 * lda + i0 : A + i0 * lda + k0;
          f32_gemm_pack_a(trans_a, rows, kc, a_src, lda, alpha, static_cast<int>(mr), a_buf.data());
          a_block = a_buf.data();
        }
        F32GemmParams params;
        params.beta = k0 == 0 ? beta : 1.0f;
        params.relu = last && epilogue.relu;
        for (int64_t q = q0; q < q1; ++q) {
          const int64_t j0 = q * nr, cols = std::min(nr, N - j0);
          const float* b_panel = B.data.data() + B.panel_offset(k0, q);
          params.bias = last && epilogue.bias ? epilogue.bias + j0 : nullptr;
          for (int64_t ii = 0; ii < rows; ii += mr) {
            uk.fn(std::min(mr, rows - ii), cols, kc, a_block + ii * kc, b_panel,
                  C + (i0 + ii) * ldc + j0, ldc, params);
          }
        }
      }
    }
  });
}

void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
           const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
           int64_t ldc, const ParallelFor& parallel, const GemmEpilogue& epilogue,
           const F32GemmUkernel* kernel) {
  if (M <= 0 || N <= 0) return;
  const PackedB packed = pack_b(trans_b, K, N, B, ldb, kernel, parallel);
  sgemm_packed(trans_a, M, A, lda, alpha, packed, beta, C, ldc, parallel, epilogue);
}

}  // namespace kiln::kernels
