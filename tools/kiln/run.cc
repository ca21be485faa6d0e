// `kiln run MODEL [--input FILE]... [--output-dir DIR] [--engine E] [--threads N] [--seed S]`
#include <chrono>
#include <filesystem>
#include <iostream>

#include "commands.h"
#include "driver/npy.h"
#include "driver/session.h"
#include "frontend/onnx/onnx_io.h"

namespace kiln::cli {
namespace {

struct RunArgs {
  std::string model;
  std::vector<std::string> inputs;
  std::string output_dir;
  std::string engine = "interp";
  int threads = 1;
  uint64_t seed = 0;
  int repeat = 1;
};

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

int run_command(const RunArgs& a) {
  SessionOptions opts;
  opts.engine = parse_engine(a.engine);
  opts.threads = a.threads;
  opts.seed = a.seed;
  auto t0 = std::chrono::steady_clock::now();
  auto session = Session::load(a.model, opts);
  auto t1 = std::chrono::steady_clock::now();
  std::vector<RtValue> feeds =
      a.inputs.empty() ? session->random_inputs(a.seed) : session->bind(session->read_inputs(a.inputs));
  std::vector<RtValue> outs;
  std::vector<double> times;
  for (int r = 0; r < a.repeat; ++r) {
    auto s = std::chrono::steady_clock::now();
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
  cmd->add_option("model", args->model, "ONNX model file")->required();
  cmd->add_option("-i,--input", args->inputs,
                  "input value file (.pb TensorProto/SequenceProto/OptionalProto binds by its embedded name, "
                  "otherwise by position; .npy binds by position); repeatable");
  cmd->add_option("-o,--output-dir", args->output_dir, "write each output as DIR/<name>.pb and .npy");
  cmd->add_option("--engine", args->engine, "interp (reference interpreter) or compiled")
      ->capture_default_str()->check(CLI::IsMember({"interp", "compiled"}));
  cmd->add_option("--threads", args->threads, "worker threads (the interpreter uses one)")
      ->capture_default_str()->check(CLI::Range(1, 1024));
  cmd->add_option("--seed", args->seed, "seed for random inputs and random ops")->capture_default_str();
  cmd->add_option("--repeat", args->repeat, "run N times and report the median time")
      ->capture_default_str()->check(CLI::Range(1, 100000));
  cmd->callback([args, &action] { action = [args] { return run_command(*args); }; });
}

}  // namespace kiln::cli
