// `kiln optimize IN.onnx -o OUT.onnx [--passes LIST] [--disable LIST] [--print-ir-after NAME|all]
// [--dump-dir DIR] [--time] [--verify]`: runs graph passes and writes the result as ONNX.
#include <iomanip>
#include <iostream>
#include <sstream>

#include "commands.h"
#include "driver/optimize_model.h"

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


int optimize_command(const OptimizeArgs& a) {
  OptimizeModelOptions opts;
  opts.passes = split_names(a.passes);
  opts.disable = split_names(a.disable);
  opts.verify = a.verify;
  opts.time = a.time;
  opts.print_ir_after = a.print_ir_after;
  opts.dump_dir = a.dump_dir;
  opts.log = &std::cout;  // --time and --print-ir-after output
  OptimizeModelResult r = optimize_model_file(a.model, a.output, opts);
  std::string ran;
  for (const auto& st : r.passes) ran += (ran.empty() ? "" : ", ") + st.pass;
  std::cout << "model: " << a.model << " (" << r.nodes_before << " nodes)\n";
  std::cout << "passes: " << (ran.empty() ? "(none)" : ran) << "\n";
  std::cout << "nodes: " << r.nodes_before << " -> " << r.nodes_after << "\n";
  if (a.time)
    std::cout << std::fixed << std::setprecision(3) << "load: " << r.load_ms << " ms, passes: " << r.passes_ms
              << " ms, save: " << r.save_ms << " ms\n";
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
