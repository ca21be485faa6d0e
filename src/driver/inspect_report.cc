// inspect_report_json: the JSON branch of `kiln inspect` (tools/kiln/inspect.cc), field for field.
#include "driver/inspect_report.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "driver/compile_model.h"
#include "driver/offload.h"
#include "ops/external.h"
#include "driver/model_info.h"
#include "driver/engine_passes.h"
#include "frontend/onnx/onnx_io.h"
#include "pass/pass.h"
#include "target/target.h"

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

}  // namespace

std::map<std::string, int64_t> bind_input_dims(const Graph& g, const std::map<std::string, int64_t>& given) {
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

InspectReport inspect_model(const std::string& path, const InspectReportOptions& opts) {
  InspectReport r;
  r.path = path;
  r.model = load_onnx_model(path);
  r.info = analyze_model(r.model);
  const auto bindings = bind_input_dims(*r.model.graph, opts.dims);
  // The pipeline runs on a second copy so that `info` describes the model as stored. The memory
  // plan comes from a third copy whose named dims are bound before the pipeline runs, so that
  // shapes computed from them (Shape -> Range, ...) become static too; the pipeline runs again
  // while it makes progress (folding a Shape whose input became static takes one more round per
  // transformer layer).
  if (opts.optimize) {
    r.optimized = load_onnx_model(path);
    PassContext ctx = engine_pass_context();
    ctx.offload = offload_backends(opts.offload);
    ctx.offload_min_cost = opts.offload_min_cost;
    run_passes(r.optimized, default_pipeline(), ctx);
    r.pass_stats = ctx.stats;
    r.offload_notes = ctx.offload_notes;
    for (const auto& n : r.optimized.graph->nodes) {
      if (!is_external(*n)) continue;
      const Graph& body = *n->attr("body")->g;
      InspectReport::OffloadRegion region{n->name, n->attr("backend")->s, body.nodes.size(), body.inputs.size(),
                                          body.outputs.size(), body.constants.size(), {}};
      for (const auto& b : body.nodes) region.ops[b->qualified_op()]++;
      r.offload_regions.push_back(std::move(region));
    }
    r.nodes_after = analyze_model(r.optimized).node_count;
    Model bound = load_onnx_model(path);
    bind_dims(bound, bindings);
    for (int round = 0; round < 64; ++round) {
      PassContext bound_ctx = engine_pass_context();
      run_passes(bound, default_pipeline(), bound_ctx);
      MemoryInfo next = analyze_memory(bound, bindings);
      bool progress = round == 0 || next.unplanned_values < r.memory.unplanned_values;
      r.memory = next;
      if (!progress) break;
    }
  }
  if (opts.compile) {
    CompileModelOptions copts;
    copts.dims = bindings;
    copts.offload = opts.offload;
    copts.offload_min_cost = opts.offload_min_cost;
    try {
      r.compile = compile_model(load_onnx_model(path), copts);
      r.compiled = true;
    } catch (const Error& e) {
      r.compile_error = e.what();
    }
  }
  return r;
}

std::string inspect_report_json(const std::string& path, const InspectReportOptions& opts, int indent) {
  InspectReportOptions o = opts;
  o.optimize = true;
  return inspect_report_json(inspect_model(path, o), opts.passes, indent);
}

std::string inspect_report_json(const InspectReport& r, bool passes, int indent) {
  const Model& m = r.model;
  const ModelInfo& info = r.info;
  const Graph& g = *m.graph;
  const MemoryInfo& mem = r.memory;
  const CompileModelResult& compiled = r.compile;
  const size_t nodes_after = r.nodes_after;
  nlohmann::json j;
  j["model"] = r.path;
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
  j["target"] = target::Target::host().describe();
  j["nodes"] = info.node_count;
  j["op_histogram"] = info.op_histogram;
  j["parameters"] = info.parameter_count;
  j["parameter_bytes"] = info.parameter_bytes;
  nlohmann::json uns = nlohmann::json::array();
  for (const auto& u : info.unsupported) uns.push_back({{"node", u.node}, {"op", u.op}, {"reason", u.reason}});
  j["unsupported"] = uns;
  if (!r.offload_regions.empty() || !r.offload_notes.empty()) {
    nlohmann::json regions = nlohmann::json::array(), native = nlohmann::json::array();
    for (const auto& x : r.offload_regions)
      regions.push_back({{"name", x.name}, {"backend", x.backend}, {"nodes", x.nodes}, {"inputs", x.inputs},
                         {"outputs", x.outputs}, {"constants", x.constants}, {"ops", x.ops}});
    for (const OffloadNote& note : r.offload_notes)
      native.push_back({{"node", note.node}, {"op", note.op}, {"reason", note.reason}});
    j["offload"] = {{"regions", regions}, {"native", native}};
  }
  j["nodes_before"] = info.node_count;
  j["nodes_after"] = nodes_after;
  j["arena_bytes"] = mem.arena_bytes;
  j["intermediate_bytes"] = mem.intermediate_bytes;
  j["live_bytes_lower_bound"] = mem.live_bytes_lower_bound;
  j["planned_values"] = mem.planned_values;
  j["unplanned_values"] = mem.unplanned_values;
  j["in_place_values"] = mem.in_place;
  j["dim_bindings"] = mem.dim_bindings;
  if (!r.compile_error.empty()) j["compile_error"] = r.compile_error;
  if (r.compiled) {
    j["generated_nodes"] = compiled.stats.generated_nodes;
    j["microkernel_nodes"] = compiled.stats.gemm_nodes;
    j["folded_nodes"] = compiled.stats.folded_nodes;
    j["fallback_nodes"] = compiled.stats.fallback_nodes;
    j["control_flow_nodes"] = compiled.stats.control_flow_nodes;
    j["fallback_ops"] = compiled.stats.fallback_ops;
    j["kernels"] = compiled.stats.kernels;
    j["distinct_kernels"] = compiled.stats.compiled_kernels;
    j["symbolic_kernels"] = compiled.stats.symbolic_kernels;
    j["compile_ms"] = compiled.stats.total_ms;
    j["shapes"] = compiled.stats.shapes;
  }
  if (passes) {
    nlohmann::json list = nlohmann::json::array();
    for (const PassStat& st : r.pass_stats)
      list.push_back({{"pass", st.pass}, {"ms", st.ms}, {"nodes", st.nodes_after}, {"op_histogram", st.histogram_after}});
    j["passes"] = list;
  }
  return j.dump(indent);
}

}  // namespace kiln
