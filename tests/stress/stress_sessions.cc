// Concurrency and cancellation stress through the C API, for the sanitizer builds (run by
// tests/stress/run_stress.sh; a short bounded run is a ctest):
//   stress_sessions sessions [--threads 8] [--sessions 4] [--seconds 60] [MODEL...]
//     every thread loads, runs, checks and frees its own sessions over and over while a
//     canceller thread cancels random live models; outputs must match the single-threaded
//     results bit for bit (or the run must report KILN_ERROR_CANCELLED).
//   stress_sessions cancel MODEL [--cycles 1000]
//     cancels runs of MODEL mid-way and reports the latency from kiln_cancel to kiln_run's
//     return (median, p99, max); every tenth cycle a full run must still give the same outputs.
//   stress_sessions write-models DIR
//     writes the models used without MODEL (a Conv, a 24-MatMul chain) as DIR/*.onnx.
// Built twice: stress_sessions (libkiln: ONNX models, JIT) and stress_runtime (libkiln_runtime
// only: compiled .so models given as MODEL), which the sanitizer phase of `./kiln.sh test` runs
// under ASan and TSan with models linked against the sanitized runtime (run_stress.sh).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "kiln/c_api.h"
#ifdef KILN_STRESS_ONNX
#include "frontend/onnx/onnx_io.h"
#include "ir/text.h"
#include "../common/matmul_chain.h"
#endif

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "stress_sessions: %s\n", why.c_str());
  std::exit(1);
}

#ifdef KILN_STRESS_ONNX
const char* kConvText =
    "graph @g(%x: f32[1,3,32,32], %w: f32[8,3,3,3]) -> (%y: f32[1,8,32,32], %z: f32[1,8]) {\n"
    "  %c = Conv(%x, %w) {pads=[1, 1, 1, 1]} : f32[1,8,32,32]\n"
    "  %y = Relu(%c) : f32[1,8,32,32]\n"
    "  %p = GlobalAveragePool(%y) : f32[1,8,1,1]\n"
    "  %s = const i64[2] [1, 8]\n"
    "  %z = Reshape(%p, %s) : f32[1,8]\n"
    "  return %y, %z\n"
    "}";

std::vector<std::string> write_models(const fs::path& dir) {
  fs::create_directories(dir);
  std::vector<std::string> paths;
  for (const auto& [name, text] : {std::pair<std::string, std::string>{"conv.onnx", kConvText},
                                   {"chain.onnx", kiln::test::matmul_chain_text(192, 24)}}) {
    const fs::path p = dir / name;
    std::ofstream(p, std::ios::binary) << kiln::serialize_onnx_model(kiln::parse_model(text));
    paths.push_back(p.string());
  }
  return paths;
}

std::vector<std::string> default_models() {
  return write_models(fs::temp_directory_path() / ("kiln_stress_" + std::to_string(::getpid())));
}
#else
std::vector<std::string> default_models() { die("this build runs compiled models only: pass MODEL.so files"); }
#endif

// Inputs from the model's declared types: symbolic dims are 1 (first) or 128; integers stay
// small (token ids), floats are a fixed pattern.
struct Io {
  std::vector<std::vector<char>> in_data, out_data;
  std::vector<kiln_tensor> in, out;

  explicit Io(kiln_model* m) {
    for (size_t i = 0; i < kiln_model_num_inputs(m); ++i) {
      kiln_tensor_info info;
      kiln_model_input_info(m, i, &info);
      kiln_tensor t{};
      t.dtype = info.dtype;
      t.rank = info.rank;
      int64_t n = 1;
      for (int d = 0; d < info.rank; ++d) {
        t.dims[d] = info.dims[d] >= 0 ? info.dims[d] : (d == 0 ? 1 : 128);
        n *= t.dims[d];
      }
      const size_t es = kiln_dtype_size(info.dtype);
      in_data.emplace_back(static_cast<size_t>(n) * es + 64);
      char* base = in_data.back().data();
      char* p = base + (64 - reinterpret_cast<uintptr_t>(base) % 64) % 64;
      for (int64_t k = 0; k < n; ++k) {
        if (info.dtype == KILN_DTYPE_FLOAT32) reinterpret_cast<float*>(p)[k] = static_cast<float>(std::sin(0.1 * k)) * 0.1f;
        else if (info.dtype == KILN_DTYPE_INT64) reinterpret_cast<int64_t*>(p)[k] = k % 100;
        else if (info.dtype == KILN_DTYPE_INT32) reinterpret_cast<int32_t*>(p)[k] = static_cast<int32_t>(k % 100);
        else std::memset(p + k * static_cast<int64_t>(es), 0, es);
      }
      t.data = p;
      t.size_bytes = static_cast<size_t>(n) * es;
      in.push_back(t);
    }
    for (size_t i = 0; i < kiln_model_num_outputs(m); ++i) {
      kiln_tensor_info info;
      kiln_model_output_info(m, i, &info);
      kiln_tensor t{};
      t.dtype = info.dtype;
      size_t n = kiln_dtype_size(info.dtype);
      for (int d = 0; d < info.rank; ++d) n *= static_cast<size_t>(info.dims[d] >= 0 ? info.dims[d] : (d == 0 ? 1 : 128));
      out_data.emplace_back(n + 64);
      t.data = out_data.back().data();
      t.size_bytes = out_data.back().size();
      out.push_back(t);
    }
  }
  kiln_status run(kiln_model* m) { return kiln_run(m, in.data(), in.size(), out.data(), out.size()); }
  // The outputs' bytes (after a successful run).
  std::string result() const {
    std::string r;
    for (const auto& t : out) {
      size_t n = kiln_dtype_size(t.dtype);
      for (int d = 0; d < t.rank; ++d) n *= static_cast<size_t>(t.dims[d]);
      r.append(static_cast<const char*>(t.data), n);
    }
    return r;
  }
};

kiln_model* load(const std::string& path) {
  kiln_model* m = nullptr;
  if (kiln_model_load_file(path.c_str(), nullptr, &m) != KILN_OK) die("loading " + path + ": " + kiln_last_error());
  return m;
}

int sessions_mode(int threads, int per_thread, double seconds, std::vector<std::string> models) {
  if (models.empty()) models = default_models();
  std::vector<std::string> expected;
  for (const auto& p : models) {  // the reference results, one session, one thread
    kiln_model* m = load(p);
    Io io(m);
    if (io.run(m) != KILN_OK) die(p + ": " + kiln_last_error());
    expected.push_back(io.result());
    kiln_model_free(m);
  }
  std::mutex live_mu;  // kiln_cancel must not race with kiln_model_free
  std::set<kiln_model*> live;
  std::atomic<bool> stop{false};
  std::atomic<long> runs{0}, cancelled{0}, loads{0}, failures{0};
  auto worker = [&](int id) {
    std::mt19937 rng(static_cast<unsigned>(id));
    std::vector<kiln_model*> mine(static_cast<size_t>(per_thread), nullptr);
    std::vector<size_t> which(mine.size());
    while (!stop) {
      const size_t slot = rng() % mine.size();
      if (!mine[slot]) {
        which[slot] = rng() % models.size();
        mine[slot] = load(models[which[slot]]);
        ++loads;
        std::lock_guard<std::mutex> lk(live_mu);
        live.insert(mine[slot]);
      }
      Io io(mine[slot]);
      const kiln_status s = io.run(mine[slot]);
      ++runs;
      if (s == KILN_ERROR_CANCELLED) ++cancelled;
      else if (s != KILN_OK || io.result() != expected[which[slot]]) {
        ++failures;
        std::fprintf(stderr, "thread %d: %s: status %d %s\n", id, models[which[slot]].c_str(), s, kiln_last_error());
      }
      if (rng() % 4 == 0) {
        {
          std::lock_guard<std::mutex> lk(live_mu);
          live.erase(mine[slot]);
        }
        kiln_model_free(mine[slot]);
        mine[slot] = nullptr;
      }
    }
    std::lock_guard<std::mutex> lk(live_mu);
    for (kiln_model* m : mine)
      if (m) {
        live.erase(m);
        kiln_model_free(m);
      }
  };
  std::thread canceller([&] {
    std::mt19937 rng(99);
    while (!stop) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1 + rng() % 5));
      std::lock_guard<std::mutex> lk(live_mu);
      if (live.empty()) continue;
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      kiln_cancel(*it);
    }
  });
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker, t);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : pool) t.join();
  canceller.join();
  std::printf("sessions: %d threads x %d sessions, %.0f s: %ld loads, %ld runs (%ld cancelled), %ld failures\n",
              threads, per_thread, seconds, loads.load(), runs.load(), cancelled.load(), failures.load());
  return failures == 0 ? 0 : 1;
}

int cancel_mode(const std::string& path, int cycles) {
  kiln_model* m = load(path);
  Io io(m);
  auto t0 = Clock::now();
  if (io.run(m) != KILN_OK) die(path + ": " + kiln_last_error());  // compiles
  const std::string expected = io.result();
  t0 = Clock::now();
  if (io.run(m) != KILN_OK) die(path + ": " + kiln_last_error());
  const double run_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  std::mt19937 rng(7);
  std::vector<double> latency_ms;
  int completed = 0;
  for (int c = 0; c < cycles; ++c) {
    std::atomic<bool> returned{false};
    Clock::time_point done;
    kiln_status status = KILN_OK;
    std::string message;
    std::thread runner([&] {
      status = io.run(m);
      done = Clock::now();
      message = kiln_last_error();
      returned = true;
    });
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(run_ms * 0.1 + run_ms * 0.6 * (rng() % 1000) / 1000.0));
    const Clock::time_point asked = Clock::now();
    kiln_cancel(m);
    runner.join();
    if (status == KILN_ERROR_CANCELLED) latency_ms.push_back(std::chrono::duration<double, std::milli>(done - asked).count());
    else if (status == KILN_OK) ++completed;
    else die("cycle " + std::to_string(c) + ": status " + std::to_string(status) + ": " + message);
    if (status == KILN_ERROR_CANCELLED && std::getenv("KILN_STRESS_VERBOSE"))
      std::fprintf(stderr, "cycle %d: cancel latency %.2f ms\n", c, latency_ms.back());
    if (c % 10 == 9 && (io.run(m) != KILN_OK || io.result() != expected)) die("a full run after cancels differs");
  }
  kiln_model_free(m);
  std::sort(latency_ms.begin(), latency_ms.end());
  auto pct = [&](double q) { return latency_ms.empty() ? 0.0 : latency_ms[static_cast<size_t>(q * (latency_ms.size() - 1))]; };
  std::printf("cancel: %s, run %.1f ms; %d cycles: %zu cancelled, %d completed first; latency from kiln_cancel to "
              "return: median %.2f ms, p99 %.2f ms, max %.2f ms\n",
              path.c_str(), run_ms, cycles, latency_ms.size(), completed, pct(0.5), pct(0.99), pct(1.0));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) die("usage: stress_sessions sessions|cancel [options] [MODEL...]");
  const std::string mode = argv[1];
  int threads = 8, sessions = 4, cycles = 1000;
  double seconds = 60;
  std::vector<std::string> models;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&] {
      if (i + 1 >= argc) die(a + " needs a value");
      return std::string(argv[++i]);
    };
    if (a == "--threads") threads = std::stoi(value());
    else if (a == "--sessions") sessions = std::stoi(value());
    else if (a == "--seconds") seconds = std::stod(value());
    else if (a == "--cycles") cycles = std::stoi(value());
    else models.push_back(a);
  }
  if (mode == "sessions") return sessions_mode(threads, sessions, seconds, models);
#ifdef KILN_STRESS_ONNX
  if (mode == "write-models" && models.size() == 1) return write_models(models[0]).empty();
#endif
  if (mode == "cancel") return cancel_mode(models.empty() ? default_models()[1] : models[0], cycles);
  die("unknown mode '" + mode + "'");
}
