// kiln-opt: runs graph passes on text-IR files; checks and regenerates golden IR-in/IR-out
// tests (tests/pass/golden/<pass>/*.kir: "// proves:", "// passes:", input, "// -----", expected).
// Also reads .onnx models; --stats prints node counts and the op histogram instead of the IR.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/error.h"
#include "frontend/onnx/onnx_io.h"
#include "ir/text.h"
#include "ops/verifier.h"
#include "pass/pass.h"
#include "tools/kiln-opt/op_list_backend.h"

namespace kiln {
namespace {

constexpr const char* kSeparator = "// -----";

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(ErrorKind::kUsage, "cannot read '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Pass names, with "default" standing for the default pipeline.
std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> expanded;
  for (const auto& name : split_names(s)) {
    if (name == "default") {
      auto d = default_pipeline();
      expanded.insert(expanded.end(), d.begin(), d.end());
    } else {
      expanded.push_back(name);
    }
  }
  return expanded;
}

struct Golden {
  std::string header;  // comment lines before the input
  std::string passes;
  std::vector<std::string> offload;  // "// offload: SPEC" lines (op_list_backend.h), in order
  std::string input;
  std::string expected;
};

Golden parse_golden(const std::string& path) {
  std::string text = read_text(path);
  Golden g;
  auto sep = text.find(std::string("\n") + kSeparator);
  g.input = sep == std::string::npos ? text : text.substr(0, sep + 1);
  if (sep != std::string::npos) {
    auto after = text.find('\n', sep + 1);
    g.expected = after == std::string::npos ? "" : text.substr(after + 1);
  }
  std::istringstream lines(g.input);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("//", 0) != 0) break;
    g.header += line + "\n";
    if (line.rfind("// passes:", 0) == 0) g.passes = line.substr(10);
    if (line.rfind("// offload: ", 0) == 0) g.offload.push_back(line.substr(12));
  }
  if (g.passes.empty()) throw Error(ErrorKind::kUsage, path + ": missing a '// passes: a,b' line");
  if (g.header.find("// proves:") == std::string::npos)
    throw Error(ErrorKind::kUsage, path + ": missing a '// proves: ...' line saying what the case shows");
  return g;
}

std::string run_on_text(const std::string& text, const std::string& source, const std::vector<std::string>& passes,
                        PassContext& ctx) {
  Model m = parse_model(text, source);
  verify_model(m, {});
  run_passes(m, passes, ctx);
  verify_model(m, {});
  return print_model(m);
}

// Text IR, or an ONNX model when the file name ends in .onnx.
Model load_input(const std::string& path) {
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".onnx") == 0) return load_onnx_model(path);
  return parse_model(read_text(path), path);
}

// Node count before the passes, after each pass, and the op histogram after the last one.
void print_stats(size_t nodes_before, const PassContext& ctx, const Model& after) {
  std::cout << "nodes before: " << nodes_before << "\n";
  for (const auto& st : ctx.stats) std::cout << "after " << st.pass << ": " << st.nodes_after << " nodes\n";
  std::cout << "op histogram after the last pass:\n";
  for (const auto& [op, n] : op_histogram(*after.graph)) std::cout << "  " << op << " " << n << "\n";
}

int check_golden(const std::vector<std::string>& paths, bool update) {
  std::vector<std::string> files;
  for (const auto& p : paths) {
    if (std::filesystem::is_directory(p)) {
      for (const auto& e : std::filesystem::recursive_directory_iterator(p))
        if (e.path().extension() == ".kir") files.push_back(e.path().string());
    } else {
      files.push_back(p);
    }
  }
  std::sort(files.begin(), files.end());
  int passed = 0, failed = 0;
  for (const auto& f : files) {
    try {
      Golden g = parse_golden(f);
      PassContext ctx;
      ctx.verify = true;
      for (const std::string& spec : g.offload) ctx.offload.push_back(make_op_list_backend(spec));
      std::string got = run_on_text(g.input, f, split_list(g.passes), ctx);
      if (update) {
        std::ofstream out(f);
        out << g.input << kSeparator << "\n" << got;
        ++passed;
      } else if (got == g.expected) {
        ++passed;
      } else {
        ++failed;
        std::cout << "FAIL " << f << ": output differs from the expected IR\n--- got:\n" << got << "--- expected:\n"
                  << g.expected;
      }
    } catch (const Error& e) {
      ++failed;
      std::cout << "FAIL " << f << ": " << e.what() << "\n";
    }
  }
  std::cout << passed << " passed, " << failed << " failed\n";
  return failed ? 1 : 0;
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  CLI::App app{"kiln-opt: run kiln graph passes on text IR and check golden tests"};
  std::vector<std::string> inputs;
  std::string passes = "default";
  bool check = false, update = false, list = false, stats = false;
  kiln::PassContext ctx;
  std::string disable;
  app.add_option("inputs", inputs, "text-IR files (or folders with --check)");
  app.add_option("--passes", passes, "comma-separated passes; 'default' is the default pipeline")->capture_default_str();
  app.add_flag("--check", check, "treat inputs as golden tests and compare");
  app.add_flag("--update", update, "with --check: rewrite the expected part of each golden file");
  app.add_flag("--stats", stats, "print node counts per pass and the op histogram instead of the IR");
  app.add_flag("--list", list, "list the passes with their summaries");
  app.add_flag("--verify", ctx.verify, "verify the IR after every pass");
  app.add_flag("--time", ctx.time, "print each pass's time");
  app.add_option("--print-ir-after", ctx.print_ir_after, "print the IR after the pass NAME, or 'all'");
  app.add_option("--dump-dir", ctx.dump_dir, "write the IR after every pass into DIR");
  app.add_option("--disable", disable, "comma-separated passes to skip");
  CLI11_PARSE(app, argc, argv);
  try {
    if (list) {
      for (const auto& p : kiln::all_passes())
        std::cout << p.name << ": " << p.summary << (p.in_default_pipeline ? "" : " (not in the default pipeline)")
                  << "\n";
      return 0;
    }
    for (const auto& d : kiln::split_list(disable)) ctx.disabled.insert(d);
    if (check || update) return kiln::check_golden(inputs, update);
    if (inputs.size() != 1) throw kiln::Error(kiln::ErrorKind::kUsage, "give one text-IR or .onnx file");
    kiln::Model m = kiln::load_input(inputs[0]);
    kiln::verify_model(m, {});
    const size_t nodes_before = m.graph->node_count_recursive();
    kiln::run_passes(m, kiln::split_list(passes), ctx);
    kiln::verify_model(m, {});
    if (stats) kiln::print_stats(nodes_before, ctx, m);
    else std::cout << kiln::print_model(m);
    return 0;
  } catch (const kiln::Error& e) {
    std::cerr << "kiln-opt: " << e.what() << "\n";
    return kiln::exit_code(e.kind());
  }
}
