// One function per subcommand file: each adds its CLI11 subcommand and sets the action that
// main() runs after parsing.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "driver/offload.h"

namespace kiln::cli {

using Action = std::function<int()>;

void add_run_command(CLI::App& app, Action& action);
void add_inspect_command(CLI::App& app, Action& action);
void add_test_onnx_command(CLI::App& app, Action& action);
void add_optimize_command(CLI::App& app, Action& action);
void add_compile_command(CLI::App& app, Action& action);
void add_bench_command(CLI::App& app, Action& action);
void add_profile_command(CLI::App& app, Action& action);
void add_serve_command(CLI::App& app, Action& action);
void add_quantize_command(CLI::App& app, Action& action);
void add_tune_command(CLI::App& app, Action& action);

// --offload NAME (repeatable, in order of preference): regions of the model run by external
// backends (docs/byoc.md), and --backend-plugin FILE, which loads an out-of-tree backend; shared
// by run, bench, profile, inspect and test-onnx.
inline void add_offload_option(CLI::App* cmd, std::vector<std::string>& offload) {
  cmd->add_option("--backend-plugin", "load an external backend from a shared library (include/kiln/extension.h: "
                                      "KILN_EXTENSION_INIT; repeatable); select it with --offload NAME")
      ->type_name("FILE")
      ->expected(1)
      ->each([](const std::string& path) {
        try {
          load_backend_plugin(path);
        } catch (const std::exception& e) {
          throw CLI::ValidationError(std::string(e.what()));
        }
      });
  cmd->add_option("--offload", offload,
                  "run the regions an external backend supports on it (repeatable, first choice first; "
                  "built in: dnnl = oneDNN); see docs/byoc.md")
      ->take_all()
      ->allow_extra_args(false);
}
inline void add_offload_min_cost_option(CLI::App* cmd, double& cost) {
  cmd->add_option("--offload-min-cost", cost,
                  "with --offload: regions whose cost is below C stay native (a Conv/MatMul/Gemm counts 10, other ops "
                  "1; default: the backend's own threshold, 10 for dnnl; 0 offloads every supported node)");
}

}  // namespace kiln::cli
