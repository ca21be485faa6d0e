// `kiln optimize IN.onnx -o OUT.onnx [--passes LIST] [--disable LIST] [--print-ir-after NAME|all]
// [--dump-dir DIR] [--time] [--verify]`: runs graph passes and writes the result as ONNX.
#include <chrono>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "commands.h"
#include "core/error.h"
#include "frontend/onnx/onnx_io.h"
#include "pass/pass.h"

namespace kiln::cli {
namespace {

struct OptimizeArgs {
  std::string model;
  std::string output;
  std::string passes;
  std::string disable;
  std::string print_ir_after;
  std::string dump_dir;
  bool time = false;
  bool verify = false;
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(item.substr(b, e - b + 1));
  }
  return out;
}

std::string known_passes() {
  std::string s;
  for (const auto& p : all_passes()) s += (s.empty() ? "" : ", ") + p.name;
  return s;
}

int optimize_command(const OptimizeArgs& a) {
  std::vector<std::string> names = a.passes.empty() ? default_pipeline() : split_list(a.passes);
  PassContext ctx;
  for (const auto& d : split_list(a.disable)) {
    if (!find_pass(d)) throw Error(ErrorKind::kUsage, "--disable: unknown pass '" + d + "' (passes: " + known_passes() + ")");
    ctx.disabled.insert(d);
  }
  for (const auto& n : names)
    if (!find_pass(n)) throw Error(ErrorKind::kUsage, "--passes: unknown pass '" + n + "' (passes: " + known_passes() + ")");
  if (!a.print_ir_after.empty() && a.print_ir_after != "all" && !find_pass(a.print_ir_after))
    throw Error(ErrorKind::kUsage, "--print-ir-after: unknown pass '" + a.print_ir_after + "' (passes: " + known_passes() + ")");
  ctx.verify = a.verify;
  ctx.time = a.time;
  ctx.print_ir_after = a.print_ir_after;
  ctx.dump_dir = a.dump_dir;
  ctx.log = &std::cout;  // --time and --print-ir-after output

  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  auto t0 = std::chrono::steady_clock::now();
  Model m = load_onnx_model(a.model);
  const size_t before = m.graph->node_count_recursive();
  auto t1 = std::chrono::steady_clock::now();
  std::cout << "model: " << a.model << " (" << before << " nodes)\n";
  if (a.time) std::cout << std::fixed << std::setprecision(3) << "load: " << ms(t1 - t0) << " ms\n";
  run_passes(m, names, ctx);  // with --time, one line per pass: name, ms, nodes after
  auto t2 = std::chrono::steady_clock::now();
  save_onnx_model(m, a.output);
  auto t3 = std::chrono::steady_clock::now();
  const size_t after = m.graph->node_count_recursive();

  std::string ran;
  for (const auto& st : ctx.stats) ran += (ran.empty() ? "" : ", ") + st.pass;
  std::cout << "passes: " << (ran.empty() ? "(none)" : ran) << "\n";
  std::cout << "nodes: " << before << " -> " << after << "\n";
  if (a.time) std::cout << "passes: " << ms(t2 - t1) << " ms, save: " << ms(t3 - t2) << " ms\n";
  std::cout << "wrote " << a.output << "\n";
  return 0;
}

}  // namespace

void add_optimize_command(CLI::App& app, Action& action) {
  auto args = std::make_shared<OptimizeArgs>();
  CLI::App* cmd = app.add_subcommand("optimize", "Run graph passes on a model and write the result as ONNX");
  cmd->add_option("model", args->model, "input ONNX model file")->required();
  cmd->add_option("-o,--output", args->output, "output ONNX model file")->required();
  cmd->add_option("--passes", args->passes, "comma-separated passes to run, in order (default: the default pipeline)");
  cmd->add_option("--disable", args->disable, "comma-separated passes to skip");
  cmd->add_option("--print-ir-after", args->print_ir_after, "print the IR (to stderr) after this pass, or after 'all'");
  cmd->add_option("--dump-dir", args->dump_dir, "write NN-<pass>.kir (text IR) after every pass into DIR");
  cmd->add_flag("--time", args->time, "print the time and node count of every pass");
  cmd->add_flag("--verify", args->verify, "run the IR verifier after every pass");
  cmd->callback([args, &action] { action = [args] { return optimize_command(*args); }; });
}

}  // namespace kiln::cli
