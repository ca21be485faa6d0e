// kiln CLI entry: parses the command line and maps errors to the documented exit codes
// (0 ok, 1 internal error, 2 usage, 3 invalid or unsupported model, 4 bad input data).
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "commands.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"kiln: a deep-learning compiler and inference engine for ONNX models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kiln 0.1.0");
  // Read by the ONNX importer (frontend/onnx/importer.cc), so every subcommand, and the C API and
  // Python through the same variable, share it.
  bool allow_newer_opset = false;
  app.add_flag("--allow-newer-opset", allow_newer_opset,
               "load models whose IR version or opsets are newer than kiln knows (one warning line; "
               "same as KILN_ALLOW_NEWER_OPSET=1)");
  app.fallthrough();
  kiln::cli::Action action;
  kiln::cli::add_run_command(app, action);
  kiln::cli::add_inspect_command(app, action);
  kiln::cli::add_test_onnx_command(app, action);
  kiln::cli::add_optimize_command(app, action);
  kiln::cli::add_compile_command(app, action);
  kiln::cli::add_bench_command(app, action);
  kiln::cli::add_profile_command(app, action);
  kiln::cli::add_serve_command(app, action);
  kiln::cli::add_quantize_command(app, action);
  kiln::cli::add_tune_command(app, action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  if (allow_newer_opset) setenv("KILN_ALLOW_NEWER_OPSET", "1", 1);
  try {
    return action ? action() : 2;
  } catch (const kiln::Error& e) {
    std::fflush(stdout);
    std::cerr << "kiln: " << e.what() << "\n";
    return kiln::exit_code(e.kind());
  } catch (const std::bad_alloc&) {
    std::cerr << "kiln: out of memory\n";
    return 4;
  } catch (const std::exception& e) {
    std::cerr << "kiln: internal error: " << e.what() << "\n";
    return 1;
  }
}
