// The pass registry and the linear pipeline runner.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "core/error.h"
#include "ir/text.h"
#include "ops/verifier.h"
#include "pass/pass.h"
#include "pass/passes.h"

namespace kiln {

const std::vector<PassInfo>& all_passes() {
  static const std::vector<PassInfo> passes = registered_passes();
  return passes;
}

std::vector<std::string> split_names(const std::string& list, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, sep);) {
    const size_t b = item.find_first_not_of(" \t\r"), e = item.find_last_not_of(" \t\r");
    if (b != std::string::npos) out.push_back(item.substr(b, e - b + 1));
  }
  return out;
}

const PassInfo* find_pass(const std::string& name) {
  for (const auto& p : all_passes())
    if (p.name == name) return &p;
  return nullptr;
}

namespace {

void count_ops(const Graph& g, std::map<std::string, int64_t>& h) {
  for (const auto& n : g.nodes) {
    ++h[n->qualified_op()];
    for (const auto& [k, a] : n->attrs) {
      if (a.g) count_ops(*a.g, h);
      for (const auto& sg : a.graphs) count_ops(*sg, h);
    }
  }
}

}  // namespace

std::map<std::string, int64_t> op_histogram(const Graph& g) {
  std::map<std::string, int64_t> h;
  count_ops(g, h);
  return h;
}

void run_passes(Model& m, const std::vector<std::string>& names, PassContext& ctx) {
  std::ostream& log = ctx.log ? *ctx.log : std::cerr;
  if (!ctx.dump_dir.empty()) std::filesystem::create_directories(ctx.dump_dir);
  int index = 0;
  for (const auto& name : names) {
    const PassInfo* p = find_pass(name);
    if (!p) {
      std::string known;
      for (const auto& q : all_passes()) known += (known.empty() ? "" : ", ") + q.name;
      throw Error(ErrorKind::kUsage, "unknown pass '" + name + "' (passes: " + known + ")");
    }
    if (ctx.disabled.count(name)) continue;
    auto start = std::chrono::steady_clock::now();
    try {
      p->run(m, ctx);
    } catch (const Error& e) {
      ErrorLocation loc;
      loc.pass = name;
      throw e.with_context(loc);
    }
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    PassStat st;
    st.pass = name;
    st.ms = ms;
    st.histogram_after = op_histogram(*m.graph);
    for (const auto& [op, n] : st.histogram_after) st.nodes_after += static_cast<size_t>(n);
    ctx.stats.push_back(st);
    if (ctx.time)
      log << std::left << std::setw(28) << name << std::right << std::fixed << std::setprecision(3) << std::setw(10)
          << ms << " ms  " << st.nodes_after << " nodes\n";
    if (ctx.verify) {
      try {
        verify_model(m);
      } catch (const Error& e) {
        ErrorLocation loc;
        loc.pass = name;
        throw Error(ErrorKind::kInternal, "the IR is invalid after this pass: " + e.message(), loc);
      }
    }
    if (ctx.print_ir_after == "all" || ctx.print_ir_after == name) {
      PrintOptions po;
      po.elide_large_constants = true;
      log << "// ----- IR after " << name << "\n" << print_model(m, po);
    }
    if (!ctx.dump_dir.empty()) {
      std::ostringstream fn;
      fn << std::setw(2) << std::setfill('0') << ++index << "-" << name << ".kir";
      std::ofstream out(std::filesystem::path(ctx.dump_dir) / fn.str());
      out << print_model(m);
    }
  }
}

}  // namespace kiln
