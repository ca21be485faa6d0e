// Graph construction and lookup.
#include "ir/graph.h"

#include <algorithm>

#include "core/error.h"

namespace kiln {

bool Type::operator==(const Type& o) const {
  if (kind != o.kind) return false;
  if (kind != Kind::kTensor) return (elem && o.elem) ? *elem == *o.elem : elem == o.elem;
  return dtype == o.dtype && shape == o.shape;
}

std::string to_string(const Type& t) {
  switch (t.kind) {
    case Type::Kind::kSequence: return "seq<" + (t.elem ? to_string(*t.elem) : "?") + ">";
    case Type::Kind::kOptional: return "opt<" + (t.elem ? to_string(*t.elem) : "?") + ">";
    case Type::Kind::kTensor: break;
  }
  std::string out = t.dtype == DType::kUndefined ? "?" : std::string(dtype_name(t.dtype));
  return out + (t.shape ? to_string(*t.shape) : "[...]");
}

std::string_view attribute_kind_name(Attribute::Kind k) {
  switch (k) {
    case Attribute::Kind::kInt: return "int";
    case Attribute::Kind::kFloat: return "float";
    case Attribute::Kind::kString: return "string";
    case Attribute::Kind::kTensor: return "tensor";
    case Attribute::Kind::kGraph: return "graph";
    case Attribute::Kind::kInts: return "ints";
    case Attribute::Kind::kFloats: return "floats";
    case Attribute::Kind::kStrings: return "strings";
    case Attribute::Kind::kTensors: return "tensors";
    case Attribute::Kind::kGraphs: return "graphs";
    case Attribute::Kind::kType: return "type";
  }
  return "?";
}

std::string Node::display_name() const {
  if (!name.empty()) return name;
  if (!outputs.empty() && outputs[0]) return "<producing " + outputs[0]->name + ">";
  return "<unnamed>";
}

Value* Graph::add_value(std::string name, Type type) {
  auto v = std::make_unique<Value>();
  v->name = std::move(name);
  v->type = std::move(type);
  v->owner = this;
  Value* raw = v.get();
  if (!raw->name.empty()) by_name_[raw->name] = raw;
  values_.push_back(std::move(v));
  return raw;
}

Node* Graph::add_node(std::string op_type, std::vector<Value*> inputs, std::vector<Value*> outputs,
                      std::string domain) {
  auto n = std::make_unique<Node>();
  n->op_type = std::move(op_type);
  n->domain = std::move(domain);
  n->inputs = std::move(inputs);
  n->outputs = std::move(outputs);
  n->owner = this;
  for (size_t i = 0; i < n->outputs.size(); ++i) {
    if (!n->outputs[i]) continue;
    n->outputs[i]->producer = n.get();
    n->outputs[i]->producer_index = static_cast<int>(i);
  }
  nodes.push_back(std::move(n));
  return nodes.back().get();
}

Value* Graph::find_local(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

Value* Graph::find(const std::string& name) const {
  for (const Graph* g = this; g; g = g->parent)
    if (Value* v = g->find_local(name)) return v;
  return nullptr;
}

namespace {

// True when v belongs to g or to a graph nested in it.
bool defined_within(const Value* v, const Graph* g) {
  for (const Graph* o = v->owner; o; o = o->parent)
    if (o == g) return true;
  return false;
}

void collect_captures(const Graph& g, const Graph* body, std::vector<Value*>& out) {
  auto take = [&](Value* v) {
    if (v && !defined_within(v, body) && std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  };
  for (const auto& n : g.nodes) {
    for (Value* v : n->inputs) take(v);
    for (const auto& [k, a] : n->attrs) {
      if (a.g) collect_captures(*a.g, body, out);
      for (const auto& sg : a.graphs) collect_captures(*sg, body, out);
    }
  }
  for (Value* v : g.outputs) take(v);
}

}  // namespace

int64_t initializer_bytes(const Graph& g) {
  int64_t total = 0;
  for (const Value* v : g.inputs)
    if (v->initializer.defined()) total += static_cast<int64_t>(v->initializer.nbytes());
  for (const Value* v : g.constants)
    if (v->initializer.defined()) total += static_cast<int64_t>(v->initializer.nbytes());
  return total;
}

std::vector<Value*> captured_values(const Graph& body) {
  std::vector<Value*> out;
  collect_captures(body, &body, out);
  return out;
}

std::vector<Value*> captured_values(const Node& n) {
  std::vector<Value*> out;
  for (const auto& [k, a] : n.attrs) {
    if (a.g) collect_captures(*a.g, a.g.get(), out);
    for (const auto& sg : a.graphs) collect_captures(*sg, sg.get(), out);
  }
  return out;
}

size_t Graph::node_count_recursive() const {
  size_t n = nodes.size();
  for (const auto& node : nodes)
    for (const auto& [key, a] : node->attrs) {
      if (a.g) n += a.g->node_count_recursive();
      for (const auto& g : a.graphs) n += g->node_count_recursive();
    }
  return n;
}

}  // namespace kiln
