// One function per subcommand file: each adds its CLI11 subcommand and sets the action that
// main() runs after parsing.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

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

}  // namespace kiln::cli
