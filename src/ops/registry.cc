// Op registry lookup, attribute access and kernel/inference contexts.
#include "ops/registry.h"

#include <algorithm>

#include "ops/families.h"

namespace kiln {

std::string_view pattern_kind_name(PatternKind k) {
  switch (k) {
    case PatternKind::kElementwise: return "elementwise";
    case PatternKind::kBroadcast: return "broadcast";
    case PatternKind::kInjective: return "injective";
    case PatternKind::kReduction: return "reduction";
    case PatternKind::kOutFusable: return "out-fusable";
    case PatternKind::kOpaque: return "opaque";
  }
  return "?";
}

std::string canonical_domain(const std::string& domain) {
  return domain == "ai.onnx" ? std::string() : domain;
}

// ---- AttrReader ----------------------------------------------------------------------------

ErrorLocation AttrReader::location() const {
  ErrorLocation loc;
  loc.node = node_.display_name();
  loc.op = node_.qualified_op();
  return loc;
}

void AttrReader::fail(ErrorKind kind, const std::string& message) const {
  throw Error(kind, message, location());
}

const Attribute* AttrReader::get(const std::string& name, Attribute::Kind kind) const {
  const Attribute* a = node_.attr(name);
  if (!a) return nullptr;
  if (a->kind != kind)
    fail(ErrorKind::kInvalidModel, "attribute '" + name + "' should be of type " +
                                       std::string(attribute_kind_name(kind)) + ", got " +
                                       std::string(attribute_kind_name(a->kind)));
  return a;
}

int64_t AttrReader::attr_int(const std::string& name) const {
  const Attribute* a = get(name, Attribute::Kind::kInt);
  if (!a) fail(ErrorKind::kInvalidModel, "missing required attribute '" + name + "'");
  return a->i;
}

int64_t AttrReader::attr_int(const std::string& name, int64_t fallback) const {
  const Attribute* a = get(name, Attribute::Kind::kInt);
  return a ? a->i : fallback;
}

float AttrReader::attr_float(const std::string& name, float fallback) const {
  const Attribute* a = node_.attr(name);
  if (a && a->kind == Attribute::Kind::kInt) return static_cast<float>(a->i);
  a = get(name, Attribute::Kind::kFloat);
  return a ? a->f : fallback;
}

std::string AttrReader::attr_string(const std::string& name, const std::string& fallback) const {
  const Attribute* a = get(name, Attribute::Kind::kString);
  return a ? a->s : fallback;
}

std::vector<int64_t> AttrReader::attr_ints(const std::string& name,
                                           std::vector<int64_t> fallback) const {
  const Attribute* a = node_.attr(name);
  if (a && a->kind == Attribute::Kind::kInt) return {a->i};
  a = get(name, Attribute::Kind::kInts);
  return a ? a->ints : fallback;
}

std::vector<float> AttrReader::attr_floats(const std::string& name,
                                           std::vector<float> fallback) const {
  const Attribute* a = node_.attr(name);
  if (a && a->kind == Attribute::Kind::kFloat) return {a->f};
  a = get(name, Attribute::Kind::kFloats);
  return a ? a->floats : fallback;
}

std::vector<std::string> AttrReader::attr_strings(const std::string& name) const {
  const Attribute* a = get(name, Attribute::Kind::kStrings);
  return a ? a->strings : std::vector<std::string>{};
}

const Tensor* AttrReader::attr_tensor(const std::string& name) const {
  const Attribute* a = get(name, Attribute::Kind::kTensor);
  return a ? &a->t : nullptr;
}

const Graph* AttrReader::attr_graph(const std::string& name) const {
  const Attribute* a = get(name, Attribute::Kind::kGraph);
  if (!a || !a->g) fail(ErrorKind::kInvalidModel, "missing required graph attribute '" + name + "'");
  return a->g.get();
}

// ---- KernelContext -------------------------------------------------------------------------

bool KernelContext::has_input(int i) const {
  return i >= 0 && i < num_inputs() && inputs_[i] != nullptr && !inputs_[i]->is_none();
}

const RtValue& KernelContext::input_value(int i) const {
  if (i < 0 || i >= num_inputs() || !inputs_[i])
    fail(ErrorKind::kInvalidModel, "missing required input #" + std::to_string(i));
  return *inputs_[i];
}

const Tensor& KernelContext::input(int i) const {
  const RtValue& v = input_value(i);
  if (!v.is_tensor())
    fail(ErrorKind::kBadInput, "input #" + std::to_string(i) + " should be a tensor");
  return v.tensor;
}

bool KernelContext::wants_output(int i) const {
  return i >= 0 && i < static_cast<int>(node().outputs.size()) && node().outputs[i] != nullptr;
}

void KernelContext::set_output(int i, Tensor t) { set_output_value(i, RtValue(std::move(t))); }

void KernelContext::set_output_value(int i, RtValue v) {
  KILN_CHECK(i >= 0 && i < num_outputs());
  (*outputs_)[static_cast<size_t>(i)] = std::move(v);
}

std::vector<RtValue> KernelContext::run_subgraph(const Graph& g,
                                                 const std::vector<RtValue>& inputs) const {
  KILN_CHECK(runner_ != nullptr);
  return runner_(g, inputs);
}

// ---- InferContext --------------------------------------------------------------------------

const Type& InferContext::input_type(int i) const {
  if (!has_input(i)) fail(ErrorKind::kInvalidModel, "missing required input #" + std::to_string(i));
  if (bound_) return input_types_.at(static_cast<size_t>(i));
  return node().inputs[i]->type;
}

const Tensor* InferContext::constant_input(int i) const {
  if (!has_input(i)) return nullptr;
  if (bound_) return input_constants_.at(static_cast<size_t>(i));
  const Value* v = node().inputs[i];
  return v->is_constant() ? &v->initializer : nullptr;
}

void InferContext::set_output_type(int i, Type t) {
  if (i >= static_cast<int>(outputs_.size())) outputs_.resize(static_cast<size_t>(i) + 1);
  outputs_[static_cast<size_t>(i)] = std::move(t);
}

// ---- OpRegistry ----------------------------------------------------------------------------

const OpRegistry& OpRegistry::global() {
  static const OpRegistry registry = [] {
    OpRegistry r;
    register_elementwise_ops(r);
    register_activation_ops(r);
    register_nn_ops(r);
    register_normalization_ops(r);
    register_matmul_ops(r);
    register_tensor_ops(r);
    register_indexing_ops(r);
    register_reduction_ops(r);
    register_control_flow_ops(r);
    register_sequence_ops(r);
    register_extra_ops(r);
    register_signal_attention_ops(r);
    register_rnn_quant_ops(r);
    register_qlinear_contrib_ops(r);
    register_kiln_composite_ops(r);
    register_external_ops(r);
    for (auto& [key, list] : r.ops_)
      std::sort(list.begin(), list.end(),
                [](const OpSchema& a, const OpSchema& b) { return a.since_version < b.since_version; });
    return r;
  }();
  return registry;
}

OpSchema& OpRegistry::add(std::string name, std::string domain) {
  auto& list = ops_[{canonical_domain(domain), name}];
  OpSchema s;
  s.domain = canonical_domain(domain);
  s.name = std::move(name);
  list.push_back(std::move(s));
  return list.back();
}

const OpSchema* OpRegistry::find(const std::string& domain, const std::string& name,
                                 int64_t opset) const {
  auto it = ops_.find({canonical_domain(domain), name});
  if (it == ops_.end()) return nullptr;
  const OpSchema* best = nullptr;
  for (const auto& s : it->second)
    if (s.since_version <= opset) best = &s;
  return best;
}

bool OpRegistry::knows(const std::string& domain, const std::string& name) const {
  return ops_.count({canonical_domain(domain), name}) != 0;
}

int OpRegistry::first_version(const std::string& domain, const std::string& name) const {
  auto it = ops_.find({canonical_domain(domain), name});
  return it == ops_.end() || it->second.empty() ? 0 : it->second.front().since_version;
}

int OpRegistry::newest_opset(const std::string& domain) const {
  int newest = 0;
  const std::string d = canonical_domain(domain);
  for (const auto& [key, versions] : ops_)
    if (key.first == d)
      for (const OpSchema& s : versions) newest = std::max(newest, s.since_version);
  return newest;
}

bool OpRegistry::is_random(const Node& n) const {
  auto it = ops_.find({canonical_domain(n.domain), n.op_type});
  return it != ops_.end() && !it->second.empty() && it->second.front().random;
}

std::vector<std::string> OpRegistry::op_names() const {
  std::vector<std::string> out;
  for (const auto& [key, list] : ops_)
    out.push_back(key.first.empty() ? key.second : key.first + "::" + key.second);
  return out;
}

}  // namespace kiln
