// The graph IR: a Model owns a Graph; a Graph owns its Values and Nodes in topological order.
// SSA: each Value has one producer (a node output, a graph input or an initializer).
// Nested graphs (If/Loop/Scan bodies) are Graphs held by attributes; they may use Values of
// enclosing graphs directly (captures).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/shape.h"
#include "core/tensor.h"

namespace kiln {

class Graph;
class Node;

// Static type of a Value: a tensor type, or a sequence/optional of another type.
struct Type {
  enum class Kind { kTensor, kSequence, kOptional };
  Kind kind = Kind::kTensor;
  DType dtype = DType::kUndefined;       // kTensor: element type (kUndefined = unknown)
  std::optional<Shape> shape;            // kTensor: nullopt = unknown rank
  std::shared_ptr<const Type> elem;      // kSequence / kOptional

  static Type tensor(DType dt, std::optional<Shape> s = std::nullopt) {
    Type t;
    t.dtype = dt;
    t.shape = std::move(s);
    return t;
  }
  static Type wrap(Kind k, Type inner) {
    Type t;
    t.kind = k;
    t.elem = std::make_shared<const Type>(std::move(inner));
    return t;
  }
  bool operator==(const Type& o) const;
};
// "f32[N,3]", "f32[...]" (unknown rank), "?[...]", "seq<f32[...]>", "opt<...>".
std::string to_string(const Type& t);

class Value {
 public:
  std::string name;
  Type type;
  Node* producer = nullptr;  // null for graph inputs and initializers
  int producer_index = 0;    // which output of `producer`
  Graph* owner = nullptr;
  bool is_graph_input = false;
  Tensor initializer;  // defined for constants (and defaults of graph inputs)

  bool is_constant() const { return initializer.defined() && !is_graph_input; }
};

struct Attribute {
  // kType: a type (ONNX TYPE_PROTO attributes, e.g. Optional's `type`), held in `tp`.
  enum class Kind { kInt, kFloat, kString, kTensor, kGraph, kInts, kFloats, kStrings, kTensors, kGraphs, kType };
  Kind kind = Kind::kInt;
  int64_t i = 0;
  float f = 0.f;
  std::string s;
  Tensor t;
  std::shared_ptr<Graph> g;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<std::string> strings;
  std::vector<Tensor> tensors;
  std::vector<std::shared_ptr<Graph>> graphs;
  Type tp;

  static Attribute make_int(int64_t v) { Attribute a; a.kind = Kind::kInt; a.i = v; return a; }
  static Attribute make_float(float v) { Attribute a; a.kind = Kind::kFloat; a.f = v; return a; }
  static Attribute make_string(std::string v) { Attribute a; a.kind = Kind::kString; a.s = std::move(v); return a; }
  static Attribute make_ints(std::vector<int64_t> v) { Attribute a; a.kind = Kind::kInts; a.ints = std::move(v); return a; }
  static Attribute make_floats(std::vector<float> v) { Attribute a; a.kind = Kind::kFloats; a.floats = std::move(v); return a; }
  static Attribute make_tensor(Tensor v) { Attribute a; a.kind = Kind::kTensor; a.t = std::move(v); return a; }
  static Attribute make_graph(std::shared_ptr<Graph> v) { Attribute a; a.kind = Kind::kGraph; a.g = std::move(v); return a; }
  static Attribute make_type(Type v) { Attribute a; a.kind = Kind::kType; a.tp = std::move(v); return a; }
};
std::string_view attribute_kind_name(Attribute::Kind k);

class Node {
 public:
  std::string op_type;
  std::string domain;  // "" is the default ONNX domain
  std::string name;
  std::vector<Value*> inputs;   // nullptr marks an omitted optional input
  std::vector<Value*> outputs;  // nullptr marks an omitted optional output
  std::map<std::string, Attribute> attrs;
  Graph* owner = nullptr;

  const Attribute* attr(const std::string& key) const {
    auto it = attrs.find(key);
    return it == attrs.end() ? nullptr : &it->second;
  }
  // "Conv" or "com.microsoft::Attention"; with the node name for messages.
  std::string qualified_op() const { return domain.empty() ? op_type : domain + "::" + op_type; }
  std::string display_name() const;
  // True when an attribute holds a graph (If/Loop/Scan bodies, ...).
  bool has_subgraphs() const {
    for (const auto& [k, a] : attrs)
      if (a.g || !a.graphs.empty()) return true;
    return false;
  }
};

class Graph {
 public:
  std::string name = "main";
  std::vector<Value*> inputs;
  std::vector<Value*> outputs;
  std::vector<Value*> constants;  // initializers, in declaration order
  std::vector<std::unique_ptr<Node>> nodes;
  Graph* parent = nullptr;  // enclosing graph for subgraphs

  Value* add_value(std::string name, Type type = {});
  Node* add_node(std::string op_type, std::vector<Value*> inputs, std::vector<Value*> outputs,
                 std::string domain = "");
  // Looks up a value by name in this graph, then in enclosing graphs.
  Value* find(const std::string& name) const;
  Value* find_local(const std::string& name) const;
  const std::vector<std::unique_ptr<Value>>& values() const { return values_; }
  // Every node of this graph and of nested subgraphs, recursively.
  size_t node_count_recursive() const;

 private:
  friend class GraphEditor;  // ir/rewrite.h: removal and renaming for passes
  std::vector<std::unique_ptr<Value>> values_;
  std::map<std::string, Value*> by_name_;
};

// Values that the subgraphs of `n` (If branches, Loop/Scan bodies, recursively) read from
// enclosing graphs, in first-use order: what a body needs besides its own inputs.
std::vector<Value*> captured_values(const Node& n);
// The same for one body.
std::vector<Value*> captured_values(const Graph& body);
// Bytes of g's initializers (constants and inputs with defaults; not its subgraphs').
int64_t initializer_bytes(const Graph& g);

struct Model {
  int64_t ir_version = 8;
  std::map<std::string, int64_t> opsets;  // domain ("" = ai.onnx) -> version
  std::string producer_name;
  std::string producer_version;
  std::map<std::string, std::string> metadata;
  std::shared_ptr<Graph> graph;
  std::string path;  // file it came from, for messages

  int64_t opset(const std::string& domain) const {
    auto it = opsets.find(domain == "ai.onnx" ? "" : domain);
    return it == opsets.end() ? 0 : it->second;
  }
};

}  // namespace kiln
