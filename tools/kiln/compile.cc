// `kiln compile MODEL [--time] [--print-kernels] [--threads N] [--seed S]`: builds the compiled
// plan for the model's static input shapes (seeded random inputs), reports the generated and
// fallback node counts and, with --time, the time of each phase.
#include <chrono>
#include <iostream>
#include <map>
#include <random>

#include "commands.h"
#include "driver/session.h"
#include "frontend/onnx/onnx_io.h"

namespace kiln::cli {
namespace {

struct CompileArgs {
  std::string model;
  bool time = false;
  bool print_kernels = false;
  int threads = 1;
  uint64_t seed = 0;
  std::vector<std::string> dims;  // NAME=VALUE for symbolic dims (others: 1)
};

// Seeded random feeds; symbolic dims take the value given by --dim or 1.
std::vector<RtValue> random_feeds(const Session& session, const std::vector<std::string>& dim_args, uint64_t seed) {
  std::map<std::string, int64_t> bind;
  for (const auto& d : dim_args) {
    auto eq = d.find('=');
    if (eq == std::string::npos) throw Error(ErrorKind::kUsage, "--dim expects NAME=VALUE, got '" + d + "'");
    bind[d.substr(0, eq)] = std::stoll(d.substr(eq + 1));
  }
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  std::vector<RtValue> feeds(session.model().graph->inputs.size());
  for (size_t i = 0; i < feeds.size(); ++i) {
    const Value& in = *session.model().graph->inputs[i];
    if (in.initializer.defined()) continue;
    const Type& t = in.type;
    if (t.kind != Type::Kind::kTensor || t.dtype == DType::kUndefined || !t.shape)
      throw Error(ErrorKind::kUsage, "input '" + in.name + "' has type " + to_string(t) + ": no random input");
    std::vector<int64_t> dims;
    for (const Dim& d : t.shape->dims) dims.push_back(d.known() ? d.value : (bind.count(d.symbol) ? bind[d.symbol] : 1));
    Tensor x(t.dtype, dims);
    for (int64_t k = 0; k < x.numel(); ++k)
      x.set_double(k, is_float(t.dtype) ? uni(rng) : static_cast<double>(rng() % 2));
    feeds[i] = RtValue(std::move(x));
  }
  return feeds;
}

double ms(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

int compile_command(const CompileArgs& a) {
  using Clock = std::chrono::steady_clock;
  SessionOptions opts;
  opts.engine = Engine::kCompiled;
  opts.optimize = true;
  opts.threads = a.threads;
  opts.seed = a.seed;
  auto t0 = Clock::now();
  Model model = load_onnx_model(a.model);
  auto t1 = Clock::now();
  Session session(std::move(model), opts);
  auto t2 = Clock::now();
  auto feeds = random_feeds(session, a.dims, a.seed);
  session.run(feeds);
  auto t3 = Clock::now();
  const CompileStats& s = session.compiled()->stats();
  int total = s.generated_nodes + s.gemm_nodes + s.fallback_nodes;
  std::cout << "model: " << a.model << "\n";
  std::cout << "kernels: " << s.kernels << "\n";
  std::cout << "generated_nodes: " << s.generated_nodes << "\n";
  std::cout << "microkernel_nodes: " << s.gemm_nodes << "  (Conv/MatMul/Gemm through the f32 GEMM microkernels)\n";
  std::cout << "fallback_nodes: " << s.fallback_nodes;
  std::string sep = " (";
  for (const auto& [op, n] : s.fallback_ops) {
    std::cout << sep << op << " " << n;
    sep = ", ";
  }
  std::cout << (s.fallback_ops.empty() ? "" : ")") << "\n";
  if (total > 0)
    std::cout << "generated: " << (100.0 * s.generated_nodes / total) << "%, generated or microkernel: "
              << (100.0 * (s.generated_nodes + s.gemm_nodes) / total) << "% of " << total << " nodes\n";
  std::cout << "arena_bytes: " << s.arena_bytes << "\n";
  if (a.time) {
    std::cout << "time (ms):\n";
    std::cout << "  load      " << ms(t0, t1) << "\n";
    std::cout << "  passes    " << ms(t1, t2) << "\n";
    std::cout << "  shapes    " << s.shapes_ms << "  (reference run to learn shapes)\n";
    std::cout << "  lowering  " << s.lowering_ms << "  (TE, schedules, TIR passes)\n";
    std::cout << "  llvm      " << s.llvm_ms << "  (optimization and JIT)\n";
    std::cout << "  plan      " << s.total_ms << "\n";
    std::cout << "  first run " << ms(t2, t3) - s.total_ms << "\n";
  }
  if (a.print_kernels) std::cout << session.compiled()->kernels_text();
  return 0;
}

}  // namespace

void add_compile_command(CLI::App& app, Action& action) {
  auto args = std::make_shared<CompileArgs>();
  CLI::App* cmd = app.add_subcommand("compile", "Compile a model for its static input shapes and report the result");
  cmd->add_option("model", args->model, "ONNX model file")->required();
  cmd->add_flag("--time", args->time, "print the time of each compilation phase");
  cmd->add_flag("--print-kernels", args->print_kernels, "print the loop nest (TIR) of every kernel");
  cmd->add_option("--threads", args->threads, "worker threads")->capture_default_str()->check(CLI::Range(1, 1024));
  cmd->add_option("--seed", args->seed, "seed for the random inputs")->capture_default_str();
  cmd->add_option("--dim", args->dims, "NAME=VALUE: size of a symbolic input dim (default 1); repeatable");
  cmd->callback([args, &action] { action = [args] { return compile_command(*args); }; });
}

}  // namespace kiln::cli
