// `kiln compile MODEL [--time] [--print-kernels] [--threads N] [--seed S]`: builds the compiled
// plan for the model's static input shapes (seeded random inputs), reports the generated and
// fallback node counts and, with --time, the time of each phase.
// `kiln compile MODEL -o model.so [--target native|x86-64-v3|x86-64-v4] [--dim N=V1,V2,...]...`:
// writes an ahead-of-time compiled shared library with the C API, one plan per input-shape
// signature (driver/aot.h, docs/c_api.md).
#include <chrono>
#include <iostream>

#include "commands.h"
#include "tune/records.h"
#include "driver/aot.h"
#include "driver/compile_model.h"
#include "frontend/onnx/onnx_io.h"

namespace kiln::cli {
namespace {

struct CompileArgs {
  std::string model;
  bool time = false;
  bool print_kernels = false;
  int threads = 1;
  std::string records;  // --records: tuning records (a library keeps the choices in its plans)
  std::vector<std::string> offload;  // --offload: external backends (a library links them)
  double offload_min_cost = -1;
  uint64_t seed = 0;
  std::vector<std::string> dims;  // NAME=VALUE for symbolic dims (others: 1); NAME=V1,V2 with -o
  std::vector<std::string> shapes;  // INPUT=D0xD1x...
  std::vector<std::string> inputs;  // -i: input files for the compile run (with -o)
  std::string output;             // -o: the shared library to write
  std::string target = "native";
  bool keep_temps = false;
};

int export_command(const CompileArgs& a) {
  AotOptions o;
  o.target = a.target;
  o.threads = a.threads;
  o.seed = a.seed;
  o.keep_temps = a.keep_temps;
  o.tuning = tune::load_tuning(a.records, a.threads);
  o.tuned_offload = tune::load_offload_choices(a.records, a.threads);
  o.offload = a.offload;
  o.offload_min_cost = a.offload_min_cost;
  for (const auto& d : a.dims) {
    auto [name, sizes] = parse_dim_list(d);
    std::vector<int64_t>& all = o.dims[name];
    all.insert(all.end(), sizes.begin(), sizes.end());
  }
  for (const auto& s : a.shapes) o.shapes.insert(parse_shape_binding(s));
  o.input_files = a.inputs;
  AotResult r = compile_shared_library(a.model, a.output, o);
  const CompileStats& s = r.stats;
  std::cout << "model: " << a.model << "\n";
  std::cout << "wrote: " << a.output << " (" << r.library_bytes << " bytes; plan and weights " << r.blob_bytes
            << " bytes; target " << a.target << ")\n";
  std::cout << "signatures: " << r.signatures << " (input shapes the library runs; kernels shared: " << r.kernels
            << " in the library)";
  if (r.branch_plans) std::cout << ", If branch plans: " << r.branch_plans;
  std::cout << "\n";
  std::cout << "kernels: " << s.kernels << ", generated_nodes: " << s.generated_nodes
            << ", microkernel_nodes: " << s.gemm_nodes << ", arena_bytes: " << s.arena_bytes;
  if (s.external_regions) std::cout << ", offloaded_nodes: " << s.external_nodes << " in " << s.external_regions << " region(s)";
  if (!a.records.empty()) std::cout << ", tuned_steps: " << s.tuned_gemms;
  std::cout << "\n";
  if (a.time) {
    std::cout << "time (ms):\n";
    std::cout << "  plan      " << r.plan_ms << "  (load, passes, plan, JIT)\n";
    std::cout << "  object    " << r.object_ms << "  (LLVM object for the target)\n";
    std::cout << "  link      " << r.link_ms << "  (blob, assembler, c++ -shared)\n";
    std::cout << "  total     " << r.total_ms << "\n";
  }
  return 0;
}

double ms(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

int compile_command(const CompileArgs& a) {
  using Clock = std::chrono::steady_clock;
  if (!a.output.empty()) return export_command(a);
  if (!a.inputs.empty()) throw Error(ErrorKind::kUsage, "-i/--input is for -o (the compile run of a library)");
  CompileModelOptions opts;
  opts.threads = a.threads;
  opts.seed = a.seed;
  opts.tuning = tune::load_tuning(a.records, a.threads);
  opts.tuned_offload = tune::load_offload_choices(a.records, a.threads);
  opts.offload = a.offload;
  opts.offload_min_cost = a.offload_min_cost;
  for (const auto& d : a.dims) {
    if (d.find(',') != std::string::npos)
      throw Error(ErrorKind::kUsage, "--dim " + d + ": a list of sizes is for -o (a library of several input-shape "
                                                  "signatures); without -o, give one size");
    auto [name, value] = parse_dim_binding(d);
    opts.dims[name] = value;
  }
  for (const auto& s : a.shapes) opts.shapes.insert(parse_shape_binding(s));
  auto t0 = Clock::now();
  Model model = load_onnx_model(a.model);
  auto t1 = Clock::now();
  CompileModelResult r = compile_model(std::move(model), opts);
  const CompileStats& s = r.stats;
  int total = s.generated_nodes + s.gemm_nodes + s.fallback_nodes + s.control_flow_nodes;
  std::cout << "model: " << a.model << "\n";
  std::cout << "kernels: " << s.kernels << "  (" << s.compiled_kernels << " compiled: identical kernels share code; "
            << s.kernels - s.reused_lowerings << " lowered: a segment of the same structure reuses the TIR; "
            << s.symbolic_kernels << " take the dims that vary with the input sizes as params)\n";
  std::cout << "generated_nodes: " << s.generated_nodes << "\n";
  std::cout << "microkernel_nodes: " << s.gemm_nodes
            << "  (Conv/MatMul/Gemm on the f32 microkernels, and the bias/residual/activation nodes fused into them)\n";
  if (!a.records.empty())
    std::cout << "tuned_steps: " << s.tuned_gemms << "  (microkernel steps built with a kernel choice from --records)\n";
  std::cout << "folded_nodes: " << s.folded_nodes << "  (decided by the input shapes alone: computed while compiling)\n";
  if (s.control_flow_nodes)
    std::cout << "control_flow_nodes: " << s.control_flow_nodes
              << "  (If/Loop/Scan steps; their bodies' nodes, as compiled by the first run, are counted above)\n";
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
    std::cout << "  passes    " << r.passes_ms << "\n";
    std::cout << "  shapes    " << s.shapes_ms << "  (" << s.shapes << ")\n";
    std::cout << "  lowering  " << s.lowering_ms << "  (TE, schedules, TIR passes)\n";
    std::cout << "  llvm      " << s.llvm_ms << "  (optimization and JIT)\n";
    std::cout << "  plan      " << s.total_ms << "\n";
    std::cout << "  first run " << r.first_run_ms << "\n";
    if (!s.llvm_cache.empty()) std::cout << "llvm cache: " << s.llvm_cache << "\n";
  }
  if (a.print_kernels) std::cout << r.kernels_text;
  return 0;
}

}  // namespace

void add_compile_command(CLI::App& app, Action& action) {
  auto args = std::make_shared<CompileArgs>();
  CLI::App* cmd = app.add_subcommand("compile", "Compile a model for its static input shapes and report the result");
  cmd->add_option("model", args->model, "ONNX model file")->required();
  cmd->add_flag("--time", args->time, "print the time of each compilation phase");
  cmd->add_flag("--print-kernels", args->print_kernels, "print the loop nest (TIR) of every kernel");
  cmd->add_option("--records", args->records, "tuning records from `kiln tune`: the kernel choices they hold for this CPU and --threads are applied");
  add_offload_option(cmd, args->offload);
  add_offload_min_cost_option(cmd, args->offload_min_cost);
  cmd->add_option("--threads", args->threads, "worker threads")->capture_default_str()->check(CLI::Range(1, 1024));
  cmd->add_option("--seed", args->seed, "seed for the random inputs")->capture_default_str();
  cmd->add_option("--dim", args->dims,
                  "NAME=VALUE: size of a symbolic input dim (default 1); repeatable. With -o, NAME=V1,V2,... "
                  "compiles a plan for each size (every combination of the lists, at most 64), and the library "
                  "runs exactly those input shapes");
  cmd->add_option("--shape", args->shapes,
                  "INPUT=D0xD1x...: the whole shape of an input (binds symbolic dims without a name); repeatable");
  cmd->add_option("-i,--input", args->inputs,
                  "with -o: input file (.npy, or .pb by its embedded name) for the compile run instead of random "
                  "values, for models whose plan depends on input values; the library runs these shapes; repeatable");
  cmd->add_option("-o,--output", args->output,
                  "write an ahead-of-time compiled shared library (kernels, plan, weights, C API) to this file");
  cmd->add_option("--target", args->target, "CPU of the -o library's kernels: native, x86-64-v3 (AVX2), x86-64-v4 (AVX-512)")
      ->capture_default_str();
  cmd->add_flag("--keep-temps", args->keep_temps, "keep the -o temporary files (object, blob, assembler)");
  cmd->callback([args, &action] { action = [args] { return compile_command(*args); }; });
}

}  // namespace kiln::cli
