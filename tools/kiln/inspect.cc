// `kiln inspect MODEL [--json] [--passes] [--html OUT.html] [--dot] [--engine compiled]
// [--print-kernels]`: IR version, opsets, signature, op histogram, parameters and unsupported
// ops; with --passes the node count and op histogram after each pass of the default pipeline;
// the JSON adds node counts before/after the pipeline and the memory plan of the optimized graph;
// --html writes an interactive graph view and --dot prints Graphviz, both of the optimized
// graph. --engine compiled compiles the model at its input shapes (as `kiln compile`) and adds
// the plan's node counts; --print-kernels prints the TIR of its kernels.
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "bench_common.h"
#include "commands.h"
#include "core/error.h"
#include "driver/inspect_report.h"
#include "driver/session.h"
#include "graph_view.h"
#include "pass/pass.h"
#include "tune/records.h"
#include "tune/tasks.h"

namespace kiln::cli {
namespace {

struct InspectArgs {
  std::string model;
  bool json = false;
  bool passes = false;
  bool dot = false;
  std::string html;
  std::vector<std::string> dims;  // NAME=VALUE bindings for the memory plan (and the compile)
  std::string engine = "compiled";  // compile at the input shapes and report the plan; "interp": don't
  bool print_kernels = false;     // print the TIR of every generated kernel (compiles)
  std::string records;            // --records: per task, what the tuning records hold
  int threads = 1;                // --threads: the records' thread count
  std::vector<std::string> offload;  // --offload: show the regions and why nodes stayed native
  double offload_min_cost = -1;
};

// --records: per tunable task of the model (compiled at its --dim sizes), the default and the
// tuned time the records hold for this CPU and thread count, and the choice --records applies.
void print_records_report(const InspectArgs& a) {
  SessionOptions opts;
  opts.engine = Engine::kCompiled;
  opts.threads = a.threads;
  auto session = Session::load(a.model, opts);
  InputShapeOptions shapes;
  parse_dim_options(a.dims, shapes);
  const std::vector<RtValue> feeds = make_bench_inputs(*session, shapes, 0);
  const std::vector<tune::Task> tasks = tune::model_tasks(*session->compiled(), feeds, a.threads);
  int64_t other = 0;
  const tune::TargetKey target = tune::host_target(a.threads);
  const auto records = tune::summarize(tune::read_records(a.records), target, &other);
  std::cout << "\ntuning records " << a.records << " for " << target.describe() << " (" << other
            << " records for other targets ignored):\n";
  std::cout << std::left << std::setw(64) << "  task" << std::right << std::setw(6) << "steps" << std::setw(12)
            << "default us" << std::setw(11) << "tuned us" << std::setw(9) << "records" << "  applied choice\n";
  double def_total = 0, tuned_total = 0;
  for (const tune::Task& t : tasks) {
    auto it = records.find(t.key);
    const tune::TaskRecords r = it == records.end() ? tune::TaskRecords{} : it->second;
    auto us = [](double v) {
      std::ostringstream os;
      os << std::fixed << std::setprecision(1) << v;
      return v > 0 ? os.str() : std::string("-");
    };
    std::cout << "  " << std::left << std::setw(62) << t.key.substr(0, 61) << std::right << std::setw(6) << t.count
              << std::setw(12) << us(r.default_us) << std::setw(11) << us(r.best_us) << std::setw(9) << r.measured
              << "  " << gemm_ops::to_string(tune::applied_choice(r)) << "\n";
    if (r.default_us > 0) {
      def_total += t.count * r.default_us;
      tuned_total += t.count * r.best_us;
    }
  }
  std::cout << std::fixed << std::setprecision(2) << "  measured tasks' time: " << def_total / 1000 << " ms default, "
            << tuned_total / 1000 << " ms tuned\n" << std::defaultfloat;
}

// --dim NAME=VALUE arguments as a map (checked by bind_input_dims).
std::map<std::string, int64_t> parse_dims(const std::vector<std::string>& dims) {
  std::map<std::string, int64_t> out;
  for (const std::string& d : dims) out.insert(parse_dim_binding(d));
  return out;
}

std::string human_bytes(int64_t b) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(1);
  if (b >= (1 << 20)) os << b / 1048576.0 << " MiB";
  else if (b >= 1024) os << b / 1024.0 << " KiB";
  else os << b << " B";
  return os.str();
}

void print_histogram(const std::map<std::string, int64_t>& histogram, const std::string& indent) {
  std::vector<std::pair<std::string, int64_t>> ops(histogram.begin(), histogram.end());
  std::stable_sort(ops.begin(), ops.end(), [](auto& x, auto& y) { return x.second > y.second; });
  for (const auto& [op, n] : ops) std::cout << indent << std::setw(6) << n << "  " << op << "\n";
}

// --offload: each kiln::External region (backend, nodes, ops) and, per op and reason, the nodes
// that stayed native.
void print_offload_report(const InspectReport& r) {
  std::cout << "\noffloaded regions:\n";
  size_t offloaded = 0;
  for (const InspectReport::OffloadRegion& x : r.offload_regions) {
    std::cout << "  " << x.name << " (" << x.backend << "): " << x.nodes << " nodes, " << x.inputs << " inputs, "
              << x.outputs << " outputs, " << x.constants << " constants:";
    for (const auto& [op, count] : x.ops) std::cout << " " << op << " x" << count;
    std::cout << "\n";
    offloaded += x.nodes;
  }
  if (r.offload_regions.empty()) std::cout << "  none\n";
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> native;  // (op, reason) -> nodes
  for (const OffloadNote& note : r.offload_notes) native[{note.op, note.reason}].push_back(note.node);
  std::cout << offloaded << " nodes offloaded in " << r.offload_regions.size() << " region(s); "
            << r.offload_notes.size() << " stayed native:\n";
  for (const auto& [key, nodes] : native) {
    std::cout << "  " << key.first << " x" << nodes.size() << ": " << key.second << " (";
    for (size_t i = 0; i < nodes.size() && i < 3; ++i) std::cout << (i ? ", " : "") << nodes[i];
    std::cout << (nodes.size() > 3 ? ", ...)" : ")") << "\n";
  }
}

int inspect_command(const InspectArgs& a) {
  if (!a.records.empty() && (a.json || a.dot || a.print_kernels))
    throw Error(ErrorKind::kUsage, "--records prints a table: it does not combine with --json, --dot or --print-kernels");
  InspectReportOptions ro;
  ro.dims = parse_dims(a.dims);
  ro.optimize = a.json || a.passes || a.dot || !a.html.empty();
  // --engine compiled (default) / --print-kernels: the plan `kiln compile` builds, at the bound dims.
  ro.compile = parse_engine(a.engine) == Engine::kCompiled || a.print_kernels;
  ro.passes = a.passes;
  ro.offload = a.offload;
  ro.offload_min_cost = a.offload_min_cost;
  if (!a.offload.empty()) ro.optimize = true;
  const InspectReport r = inspect_model(a.model, ro);
  const Model& m = r.model;
  const ModelInfo& info = r.info;
  const Graph& g = *m.graph;
  const MemoryInfo& mem = r.memory;
  const CompileModelResult& compiled = r.compile;
  if (a.print_kernels) {
    if (!r.compiled) throw Error(ErrorKind::kUnsupported, "cannot compile: " + r.compile_error);
    std::cout << compiled.kernels_text;
    return 0;
  }
  if (!a.html.empty()) {
    std::ofstream out(a.html);
    if (!out) throw Error(ErrorKind::kUsage, "cannot write '" + a.html + "'");
    write_html(r.optimized, mem, out);
  }
  if (a.dot) {
    write_dot(r.optimized, std::cout);
    return 0;
  }
  if (a.json) {
    std::cout << inspect_report_json(r, a.passes) << "\n";
    return 0;
  }
  std::cout << "model:      " << a.model << "\n";
  std::cout << "ir_version: " << m.ir_version << "\n";
  if (!m.producer_name.empty()) std::cout << "producer:   " << m.producer_name << " " << m.producer_version << "\n";
  std::cout << "opsets:    ";
  for (const auto& [d, v] : m.opsets) std::cout << " " << (d.empty() ? "ai.onnx" : d) << "=" << v;
  std::cout << "\ninputs:\n";
  for (const Value* v : g.inputs)
    std::cout << "  " << v->name << ": " << to_string(v->type) << (v->initializer.defined() ? " (has default)" : "") << "\n";
  std::cout << "outputs:\n";
  for (const Value* v : g.outputs) std::cout << "  " << v->name << ": " << to_string(v->type) << "\n";
  std::cout << "nodes: " << info.node_count << "\nop histogram:\n";
  print_histogram(info.op_histogram, "  ");
  std::cout << "parameters: " << info.parameter_count << " (" << human_bytes(info.parameter_bytes) << ")\n";
  if (info.unsupported.empty()) {
    std::cout << "unsupported ops: none\n";
  } else {
    std::cout << "unsupported ops: " << info.unsupported.size() << "\n";
    for (const auto& u : info.unsupported) std::cout << "  " << u.op << " at node " << u.node << ": " << u.reason << "\n";
  }
  if (!r.compile_error.empty()) std::cout << "compiled engine: cannot compile: " << r.compile_error << "\n";
  if (r.compiled)
    std::cout << "compiled engine: " << compiled.stats.kernels << " kernels (" << compiled.stats.compiled_kernels
              << " distinct, " << compiled.stats.symbolic_kernels
              << " taking the dims that vary with the input sizes as params), " << compiled.stats.generated_nodes
              << " generated nodes, " << compiled.stats.gemm_nodes << " microkernel nodes, "
              << compiled.stats.folded_nodes << " folded nodes, "
              << compiled.stats.fallback_nodes << " fallback nodes, compiled in " << std::fixed << std::setprecision(1)
              << compiled.stats.total_ms << " ms\n" << std::defaultfloat;
  if (r.compiled && !compiled.stats.fallback_ops.empty()) {
    std::cout << "fallback ops (reference kernels):\n";
    for (const auto& [op, count] : compiled.stats.fallback_ops) std::cout << "  " << op << ": " << count << "\n";
  }
  if (a.passes) {
    std::cout << "\ndefault pipeline:\n";
    const std::map<std::string, int64_t>* previous = &info.op_histogram;
    for (const PassStat& st : r.pass_stats) {
      std::cout << "after " << st.pass << ": " << st.nodes_after << " nodes (" << std::fixed << std::setprecision(2)
                << st.ms << " ms)" << (st.histogram_after == *previous ? ", op histogram unchanged" : "") << "\n";
      if (st.histogram_after != *previous) print_histogram(st.histogram_after, "  ");
      previous = &st.histogram_after;
    }
    std::map<int64_t, int> groups;
    for (const auto& n : r.optimized.graph->nodes)
      if (const Attribute* at = n->attr("kiln.group"); at && at->kind == Attribute::Kind::kInt) ++groups[at->i];
    int multi = 0;
    for (const auto& [gid, count] : groups) multi += count > 1;
    std::cout << "fused groups: " << groups.size() << " (" << multi << " of several nodes)\n";
    std::cout << "memory plan of the optimized graph (sizes from static types, dims bound:";
    for (const auto& [sym, v] : mem.dim_bindings) std::cout << " " << sym << "=" << v;
    std::cout << "):\n  arena " << human_bytes(mem.arena_bytes) << ", live lower bound "
              << human_bytes(mem.live_bytes_lower_bound) << ", all intermediates " << human_bytes(mem.intermediate_bytes)
              << "; " << mem.planned_values << " values planned (" << mem.in_place << " in place), "
              << mem.unplanned_values << " without a static size\n";
  }
  if (!a.offload.empty()) print_offload_report(r);
  if (!a.records.empty()) print_records_report(a);
  return 0;
}

}  // namespace

void add_inspect_command(CLI::App& app, Action& action) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* cmd = app.add_subcommand("inspect", "Describe a model: signature, ops, parameters, support");
  cmd->add_option("model", args->model, "ONNX model file")->required();
  cmd->add_flag("--json", args->json,
                "print the same facts as JSON, with node counts before/after the default pipeline and its memory plan");
  cmd->add_flag("--passes", args->passes, "run the default pipeline; print node count and op histogram after each pass");
  cmd->add_option("--html", args->html, "write an interactive view of the optimized graph to this HTML file");
  cmd->add_flag("--dot", args->dot, "print the optimized graph as Graphviz dot");
  cmd->add_option("--dim", args->dims, "NAME=VALUE: bind a named input dim for the memory plan and compile (default 1)");
  cmd->add_option("--engine", args->engine,
                  "compiled (default): also compile the model at its input shapes (symbolic dims from --dim, else "
                  "1) and report generated, microkernel and fallback nodes, kernels and compile time; interp: skip")
      ->capture_default_str()
      ->check(CLI::IsMember({"interp", "compiled"}));
  cmd->add_flag("--print-kernels", args->print_kernels, "compile the model and print the loop nest (TIR) of every kernel");
  cmd->add_option("--records", args->records,
                  "tuning records (kiln tune): per tunable kernel of the model, the default and tuned time they hold "
                  "for this CPU and --threads, and the choice they apply");
  add_offload_option(cmd, args->offload);
  add_offload_min_cost_option(cmd, args->offload_min_cost);
  cmd->add_option("--threads", args->threads, "with --records: the thread count whose records to show")
      ->capture_default_str()->check(CLI::Range(1, 1024));
  cmd->callback([args, &action] { action = [args] { return inspect_command(*args); }; });
}

}  // namespace kiln::cli
