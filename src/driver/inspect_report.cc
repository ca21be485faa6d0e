// inspect_report_json: the JSON branch of `kiln inspect` (tools/kiln/inspect.cc), field for field.
#include "driver/inspect_report.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "driver/compile_model.h"
#include "driver/model_info.h"
#include "frontend/onnx/onnx_io.h"
#include "pass/pass.h"

namespace kiln {
namespace {

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

// Values for the named dims of the model's inputs: 1 unless `given` says otherwise.
std::map<std::string, int64_t> dim_bindings(const Graph& g, const std::map<std::string, int64_t>& given) {
  std::map<std::string, int64_t> out;
  for (const std::string& s : dim_symbols(g)) out[s] = 1;
  for (const auto& [name, v] : given) {
    if (name.empty() || v < 0)
      throw Error(ErrorKind::kUsage, "dim bindings want NAME=VALUE with VALUE >= 0, got '" + name + "=" +
                                         std::to_string(v) + "'");
    out[name] = v;
  }
  return out;
}

}  // namespace

std::string inspect_report_json(const std::string& path, const InspectReportOptions& opts, int indent) {
  Model m = load_onnx_model(path);
  ModelInfo info = analyze_model(m);
  const Graph& g = *m.graph;
  // As in the CLI: the pipeline runs on a second copy so that the facts above describe the model
  // as stored; the memory plan comes from a third copy with the named dims bound, re-run while
  // folding makes progress.
  Model opt = load_onnx_model(path);
  PassContext ctx;
  run_passes(opt, default_pipeline(), ctx);
  const size_t nodes_after = analyze_model(opt).node_count;
  const auto bindings = dim_bindings(g, opts.dims);
  MemoryInfo mem;
  Model bound = load_onnx_model(path);
  bind_dims(bound, bindings);
  for (int round = 0; round < 64; ++round) {
    PassContext bound_ctx;
    run_passes(bound, default_pipeline(), bound_ctx);
    MemoryInfo next = analyze_memory(bound, bindings);
    bool progress = round == 0 || next.unplanned_values < mem.unplanned_values;
    mem = next;
    if (!progress) break;
  }
  CompileModelResult compiled;
  if (opts.compile) {
    CompileModelOptions copts;
    copts.dims = bindings;
    compiled = compile_model(load_onnx_model(path), copts);
  }

  nlohmann::json j;
  j["model"] = path;
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
  if (opts.compile) {
    j["generated_nodes"] = compiled.stats.generated_nodes;
    j["microkernel_nodes"] = compiled.stats.gemm_nodes;
    j["fallback_nodes"] = compiled.stats.fallback_nodes;
    j["fallback_ops"] = compiled.stats.fallback_ops;
    j["kernels"] = compiled.stats.kernels;
    j["compile_ms"] = compiled.stats.total_ms;
  }
  if (opts.passes) {
    nlohmann::json list = nlohmann::json::array();
    for (const PassStat& st : ctx.stats)
      list.push_back({{"pass", st.pass}, {"ms", st.ms}, {"nodes", st.nodes_after}, {"op_histogram", st.histogram_after}});
    j["passes"] = list;
  }
  return j.dump(indent);
}

}  // namespace kiln
