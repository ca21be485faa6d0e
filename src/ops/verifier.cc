// IR verifier (see verifier.h).
#include "ops/verifier.h"

#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "ir/text.h"
#include "ops/registry.h"

namespace kiln {
namespace {

constexpr int kMaxDepth = 256;

std::string ref(const Value* v) { return v ? "%" + v->name : "_"; }

std::string range_text(int lo, int hi) {
  if (hi < 0) return "at least " + std::to_string(lo);
  if (lo == hi) return std::to_string(lo);
  return std::to_string(lo) + " to " + std::to_string(hi);
}

class Verifier {
 public:
  Verifier(const Model& m, const VerifyOptions& o)
      : m_(m), o_(o), reg_(o.registry ? *o.registry : OpRegistry::global()) {}

  void run() {
    if (!m_.graph) fail(nullptr, "model has no graph");
    graph(*m_.graph, "@" + m_.graph->name, 0);
  }

 private:
  using ValueSet = std::unordered_set<const Value*>;

  [[noreturn]] void fail(const Node* n, const std::string& msg) const {
    ErrorLocation loc;
    loc.file = m_.path;
    if (n) {
      loc.node = n->display_name();
      loc.op = n->qualified_op();
    }
    throw Error(ErrorKind::kInvalidModel, msg + (path_.empty() ? "" : " (in graph " + path_ + ")"), loc);
  }

  bool visible(const Value* v, const ValueSet& local) const {
    if (local.count(v)) return true;
    for (const ValueSet* s : scopes_)
      if (s->count(v)) return true;
    return false;
  }

  void check_type(const Type& t, const Value* v, const Node* n, int depth = 0) const {
    if (depth > kMaxDepth) fail(n, "type of " + ref(v) + " is nested too deeply");
    switch (t.kind) {
      case Type::Kind::kSequence:
      case Type::Kind::kOptional:
        if (!t.elem) return;  // element type unknown
        check_type(*t.elem, v, n, depth + 1);
        return;
      case Type::Kind::kTensor:
        break;
      default:
        fail(n, "value " + ref(v) + " has an invalid type kind");
    }
    if (dtype_name(t.dtype) == "invalid")
      fail(n, "value " + ref(v) + " has an invalid element type code " +
                  std::to_string(static_cast<int>(t.dtype)));
  }

  void check_initializer(const Value* v, const Node* n) const {
    const Tensor& init = v->initializer;
    const Type& t = v->type;
    if (t.kind != Type::Kind::kTensor)
      fail(n, "value " + ref(v) + " has an initializer but a non-tensor type " + print_type(t));
    bool ok = t.dtype == DType::kUndefined || t.dtype == init.dtype();
    if (ok && t.shape) {
      ok = t.shape->rank() == static_cast<size_t>(init.rank());
      for (size_t i = 0; ok && i < t.shape->rank(); ++i)
        if (t.shape->dims[i].known() && t.shape->dims[i].value != init.dims()[i]) ok = false;
    }
    if (!ok)
      fail(n, "type " + print_type(t) + " of " + ref(v) + " does not match its initializer " +
                  std::string(dtype_name(init.dtype())) + dims_to_string(init.dims()));
  }

  void check_schema(const Node& n) const {
    const int64_t opset = m_.opset(n.domain);
    const OpSchema* s = opset > 0 ? reg_.find(n.domain, n.op_type, opset) : nullptr;
    if (!s) {
      if (!o_.require_known_ops) return;
      if (opset <= 0) {
        std::string d = canonical_domain(n.domain);
        fail(&n, "the model imports no opset for domain '" + (d.empty() ? std::string("ai.onnx") : d) +
                     "' used by op " + n.qualified_op());
      }
      if (reg_.knows(n.domain, n.op_type))
        fail(&n, "op " + n.qualified_op() + " is not available in opset " + std::to_string(opset) +
                     " (first version " + std::to_string(reg_.first_version(n.domain, n.op_type)) + ")");
      fail(&n, "unknown op " + n.qualified_op() + " (opset " + std::to_string(opset) + ")");
    }
    // Counts are positions (an omitted optional input still takes its slot: the schema has no
    // per-input optionality, e.g. Loop's M and cond are optional but positional). Trailing
    // omitted inputs do not count against the maximum.
    size_t n_in = n.inputs.size();
    while (n_in > 0 && !n.inputs[n_in - 1]) --n_in;
    const auto lo_in = static_cast<size_t>(std::max(0, s->min_inputs));
    if (n.inputs.size() < lo_in || (s->max_inputs >= 0 && n_in > static_cast<size_t>(s->max_inputs)))
      fail(&n, "op " + n.qualified_op() + " takes " + range_text(s->min_inputs, s->max_inputs) +
                   " inputs, got " + std::to_string(n.inputs.size()));
    const size_t n_out = n.outputs.size();
    const auto lo_out = static_cast<size_t>(std::max(0, s->min_outputs));
    if (n_out < lo_out || (s->max_outputs >= 0 && n_out > static_cast<size_t>(s->max_outputs)))
      fail(&n, "op " + n.qualified_op() + " has " + range_text(s->min_outputs, s->max_outputs) +
                   " outputs, got " + std::to_string(n_out));
  }

  void graph(const Graph& g, const std::string& path, int depth) {
    if (depth > kMaxDepth) fail(nullptr, "subgraphs nested too deeply (or a graph contains itself)");
    const std::string saved_path = path_;
    path_ = path;
    ValueSet defined;
    std::unordered_map<std::string, const Value*> names;

    auto define = [&](const Value* v, const Node* n, const char* what) {
      if (defined.count(v)) fail(n, "value " + ref(v) + " is defined more than once");
      if (v->owner != &g) fail(n, what + std::string(" ") + ref(v) + " belongs to another graph");
      if (!v->name.empty()) {
        auto [it, fresh] = names.emplace(v->name, v);
        if (!fresh) fail(n, "duplicate definition of value " + ref(v));
      }
      check_type(v->type, v, n);
      defined.insert(v);
    };

    for (const Value* v : g.inputs) {
      if (!v) fail(nullptr, "graph has a null input");
      define(v, nullptr, "graph input");
      if (v->producer) fail(v->producer, "graph input " + ref(v) + " is also produced by a node");
      if (v->initializer.defined()) check_initializer(v, nullptr);
    }
    for (const Value* v : g.constants) {
      if (!v) fail(nullptr, "graph has a null constant");
      if (!v->initializer.defined()) fail(nullptr, "constant " + ref(v) + " has no data");
      if (v->is_graph_input && defined.count(v)) continue;  // default of a graph input
      define(v, nullptr, "constant");
      if (v->producer) fail(v->producer, "constant " + ref(v) + " is also produced by a node");
      check_initializer(v, nullptr);
    }
    for (const auto& up : g.nodes) {
      if (!up) fail(nullptr, "graph has a null node");
      const Node& n = *up;
      if (n.owner != &g) fail(&n, "node belongs to another graph");
      check_schema(n);
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        const Value* v = n.inputs[i];
        if (!v || visible(v, defined)) continue;
        const std::string what = "input #" + std::to_string(i) + " " + ref(v);
        if (v->producer == &n) fail(&n, what + " is the node's own output (cycle)");
        if (v->producer && v->producer->owner == &g)
          fail(&n, what + " is produced by a later node (" + v->producer->display_name() +
                       "): cycle or nodes not in topological order");
        if (v->producer && v->owner != &g)
          fail(&n, what + " is used before its definition in an enclosing graph");
        fail(&n, what + " is used but not defined in this graph or an enclosing one");
      }
      for (const auto& [key, a] : n.attrs) {
        auto sub = [&](const std::shared_ptr<Graph>& sg, const std::string& label) {
          if (!sg) fail(&n, "graph attribute '" + label + "' is empty");
          if (sg->parent != &g)
            fail(&n, "subgraph '" + label + "' does not have its enclosing graph as parent");
          scopes_.push_back(&defined);
          graph(*sg, path + "/" + label + "@" + sg->name, depth + 1);
          scopes_.pop_back();
          path_ = path;
        };
        if (a.kind == Attribute::Kind::kGraph) sub(a.g, key);
        if (a.kind == Attribute::Kind::kGraphs)
          for (size_t i = 0; i < a.graphs.size(); ++i) sub(a.graphs[i], key + "[" + std::to_string(i) + "]");
      }
      for (size_t i = 0; i < n.outputs.size(); ++i) {
        const Value* v = n.outputs[i];
        if (!v) continue;
        if (v->producer != &n || v->producer_index != static_cast<int>(i))
          fail(&n, "output #" + std::to_string(i) + " " + ref(v) + " does not record this node as its producer");
        define(v, &n, "output");
      }
    }
    for (size_t i = 0; i < g.outputs.size(); ++i) {
      const Value* v = g.outputs[i];
      if (!v) fail(nullptr, "graph output #" + std::to_string(i) + " is null");
      if (!visible(v, defined)) fail(nullptr, "graph output " + ref(v) + " is not defined");
    }
    path_ = saved_path;
  }

  const Model& m_;
  const VerifyOptions& o_;
  const OpRegistry& reg_;
  std::vector<const ValueSet*> scopes_;
  std::string path_;
};

}  // namespace

void verify_model(const Model& m, const VerifyOptions& opts) { Verifier(m, opts).run(); }

}  // namespace kiln
