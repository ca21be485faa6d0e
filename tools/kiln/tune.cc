// `kiln tune MODEL... --budget 10m --threads N --records FILE [--resume]`: searches kernel choices
// of the model's tunable kernels (tune/tuner.h) in a measurement worker, appending every
// measurement to FILE, with a live progress line; the hidden `kiln tune-worker` is that worker.
// How it works and how to apply the records: docs/tuning.md.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bench_common.h"
#include "commands.h"
#include "driver/offload.h"
#include "driver/session.h"
#include "frontend/onnx/onnx_io.h"
#include "tune/tuner.h"
#include "tune/worker.h"

namespace kiln::cli {
namespace {

struct TuneArgs {
  std::vector<std::string> models;
  std::string budget = "10m";
  int threads = 1;
  std::string records;
  bool resume = false;
  int64_t batch = 1;
  std::vector<std::string> dims;
  int runs = 10;
  double timeout_s = 60;
  int patience = 16;
  uint64_t seed = 0;
  bool json = false;
  bool no_offload = false;  // --no-offload: skip the offload phase
};

// The offload phase's outcome: each variant's model time ("" = kiln's own kernels) and the one
// the records apply (empty: kiln's own).
struct OffloadOutcome {
  std::map<std::string, double> model_ms;
  std::string chosen;
};

// --json: the summary as one JSON object per model, one per line (what kiln.tune() returns).
void print_json(const tune::TuneSummary& s, const std::string& out, const OffloadOutcome& offload) {
  std::string ms = "{";
  for (const auto& [variant, t] : offload.model_ms)
    ms += std::string(ms.size() > 1 ? ", " : "") + json_string(variant.empty() ? "kiln" : variant) + ": " + json_number(t);
  std::string j = "{\"model\": " + json_string(s.model) + ", \"records\": " + json_string(out) + ", \"offload\": " +
                  json_string(offload.chosen) + ", \"offload_model_ms\": " + ms + "}, \"trials\": " + std::to_string(s.trials) +
                  ", \"invalid\": " + std::to_string(s.invalid) + ", \"rounds\": " + std::to_string(s.rounds) +
                  ", \"failed_rounds\": " + std::to_string(s.failed_rounds) + ", \"elapsed_s\": " +
                  json_number(s.elapsed_s) + ", \"default_total_us\": " + json_number(s.default_total_us) +
                  ", \"tuned_total_us\": " + json_number(s.tuned_total_us) + ", \"tasks\": [";
  for (size_t i = 0; i < s.tasks.size(); ++i) {
    const tune::TaskResult& t = s.tasks[i];
    j += std::string(i ? ", " : "") + "{\"key\": " + json_string(t.key) + ", \"op\": " + json_string(t.op) +
         ", \"steps\": " + std::to_string(t.count) + ", \"default_us\": " + json_number(t.default_us) +
         ", \"tuned_us\": " + json_number(t.best_us) + ", \"choice\": " + json_string(gemm_ops::to_string(t.best)) +
         ", \"trials\": " + std::to_string(t.trials) + ", \"invalid\": " + std::to_string(t.invalid) +
         ", \"reused\": " + std::to_string(t.reused) + ", \"space\": " + std::to_string(t.space) + "}";
  }
  std::cout << j << "]}\n";
}

// "10m", "90s", "1h", "1m30s" or plain seconds.
double parse_budget(const std::string& text) {
  double total = 0;
  std::string num;
  bool any = false;
  for (size_t i = 0; i <= text.size(); ++i) {
    const char c = i < text.size() ? text[i] : '\0';
    if ((c >= '0' && c <= '9') || c == '.') {
      num += c;
      continue;
    }
    if (num.empty() || (c != 'h' && c != 'm' && c != 's' && c != '\0')) {
      if (c == '\0' && num.empty() && any) break;
      throw Error(ErrorKind::kUsage, "--budget expects a duration such as 10m, 90s, 1h or 1m30s, got '" + text + "'");
    }
    double v = 0;
    try {
      v = std::stod(num);
    } catch (const std::exception&) {
      throw Error(ErrorKind::kUsage, "--budget: '" + num + "' is not a number");
    }
    total += v * (c == 'h' ? 3600 : c == 'm' ? 60 : 1);
    num.clear();
    any = true;
  }
  if (total > 7 * 24 * 3600) throw Error(ErrorKind::kUsage, "--budget is longer than a week: '" + text + "'");
  return total;
}

std::string self_executable() {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error(ErrorKind::kInternal, "tune: cannot find this executable (/proc/self/exe) to start the worker");
  return p.string();
}

std::string us_text(double us) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(us >= 1000 ? 0 : 1) << us;
  return os.str();
}

void print_summary(const tune::TuneSummary& s, const TuneArgs& a, const std::string& out,
                   const OffloadOutcome& offload) {
  std::cout << "model: " << s.model << "\n";
  if (!offload.model_ms.empty()) {
    std::cout << "offload: model run";
    for (const auto& [variant, ms] : offload.model_ms)
      std::cout << " " << (variant.empty() ? "kiln" : variant) << " " << us_text(ms * 1000) << " us";
    std::cout << "; --records runs it " << (offload.chosen.empty() ? "on kiln's own kernels" : "with --offload " + offload.chosen)
              << "\n";
  }
  if (s.tasks.empty()) {
    if (!offload.chosen.empty()) {
      std::cout << "no tuning tasks left: the model's Conv and MatMul/Gemm steps run on " << offload.chosen << "\n";
      return;
    }
    std::cout << "no tuning tasks: the model has no Conv (group 1, float32 weights, more than one output pixel, not a "
                 "stem) or MatMul/Gemm (constant 2-D weight, more than one row) step that kiln tune searches\n";
    return;
  }
  std::cout << std::left << std::setw(64) << "task" << std::right << std::setw(6) << "steps" << std::setw(12)
            << "default us" << std::setw(11) << "tuned us" << std::setw(9) << "speedup" << std::setw(8) << "trials"
            << "  choice\n";
  for (const auto& t : s.tasks) {
    const double sp = t.best_us > 0 && t.default_us > 0 ? t.default_us / t.best_us : 1.0;
    std::ostringstream spt;
    spt << std::fixed << std::setprecision(2) << sp << "x";
    std::cout << std::left << std::setw(64) << t.key.substr(0, 63) << std::right << std::setw(6) << t.count
              << std::setw(12) << (t.default_us > 0 ? us_text(t.default_us) : "-") << std::setw(11)
              << (t.best_us > 0 ? us_text(t.best_us) : "-") << std::setw(9) << spt.str() << std::setw(8)
              << (std::to_string(t.trials) + (t.reused ? "+" + std::to_string(t.reused) : "")) << "  "
              << gemm_ops::to_string(t.best) << "\n";
  }
  std::cout << std::fixed << std::setprecision(2) << "tasks' time (steps x kernel time): " << s.default_total_us / 1000
            << " ms -> " << s.tuned_total_us / 1000 << " ms ("
            << (s.tuned_total_us > 0 ? s.default_total_us / s.tuned_total_us : 1.0) << "x) over " << s.tasks.size()
            << " tasks; " << s.trials << " trials (" << s.invalid << " invalid) in " << s.rounds << " rounds ("
            << s.failed_rounds << " failed) in " << std::setprecision(1) << s.elapsed_s
            << " s; trials column: measured now + reused from the records\n";
  std::cout << "records: " << out << " (apply them with --records " << a.records
            << " to kiln run / bench / profile / compile / inspect, or kiln.load(..., records=...))\n";
}

// Where `model`'s measurements go: the records file, or in a records directory
// DIR/<model>-t<threads>.jsonl (every file there is reused: tasks other models share).
std::string records_out(const TuneArgs& a, const std::string& model) {
  if (!std::filesystem::is_directory(a.records)) return a.records;
  return (std::filesystem::path(a.records) /
          (std::filesystem::path(model).stem().string() + "-t" + std::to_string(a.threads) + ".jsonl"))
      .string();
}

// The offload phase (docs/tuning.md): the whole model timed in a worker on kiln's own kernels and
// in one more per registered backend (a crash or a hang is recorded, not fatal); the records keep
// every time, and --records applies the fastest when it is at least 2% under kiln's own.
OffloadOutcome choose_offload(const TuneArgs& a, const std::string& model, const std::string& out,
                              const std::vector<std::string>& worker_argv) {
  OffloadOutcome outcome;
  register_builtin_backends();
  const std::vector<std::string> backends = ext::backend_names();
  if (a.no_offload || backends.empty() || parse_budget(a.budget) <= 0) return outcome;  // --budget 0: reuse only
  const std::string fingerprint = model_fingerprint(load_onnx_model(model));
  const tune::TargetKey target = tune::host_target(a.threads);
  std::vector<std::string> variants = {""};
  variants.insert(variants.end(), backends.begin(), backends.end());
  std::vector<tune::Record> records;
  for (const std::string& v : variants) {
    std::vector<std::string> argv = worker_argv;
    if (!v.empty()) argv.insert(argv.end(), {"--offload", v});
    tune::WorkerProcess worker(argv);
    worker.start();
    std::string failure;
    // Its task list: it compiled (as the tuner's worker start, compiling may take longer than a round).
    std::optional<std::string> reply = worker.request("", std::max(300.0, a.timeout_s), &failure);
    if (reply)
      reply = worker.request(nlohmann::json{{"time_model", true}, {"runs", a.runs}, {"min_ms", 200}}.dump(),
                             a.timeout_s, &failure);
    worker.stop();
    tune::Record r;
    r.key = tune::offload_key(fingerprint);
    r.offload = v;
    r.target = target;
    r.model = std::filesystem::path(model).filename().string();
    const nlohmann::json j = reply ? nlohmann::json::parse(*reply, nullptr, false) : nlohmann::json();
    if (j.is_object() && j.contains("model_ms") && j["model_ms"].is_number()) {
      r.time_us = j["model_ms"].get<double>() * 1000;
      outcome.model_ms[v] = j["model_ms"].get<double>();
    } else {
      r.status = failure.find("timeout") != std::string::npos ? tune::Status::kTimeout
                 : reply                                     ? tune::Status::kError
                                                             : tune::Status::kCrashed;
      r.detail = reply ? *reply : failure;
    }
    records.push_back(r);
  }
  tune::append_records(out, records);
  const OffloadTable best = tune::best_offload(records, target);
  if (auto it = best.find(fingerprint); it != best.end()) outcome.chosen = it->second;
  std::cerr << "kiln tune: offload:";
  for (const auto& [variant, ms] : outcome.model_ms)
    std::cerr << " " << (variant.empty() ? "kiln" : variant) << " " << std::fixed << std::setprecision(2) << ms << " ms";
  std::cerr << " -> " << (outcome.chosen.empty() ? "kiln's own kernels" : outcome.chosen) << "\n" << std::defaultfloat;
  return outcome;
}

// One model, with the whole budget; it reuses what earlier models of the command wrote.
void tune_one(const TuneArgs& a, const std::string& model) {
  const std::string out = records_out(a, model);
  tune::TuneOptions o;
  o.worker_argv = {self_executable(), "tune-worker", model, "--threads", std::to_string(a.threads), "--batch",
                   std::to_string(a.batch), "--seed", std::to_string(a.seed)};
  for (const auto& d : a.dims) o.worker_argv.insert(o.worker_argv.end(), {"--dim", d});
  const auto phase_start = std::chrono::steady_clock::now();
  const OffloadOutcome offload = choose_offload(a, model, out, o.worker_argv);
  // The kernel search then runs on the model as the records will run it.
  if (!offload.chosen.empty()) o.worker_argv.insert(o.worker_argv.end(), {"--offload", offload.chosen});
  const double phase_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - phase_start).count();
  o.records = out;
  o.reuse = a.records;
  o.model = std::filesystem::path(model).filename().string();
  o.threads = a.threads;
  o.budget_s = std::max(0.0, parse_budget(a.budget) - phase_s);
  o.runs = a.runs;
  o.timeout_s = a.timeout_s;
  o.patience = a.patience;
  o.seed = a.seed;
  const bool tty = isatty(2);
  auto last = std::chrono::steady_clock::now();
  o.progress = [tty, &last](const std::string& line, bool done) {
    const auto now = std::chrono::steady_clock::now();
    if (tty) {
      std::cerr << "\r\033[K" << line << (done ? "\n" : "") << std::flush;
    } else if (done || now - last > std::chrono::seconds(10)) {
      std::cerr << line << "\n";
      last = now;
    }
  };
  std::cerr << "kiln tune: " << model << ", " << a.threads << " thread(s), budget " << a.budget << " on "
            << tune::host_target(a.threads).describe() << "\n";
  tune::TuneSummary s = tune::tune_model(o);
  s.model = model;
  if (a.json)
    print_json(s, out, offload);
  else
    print_summary(s, a, out, offload);
}

int tune_command(const TuneArgs& a) {
  if (a.records.empty())
    throw Error(ErrorKind::kUsage, "kiln tune needs --records FILE or DIR (where measurements go)");
  parse_budget(a.budget);  // a bad budget fails before any work
  for (const std::string& m : a.models)
    if (!std::filesystem::exists(m)) throw Error(ErrorKind::kBadInput, m + ": no such model file");
  if (!a.resume)
    for (const std::string& m : a.models)
      if (std::filesystem::exists(records_out(a, m)))
        throw Error(ErrorKind::kUsage, records_out(a, m) + " exists: pass --resume to add to it (its measurements "
                                                           "are reused), or name another file");
  tune::read_records(a.records, true);  // a malformed file fails here, before any work
  for (const std::string& m : a.models) tune_one(a, m);
  return 0;
}

struct WorkerArgs {
  std::string model;
  int threads = 1;
  int64_t batch = 1;
  std::vector<std::string> dims;
  uint64_t seed = 0;
  std::vector<std::string> offload;  // the backend the model is compiled with (the offload phase)
};

int worker_command(const WorkerArgs& a) {
  SessionOptions opts;
  opts.engine = Engine::kCompiled;
  opts.threads = a.threads;
  opts.seed = a.seed;
  opts.profile = true;  // per-step timings: the worker times each task's steps inside model runs
  opts.offload = a.offload;
  auto session = Session::load(a.model, opts);
  InputShapeOptions shapes;
  shapes.batch = a.batch;
  parse_dim_options(a.dims, shapes);
  std::vector<RtValue> feeds = make_bench_inputs(*session, shapes, a.seed);
  return tune::run_worker(*session->compiled(), feeds, a.threads, std::cin, std::cout);
}

}  // namespace

void add_tune_command(CLI::App& app, Action& action) {
  auto a = std::make_shared<TuneArgs>();
  CLI::App* cmd = app.add_subcommand(
      "tune", "Search faster kernel choices for a model's convolutions on this CPU and record them (docs/tuning.md)");
  cmd->add_option("models", a->models, "ONNX model files (each gets the whole --budget; later ones reuse the records "
                                      "the earlier ones wrote)")->required();
  cmd->add_option("--records", a->records,
                  "JSON-lines file the measurements are appended to, or a directory: then DIR/<model>-t<threads>.jsonl, "
                  "and the other files there are reused (required)");
  cmd->add_flag("--resume", a->resume,
                "add to an existing records file; choices it already holds for this CPU and thread count are not "
                "measured again (also how another model's records are shared)");
  cmd->add_option("--budget", a->budget, "wall time for the search: 10m, 90s, 1h, 1m30s (0: only reuse the records)")
      ->capture_default_str();
  cmd->add_option("--threads", a->threads, "threads the kernels are timed with (the records apply to this count)")
      ->capture_default_str()->check(CLI::Range(1, 1024));
  cmd->add_option("--batch", a->batch, "size of symbolic batch dims")
      ->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--dim", a->dims, "name=value for a symbolic dim (seq-like dims default to 128); repeatable");
  cmd->add_option("--runs", a->runs,
                  "timed model runs per round, at least (and at least 200 ms of them); each kernel's time: the median")
      ->capture_default_str()->check(CLI::Range(1, 100000));
  cmd->add_option("--timeout", a->timeout_s, "a round taking longer (seconds) has a hung candidate")
      ->capture_default_str()->check(CLI::Range(0.1, 3600.0));
  cmd->add_option("--patience", a->patience, "a task stops after this many trials without a 1% gain")
      ->capture_default_str()->check(CLI::Range(1, 100000));
  cmd->add_option("--seed", a->seed, "seed of the search order and the random inputs")->capture_default_str();
  cmd->add_flag("--json", a->json, "print the summary as JSON (records file, offload choice, totals, per task: times, choice, trials)");
  cmd->add_flag("--no-offload", a->no_offload,
                "skip the offload phase (which times the whole model on kiln's kernels and with each available "
                "external backend, --offload, and records the fastest)");
  cmd->callback([a, &action] { action = [a] { return tune_command(*a); }; });

  auto w = std::make_shared<WorkerArgs>();
  CLI::App* worker = app.add_subcommand("tune-worker", "");  // internal: kiln tune's measurement process
  worker->group("");
  worker->add_option("model", w->model)->required();
  worker->add_option("--threads", w->threads)->check(CLI::Range(1, 1024));
  worker->add_option("--batch", w->batch);
  worker->add_option("--dim", w->dims);
  worker->add_option("--seed", w->seed);
  worker->add_option("--offload", w->offload);
  worker->callback([w, &action] { action = [w] { return worker_command(*w); }; });
}

}  // namespace kiln::cli
