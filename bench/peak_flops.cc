// kiln_peak_flops: the machine's fp32 FMA peak (independent FMA chains in registers) and
// SGEMM 1024^3 GFLOP/s through kernels::sgemm on kiln's thread pool, with 1 and 2 threads, and the ratio to peak (also
// per run, against a short peak burst measured just before it);
// the int8 (u8s8) GEMM of the same size in GOP/s, with 7-bit and full-range B.
// Usage: kiln_peak_flops [--size N] [--reps R] [--threads T]...
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "kernels/x86/f32_gemm.h"
#include "kernels/x86/s8_gemm.h"
#include "runtime/thread_pool.h"

namespace {

using kiln::kernels::Isa;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

constexpr int kChains = 24;

// Returns flops done: iters * chains * lanes * 2.
__attribute__((target("avx512f,fma"), noinline)) double fma_loop_avx512(int64_t iters, float* sink) {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(float(i) * 1e-3f);
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 32
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], x, y);
  }
  __m512 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, acc[i]);
  alignas(64) float out[16];
  _mm512_store_ps(out, s);
  *sink = out[0];
  return double(iters) * kChains * 16 * 2;
}

__attribute__((target("avx2,fma"), noinline)) double fma_loop_avx2(int64_t iters, float* sink) {
  constexpr int kYmmChains = 12;
  __m256 acc[kYmmChains];
  for (int i = 0; i < kYmmChains; ++i) acc[i] = _mm256_set1_ps(float(i) * 1e-3f);
  const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kYmmChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], x, y);
  }
  alignas(32) float out[8];
  __m256 s = acc[0];
  for (int i = 1; i < kYmmChains; ++i) s = _mm256_add_ps(s, acc[i]);
  _mm256_store_ps(out, s);
  *sink = out[0];
  return double(iters) * kYmmChains * 8 * 2;
}

// Peak GFLOP/s with `threads` threads each running its own FMA chains (best of `reps`; the
// default is ~80 ms a rep).
double measure_peak(Isa isa, int threads, int reps = 3, int64_t iters = 20'000'000) {
  double best = 0;
  for (int rep = 0; rep < reps; ++rep) {
    std::vector<std::thread> pool;
    std::vector<float> sinks(threads * 16);
    std::vector<double> flops(threads);
    const auto t0 = Clock::now();
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        flops[t] = isa == Isa::kAvx512 ? fma_loop_avx512(iters, &sinks[t * 16])
                                       : fma_loop_avx2(iters, &sinks[t * 16]);
      });
    for (auto& th : pool) th.join();
    const double s = seconds_since(t0);
    double total = 0;
    for (double f : flops) total += f;
    best = std::max(best, total / s * 1e-9);
  }
  return best;
}

// The GEMMs run on kiln's own thread pool, as a model's GEMM steps do (spinning workers, per-thread
// shares, stealing), not on threads started per call.
kiln::kernels::ParallelFor make_parallel(kiln::ThreadPool* pool) {
  if (!pool || pool->num_threads() <= 1) return nullptr;
  return [pool](int64_t n, std::function<void(int64_t, int64_t)> fn) { pool->parallel_for(n, fn); };
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n = 1024;
  int reps = 10;
  std::vector<int> thread_counts;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--size") && i + 1 < argc) n = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) thread_counts.push_back(std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: kiln_peak_flops [--size N] [--reps R] [--threads T]...\n");
      return 2;
    }
  }
  if (thread_counts.empty()) thread_counts = {1, 2};
  const Isa peak_isa = kiln::kernels::isa_supported(Isa::kAvx512) ? Isa::kAvx512
                       : kiln::kernels::isa_supported(Isa::kAvx2) ? Isa::kAvx2
                                                                   : Isa::kGeneric;
  std::printf("default kernel: %s\n", kiln::kernels::f32_gemm_default().name);
  std::vector<float> a(n * n), b(n * n), c(n * n);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (auto& v : a) v = dist(rng);
  for (auto& v : b) v = dist(rng);
  const double flops = 2.0 * double(n) * n * n;
  for (int threads : thread_counts) {
    double peak = 0;
    if (peak_isa != Isa::kGeneric) {
      peak = measure_peak(peak_isa, threads);
      std::printf("threads=%d  fp32 FMA peak (%s): %.1f GFLOP/s\n", threads,
                  kiln::kernels::isa_name(peak_isa), peak);
    }
    kiln::ThreadPool pool(threads);
    const auto parallel = make_parallel(&pool);
    for (const auto& k : kiln::kernels::f32_gemm_ukernels()) {
      if (!kiln::kernels::isa_supported(k.isa)) continue;
      std::vector<double> times, times_packed, paired;
      const auto packed = kiln::kernels::pack_b(false, n, n, b.data(), n, &k, parallel);
      for (int r = 0; r < reps + 1; ++r) {
        // A short peak burst (~8 ms) right before each run: on a shared machine whose throughput
        // drifts, the run's share of the peak of that moment is the steadier figure.
        // (After the pool's workers stop spinning, so they do not share the cores with it.)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        const double peak_now = peak_isa != Isa::kGeneric ? measure_peak(peak_isa, threads, 1, 2'000'000) : 0.0;
        auto t0 = Clock::now();
        kiln::kernels::sgemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(),
                             n, parallel, {}, &k, threads);
        const double t = seconds_since(t0);
        t0 = Clock::now();
        kiln::kernels::sgemm_packed(false, n, a.data(), n, 1.0f, packed, 0.0f, c.data(), n,
                                    parallel, {}, threads);
        const double tp = seconds_since(t0);
        if (r > 0) {  // the first run is warm-up
          times.push_back(t), times_packed.push_back(tp);
          if (peak_now > 0) paired.push_back(flops / t * 1e-9 / peak_now);
        }
      }
      std::sort(paired.begin(), paired.end());
      std::sort(times.begin(), times.end());
      std::sort(times_packed.begin(), times_packed.end());
      const double med = flops / times[times.size() / 2] * 1e-9, best = flops / times[0] * 1e-9;
      const double medp = flops / times_packed[times_packed.size() / 2] * 1e-9;
      const double bestp = flops / times_packed[0] * 1e-9;
      std::printf(
          "threads=%d  sgemm %lldx%lldx%lld %-28s median %.1f best %.1f GFLOP/s (%.0f%% / %.0f%% "
          "of peak); pre-packed B: median %.1f best %.1f (%.0f%% / %.0f%%)\n",
          threads, (long long)n, (long long)n, (long long)n, k.name, med, best,
          peak > 0 ? 100 * med / peak : 0.0, peak > 0 ? 100 * best / peak : 0.0, medp, bestp,
          peak > 0 ? 100 * medp / peak : 0.0, peak > 0 ? 100 * bestp / peak : 0.0);
      if (!paired.empty())
        std::printf("threads=%d  sgemm %lldx%lldx%lld %-28s vs the peak measured just before each run: median %.0f%% "
                    "(quartiles %.0f%%-%.0f%%)\n",
                    threads, (long long)n, (long long)n, (long long)n, k.name, 100 * paired[paired.size() / 2],
                    100 * paired[paired.size() / 4], 100 * paired[paired.size() * 3 / 4]);
    }
    // int8: u8 x s8 -> s32 with B pre-packed; one VNNI instruction does 4x the multiply-adds of
    // an fp32 FMA, so 4x the fp32 peak is its ceiling. On AVX2 without VNNI, B within 7 bits
    // takes the vpmaddubsw microkernel and full-range B the int16 one: both are measured.
    for (const int b_value : {-2, -100}) {
      std::vector<uint8_t> a8(n * n, 3);
      std::vector<int8_t> b8(n * n, static_cast<int8_t>(b_value));
      std::vector<int32_t> c8(n * n);
      const auto packed = kiln::kernels::pack_b_s8(n, n, b8.data(), n);
      std::vector<double> times;
      for (int r = 0; r < reps + 1; ++r) {
        const auto t0 = Clock::now();
        kiln::kernels::u8s8_gemm_packed(n, a8.data(), n, packed, c8.data(), n, parallel);
        if (r > 0) times.push_back(seconds_since(t0));
      }
      std::sort(times.begin(), times.end());
      const double med = flops / times[times.size() / 2] * 1e-9, best = flops / times[0] * 1e-9;
      std::printf("threads=%d  u8s8 gemm %lldx%lldx%lld %s, %s B: median %.1f best %.1f GOP/s (%.0f%% / %.0f%% of 4x "
                  "the fp32 peak)\n",
                  threads, (long long)n, (long long)n, (long long)n, kiln::kernels::s8_gemm_kernel_name(),
                  packed.seven_bit ? "7-bit" : "8-bit", med, best, peak > 0 ? 25 * med / peak : 0.0,
                  peak > 0 ? 25 * best / peak : 0.0);
    }
  }
  return 0;
}
