// f32 GEMM microkernels and the blocked SGEMM driver (BLIS/XNNPACK style).
// Requires: nothing beyond core. Guarantees: C = alpha*op(A)*op(B) + beta*C (+bias, relu),
// computed by the best microkernel the CPU supports (KILN_ISA=generic|avx2|avx512 forces one).
// Tests: tests/kernels/test_sgemm.cc. Benchmark: bench/peak_flops.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/large_alloc.h"
#include "target/target.h"

namespace kiln::kernels {

using target::Isa;
using target::isa_name;
// True when this CPU can run code for `isa` (whatever KILN_ISA selects: tests run every kernel
// the CPU can). The kernels a plan uses follow target::Target::host().isa.
bool isa_supported(Isa isa);

// An activation a GEMM epilogue applies last (values fixed: plans serialize them).
enum class Activation : int32_t { kNone = 0, kSilu = 1, kHardSwish = 2, kSigmoid = 3, kTanh = 4 };

// The activation on one value (the portable kernels, tails and post-passes).
inline float apply_activation(Activation a, float x) {
  switch (a) {
    case Activation::kNone: return x;
    case Activation::kSilu: return x / (1.0f + __builtin_expf(-x));
    case Activation::kHardSwish: return x * __builtin_fminf(__builtin_fmaxf(x + 3.0f, 0.0f), 6.0f) / 6.0f;
    case Activation::kSigmoid: return 1.0f / (1.0f + __builtin_expf(-x));
    case Activation::kTanh: return __builtin_tanhf(x);
  }
  return x;
}

// y[i] = act(y[i]) for i < n, vectorized where the CPU allows (post-passes of ops whose own
// kernels do not apply the activation).
void apply_activation_inplace(Activation a, float* y, int64_t n);

// Epilogue applied in the microkernel's store on the last K block.
// Order: alpha*AB + beta*C + bias, + residual, then relu, the clamp, the activation.
struct GemmEpilogue {
  const float* bias = nullptr;  // per-column (N) bias, added after alpha*AB + beta*C
  bool relu = false;
  const float* residual = nullptr;  // [M, N] with leading dim ldr, or null
  int64_t ldr = 0;
  bool clamp = false;  // clamp to [lo, hi]
  float lo = 0.0f, hi = 0.0f;
  Activation act = Activation::kNone;  // last
};

// Microkernel parameters for one MRxNR tile.
// Order: acc (+ beta*C) + bias[col] + row_bias[row] + residual, then relu, the clamp, the activation.
struct F32GemmParams {
  float beta = 0.0f;             // 0: overwrite C (C is not read), otherwise C = acc + beta*C
  const float* bias = nullptr;  // nr entries, or null
  bool relu = false;
  const float* row_bias = nullptr;  // mr entries (one per row of the tile), or null
  const float* residual = nullptr;  // the tile's mr x nr block of a residual, leading dim ldr, or null
  int64_t ldr = 0;
  bool clamp = false;               // clamp to [lo, hi]
  float lo = 0.0f, hi = 0.0f;
  Activation act = Activation::kNone;  // last
  int64_t b_stride = 0;  // floats from one k row of B to the next: 0 means NR (a packed panel)
};

// Computes an mr x nr tile (mr <= MR, nr <= NR) of C from a packed A micro-panel
// (kc x MR, k-major) and a packed B micro-panel (kc x NR, k-major; or, with params.b_stride,
// NR columns of each of kc rows that far apart, all NR readable).
using F32GemmUkernelFn = void (*)(int64_t mr, int64_t nr, int64_t kc, const float* a_packed,
                                  const float* b_packed, float* c, int64_t ldc,
                                  const F32GemmParams& params);

// The one list of f32 GEMM microkernels: drives declarations, dispatch, tests and benchmarks.
// X(MR, NR, isa suffix, Isa, KC, MC), best first.
#define KILN_F32_GEMM_UKERNELS(X)                 \
  X(14, 32, avx512f, ::kiln::kernels::Isa::kAvx512, 512, 112) \
  X(12, 32, avx512f, ::kiln::kernels::Isa::kAvx512, 512, 120) \
  X(10, 32, avx512f, ::kiln::kernels::Isa::kAvx512, 512, 120) \
  X(8, 32, avx512f, ::kiln::kernels::Isa::kAvx512, 512, 128)  \
  X(6, 16, avx2, ::kiln::kernels::Isa::kAvx2, 256, 120)       \
  X(4, 8, generic, ::kiln::kernels::Isa::kGeneric, 256, 64)

#define KILN_DECLARE_F32_GEMM(MR, NR, SUFFIX, ISA, KC, MC)                          \
  void f32_gemm_ukernel_##MR##x##NR##__##SUFFIX(int64_t mr, int64_t nr, int64_t kc,  \
                                                const float* a_packed,               \
                                                const float* b_packed, float* c,     \
                                                int64_t ldc, const F32GemmParams& params);
KILN_F32_GEMM_UKERNELS(KILN_DECLARE_F32_GEMM)
#undef KILN_DECLARE_F32_GEMM

struct F32GemmUkernel {
  const char* name;
  Isa isa;
  int mr, nr;
  int kc, mc;  // cache blocking: K block, M block (a multiple of mr)
  F32GemmUkernelFn fn;
};

const std::vector<F32GemmUkernel>& f32_gemm_ukernels();
// The kernel chosen once at start-up: the first of the list for target::Target::host().isa.
const F32GemmUkernel& f32_gemm_default();

// A partial last column panel (cols < NR) computed with A's rows in vector lanes and one
// broadcast B value per column (AVX-512 kernels, MR <= 16), then transposed in registers for
// the usual row-wise store: per k step about (cols + 1) / 2 cycles of loads against MR cycles of
// FMAs for a whole padded panel, so it pays for narrow tails such as a 14x14 image's
// 196 = 6 x 32 + 4 columns. b: the panel (row k at b + k*b_stride,
// all columns of the rounded-up-to-4 width readable, as a packed panel's zero padding is).
bool f32_gemm_coltail_pays(const F32GemmUkernel& uk, int64_t cols);
// Only where f32_gemm_coltail_pays(uk, cols) (callers decide once per GEMM, not per tile).
void f32_gemm_coltail(const F32GemmUkernel& uk, int64_t mr, int64_t cols, int64_t kc, const float* a_packed,
                      const float* b, int64_t b_stride, float* c, int64_t ldc, const F32GemmParams& params);

// Parallel hook: run fn(begin, end) over a partition of [0, n). nullptr runs serially.
using ParallelFor = std::function<void(int64_t n, std::function<void(int64_t, int64_t)>)>;
// fn over [0, n) through `parallel` (serially when it is null or n is 1).
void run_parallel(const ParallelFor& parallel, int64_t n, const std::function<void(int64_t, int64_t)>& fn);

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// How a GEMM's C splits into parallel tasks: `chunks` column chunks (each streams the A rows of
// its task again) x `groups` row groups of whole MR micro-panels (each packs its chunk's B block).
struct GemmSplit {
  int64_t chunks = 1, groups = 1;
};
// The split with the lowest estimated time on `threads` threads (<= 0: unknown, taken as 4):
// the largest task's compute times the rounds of tasks per thread, plus `chunk_cost` per column
// chunk and `group_cost` per row group (ns: operands re-streamed or re-packed), shared by the
// threads; a chunk's B block (KC x columns) fits in half of L2. One thread gets the fewest
// chunks and one group; several threads get at least 3 tasks each when the work allows. The cost helpers below give the rough per-thread rates.
GemmSplit choose_gemm_split(int64_t M, int64_t N, int64_t K, const F32GemmUkernel& uk, int threads,
                            double chunk_cost, double group_cost);
double gemm_split_compute_ns(int64_t M, int64_t N, int64_t K);
// Streaming `bytes` again from beyond L2 (0 when they fit in half of L2).
double gemm_split_stream_ns(double bytes);
// Of the kernels that read the same packed B as `base` (ISA, NR, KC), the one that pads M least.
const F32GemmUkernel& f32_gemm_for_rows(int64_t M, const F32GemmUkernel& base = f32_gemm_default());
// The kernel with `mr` rows among those that read the same packed B as `base`, or null (a tuned
// choice names its micro-kernel by height).
const F32GemmUkernel* f32_gemm_with_rows(int mr, const F32GemmUkernel& base = f32_gemm_default());
// This CPU's L2 size per core in bytes (target::Target::host().l2_bytes; 1 MiB when unknown).
int64_t l2_cache_bytes();

// op(B) (K x N) packed into NR-column panels per K block; pack once for constant weights.
struct PackedB {
  const F32GemmUkernel* kernel = nullptr;
  bool pinned = false;  // packed for an explicitly chosen kernel: sgemm_packed uses exactly it
  int64_t k = 0, n = 0;
  LargeVector<float> data;  // [k block][n panel][kc][NR], zero-padded
  int64_t panel_offset(int64_t k0, int64_t panel) const;
};

// Packs op(A) rows [m0, m0+mc) x K block [k0, k0+kc) into MR-row panels scaled by alpha.
void f32_gemm_pack_a(bool trans_a, int64_t mc, int64_t kc, const float* a, int64_t lda, float alpha,
                     int mr, float* out);
// Packs op(B) K block x columns [0, nc) into NR-column panels.
void f32_gemm_pack_b(bool trans_b, int64_t kc, int64_t nc, const float* b, int64_t ldb, int nr,
                     float* out);

// `kernel` null: the default kernel's layout, and sgemm_packed picks the kernel that pads M
// least among those sharing it (f32_gemm_for_rows); else exactly `kernel` is used.
PackedB pack_b(bool trans_b, int64_t K, int64_t N, const float* B, int64_t ldb,
               const F32GemmUkernel* kernel = nullptr, const ParallelFor& parallel = nullptr);
// The same into `into`, reusing its buffer (no allocation once it has grown): for B operands
// packed on every run.
void pack_b_into(bool trans_b, int64_t K, int64_t N, const float* B, int64_t ldb, PackedB& into,
                 const F32GemmUkernel* kernel = nullptr, const ParallelFor& parallel = nullptr);

// dst = src with row k of op(B) scaled by s[k] (a per-input-channel scale folded into packed
// weights); dst's buffer is reused.
void scale_packed_b_rows(const PackedB& src, const float* s, PackedB& dst);

// C = alpha*op(A)*op(B) + beta*C, then + bias and relu per epilogue; B pre-packed. `threads`:
// how many workers `parallel` spreads over (0: unknown, taken as 4), to balance the split.
// A tuned `kernel` (one that reads B's packing: f32_gemm_with_rows) and `split` (chunks and
// groups clamped to the panels there are) replace the default picks when set.
void sgemm_packed(bool trans_a, int64_t M, const float* A, int64_t lda, float alpha,
                  const PackedB& B, float beta, float* C, int64_t ldc,
                  const ParallelFor& parallel = nullptr, const GemmEpilogue& epilogue = {}, int threads = 0,
                  const F32GemmUkernel* kernel = nullptr, const GemmSplit* split = nullptr);

// Row-major SGEMM: C[M,N] = alpha*op(A)[M,K]*op(B)[K,N] + beta*C (+ epilogue). B is packed as
// it goes: by each task for its own column chunk when the split has no row groups (the packed
// panels stay in that core's L2), else once for all tasks.
void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
           const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
           int64_t ldc, const ParallelFor& parallel = nullptr, const GemmEpilogue& epilogue = {},
           const F32GemmUkernel* kernel = nullptr, int threads = 0);

}  // namespace kiln::kernels
