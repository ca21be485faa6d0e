// ONNX ModelProto -> Model: opset imports, initializers, Constant nodes, value_info, nested
// graphs, model-local functions (inlined) and a topological check that rejects cycles.
#include <google/protobuf/io/coded_stream.h>
#include <onnx/onnx_pb.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include "core/error.h"
#include "frontend/onnx/attribute_check.h"
#include "frontend/onnx/onnx_io.h"
#include "frontend/onnx/initializer_payloads.h"
#include "frontend/onnx/proto_util.h"
#include "frontend/onnx/tensor_proto.h"
#include "ops/registry.h"

namespace kiln {
namespace {

constexpr int kMaxGraphDepth = 64;
constexpr int kMaxFunctionDepth = 32;
// Functions that call others several times can blow up exponentially when inlined.
constexpr size_t kMaxInlinedNodes = size_t{1} << 18;
constexpr size_t kMaxInlinedBytes = size_t{64} << 20;

struct FunctionKey {
  std::string domain, name;
  bool operator<(const FunctionKey& o) const {
    return std::tie(domain, name) < std::tie(o.domain, o.name);
  }
};

class Importer {
 public:
  // `kept_raw`: raw_data of main-graph initializers kept outside the proto (initializer_payloads.h).
  Importer(const onnx::ModelProto& proto, std::string file, std::string base_dir,
           std::unordered_map<const onnx::TensorProto*, std::string_view> kept_raw = {})
      : proto_(proto), file_(std::move(file)), base_dir_(std::move(base_dir)), kept_raw_(std::move(kept_raw)) {}

  Model run() {
    Model m;
    m.path = file_;
    if (!proto_.has_graph()) fail_model("the file has no graph (is it an ONNX model?)");
    m.ir_version = proto_.ir_version();
    if (m.ir_version <= 0) fail_model("missing or invalid ir_version");
    if (m.ir_version > kNewestIrVersion)
      newer_than_known("IR version " + std::to_string(m.ir_version) + " is newer than the newest kiln knows (" +
                       std::to_string(kNewestIrVersion) + ")");
    for (const auto& os : proto_.opset_import()) {
      if (os.version() <= 0)
        fail_model("opset import for domain '" + os.domain() + "' has invalid version " +
                   std::to_string(os.version()));
      const std::string domain = canonical(os.domain());
      const int64_t newest = newest_known_opset(domain);
      if (newest > 0 && os.version() > newest)
        newer_than_known("opset " + std::to_string(os.version()) + " of domain '" +
                         (domain.empty() ? std::string("ai.onnx") : domain) + "' is newer than the newest kiln knows (" +
                         std::to_string(newest) + ")");
      m.opsets[domain] = os.version();
    }
    if (proto_.opset_import_size() == 0) m.opsets[""] = 1;  // IR version 1-2 models
    model_opsets_ = m.opsets;
    m.producer_name = proto_.producer_name();
    m.producer_version = proto_.producer_version();
    for (const auto& kv : proto_.metadata_props()) m.metadata[kv.key()] = kv.value();
    for (const auto& f : proto_.functions()) functions_[{canonical(f.domain()), f.name()}] = &f;
    m.graph = std::make_shared<Graph>();
    import_graph(proto_.graph(), *m.graph, 0);
    return m;
  }

 private:
  static std::string canonical(const std::string& d) { return d == "ai.onnx" ? "" : d; }
  std::map<std::string, int64_t> model_opsets_;  // canonical domain -> imported opset

  // The newest IR version and per-domain opsets whose meaning kiln knows (the onnx release its
  // conformance suites come from); 0 for domains of which kiln implements no op (their ops are
  // reported as unsupported where used).
  static constexpr int64_t kNewestIrVersion = 14;
  static int64_t newest_known_opset(const std::string& domain) {
    if (domain.empty()) return 28;
    if (domain == "ai.onnx.ml") return 5;
    if (domain == "ai.onnx.preview.training") return 1;
    if (domain == "kiln") return 1;
    return 0;
  }

  // A model newer than kiln knows: an invalid-model error, or with KILN_ALLOW_NEWER_OPSET=1 (the
  // CLI's --allow-newer-opset) one warning line on stderr, and the model is read as the newest
  // version kiln knows.
  void newer_than_known(const std::string& what) {
    const char* allow = std::getenv("KILN_ALLOW_NEWER_OPSET");
    if (!allow || std::string(allow) != "1")
      fail_model(what + "; --allow-newer-opset (KILN_ALLOW_NEWER_OPSET=1) runs it anyway");
    // Once per file and finding in a process (tools load a model more than once).
    static std::mutex mu;
    static std::set<std::string> warned;
    std::lock_guard<std::mutex> lock(mu);
    if (warned.insert(file_ + ": " + what).second)
      std::cerr << "kiln: warning: " << file_ << ": " << what << "; running it anyway\n";
  }

  [[noreturn]] void fail_model(const std::string& msg, ErrorKind kind = ErrorKind::kInvalidModel) {
    ErrorLocation loc;
    loc.file = file_;
    throw Error(kind, msg, loc);
  }
  [[noreturn]] void fail_node(const onnx::NodeProto& n, const std::string& msg,
                              ErrorKind kind = ErrorKind::kInvalidModel) {
    ErrorLocation loc;
    loc.file = file_;
    loc.node = n.name().empty() ? (n.output_size() ? "<producing " + n.output(0) + ">" : "<unnamed>") : n.name();
    loc.op = n.domain().empty() || n.domain() == "ai.onnx" ? n.op_type() : n.domain() + "::" + n.op_type();
    throw Error(kind, msg, loc);
  }

  Type import_type(const onnx::TypeProto& t, const std::string& what) {
    switch (t.value_case()) {
      case onnx::TypeProto::kTensorType: {
        const auto& tt = t.tensor_type();
        Type out;
        if (tt.elem_type() != 0) {
          if (!dtype_is_valid(tt.elem_type()))
            fail_model("'" + what + "' has unknown element type " + std::to_string(tt.elem_type()));
          out.dtype = static_cast<DType>(tt.elem_type());
        }
        if (tt.has_shape()) {
          Shape s;
          for (const auto& d : tt.shape().dim()) {
            if (d.has_dim_value() && d.dim_value() >= 0) s.dims.emplace_back(d.dim_value());
            else if (d.has_dim_param() && !d.dim_param().empty()) s.dims.push_back(Dim::named(d.dim_param()));
            else s.dims.emplace_back();  // unknown (also negative dim_value written by some exporters)
          }
          out.shape = std::move(s);
        }
        return out;
      }
      case onnx::TypeProto::kSequenceType:
        return Type::wrap(Type::Kind::kSequence, import_type(t.sequence_type().elem_type(), what));
      case onnx::TypeProto::kOptionalType:
        return Type::wrap(Type::Kind::kOptional, import_type(t.optional_type().elem_type(), what));
      case onnx::TypeProto::VALUE_NOT_SET:
        return Type{};
      default:
        fail_model("'" + what + "' has a map or sparse tensor type, which kiln does not support",
                   ErrorKind::kUnsupported);
    }
  }

  // Nodes with model-local functions expanded (recursively), with fresh names for internals.
  void expand_node(const onnx::NodeProto& n, std::vector<onnx::NodeProto>& out, int depth) {
    auto it = functions_.find({canonical(n.domain()), n.op_type()});
    if (it == functions_.end()) {
      if (depth > 0) {
        ++inlined_nodes_;
        inlined_bytes_ += n.ByteSizeLong();
      }
      if (inlined_nodes_ > kMaxInlinedNodes || inlined_bytes_ > kMaxInlinedBytes)
        fail_node(n, "model-local functions expand to more than " + std::to_string(kMaxInlinedNodes) +
                         " nodes or " + std::to_string(kMaxInlinedBytes >> 20) + " MiB");
      out.push_back(n);
      return;
    }
    if (depth > kMaxFunctionDepth) fail_node(n, "model-local functions nest more than " + std::to_string(kMaxFunctionDepth) +
                          " deep (is function '" + n.op_type() + "' recursive?)");
    const onnx::FunctionProto& f = *it->second;
    std::map<std::string, std::string> rename;
    for (int i = 0; i < f.input_size(); ++i)
      rename[f.input(i)] = i < n.input_size() ? n.input(i) : "";
    for (int i = 0; i < f.output_size(); ++i)
      rename[f.output(i)] = i < n.output_size() ? n.output(i) : "";
    std::map<std::string, const onnx::AttributeProto*> attrs;
    for (const auto& a : n.attribute()) attrs[a.name()] = &a;
    const std::string prefix = "__" + f.name() + "_" + std::to_string(inline_counter_++) + "/";
    auto mapped = [&](const std::string& name) -> std::string {
      if (name.empty()) return name;
      auto r = rename.find(name);
      if (r != rename.end()) return r->second;
      return rename[name] = prefix + name;
    };
    for (const auto& body : f.node()) {
      onnx::NodeProto copy = body;
      for (auto& in : *copy.mutable_input()) in = mapped(in);
      for (auto& o : *copy.mutable_output()) o = mapped(o);
      if (!copy.name().empty()) copy.set_name(prefix + copy.name());
      // Substitute attribute references; drop the ones the caller did not set.
      google::protobuf::RepeatedPtrField<onnx::AttributeProto> resolved;
      for (const auto& a : copy.attribute()) {
        if (a.ref_attr_name().empty()) {
          *resolved.Add() = a;
          continue;
        }
        auto src = attrs.find(a.ref_attr_name());
        if (src == attrs.end()) continue;
        onnx::AttributeProto sub = *src->second;
        sub.set_name(a.name());
        *resolved.Add() = sub;
      }
      *copy.mutable_attribute() = resolved;
      expand_node(copy, out, depth + 1);
    }
  }

  Attribute import_attribute(const onnx::NodeProto& n, const onnx::AttributeProto& a, Graph& g,
                             int depth) {
    using K = onnx::AttributeProto;
    K::AttributeType type = a.type();
    if (type == K::UNDEFINED) {  // IR version 1 models omit the type: infer from the set field
      if (a.has_f()) type = K::FLOAT;
      else if (a.has_i()) type = K::INT;
      else if (a.has_s()) type = K::STRING;
      else if (a.has_t()) type = K::TENSOR;
      else if (a.has_g()) type = K::GRAPH;
      else if (a.floats_size()) type = K::FLOATS;
      else if (a.ints_size()) type = K::INTS;
      else if (a.strings_size()) type = K::STRINGS;
      else if (a.tensors_size()) type = K::TENSORS;
      else if (a.graphs_size()) type = K::GRAPHS;
      else if (a.has_tp()) type = K::TYPE_PROTO;
      else fail_node(n, "attribute '" + a.name() + "' has no type and no value");
    }
    const std::string what = a.name();
    switch (type) {
      case K::INT: return Attribute::make_int(a.i());
      case K::FLOAT: return Attribute::make_float(a.f());
      case K::STRING: return Attribute::make_string(a.s());
      case K::INTS: return Attribute::make_ints({a.ints().begin(), a.ints().end()});
      case K::FLOATS: return Attribute::make_floats({a.floats().begin(), a.floats().end()});
      case K::STRINGS: {
        Attribute out;
        out.kind = Attribute::Kind::kStrings;
        out.strings.assign(a.strings().begin(), a.strings().end());
        return out;
      }
      case K::TENSOR: return Attribute::make_tensor(load_tensor(n, a.t(), what));
      case K::TENSORS: {
        Attribute out;
        out.kind = Attribute::Kind::kTensors;
        for (const auto& t : a.tensors()) out.tensors.push_back(load_tensor(n, t, what));
        return out;
      }
      case K::GRAPH: {
        auto sub = std::make_shared<Graph>();
        sub->parent = &g;
        sub->name = a.g().name().empty() ? a.name() : a.g().name();
        import_graph(a.g(), *sub, depth + 1);
        return Attribute::make_graph(sub);
      }
      case K::GRAPHS: {
        Attribute out;
        out.kind = Attribute::Kind::kGraphs;
        for (const auto& gp : a.graphs()) {
          auto sub = std::make_shared<Graph>();
          sub->parent = &g;
          sub->name = gp.name();
          import_graph(gp, *sub, depth + 1);
          out.graphs.push_back(sub);
        }
        return out;
      }
      case K::TYPE_PROTO: return Attribute::make_type(import_type(a.tp(), what));
      default:
        fail_node(n, "attribute '" + a.name() + "' has an unsupported type (sparse tensor or list of types)",
                  ErrorKind::kUnsupported);
    }
  }

  Tensor load_tensor(const onnx::NodeProto& n, const onnx::TensorProto& t, const std::string& what) {
    try {
      return tensor_from_proto(t, base_dir_, what);
    } catch (const Error& e) {
      fail_node(n, e.message(), e.kind());
    }
  }

  // The value of a Constant node, from whichever value_* attribute it carries.
  Tensor constant_value(const onnx::NodeProto& n) {
    if (n.attribute_size() != 1) fail_node(n, "Constant needs exactly one value attribute");
    const auto& a = n.attribute(0);
    const std::string& k = a.name();
    if (k == "value") return load_tensor(n, a.t(), n.output(0));
    if (k == "value_float") return Tensor::scalar(DType::kFloat32, a.f());
    if (k == "value_int") return Tensor::scalar(DType::kInt64, a.i());
    if (k == "value_floats") {
      Tensor t(DType::kFloat32, {a.floats_size()});
      std::copy(a.floats().begin(), a.floats().end(), t.data<float>());
      return t;
    }
    if (k == "value_ints") {
      Tensor t(DType::kInt64, {a.ints_size()});
      std::copy(a.ints().begin(), a.ints().end(), t.data<int64_t>());
      return t;
    }
    if (k == "value_string") {
      Tensor t(DType::kString, {});
      t.data<std::string>()[0] = a.s();
      return t;
    }
    if (k == "value_strings") {
      Tensor t(DType::kString, {a.strings_size()});
      for (int i = 0; i < a.strings_size(); ++i) t.data<std::string>()[i] = a.strings(i);
      return t;
    }
    fail_node(n, "Constant attribute '" + k + "' is not supported", ErrorKind::kUnsupported);
  }

  // Orders nodes so that every local input is produced before use; rejects cycles.
  std::vector<const onnx::NodeProto*> topo_order(const std::vector<onnx::NodeProto>& nodes,
                                                 const std::set<std::string>& predefined) {
    std::map<std::string, size_t> producer;
    for (size_t i = 0; i < nodes.size(); ++i)
      for (const auto& o : nodes[i].output()) {
        if (o.empty()) continue;
        if (predefined.count(o) || !producer.emplace(o, i).second)
          fail_node(nodes[i], "value '" + o + "' is defined more than once");
      }
    std::vector<int> state(nodes.size(), 0);  // 0 new, 1 visiting, 2 done
    std::vector<const onnx::NodeProto*> order;
    order.reserve(nodes.size());
    std::vector<std::pair<size_t, int>> stack;
    for (size_t root = 0; root < nodes.size(); ++root) {
      if (state[root]) continue;
      stack.push_back({root, 0});
      state[root] = 1;
      while (!stack.empty()) {
        auto& [i, next] = stack.back();
        const auto& n = nodes[i];
        if (next < n.input_size()) {
          auto p = producer.find(n.input(next++));
          if (p == producer.end()) continue;
          if (state[p->second] == 1)
            fail_node(n, "the graph has a cycle: input '" + p->first + "' depends on this node's own output");
          if (state[p->second] == 0) {
            state[p->second] = 1;
            stack.push_back({p->second, 0});
          }
          continue;
        }
        state[i] = 2;
        order.push_back(&n);
        stack.pop_back();
      }
    }
    return order;
  }

  void import_graph(const onnx::GraphProto& gp, Graph& g, int depth) {
    if (depth > kMaxGraphDepth) fail_model("subgraphs nest deeper than " + std::to_string(kMaxGraphDepth));
    if (g.name.empty() || depth == 0) g.name = gp.name().empty() ? "main" : gp.name();
    std::map<std::string, const onnx::ValueInfoProto*> infos;
    for (const auto& vi : gp.value_info()) infos[vi.name()] = &vi;
    for (const auto& vi : gp.output()) infos[vi.name()] = &vi;

    std::set<std::string> defined;
    std::map<std::string, const onnx::TensorProto*> inits;
    for (const auto& t : gp.initializer()) {
      if (t.name().empty()) fail_model("graph '" + g.name + "' has an initializer without a name");
      if (!inits.emplace(t.name(), &t).second) fail_model("initializer '" + t.name() + "' is defined twice");
    }
    if (gp.sparse_initializer_size())
      fail_model("sparse initializers are not supported", ErrorKind::kUnsupported);
    for (const auto& in : gp.input()) {
      if (in.name().empty()) fail_model("graph '" + g.name + "' has an input without a name");
      if (!defined.insert(in.name()).second) fail_model("graph input '" + in.name() + "' is declared twice");
      Value* v = g.add_value(in.name(), import_type(in.type(), in.name()));
      v->is_graph_input = true;
      auto it = inits.find(in.name());
      if (it != inits.end()) v->initializer = init_tensor(*it->second);
      g.inputs.push_back(v);
    }
    for (const auto& t : gp.initializer()) {
      if (defined.count(t.name())) continue;  // input with a default, handled above
      defined.insert(t.name());
      Tensor data = init_tensor(t);
      Value* v = g.add_value(t.name(), Type::tensor(data.dtype(), Shape::of(data.dims())));
      v->initializer = std::move(data);
      g.constants.push_back(v);
    }

    std::vector<onnx::NodeProto> nodes;
    nodes.reserve(static_cast<size_t>(gp.node_size()));
    for (const auto& n : gp.node()) expand_node(n, nodes, 0);

    for (const onnx::NodeProto* np : topo_order(nodes, defined)) {
      const auto& n = *np;
      if (n.op_type().empty()) fail_node(n, "node has no op_type");
      const std::string domain = canonical(n.domain());
      if (domain.empty() && n.op_type() == "Constant" && n.output_size() == 1) {
        Tensor data = constant_value(n);
        Value* v = g.add_value(n.output(0), Type::tensor(data.dtype(), Shape::of(data.dims())));
        v->initializer = std::move(data);
        g.constants.push_back(v);
        continue;
      }
      std::vector<Value*> ins;
      for (const auto& name : n.input()) {
        if (name.empty()) {
          ins.push_back(nullptr);
          continue;
        }
        Value* v = g.find(name);
        if (!v) fail_node(n, "input '" + name + "' is not defined by any graph input, initializer or node");
        ins.push_back(v);
      }
      std::vector<Value*> outs;
      for (const auto& name : n.output()) {
        if (name.empty()) {
          outs.push_back(nullptr);
          continue;
        }
        Type t;
        auto info = infos.find(name);
        if (info != infos.end()) t = import_type(info->second->type(), name);
        outs.push_back(g.add_value(name, t));
      }
      Node* node = g.add_node(n.op_type(), ins, outs, domain);
      node->name = n.name();
      if (!model_opset_known(domain))
        fail_node(n, "domain '" + n.domain() + "' has no opset import in the model", ErrorKind::kInvalidModel);
      for (const auto& a : n.attribute()) {
        if (a.name().empty()) fail_node(n, "attribute without a name");
        node->attrs[a.name()] = import_attribute(n, a, g, depth);
      }
      check_against_schema(n, *node);
    }
    for (const auto& out : gp.output()) {
      Value* v = g.find_local(out.name());
      if (!v) {
        // An output may name an outer-scope value (subgraphs) or an input directly.
        v = g.find(out.name());
        if (!v) fail_model("graph output '" + out.name() + "' is not produced by any node, input or initializer");
      }
      if (v->type.kind == Type::Kind::kTensor && v->type.dtype == DType::kUndefined && !v->type.shape)
        v->type = import_type(out.type(), out.name());
      g.outputs.push_back(v);
    }
  }

  // What onnx.checker rejects and kiln's op schema can tell: an omitted (empty-named) output that
  // every version of the op defines, a graph attribute on an op without subgraphs. (Unknown ops
  // and opsets are reported where the op is resolved, with the rest of its checks.)
  void check_against_schema(const onnx::NodeProto& n, const Node& node) {
    const auto it = model_opsets_.find(node.domain);
    const OpSchema* s = it == model_opsets_.end() ? nullptr
                                                  : OpRegistry::global().find(node.domain, node.op_type, it->second);
    if (!s) return;
    for (int k = 0; k < s->min_outputs && k < n.output_size(); ++k)
      if (n.output(k).empty()) fail_node(n, "output " + std::to_string(k) + " is required but has no name");
    if (!s->subgraphs)
      for (const auto& a : n.attribute())
        if (a.type() == onnx::AttributeProto::GRAPH || a.type() == onnx::AttributeProto::GRAPHS || a.has_g())
          fail_node(n, "attribute '" + a.name() + "' is a graph, but " + n.op_type() + " takes no subgraph");
    if (std::string why = check_onnx_attributes(n, node.domain, it->second); !why.empty()) fail_node(n, why);
  }

  bool model_opset_known(const std::string& domain) const {
    if (domain.empty() && proto_.opset_import_size() == 0) return true;
    for (const auto& os : proto_.opset_import())
      if (canonical(os.domain()) == domain) return true;
    return false;
  }

  Tensor init_tensor(const onnx::TensorProto& t) {
    try {
      auto kept = kept_raw_.find(&t);
      return tensor_from_proto(t, base_dir_, t.name(), kept == kept_raw_.end() ? std::string_view() : kept->second);
    } catch (const Error& e) {
      ErrorLocation loc;
      loc.file = file_;
      throw Error(e.kind(), "initializer " + e.message().substr(std::string("tensor ").size()), loc);
    }
  }

  const onnx::ModelProto& proto_;
  std::string file_;
  std::string base_dir_;
  std::map<FunctionKey, const onnx::FunctionProto*> functions_;
  std::unordered_map<const onnx::TensorProto*, std::string_view> kept_raw_;
  int inline_counter_ = 0;
  size_t inlined_nodes_ = 0;  // nodes that came from function bodies, whole model
  size_t inlined_bytes_ = 0;
};

}  // namespace

Model load_onnx_model_from_bytes(const void* data, size_t size, const std::string& display_name,
                                 const ImportOptions& opts) {
  onnx::ModelProto proto;
  ErrorLocation loc;
  loc.file = display_name;
  if (size == 0) throw Error(ErrorKind::kInvalidModel, "the file is empty", loc);
  if (size > static_cast<size_t>(INT_MAX))
    throw Error(ErrorKind::kUnsupported,
                "model files over 2 GB must keep their weights in external data files", loc);
  // Large weights are copied once, from `data` into their tensors (initializer_payloads.h).
  std::optional<StrippedModel> stripped = strip_initializer_payloads(static_cast<const char*>(data), size);
  const bool parsed = stripped ? parse_proto(proto, stripped->bytes.data(), stripped->bytes.size())
                               : parse_proto(proto, data, size);
  if (!parsed)
    throw Error(ErrorKind::kInvalidModel,
                "not a valid ONNX model: protobuf parsing failed (truncated, not an ONNX file, or nested too deeply)", loc);
  std::unordered_map<const onnx::TensorProto*, std::string_view> kept;
  if (stripped && static_cast<size_t>(proto.graph().initializer_size()) == stripped->payloads.size())
    for (int i = 0; i < proto.graph().initializer_size(); ++i)
      if (stripped->payloads[static_cast<size_t>(i)].data()) kept[&proto.graph().initializer(i)] = stripped->payloads[static_cast<size_t>(i)];
  return Importer(proto, display_name, opts.base_dir, std::move(kept)).run();
}

Model load_onnx_model(const std::string& path, const ImportOptions& opts) {
  MappedFile bytes(path, ErrorKind::kInvalidModel);
  ImportOptions o = opts;
  if (o.base_dir.empty()) o.base_dir = std::filesystem::path(path).parent_path().string();
  try {
    return load_onnx_model_from_bytes(bytes.data(), bytes.size(), path, o);
  } catch (const Error& e) {
    ErrorLocation loc;
    loc.file = path;
    throw e.with_context(loc);
  }
}

}  // namespace kiln
