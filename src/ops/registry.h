// The op registry: per op (domain, name, opset range) its arity, pattern kind, reference kernel
// and optional static type/shape inference. Op families register themselves in their own file
// (ops/<family>.cc) through one function listed in registry.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/value.h"
#include "ir/graph.h"

namespace kiln {

enum class PatternKind { kElementwise, kBroadcast, kInjective, kReduction, kOutFusable, kOpaque };
std::string_view pattern_kind_name(PatternKind k);

// Shared attribute access for kernels and inference, with clear errors naming node and op.
class AttrReader {
 public:
  explicit AttrReader(const Node& node) : node_(node) {}
  const Node& node() const { return node_; }
  bool has_attr(const std::string& name) const { return node_.attr(name) != nullptr; }
  int64_t attr_int(const std::string& name) const;  // required
  int64_t attr_int(const std::string& name, int64_t fallback) const;
  float attr_float(const std::string& name, float fallback) const;
  std::string attr_string(const std::string& name, const std::string& fallback) const;
  std::vector<int64_t> attr_ints(const std::string& name, std::vector<int64_t> fallback = {}) const;
  std::vector<float> attr_floats(const std::string& name, std::vector<float> fallback = {}) const;
  std::vector<std::string> attr_strings(const std::string& name) const;
  const Tensor* attr_tensor(const std::string& name) const;
  const Graph* attr_graph(const std::string& name) const;  // required
  // Throws an Error of `kind` located at this node.
  [[noreturn]] void fail(ErrorKind kind, const std::string& message) const;
  ErrorLocation location() const;

 private:
  const Attribute* get(const std::string& name, Attribute::Kind kind) const;
  const Node& node_;
};

class KernelContext : public AttrReader {
 public:
  using SubgraphRunner =
      std::function<std::vector<RtValue>(const Graph&, const std::vector<RtValue>&)>;

  KernelContext(const Node& node, int64_t opset, std::vector<const RtValue*> inputs,
                std::vector<RtValue>* outputs, SubgraphRunner runner, std::mt19937_64* rng)
      : AttrReader(node), opset_(opset), inputs_(std::move(inputs)), outputs_(outputs),
        runner_(std::move(runner)), rng_(rng) {}

  int64_t opset() const { return opset_; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  // True when input i exists and was not omitted (empty name) and is not an empty optional.
  bool has_input(int i) const;
  const Tensor& input(int i) const;  // throws kBadInput when missing or not a tensor
  const RtValue& input_value(int i) const;
  int num_outputs() const { return static_cast<int>(outputs_->size()); }
  // True when output i is consumed or is a graph output (optional outputs may be skipped).
  bool wants_output(int i) const;
  void set_output(int i, Tensor t);
  void set_output_value(int i, RtValue v);
  std::vector<RtValue> run_subgraph(const Graph& g, const std::vector<RtValue>& inputs) const;
  std::mt19937_64& rng() const { return *rng_; }

 private:
  int64_t opset_;
  std::vector<const RtValue*> inputs_;
  std::vector<RtValue>* outputs_;
  SubgraphRunner runner_;
  std::mt19937_64* rng_;
};

// Static inference: input types and, where known at compile time, constant input values. By
// default both come from the graph (declared types, initializers); the compile pipeline binds
// them instead (pass/bind_shapes.h: input dims bound, values folded) without touching the graph.
class InferContext : public AttrReader {
 public:
  InferContext(const Node& node, int64_t opset) : AttrReader(node), opset_(opset) {}
  // Bound types and values, parallel to node.inputs (a null constant: not known).
  InferContext(const Node& node, int64_t opset, std::vector<Type> input_types,
               std::vector<const Tensor*> input_constants)
      : AttrReader(node), opset_(opset), bound_(true), input_types_(std::move(input_types)),
        input_constants_(std::move(input_constants)) {}
  int64_t opset() const { return opset_; }
  int num_inputs() const { return static_cast<int>(node().inputs.size()); }
  bool has_input(int i) const { return i < num_inputs() && node().inputs[i] != nullptr; }
  const Type& input_type(int i) const;
  // The value of input i when it is an initializer/constant; nullptr otherwise.
  const Tensor* constant_input(int i) const;
  int num_outputs() const { return static_cast<int>(node().outputs.size()); }
  void set_output_type(int i, Type t);
  const std::vector<Type>& output_types() const { return outputs_; }

 private:
  int64_t opset_;
  bool bound_ = false;
  std::vector<Type> input_types_;
  std::vector<const Tensor*> input_constants_;
  std::vector<Type> outputs_;
};

using KernelFn = void (*)(KernelContext&);
using InferFn = void (*)(InferContext&);

struct OpSchema {
  std::string domain;
  std::string name;
  int since_version = 1;  // this entry applies from this opset up to the next entry's since
  int min_inputs = 0, max_inputs = -1;  // -1: variadic
  int min_outputs = 1, max_outputs = 1;
  PatternKind pattern = PatternKind::kOpaque;
  KernelFn kernel = nullptr;
  InferFn infer = nullptr;
  // The interpreter converts f16/bf16 tensor inputs to f32, runs the kernel, and converts f32
  // outputs back, so kernels of pure float math need only f32/f64 code.
  bool half_via_float = false;
  // Output shapes depend on input values, not only on input shapes (NonZero, Unique, ...): the
  // compile pipeline cannot plan past such a node before it runs.
  bool data_dependent_shape = false;
  // Outputs come from a random generator: never folded, merged or fixed at compile time.
  bool random = false;
  // Takes graph-valued attributes (If, Loop, Scan, SequenceMap); a graph attribute on any other
  // op is an invalid model.
  bool subgraphs = false;

  // Fluent setters used by the registration tables.
  OpSchema& since(int v) { since_version = v; return *this; }
  OpSchema& inputs(int lo, int hi) { min_inputs = lo; max_inputs = hi; return *this; }
  OpSchema& inputs(int n) { return inputs(n, n); }
  OpSchema& outputs(int lo, int hi) { min_outputs = lo; max_outputs = hi; return *this; }
  OpSchema& takes_subgraphs() { subgraphs = true; return *this; }
  OpSchema& outputs(int n) { return outputs(n, n); }
  OpSchema& kind(PatternKind k) { pattern = k; return *this; }
  OpSchema& run(KernelFn f) { kernel = f; return *this; }
  OpSchema& shape(InferFn f) { infer = f; return *this; }
  OpSchema& via_float() { half_via_float = true; return *this; }
  OpSchema& dynamic_shape() { data_dependent_shape = true; return *this; }
  OpSchema& nondeterministic() { random = true; return *this; }
};

class OpRegistry {
 public:
  // The registry with every built-in op family registered.
  static const OpRegistry& global();

  OpSchema& add(std::string name, std::string domain = "");
  // The entry for `opset` (largest since_version <= opset); nullptr when none.
  const OpSchema* find(const std::string& domain, const std::string& name, int64_t opset) const;
  bool knows(const std::string& domain, const std::string& name) const;
  // Smallest since_version registered for the op (0 if unknown).
  int first_version(const std::string& domain, const std::string& name) const;
  // The newest opset of `domain` kiln has op versions for (the largest since_version); 0 when it
  // registers no op of the domain.
  int newest_opset(const std::string& domain) const;
  std::vector<std::string> op_names() const;
  // OpSchema::random of node n's op (any opset: the flag does not change across versions).
  bool is_random(const Node& n) const;

 private:
  std::map<std::pair<std::string, std::string>, std::vector<OpSchema>> ops_;
};

// Normalizes "ai.onnx" to "".
std::string canonical_domain(const std::string& domain);

}  // namespace kiln
