// `kiln bench MODEL... [--threads N] [--batch B] [--dim name=V]... [--engine E]
//              [--compare onnxruntime] [--warmup W] [--min-time S] [--min-runs R] [--rounds K]
//              [--settle-ms MS] [--json]`
// Per model: seeded random inputs (symbolic dims resolved by bench_common.h), warm-up runs,
// then timed runs until --min-time seconds and at least --min-runs runs; median and min
// latency. With --compare onnxruntime the same inputs go (as .npy files) to
// bench/ort_runner.py --serve, run by the project's Python (env KILN_PYTHON, else
// <repo>/.venv/bin/python; the script from env KILN_ORT_RUNNER, else found above the kiln binary
// or the working directory), which loads ONNX Runtime (intra-op threads = --threads, inter-op 1,
// sequential), warms it up and writes its outputs back (kiln checks that they agree); then the
// timed runs alternate in --rounds rounds, kiln's share then ORT's, so that a noisy shared
// machine slows both alike. Each share starts after --settle-ms of idle time: the other engine's
// pool threads spin for a while after its last run, and on a 2-core machine they would otherwise
// take a core from the first runs of the next share (ResNet-50 on 2 threads, 3 alternated pairs:
// kiln/ORT 1.06-1.13 without the pause, 0.99-1.02 with 50 ms).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <set>
#include <sstream>
#include <thread>
#include <memory>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "bench_common.h"
#include "commands.h"
#include "tune/records.h"
#include "driver/npy.h"
#include "driver/session.h"

namespace kiln::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct BenchArgs {
  std::vector<std::string> models;
  std::string engine = "compiled";
  int threads = 1;
  int64_t batch = 1;
  std::vector<std::string> dims;
  std::string compare;
  int warmup = 3;
  double min_time = 2.0;
  int min_runs = 10;
  int rounds = 4;
  int settle_ms = 50;
  uint64_t seed = 0;
  bool optimize = false;
  std::string records;  // --records: tuning records applied to kiln's kernels
  std::vector<std::string> offload;  // --offload: external backends for kiln's regions
  double offload_min_cost = -1;  // --offload-min-cost
  bool json = false;
  bool samples = false;
  double rtol = 1e-3;
  double atol = 1e-4;
  bool tolerances_given = false;  // --rtol or --atol on the command line
  double min_sqnr = 20.0;         // quantized models' output check, when no tolerance was given
};

struct Timing {
  double median = NAN, min = NAN;
  int runs = 0;
  std::vector<double> samples;  // every timed run, in the order run (--samples)
};

struct Result {
  std::string model;
  std::string inputs;  // "name f32[1,3,224,224]; ..."
  double load_ms = 0, first_run_ms = 0;
  Timing kiln;
  bool has_ort = false;
  Timing ort;
  double ort_load_ms = NAN;
  bool outputs_match = true;
  double max_abs_diff = NAN;
  bool by_sqnr = false;      // a quantized model checked by SQNR (BenchArgs::min_sqnr)
  double sqnr_db = NAN;      // then the lowest output SQNR against ORT's
  std::string note;  // mismatch or ORT failure details
};

Timing summarize(std::vector<double> t) {
  Timing r;
  if (t.empty()) return r;
  r.samples = t;
  std::sort(t.begin(), t.end());
  r.runs = static_cast<int>(t.size());
  r.min = t.front();
  r.median = t.size() % 2 ? t[t.size() / 2] : 0.5 * (t[t.size() / 2 - 1] + t[t.size() / 2]);
  return r;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The first existing `rel` in `start` or one of its parents.
std::string find_upwards(fs::path start, const std::string& rel) {
  std::error_code ec;
  for (fs::path p = start; !p.empty(); p = p.parent_path()) {
    if (fs::exists(p / rel, ec)) return (p / rel).string();
    if (p == p.parent_path()) break;
  }
  return "";
}

std::string repo_file(const std::string& rel) {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  std::string found = ec ? "" : find_upwards(exe.parent_path(), rel);
  if (found.empty()) found = find_upwards(fs::current_path(ec), rel);
  return found;
}

std::string ort_python() {
  if (const char* p = std::getenv("KILN_PYTHON"); p && *p) return p;
  std::string venv = repo_file(".venv/bin/python");
  return venv.empty() ? "python3" : venv;
}

std::string ort_runner() {
  if (const char* p = std::getenv("KILN_ORT_RUNNER"); p && *p) return p;
  std::string r = repo_file("bench/ort_runner.py");
  if (r.empty())
    throw Error(ErrorKind::kUsage,
                "--compare onnxruntime needs bench/ort_runner.py (not found above the kiln binary or the working "
                "directory; set KILN_ORT_RUNNER)");
  return r;
}

// True when the model computes on quantized values: two int8 engines then agree only within the
// quantization noise (a value rounding to the neighbouring level in one layer moves later ones).
bool quantized_model(const Graph& g) {
  static const std::set<std::string> ops = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear",
                                            "MatMulInteger", "ConvInteger", "QLinearConv", "QLinearMatMul"};
  for (const auto& n : g.nodes)
    if (ops.count(n->op_type) || (n->domain == "com.microsoft" && n->op_type.rfind("QLinear", 0) == 0)) return true;
  return false;
}

// 10 log10(sum w^2 / sum (g - w)^2) over one output (infinite when equal).
double sqnr_db(const Tensor& got, const Tensor& want) {
  double signal = 0, noise = 0;
  for (int64_t k = 0; k < got.numel(); ++k) {
    const double g = got.get_double(k), w = want.get_double(k);
    signal += w * w;
    noise += (g - w) * (g - w);
  }
  if (noise == 0) return INFINITY;
  return std::isnan(noise) ? -INFINITY : 10.0 * std::log10(signal / noise);
}

// Compares kiln's outputs with ORT's (.npy files out_dir/<i>.npy): every element within
// atol + rtol*|ort|, or for a quantized model without --rtol/--atol every float output's SQNR at
// least min_sqnr (integer outputs within one level); sets outputs_match, max_abs_diff, sqnr_db
// and a note on the first failure.
void compare_outputs(const std::vector<RtValue>& outs, const fs::path& dir, const BenchArgs& a, Result& r) {
  r.max_abs_diff = 0;
  for (size_t i = 0; i < outs.size(); ++i) {
    fs::path p = dir / (std::to_string(i) + ".npy");
    if (!outs[i].is_tensor()) {
      r.note += "output #" + std::to_string(i) + " is not a tensor (not compared); ";
      continue;
    }
    Tensor want = read_npy(p.string());
    const Tensor& got = outs[i].tensor;
    if (got.dims() != want.dims()) {
      r.outputs_match = false;
      r.note += "output #" + std::to_string(i) + " shape " + dims_text(got.dims()) + " vs onnxruntime " +
                dims_text(want.dims()) + "; ";
      continue;
    }
    if (got.dtype() == DType::kString) continue;
    const bool by_sqnr = r.by_sqnr && is_float(got.dtype());
    int64_t bad = 0;
    for (int64_t k = 0; k < got.numel(); ++k) {
      double g = got.get_double(k), w = want.get_double(k);
      double d = std::fabs(g - w);
      if (std::isnan(g) != std::isnan(w)) d = INFINITY;
      if (std::isnan(g) && std::isnan(w)) d = 0;
      if (!(d <= r.max_abs_diff)) r.max_abs_diff = d;
      if (r.by_sqnr ? !by_sqnr && !(d <= 1) : !(d <= a.atol + a.rtol * std::fabs(w))) ++bad;
    }
    if (by_sqnr) {
      const double db = sqnr_db(got, want);
      if (!(db >= r.sqnr_db)) r.sqnr_db = db;
      if (!(db >= a.min_sqnr)) {
        r.outputs_match = false;
        std::ostringstream os;
        os << std::fixed << std::setprecision(1) << "output #" << i << ": SQNR " << db << " dB against onnxruntime, below "
           << a.min_sqnr << " (--min-sqnr); ";
        r.note += os.str();
      }
    }
    if (bad) {
      r.outputs_match = false;
      r.note += "output #" + std::to_string(i) + ": " + std::to_string(bad) + " of " + std::to_string(got.numel()) +
                " elements outside rtol/atol; ";
    }
  }
}

// bench/ort_runner.py --serve as a child process: timing requests on its stdin, JSON lines back.
class OrtServer {
 public:
  ~OrtServer() { close(); }

  // Starts the runner; false (with the reason in `error`) when it does not come up ready.
  bool start(const std::string& cmd, std::string& error) {
    // A runner that dies must fail its model's comparison, not kill kiln on the next write.
    std::signal(SIGPIPE, SIG_IGN);
    int to_child[2], from_child[2];
    if (::pipe(to_child) != 0) return fail("pipe failed", error);
    if (::pipe(from_child) != 0) {
      ::close(to_child[0]), ::close(to_child[1]);
      return fail("pipe failed", error);
    }
    pid_ = ::fork();
    if (pid_ < 0) return fail("fork failed", error);
    if (pid_ == 0) {
      ::dup2(to_child[0], 0);
      ::dup2(from_child[1], 1);
      ::dup2(from_child[1], 2);
      for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) ::close(fd);
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(to_child[0]);
    ::close(from_child[1]);
    in_ = ::fdopen(to_child[1], "w");
    out_ = ::fdopen(from_child[0], "r");
    std::string text, line;
    while (read_line(line)) {
      if (line.rfind("{\"ready\"", 0) == 0) {
        ready_line = line;
        return true;
      }
      text += line + "\n";
    }
    if (text.size() > 600) text = text.substr(text.size() - 600);
    return fail("onnxruntime failed (" + cmd.substr(0, cmd.find(" --input")) + "): " + text, error);
  }

  // Runs ORT for at least `seconds` and `runs` runs; the per-run times (ms), empty on failure.
  std::vector<double> time_runs(double seconds, int runs) {
    std::vector<double> times;
    if (!in_ || std::fprintf(in_, "%.6f %d\n", seconds, runs) < 0 || std::fflush(in_) != 0) return times;
    // Lines before the answer are the runner's own warnings (its stderr shares the pipe).
    std::string line;
    while (read_line(line))
      if (line.rfind("{\"times_ms\"", 0) == 0) {
        const nlohmann::json reply = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (reply.is_object() && reply["times_ms"].is_array())
          for (const auto& t : reply["times_ms"])
            if (t.is_number()) times.push_back(t.get<double>());
        break;
      }
    return times;
  }

  void close() {
    if (in_) std::fclose(in_), in_ = nullptr;
    if (out_) std::fclose(out_), out_ = nullptr;
    if (pid_ > 0) {
      int status = 0;
      ::waitpid(pid_, &status, 0);
      pid_ = -1;
    }
  }

  std::string ready_line;  // {"ready": true, "load_ms": ..., ...}

 private:
  bool read_line(std::string& line) {
    line.clear();
    if (!out_) return false;
    for (int ch; (ch = std::fgetc(out_)) != EOF;) {
      if (ch == '\n') return true;
      line += static_cast<char>(ch);
    }
    return !line.empty();
  }
  bool fail(const std::string& why, std::string& error) {
    error = why;
    close();
    return false;
  }

  pid_t pid_ = -1;
  FILE* in_ = nullptr;
  FILE* out_ = nullptr;
};

// Starts ORT on the same inputs and compares its outputs; null (with r.note) when it fails.
std::unique_ptr<OrtServer> start_ort(const std::vector<RtValue>& feeds, const std::vector<RtValue>& outs,
                                     const Session& s, const std::string& model, const BenchArgs& a, Result& r) {
  static int counter = 0;
  fs::path dir = fs::temp_directory_path() / ("kiln-bench-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  fs::create_directories(dir / "out");
  std::string cmd = shell_quote(ort_python()) + " " + shell_quote(ort_runner()) + " " + shell_quote(model) +
                    " --threads " + std::to_string(a.threads) + " --warmup " + std::to_string(a.warmup) +
                    " --serve --output-dir " + shell_quote((dir / "out").string());
  const Graph& g = *s.model().graph;
  for (size_t i = 0; i < feeds.size(); ++i) {
    if (feeds[i].is_none()) continue;
    fs::path p = dir / (std::to_string(i) + ".npy");
    write_npy(p.string(), feeds[i].tensor);
    cmd += " --input " + shell_quote(g.inputs[i]->name + "=" + p.string());
  }
  r.has_ort = true;
  auto server = std::make_unique<OrtServer>();
  std::string error;
  if (!server->start(cmd, error)) {
    r.outputs_match = false;
    r.note += error;
    server.reset();
  } else {
    const nlohmann::json ready = nlohmann::json::parse(server->ready_line, nullptr, /*allow_exceptions=*/false);
    r.ort_load_ms = ready.is_object() && ready.contains("load_ms") && ready["load_ms"].is_number()
                        ? ready["load_ms"].get<double>()
                        : NAN;
    r.by_sqnr = !a.tolerances_given && quantized_model(*s.model().graph);
    if (r.by_sqnr) r.sqnr_db = INFINITY;
    compare_outputs(outs, dir / "out", a, r);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  return server;
}

Result bench_one(const std::string& model, const BenchArgs& a, const InputShapeOptions& shapes) {
  Result r;
  r.model = model;
  SessionOptions opts;
  opts.engine = parse_engine(a.engine);
  opts.threads = a.threads;
  opts.seed = a.seed;
  opts.optimize = a.optimize;
  opts.tuning = tune::load_tuning(a.records, a.threads);
  opts.tuned_offload = tune::load_offload_choices(a.records, a.threads);
  opts.offload = a.offload;
  opts.offload_min_cost = a.offload_min_cost;
  auto t0 = Clock::now();
  auto session = Session::load(model, opts);
  r.load_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  std::vector<RtValue> feeds = make_bench_inputs(*session, shapes, a.seed);
  const Graph& g = *session->model().graph;
  for (size_t i = 0; i < feeds.size(); ++i)
    if (!feeds[i].is_none())
      r.inputs += (r.inputs.empty() ? "" : "; ") + g.inputs[i]->name + " " +
                  std::string(dtype_name(feeds[i].tensor.dtype())) + dims_text(feeds[i].tensor.dims());
  auto ms_since = [](Clock::time_point s) {
    return std::chrono::duration<double, std::milli>(Clock::now() - s).count();
  };
  auto s = Clock::now();
  std::vector<RtValue> outs = session->run(feeds);  // first run: includes plan/JIT for the compiled engine
  r.first_run_ms = ms_since(s);
  for (int i = 1; i < a.warmup; ++i) session->run(feeds);
  std::unique_ptr<OrtServer> ort;
  if (!a.compare.empty()) ort = start_ort(feeds, outs, *session, model, a, r);
  // Without ORT, one round; with it, kiln and ORT take turns, each its share of the time.
  const int rounds = ort ? a.rounds : 1;
  const double round_ms = a.min_time * 1000.0 / rounds;
  const int round_runs = (a.min_runs + rounds - 1) / rounds;
  std::vector<double> times, ort_times;
  const auto settle = [&] {
    if (ort && a.settle_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(a.settle_ms));
  };
  for (int round = 0; round < rounds; ++round) {
    settle();
    auto start = Clock::now();
    for (int n = 0; n < round_runs || ms_since(start) < round_ms; ++n) {
      auto t = Clock::now();
      session->run(feeds);
      times.push_back(ms_since(t));
    }
    if (ort) {
      settle();
      std::vector<double> t = ort->time_runs(round_ms / 1000.0, round_runs);
      if (t.empty()) {
        r.outputs_match = false;
        r.note += "onnxruntime stopped answering; ";
        ort.reset();
        ort_times.clear();
      }
      ort_times.insert(ort_times.end(), t.begin(), t.end());
    }
  }
  r.kiln = summarize(times);
  if (r.has_ort) r.ort = summarize(ort_times);
  return r;
}

std::string timing_json(const Timing& t, bool with_samples) {
  std::string s = "{\"median\": " + json_number(t.median) + ", \"min\": " + json_number(t.min) +
                  ", \"runs\": " + std::to_string(t.runs);
  if (with_samples) {
    s += ", \"samples\": [";
    for (size_t i = 0; i < t.samples.size(); ++i) s += (i ? ", " : "") + json_number(t.samples[i]);
    s += "]";
  }
  return s + "}";
}

std::string today() {
  std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::localtime(&now));
  return buf;
}

std::string fixed(double v, int prec) {
  if (std::isnan(v)) return "-";
  std::ostringstream os;
  os << std::fixed << std::setprecision(prec) << v;
  return os.str();
}

int bench_command(const BenchArgs& a) {
  if (!a.compare.empty() && a.compare != "onnxruntime")
    throw Error(ErrorKind::kUsage, "--compare supports only 'onnxruntime', got '" + a.compare + "'");
  InputShapeOptions shapes;
  shapes.batch = a.batch;
  parse_dim_options(a.dims, shapes);
  std::vector<Result> results;
  int exit = 0;
  for (const auto& m : a.models) {
    if (!a.json) std::cerr << "benchmarking " << m << " ...\n";
    results.push_back(bench_one(m, a, shapes));
    const Result& r = results.back();
    if (r.has_ort && !r.outputs_match) exit = 1;
    if (!a.json && !r.note.empty()) std::cerr << "  " << fs::path(m).filename().string() << ": " << r.note << "\n";
  }
  if (a.json) {
    std::cout << "{\"kiln_version\": \"0.1.0\", \"date\": " << json_string(today())
              << ", \"cpu\": " << json_string(cpu_model_name())
              << ", \"target\": " << json_string(target::Target::host().describe())
              << ", \"hardware_threads\": " << std::thread::hardware_concurrency()
              << ", \"engine\": " << json_string(a.engine) << ", \"threads\": " << a.threads
              << ", \"batch\": " << a.batch << ", \"optimize\": " << (a.optimize ? "true" : "false")
              << ", \"results\": [\n";
    for (size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      double ratio = r.has_ort ? r.kiln.median / r.ort.median : NAN;
      std::cout << "  {\"model\": " << json_string(fs::path(r.model).stem().string())
                << ", \"path\": " << json_string(r.model) << ", \"engine\": " << json_string(a.engine)
                << ", \"threads\": " << a.threads << ", \"batch\": " << a.batch
                << ", \"inputs\": " << json_string(r.inputs) << ", \"load_ms\": " << json_number(r.load_ms)
                << ", \"first_run_ms\": " << json_number(r.first_run_ms) << ", \"kiln_ms\": " << timing_json(r.kiln, a.samples)
                << ", \"ort_ms\": " << (r.has_ort && !std::isnan(r.ort.median) ? timing_json(r.ort, a.samples) : "null")
                << ", \"ratio\": " << json_number(ratio)
                << ", \"outputs_match\": " << (r.has_ort ? (r.outputs_match ? "true" : "false") : "null")
                << ", \"max_abs_diff\": " << json_number(r.max_abs_diff)
                << ", \"sqnr_db\": " << json_number(r.by_sqnr ? std::min(r.sqnr_db, 300.0) : NAN)  // 300: identical
                << ", \"note\": " << json_string(r.note)
                << "}" << (i + 1 < results.size() ? "," : "") << "\n";
    }
    std::cout << "]}\n";
    return exit;
  }
  std::cout << "engine " << a.engine << ", " << a.threads << " thread(s), batch " << a.batch << ", cpu "
            << cpu_model_name() << ", target " << target::Target::host().describe() << "\n";
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"model", "kiln median ms", "kiln min ms", "runs"});
  if (!a.compare.empty())
    for (const char* h : {"ORT median ms", "ORT min ms", "kiln/ORT", "outputs"}) rows[0].push_back(h);
  for (const Result& r : results) {
    std::vector<std::string> row = {fs::path(r.model).stem().string(), fixed(r.kiln.median, 3), fixed(r.kiln.min, 3),
                                     std::to_string(r.kiln.runs)};
    if (!a.compare.empty()) {
      row.push_back(fixed(r.ort.median, 3));
      row.push_back(fixed(r.ort.min, 3));
      row.push_back(fixed(r.kiln.median / r.ort.median, 2));
      std::ostringstream os;
      if (std::isnan(r.ort.median)) os << "ORT failed";
      else if (r.by_sqnr)
        os << (r.outputs_match ? "match" : "MISMATCH") << " (quantized: SQNR " << std::fixed << std::setprecision(1)
           << r.sqnr_db << " dB, max diff " << std::defaultfloat << std::setprecision(2) << r.max_abs_diff << ")";
      else os << (r.outputs_match ? "match" : "MISMATCH") << " (max diff " << std::setprecision(2) << r.max_abs_diff << ")";
      row.push_back(os.str());
    }
    rows.push_back(row);
  }
  std::vector<size_t> w(rows[0].size(), 0);
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) w[c] = std::max(w[c], row[c].size());
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) {
      if (c == 0) std::cout << std::left << std::setw(static_cast<int>(w[c])) << row[c];
      else std::cout << "  " << std::right << std::setw(static_cast<int>(w[c])) << row[c];
    }
    std::cout << "\n";
  }
  if (!a.compare.empty() && results.size() > 1) {
    double log_sum = 0;
    int n = 0;
    for (const Result& r : results)
      if (!std::isnan(r.ort.median) && r.ort.median > 0) {
        log_sum += std::log(r.kiln.median / r.ort.median);
        ++n;
      }
    if (n) std::cout << "geometric mean kiln/ORT: " << fixed(std::exp(log_sum / n), 2) << " over " << n << " model(s)\n";
  }
  return exit;
}

}  // namespace

void add_bench_command(CLI::App& app, Action& action) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand("bench", "Measure model latency (optionally against ONNX Runtime in the same run)");
  cmd->add_option("models", a->models, "ONNX model files")->required();
  cmd->add_option("--engine", a->engine, "interp (reference interpreter) or compiled")
      ->capture_default_str()->check(CLI::IsMember({"interp", "compiled"}));
  add_offload_option(cmd, a->offload);
  add_offload_min_cost_option(cmd, a->offload_min_cost);
  cmd->add_option("--records", a->records, "tuning records from `kiln tune`: the kernel choices they hold for this CPU and --threads are applied");
  cmd->add_option("--threads", a->threads, "worker threads for kiln and for ONNX Runtime's intra-op pool")
      ->capture_default_str()->check(CLI::Range(1, 1024));
  cmd->add_option("--batch", a->batch, "size of symbolic batch dims (the first dim, or named N/batch)")
      ->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--dim", a->dims, "name=value for a symbolic dim (seq-like dims default to 128, others to 1); repeatable");
  cmd->add_option("--compare", a->compare, "also run and time ONNX Runtime ('onnxruntime') and check outputs agree");
  cmd->add_option("--warmup", a->warmup, "untimed runs before timing (the first includes any compilation)")
      ->capture_default_str()->check(CLI::Range(1, 100000));
  cmd->add_option("--min-time", a->min_time, "time runs for at least this many seconds")
      ->capture_default_str()->check(CLI::Range(0.0, 3600.0));
  cmd->add_option("--min-runs", a->min_runs, "and at least this many timed runs")
      ->capture_default_str()->check(CLI::Range(1, 1000000));
  cmd->add_option("--rounds", a->rounds, "with --compare: kiln and ONNX Runtime alternate in this many timing rounds")
      ->capture_default_str()->check(CLI::Range(1, 1000));
  cmd->add_option("--settle-ms", a->settle_ms,
                  "with --compare: idle milliseconds before each engine's share of a round, so the other engine's "
                  "spinning pool threads have gone quiet")
      ->capture_default_str()->check(CLI::Range(0, 10000));
  cmd->add_option("--seed", a->seed, "seed of the random inputs")->capture_default_str();
  cmd->add_flag("--optimize", a->optimize, "with --engine interp: run the default graph-pass pipeline first (the compiled engine always runs it)");
  CLI::Option* rtol = cmd->add_option("--rtol", a->rtol, "relative tolerance of the output check")->capture_default_str();
  CLI::Option* atol = cmd->add_option("--atol", a->atol, "absolute tolerance of the output check")->capture_default_str();
  cmd->add_option("--min-sqnr", a->min_sqnr,
                  "quantized models (QuantizeLinear/DequantizeLinear/...Integer/QLinear* ops) without --rtol/--atol: "
                  "the least SQNR in dB of each float output against ONNX Runtime's (integer outputs within one level); "
                  "two int8 engines round differently (QDQ ResNet-50 and BERT-like measured 29-37 dB), a wrong kernel "
                  "gives about 0")
      ->capture_default_str();
  cmd->add_flag("--json", a->json, "print machine-readable results");
  cmd->add_flag("--samples", a->samples,
                "with --json: also list every timed run's latency in run order (with --compare, --rounds "
                "shares of kiln's runs and ORT's alternate), to see how load spread them");
  cmd->callback([a, rtol, atol, &action] {
    a->tolerances_given = rtol->count() > 0 || atol->count() > 0;
    action = [a] { return bench_command(*a); };
  });
}

}  // namespace kiln::cli
