// `kiln inspect MODEL [--json]`: IR version, opsets, signature, op histogram, parameters and
// unsupported ops.
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "driver/model_info.h"
#include "frontend/onnx/onnx_io.h"

namespace kiln::cli {
namespace {

struct InspectArgs {
  std::string model;
  bool json = false;
};

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

int inspect_command(const InspectArgs& a) {
  Model m = load_onnx_model(a.model);
  ModelInfo info = analyze_model(m);
  const Graph& g = *m.graph;
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
  std::vector<std::pair<std::string, int64_t>> ops(info.op_histogram.begin(), info.op_histogram.end());
  std::stable_sort(ops.begin(), ops.end(), [](auto& x, auto& y) { return x.second > y.second; });
  for (const auto& [op, n] : ops) std::cout << "  " << std::setw(6) << n << "  " << op << "\n";
  std::cout << "parameters: " << info.parameter_count << " (" << human_bytes(info.parameter_bytes) << ")\n";
  if (info.unsupported.empty()) {
    std::cout << "unsupported ops: none\n";
  } else {
    std::cout << "unsupported ops: " << info.unsupported.size() << "\n";
    for (const auto& u : info.unsupported) std::cout << "  " << u.op << " at node " << u.node << ": " << u.reason << "\n";
  }
  return 0;
}

}  // namespace

void add_inspect_command(CLI::App& app, Action& action) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* cmd = app.add_subcommand("inspect", "Describe a model: signature, ops, parameters, support");
  cmd->add_option("model", args->model, "ONNX model file")->required();
  cmd->add_flag("--json", args->json, "print the same facts as JSON");
  cmd->callback([args, &action] { action = [args] { return inspect_command(*args); }; });
}

}  // namespace kiln::cli
