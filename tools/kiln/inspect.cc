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
#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/error.h"
#include "driver/compile_model.h"
#include "driver/model_info.h"
#include "frontend/onnx/onnx_io.h"
#include "graph_view.h"
#include "pass/pass.h"

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
};

// Values for the named dims of the model's inputs: 1 unless --dim NAME=VALUE says otherwise.
std::map<std::string, int64_t> dim_bindings(const Graph& g, const std::vector<std::string>& dims) {
  std::map<std::string, int64_t> out;
  for (const std::string& s : dim_symbols(g)) out[s] = 1;
  for (const std::string& d : dims) {
    auto eq = d.find('=');
    int64_t v = -1;
    try {
      if (eq != std::string::npos) v = std::stoll(d.substr(eq + 1));
    } catch (const std::exception&) {
    }
    if (eq == std::string::npos || eq == 0 || v < 0) throw Error(ErrorKind::kUsage, "--dim wants NAME=VALUE, got '" + d + "'");
    out[d.substr(0, eq)] = v;
  }
  return out;
}

nlohmann::json type_json(const Type& t) {
  nlohmann::json j;
  if (t.kind != Type::Kind::kTensor) {
    j["kind"] = t.kind == Type::Kind::kSequence ? "sequence" : "optional";
    if (t.elem) j["elem"] = type_json(*t.elem);
    return j;
  }
  j["dtype"] = t.dtype == DType::kUndefined ? "unknown" : std::string(dtype_name(t.dtype));
  if (t.shape) {
    nlohmann::json dims = nlohmann::json::array();
    for (const Dim& d : t.shape->dims) {
      if (d.known()) dims.push_back(d.value);
      else dims.push_back(d.symbol.empty() ? "?" : d.symbol);
    }
    j["shape"] = dims;
  } else {
    j["shape"] = nullptr;
  }
  return j;
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

int inspect_command(const InspectArgs& a) {
  Model m = load_onnx_model(a.model);
  ModelInfo info = analyze_model(m);
  const Graph& g = *m.graph;
  // The default pipeline runs on a second copy so that the facts above describe the model as
  // stored. The memory plan comes from a third copy whose named dims are bound before the
  // pipeline runs, so that shapes computed from them (Shape -> Range, ...) become static too.
  const bool optimize = a.json || a.passes || a.dot || !a.html.empty();
  Model opt;
  PassContext ctx;
  MemoryInfo mem;
  size_t nodes_after = 0;
  if (optimize) {
    opt = load_onnx_model(a.model);
    run_passes(opt, default_pipeline(), ctx);
    nodes_after = analyze_model(opt).node_count;
    auto bindings = dim_bindings(g, a.dims);
    Model bound = load_onnx_model(a.model);
    bind_dims(bound, bindings);
    // The pipeline runs again while it makes progress: folding a Shape whose input became static
    // only happens after shape inference saw the folded shape inputs before it (one more layer
    // of a transformer per round).
    for (int round = 0; round < 64; ++round) {
      PassContext bound_ctx;
      run_passes(bound, default_pipeline(), bound_ctx);
      MemoryInfo next = analyze_memory(bound, bindings);
      bool progress = round == 0 || next.unplanned_values < mem.unplanned_values;
      mem = next;
      if (!progress) break;
    }
  }
  // --engine compiled / --print-kernels: the plan `kiln compile` builds, at the bound dims.
  const bool compile = parse_engine(a.engine) == Engine::kCompiled || a.print_kernels;
  CompileModelResult compiled;
  std::string compile_error;  // the model is described even when it cannot be compiled
  if (compile) {
    CompileModelOptions copts;
    copts.dims = dim_bindings(g, a.dims);
    try {
      compiled = compile_model(load_onnx_model(a.model), copts);
    } catch (const Error& e) {
      if (a.print_kernels) throw;
      compile_error = e.what();
    }
  }
  if (a.print_kernels) {
    std::cout << compiled.kernels_text;
    return 0;
  }
  if (!a.html.empty()) {
    std::ofstream out(a.html);
    if (!out) throw Error(ErrorKind::kUsage, "cannot write '" + a.html + "'");
    write_html(opt, mem, out);
  }
  if (a.dot) {
    write_dot(opt, std::cout);
    return 0;
  }
  if (a.json) {
    nlohmann::json j;
    j["model"] = a.model;
    j["ir_version"] = m.ir_version;
    j["producer"] = m.producer_name + (m.producer_version.empty() ? "" : " " + m.producer_version);
    nlohmann::json opsets = nlohmann::json::object();
    for (const auto& [d, v] : m.opsets) opsets[d.empty() ? "ai.onnx" : d] = v;
    j["opsets"] = opsets;
    for (const char* which : {"inputs", "outputs"}) {
      nlohmann::json list = nlohmann::json::array();
      for (const Value* v : std::string(which) == "inputs" ? g.inputs : g.outputs) {
        nlohmann::json e = type_json(v->type);
        e["name"] = v->name;
        if (v->is_graph_input && v->initializer.defined()) e["has_default"] = true;
        list.push_back(e);
      }
      j[which] = list;
    }
    j["nodes"] = info.node_count;
    j["op_histogram"] = info.op_histogram;
    j["parameters"] = info.parameter_count;
    j["parameter_bytes"] = info.parameter_bytes;
    nlohmann::json uns = nlohmann::json::array();
    for (const auto& u : info.unsupported) uns.push_back({{"node", u.node}, {"op", u.op}, {"reason", u.reason}});
    j["unsupported"] = uns;
    j["nodes_before"] = info.node_count;
    j["nodes_after"] = nodes_after;
    j["arena_bytes"] = mem.arena_bytes;
    j["intermediate_bytes"] = mem.intermediate_bytes;
    j["live_bytes_lower_bound"] = mem.live_bytes_lower_bound;
    j["planned_values"] = mem.planned_values;
    j["unplanned_values"] = mem.unplanned_values;
    j["in_place_values"] = mem.in_place;
    j["dim_bindings"] = mem.dim_bindings;
    if (!compile_error.empty()) j["compile_error"] = compile_error;
    if (compile && compile_error.empty()) {
      j["generated_nodes"] = compiled.stats.generated_nodes;
      j["microkernel_nodes"] = compiled.stats.gemm_nodes;
      j["fallback_nodes"] = compiled.stats.fallback_nodes;
      j["fallback_ops"] = compiled.stats.fallback_ops;
      j["kernels"] = compiled.stats.kernels;
      j["compile_ms"] = compiled.stats.total_ms;
    }
    if (a.passes) {
      nlohmann::json list = nlohmann::json::array();
      for (const PassStat& st : ctx.stats)
        list.push_back({{"pass", st.pass}, {"ms", st.ms}, {"nodes", st.nodes_after}, {"op_histogram", st.histogram_after}});
      j["passes"] = list;
    }
    std::cout << j.dump(2) << "\n";
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
  if (!compile_error.empty()) std::cout << "compiled engine: cannot compile: " << compile_error << "\n";
  if (compile && compile_error.empty())
    std::cout << "compiled engine: " << compiled.stats.kernels << " kernels, " << compiled.stats.generated_nodes
              << " generated nodes, " << compiled.stats.gemm_nodes << " microkernel nodes, "
              << compiled.stats.fallback_nodes << " fallback nodes, compiled in " << std::fixed << std::setprecision(1)
              << compiled.stats.total_ms << " ms\n" << std::defaultfloat;
  if (compile && !compiled.stats.fallback_ops.empty()) {
    std::cout << "fallback ops (reference kernels):\n";
    for (const auto& [op, count] : compiled.stats.fallback_ops) std::cout << "  " << op << ": " << count << "\n";
  }
  if (a.passes) {
    std::cout << "\ndefault pipeline:\n";
    const std::map<std::string, int64_t>* previous = &info.op_histogram;
    for (const PassStat& st : ctx.stats) {
      std::cout << "after " << st.pass << ": " << st.nodes_after << " nodes (" << std::fixed << std::setprecision(2)
                << st.ms << " ms)" << (st.histogram_after == *previous ? ", op histogram unchanged" : "") << "\n";
      if (st.histogram_after != *previous) print_histogram(st.histogram_after, "  ");
      previous = &st.histogram_after;
    }
    std::map<int64_t, int> groups;
    for (const auto& n : opt.graph->nodes)
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
  cmd->callback([args, &action] { action = [args] { return inspect_command(*args); }; });
}

}  // namespace kiln::cli
