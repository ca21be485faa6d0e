// `kiln run MODEL [--input FILE]... [--output-dir DIR] [--engine E] [--threads N] [--seed S]
// [--batch B] [--dim NAME=VALUE]... [--max-memory SIZE] [--timeout SECONDS]`
// MODEL may also be a library from `kiln compile -o` (run through its C API; --engine ignored).
#include <chrono>
#include <filesystem>
#include <iostream>
#include <random>

#include "bench_common.h"
#include "commands.h"
#include "tune/records.h"
#include "core/run_control.h"
#include "driver/aot.h"
#include "driver/npy.h"
#include "driver/session.h"
#include "frontend/onnx/onnx_io.h"
#include "target/target.h"

namespace kiln::cli {
namespace {

struct RunArgs {
  std::string model;
  std::vector<std::string> inputs;
  std::string output_dir;
  std::string engine = "compiled";
  int threads = 1;
  std::string records;  // --records: tuning records (ONNX models; a library keeps the choices it was compiled with)
  std::vector<std::string> offload;  // --offload: external backends
  double offload_min_cost = -1;  // --offload-min-cost
  uint64_t seed = 0;
  int repeat = 1;
  bool optimize = false;  // interp engine: the default pass pipeline first
  int64_t batch = 1;               // symbolic dims of random inputs, as `kiln bench` resolves them
  std::vector<std::string> dims;  // NAME=VALUE
  std::string max_memory;         // --max-memory SIZE
  double timeout_s = 0;           // --timeout SECONDS, per run
};

int64_t max_memory_of(const RunArgs& a) {
  return a.max_memory.empty() ? 0 : parse_byte_size(a.max_memory, "--max-memory");
}

std::string describe(const RtValue& v) {
  std::string prefix = v.optional ? "optional " : "";
  if (v.is_none()) return prefix + "(empty)";
  if (v.is_tensor()) return prefix + tensor_summary(v.tensor);
  std::string s = prefix + "sequence of " + std::to_string(v.sequence.size());
  if (!v.sequence.empty()) s += ", first: " + tensor_summary(v.sequence[0], 4);
  return s;
}

// Output names may contain '/' or ':' (exporters do that); keep file names flat and safe.
std::string file_stem(const std::string& name) {
  std::string out;
  for (char c : name) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.') ? c : '_';
  return out.empty() ? "output" : out;
}

// A compiled model library: inputs from files by position (or seeded random ones, drawn as for
// the ONNX model), outputs printed and written like run_command's.
int run_library_command(const RunArgs& a) {
  auto t0 = std::chrono::steady_clock::now();
  auto lib = CompiledLibrary::open(a.model, a.threads, max_memory_of(a), static_cast<int64_t>(a.timeout_s * 1000));
  auto t1 = std::chrono::steady_clock::now();
  std::vector<Tensor> feeds;
  if (a.inputs.empty()) {
    std::mt19937_64 rng(a.seed);
    std::uniform_real_distribution<double> uni(-1.0, 1.0);
    // A library of several signatures: the first one's shapes.
    for (const auto& in : lib->signatures().empty() ? lib->inputs() : lib->signatures()[0]) {
      Tensor x(in.dtype, in.dims);
      for (int64_t k = 0; k < x.numel(); ++k) x.set_double(k, is_float(in.dtype) ? uni(rng) : static_cast<double>(rng() % 2));
      feeds.push_back(std::move(x));
    }
  } else {
    for (const auto& path : a.inputs) {
      NamedValue nv = read_value_file(path, nullptr);
      if (!nv.value.is_tensor()) throw Error(ErrorKind::kBadInput, "input file '" + path + "' is not a tensor");
      feeds.push_back(nv.value.tensor);
    }
    if (feeds.size() != lib->inputs().size())
      throw Error(ErrorKind::kBadInput, "the model has " + std::to_string(lib->inputs().size()) + " inputs, got " +
                                            std::to_string(feeds.size()) + " input files");
  }
  std::vector<Tensor> outs;
  std::vector<double> times;
  for (int r = 0; r < a.repeat; ++r) {
    auto s = std::chrono::steady_clock::now();
    outs = lib->run(feeds);
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count());
  }
  std::cout << "model: " << a.model << " (load " << std::chrono::duration<double, std::milli>(t1 - t0).count()
            << " ms, compiled library";
  if (lib->signatures().size() > 1) std::cout << " of " << lib->signatures().size() << " input-shape signatures";
  std::cout << ")\n";
  std::cout << "inputs" << (a.inputs.empty() ? " (random, seed " + std::to_string(a.seed) + ")" : "") << ":\n";
  for (size_t i = 0; i < feeds.size(); ++i)
    std::cout << "  " << lib->inputs()[i].name << ": " << describe(RtValue(feeds[i])) << "\n";
  std::cout << "outputs:\n";
  for (size_t i = 0; i < outs.size(); ++i)
    std::cout << "  " << lib->outputs()[i].name << ": " << describe(RtValue(outs[i])) << "\n";
  std::sort(times.begin(), times.end());
  std::cout << "time: " << times[times.size() / 2] << " ms"
            << (a.repeat > 1 ? " (median of " + std::to_string(a.repeat) + ")" : "") << "\n";
  if (!a.output_dir.empty()) {
    std::filesystem::create_directories(a.output_dir);
    for (size_t i = 0; i < outs.size(); ++i) {
      const std::string& name = lib->outputs()[i].name;
      std::string stem = (std::filesystem::path(a.output_dir) / file_stem(name)).string();
      write_value_pb(stem + ".pb", name, RtValue(outs[i]));
      if (npy_representable(outs[i].dtype())) write_npy(stem + ".npy", outs[i]);
    }
    std::cout << "wrote " << outs.size() << " output(s) to " << a.output_dir << "\n";
  }
  return 0;
}

int run_command(const RunArgs& a) {
  if (is_shared_library_file(a.model)) return run_library_command(a);
  SessionOptions opts;
  opts.engine = parse_engine(a.engine);
  opts.threads = a.threads;
  opts.seed = a.seed;
  opts.optimize = a.optimize;
  opts.max_memory_bytes = max_memory_of(a);
  opts.tuning = tune::load_tuning(a.records, a.threads);
  opts.tuned_offload = tune::load_offload_choices(a.records, a.threads);
  opts.offload = a.offload;
  opts.offload_min_cost = a.offload_min_cost;
  auto t0 = std::chrono::steady_clock::now();
  InputShapeOptions shapes;
  shapes.batch = a.batch;
  parse_dim_options(a.dims, shapes);
  auto session = Session::load(a.model, opts);
  auto t1 = std::chrono::steady_clock::now();
  std::vector<RtValue> feeds =
      a.inputs.empty() ? session->random_inputs(a.seed, [&](const Value& in) { return resolve_dims(in, shapes); })
                       : session->bind(session->read_inputs(a.inputs));
  std::vector<RtValue> outs;
  std::vector<double> times;
  for (int r = 0; r < a.repeat; ++r) {
    auto s = std::chrono::steady_clock::now();
    RunScope deadline(nullptr, a.timeout_s);
    outs = session->run(feeds);
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count());
  }
  const Graph& g = *session->model().graph;
  std::cout << "model: " << a.model << " (load " << std::chrono::duration<double, std::milli>(t1 - t0).count()
            << " ms, engine " << a.engine << ")\n";
  std::cout << "inputs" << (a.inputs.empty() ? " (random, seed " + std::to_string(a.seed) + ")" : "") << ":\n";
  for (size_t i = 0; i < g.inputs.size(); ++i)
    if (!feeds[i].is_none()) std::cout << "  " << g.inputs[i]->name << ": " << describe(feeds[i]) << "\n";
  std::cout << "outputs:\n";
  for (size_t i = 0; i < outs.size(); ++i) std::cout << "  " << g.outputs[i]->name << ": " << describe(outs[i]) << "\n";
  std::sort(times.begin(), times.end());
  std::cout << "time: " << times[times.size() / 2] << " ms" << (a.repeat > 1 ? " (median of " + std::to_string(a.repeat) + ")" : "")
            << "\n";
  if (const CompiledExecutor* c = session->compiled()) {
    const CompileStats& s = c->stats();
    std::cout << "nodes: " << s.generated_nodes << " generated, " << s.gemm_nodes << " microkernel, " << s.folded_nodes
              << " folded, " << s.control_flow_nodes << " control flow, " << s.fallback_nodes << " reference kernel";
    if (s.external_regions > 0)
      std::cout << ", " << s.external_nodes << " offloaded in " << s.external_regions << " region(s)";
    std::cout << " (shapes: " << s.shapes << ")\n";
    std::cout << "target: " << target::Target::host().describe() << "\n";
  }
  if (!a.output_dir.empty()) {
    std::filesystem::create_directories(a.output_dir);
    for (size_t i = 0; i < outs.size(); ++i) {
      std::string stem = (std::filesystem::path(a.output_dir) / file_stem(g.outputs[i]->name)).string();
      write_value_pb(stem + ".pb", g.outputs[i]->name, outs[i]);
      if (outs[i].is_tensor() && !outs[i].optional && npy_representable(outs[i].tensor.dtype()))
        write_npy(stem + ".npy", outs[i].tensor);
    }
    std::cout << "wrote " << outs.size() << " output(s) to " << a.output_dir << "\n";
  }
  return 0;
}

}  // namespace

void add_run_command(CLI::App& app, Action& action) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand("run", "Run a model on inputs from files or on seeded random inputs");
  cmd->add_option("model", args->model, "ONNX model file, or a library from `kiln compile -o`")->required();
  cmd->add_option("-i,--input", args->inputs,
                  "input value file (.pb TensorProto/SequenceProto/OptionalProto binds by its embedded name, "
                  "otherwise by position; .npy binds by position); repeatable");
  cmd->add_option("-o,--output-dir", args->output_dir, "write each output as DIR/<name>.pb and .npy");
  cmd->add_option("--engine", args->engine, "compiled (default: generated kernels and microkernels, falling back to reference kernels per node) or interp (the reference interpreter)")
      ->capture_default_str()->check(CLI::IsMember({"interp", "compiled"}));
  add_offload_option(cmd, args->offload);
  add_offload_min_cost_option(cmd, args->offload_min_cost);
  cmd->add_option("--records", args->records, "tuning records from `kiln tune`: the kernel choices they hold for this CPU and --threads are applied");
  cmd->add_option("--threads", args->threads, "worker threads (the interpreter uses one)")
      ->capture_default_str()->check(CLI::Range(1, 1024));
  cmd->add_option("--seed", args->seed, "seed for random inputs and random ops")->capture_default_str();
  cmd->add_option("--repeat", args->repeat, "run N times and report the median time")
      ->capture_default_str()->check(CLI::Range(1, 100000));
  cmd->add_option("--batch", args->batch,
                  "random inputs: size of symbolic batch dims (the first dim, or named N/batch); ignored for libraries")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  cmd->add_option("--dim", args->dims,
                  "random inputs: NAME=VALUE for a symbolic dim (seq-like dims default to 128, others to 1); repeatable");
  cmd->add_option("--max-memory", args->max_memory,
                  "memory budget: weights, packed weights, activations and outputs (bytes, or 512M, 2G, ...); a "
                  "model or input shapes that need more fail before allocating (exit 5)");
  cmd->add_option("--timeout", args->timeout_s,
                  "stop a run that takes longer than SECONDS (exit 5); checked between kernel steps")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--optimize", args->optimize,
                "with --engine interp: run the default graph-pass pipeline first (the compiled engine always runs it)");
  cmd->callback([args, &action] { action = [args] { return run_command(*args); }; });
}

}  // namespace kiln::cli
