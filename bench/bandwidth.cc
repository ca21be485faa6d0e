// kiln_bandwidth: memory bandwidth of the machine (memcpy of 64M floats, 1 and 2 threads) and of
// kiln's compiled engine on two memory-bound graphs, with the ratio to the copy bandwidth:
//   chain:  y = relu((x*a + b) * x - c) over 64M floats (5 elementwise ops, one fused kernel),
//           bytes = read + written (8 per element; copy counts the same way);
//   reduce: ReduceSum over the last axis of [65536, 1024] floats, bytes = read (4 per element).
// Each figure is the best of --reps runs (default 5). "fresh" rows let the engine allocate the
// graph output per run (glibc maps large blocks anew each time, so the first-touch page faults
// of the 256 MiB chain output are part of a run); "caller" rows pass a preallocated output
// buffer (CompiledExecutor::run with OutputBuffer, as the C API and a steady caller do), which
// is what memcpy's destination is too.
// Usage: kiln_bandwidth [--reps R] [--print-kernels]  (the TIR of the kernels, 1-thread plans)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ir/text.h"
#include "pass/pass.h"
#include "driver/compiled_executor.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kN = int64_t(64) << 20;  // 64M floats
constexpr int64_t kRows = 65536, kCols = 1024;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Best GB/s of memcpy of kN floats split in `threads` parts (bytes read + written).
double copy_gbs(int threads, int reps) {
  std::vector<float> src(kN, 1.0f), dst(kN, 0.0f);
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    std::vector<std::thread> pool;
    const int64_t part = kN / threads;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        const int64_t lo = t * part, hi = t == threads - 1 ? kN : lo + part;
        std::memcpy(dst.data() + lo, src.data() + lo, sizeof(float) * static_cast<size_t>(hi - lo));
      });
    for (auto& th : pool) th.join();
    best = std::max(best, 2.0 * sizeof(float) * kN / seconds_since(t0) * 1e-9);
  }
  if (dst[kN / 2] != 1.0f) std::abort();
  return best;
}

kiln::Model prepare(const std::string& text) {
  kiln::Model m = kiln::parse_model(text);
  kiln::PassContext ctx;
  kiln::run_passes(m, {"shape-inference", "fusion"}, ctx);
  return m;
}

struct EngineResult {
  double gbs = 0;
  int kernels = 0, generated = 0, fallback = 0;
};

// Best GB/s of the compiled engine on `m` with input `x`; `bytes` per run. `into`: the output
// goes to this caller buffer instead of a fresh tensor.
EngineResult engine_gbs(const kiln::Model& m, const kiln::Tensor& x, double bytes, int threads, int reps,
                        bool print_kernels, const kiln::Tensor* into) {
  kiln::CompiledOptions opts;
  opts.threads = threads;
  kiln::CompiledExecutor exec(m, opts);
  std::vector<kiln::RtValue> feeds{kiln::RtValue(x)};
  std::vector<kiln::OutputBuffer> outs;
  if (into) outs.push_back({into->raw(), into->nbytes()});
  exec.run(feeds, outs);  // builds the plan
  if (print_kernels) std::printf("%s", exec.kernels_text().c_str());
  EngineResult r;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    auto out = exec.run(feeds, outs);
    r.gbs = std::max(r.gbs, bytes / seconds_since(t0) * 1e-9);
  }
  r.kernels = exec.stats().kernels;
  r.generated = exec.stats().generated_nodes;
  r.fallback = exec.stats().fallback_nodes;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 5;
  bool print_kernels = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--reps" && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    else if (std::string(argv[i]) == "--print-kernels") print_kernels = true;
    else {
      std::fprintf(stderr, "usage: kiln_bandwidth [--reps R] [--print-kernels]\n");
      return 2;
    }
  }
  const std::string chain_text = R"(graph @chain(%x: f32[67108864]) -> (%y: f32[67108864]) {
    %a = const f32[] [0.75]
    %b = const f32[] [0.25]
    %c = const f32[] [0.5]
    %t1 = Mul(%x, %a) : f32[67108864]
    %t2 = Add(%t1, %b) : f32[67108864]
    %t3 = Mul(%t2, %x) : f32[67108864]
    %t4 = Sub(%t3, %c) : f32[67108864]
    %y = Relu(%t4) : f32[67108864]
    return %y
  })";
  const std::string reduce_text = R"(graph @reduce(%x: f32[65536,1024]) -> (%y: f32[65536]) {
    %ax = const i64[1] [1]
    %y = ReduceSum(%x, %ax) {keepdims=0} : f32[65536]
    return %y
  })";
  kiln::Model chain = prepare(chain_text), reduce = prepare(reduce_text);
  kiln::Tensor xc(kiln::DType::kFloat32, {kN});
  kiln::Tensor xr(kiln::DType::kFloat32, {kRows, kCols});
  float* pc = static_cast<float*>(xc.raw());
  float* pr = static_cast<float*>(xr.raw());
  for (int64_t i = 0; i < kN; ++i) pc[i] = pr[i] = static_cast<float>(i % 1000) * 1e-3f - 0.5f;

  std::printf("%-22s %7s %9s %8s  %s\n", "benchmark", "threads", "GB/s", "of copy", "plan");
  double copy[3] = {0, 0, 0};
  for (int t : {1, 2}) {
    copy[t] = copy_gbs(t, reps);
    std::printf("%-22s %7d %9.2f %8s\n", "memcpy (r+w)", t, copy[t], "");
  }
  kiln::Tensor chain_out = kiln::Tensor::uninitialized(kiln::DType::kFloat32, {kN});
  kiln::Tensor reduce_out = kiln::Tensor::uninitialized(kiln::DType::kFloat32, {kRows});
  for (int mode = 0; mode < 2; ++mode) {
    const bool caller = mode == 1;
    const char* suffix = caller ? ", caller" : ", fresh";
    for (int t : {1, 2}) {
      EngineResult r = engine_gbs(chain, xc, 8.0 * kN, t, reps, print_kernels && t == 1 && mode == 0,
                                  caller ? &chain_out : nullptr);
      std::printf("%-22s %7d %9.2f %7.0f%%  %d kernel(s), %d generated, %d fallback\n",
                  (std::string("chain (r+w") + suffix + ")").c_str(), t, r.gbs, 100 * r.gbs / copy[t], r.kernels,
                  r.generated, r.fallback);
    }
    for (int t : {1, 2}) {
      EngineResult r = engine_gbs(reduce, xr, 4.0 * kN, t, reps, print_kernels && t == 1 && mode == 0,
                                  caller ? &reduce_out : nullptr);
      std::printf("%-22s %7d %9.2f %7.0f%%  %d kernel(s), %d generated, %d fallback\n",
                  (std::string("reduce (r") + suffix + ")").c_str(), t, r.gbs, 100 * r.gbs / copy[t], r.kernels,
                  r.generated, r.fallback);
    }
  }
  return 0;
}
