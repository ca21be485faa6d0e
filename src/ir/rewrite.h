// Graph rewriting support for passes: use lists, replacing uses, removing nodes and dead
// values, renaming, and restoring topological order after nodes were appended.
#pragma once

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"

namespace kiln {

// Consumers of every value used by `g`'s nodes, including uses inside nested subgraphs
// (attributed to the node that owns the subgraph).
struct UseMap {
  std::unordered_map<const Value*, std::vector<Node*>> users;
  size_t count(const Value* v) const {
    auto it = users.find(v);
    return it == users.end() ? 0 : it->second.size();
  }
  const std::vector<Node*>& of(const Value* v) const;
};
UseMap compute_uses(const Graph& g);
bool is_graph_output(const Graph& g, const Value* v);
// Applies `rewrite` to every subgraph of `g` (innermost first), then to `g`; true when any
// call returned true.
bool rewrite_graphs(Graph& g, const std::function<bool(Graph&)>& rewrite);

class GraphEditor {
 public:
  explicit GraphEditor(Graph& g) : g_(g) {}

  // Replaces every use of `from` (node inputs here and in nested subgraphs, graph outputs) by
  // `to`. When `from` is a graph output and `to` is a plain intermediate, `to` takes over
  // from's name so that the model's output names do not change.
  void replace_all_uses(Value* from, Value* to);
  // Removes nodes for which `pred` is true (their outputs must be unused by then).
  size_t remove_nodes_if(const std::function<bool(const Node&)>& pred);
  // Drops values that are not inputs, outputs, constants or produced by a node.
  void erase_dead_values();
  void rename(Value* v, const std::string& name);
  // A fresh name "<base>_k" not used in this graph or its enclosing graphs.
  std::string unique_name(const std::string& base);
  // Reorders nodes topologically (stable for nodes that are already in order).
  void sort_topologically();

  // A new constant of this graph holding `t`, named unique_name(base).
  Value* add_constant(Tensor t, const std::string& base);
  // A 1-D int64 constant (shapes, axes, pads).
  Value* add_ints(const std::vector<int64_t>& values, const std::string& base);
  // A new node with one new output of type `type`, named unique_name(base).
  Node* add_node(const std::string& op_type, std::vector<Value*> inputs, Type type, const std::string& base);
  // Lowering rewrites: calls rewrite(n) on each default-domain `op_type` node there is now;
  // rewrite either leaves the node alone and returns false, or appends its replacement and
  // reroutes the node's uses (replace_all_uses) and returns true. Then the replaced nodes and the
  // values only they used go, and the order is restored. Returns whether anything was rewritten.
  bool rewrite_nodes(const std::string& op_type, const std::function<bool(Node&)>& rewrite);

 private:
  bool is_graph_output_elsewhere(const Value* v) const;
  Graph& g_;
  int counter_ = 0;
};

}  // namespace kiln
