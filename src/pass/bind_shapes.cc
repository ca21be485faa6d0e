// bind-shapes: shape inference with one call's input dims bound, plus compile-time evaluation of
// the values the shapes decide. See bind_shapes.h.
#include "pass/bind_shapes.h"

#include <exception>

#include "ops/evaluate.h"
#include "ops/registry.h"
#include "pass/shape_inference.h"

namespace kiln {
namespace {

class Binder {
 public:
  Binder(const Model& m, int64_t keep) : m_(m), keep_(keep) {}

  BoundShapes run(const std::vector<RtValue>& feeds, const std::vector<Value*>& captures) {
    const Graph& g = *m_.graph;
    // S1: inputs and captured values (dims only: their values are the caller's data), constants.
    std::vector<const Value*> inputs(g.inputs.begin(), g.inputs.end());
    inputs.insert(inputs.end(), captures.begin(), captures.end());
    for (size_t i = 0; i < inputs.size(); ++i)
      if (!bind_input(*inputs[i], i < feeds.size() ? feeds[i] : RtValue())) return std::move(out_);
    for (const Value* c : g.constants) bind_constant(*c);
    // S2: every node in order, by evaluation where all its inputs are known, else by inference.
    for (const auto& n : g.nodes)
      if (!bind_node(*n)) return std::move(out_);
    out_.complete = true;
    return std::move(out_);
  }

 private:
  bool stop(const Node* n, const std::string& why) {
    out_.stopped_at = n ? "node '" + n->display_name() + "' (" + n->qualified_op() + "): " + why : why;
    return false;
  }

  bool bind_input(const Value& in, const RtValue& feed) {
    if (feed.is_none() && in.initializer.defined()) {
      bind_constant(in);
      return true;
    }
    if (!feed.is_tensor()) return stop(nullptr, "input '" + in.name + "' is not a tensor");
    const Tensor& x = feed.tensor;
    // A symbol bound to two sizes is an input error that a run reports with its node.
    if (in.type.shape && in.type.shape->rank() == static_cast<size_t>(x.rank()))
      for (size_t k = 0; k < in.type.shape->rank(); ++k) {
        const std::string& sym = in.type.shape->dims[k].symbol;
        if (sym.empty()) continue;
        auto [it, fresh] = symbols_.emplace(sym, x.dims()[k]);
        if (!fresh && it->second != x.dims()[k])
          return stop(nullptr, "dim '" + sym + "' is " + std::to_string(it->second) + " in one input and " +
                                   std::to_string(x.dims()[k]) + " in '" + in.name + "'");
      }
    out_.values[&in] = BoundValue{x.dtype(), x.dims(), Tensor()};
    return true;
  }

  void bind_constant(const Value& c) {
    out_.values[&c] = BoundValue{c.initializer.dtype(), c.initializer.dims(), c.initializer};
  }

  bool bind_node(const Node& n) {
    const int64_t opset = m_.opset(n.domain);
    const OpRegistry& reg = OpRegistry::global();
    const OpSchema* schema = reg.find(n.domain, n.op_type, opset);
    if (!schema) return stop(&n, "no schema for opset " + std::to_string(opset));
    if (n.has_subgraphs()) return stop(&n, "control flow is planned at run time");
    if (schema->data_dependent_shape) return stop(&n, "its output shape depends on input values");
    std::vector<Type> types;
    std::vector<const Tensor*> constants;
    bool all_values = true;
    for (const Value* v : n.inputs) {
      if (!v) {
        types.emplace_back();
        constants.push_back(nullptr);
        continue;
      }
      auto it = out_.values.find(v);
      if (it == out_.values.end() && v->is_constant()) {  // an enclosing graph's constant (bodies)
        bind_constant(*v);
        it = out_.values.find(v);
      }
      if (it == out_.values.end()) return stop(&n, "input '" + v->name + "' has no known shape");
      const BoundValue& b = it->second;
      types.push_back(Type::tensor(b.dtype, Shape::of(b.dims)));
      constants.push_back(b.value.defined() ? &b.value : nullptr);
      all_values &= b.value.defined();
    }
    std::vector<Type> inferred;
    if (schema->infer) {
      InferContext ctx(n, opset, types, constants);
      try {
        schema->infer(ctx);
      } catch (const std::exception& e) {
        return stop(&n, std::string("shape inference failed: ") + e.what());
      }
      inferred = ctx.output_types();
    }
    std::vector<Tensor> computed(n.outputs.size());
    if (n.domain.empty() && (n.op_type == "Shape" || n.op_type == "Size") && n.inputs.size() == 1 && n.inputs[0]) {
      computed[0] = shape_op_value(n, opset, out_.values[n.inputs[0]].dims);
    } else if (all_values && !schema->random && schema->kernel && small(inferred)) {
      if (!evaluate(n, *schema, opset, constants, computed)) return false;
    }
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      const Value* v = n.outputs[i];
      if (!v) continue;
      if (computed[i].defined()) {
        const Tensor& t = computed[i];
        out_.values[v] = BoundValue{t.dtype(), t.dims(), t.numel() <= keep_ ? t : Tensor()};
        continue;
      }
      if (i >= inferred.size()) return stop(&n, "no shape inference for output '" + v->name + "'");
      const Type& t = inferred[i];
      if (t.kind != Type::Kind::kTensor || t.dtype == DType::kUndefined || !t.shape || !t.shape->is_static())
        return stop(&n, "output '" + v->name + "' is inferred as " + to_string(t));
      if (!agrees(v->type, t))
        return stop(&n,
                    "output '" + v->name + "' is declared " + to_string(v->type) + " but inferred as " + to_string(t));
      out_.values[v] = BoundValue{t.dtype, t.shape->sizes(), Tensor()};
    }
    return true;
  }

  // False when inference already shows an output too large to keep (not worth evaluating).
  bool small(const std::vector<Type>& inferred) const {
    for (const Type& t : inferred) {
      if (t.kind != Type::Kind::kTensor || !t.shape || !t.shape->is_static()) continue;
      double numel = 1;
      for (const Dim& d : t.shape->dims) numel *= static_cast<double>(d.value);
      if (numel > static_cast<double>(keep_)) return false;
    }
    return true;
  }

  bool evaluate(const Node& n, const OpSchema& s, int64_t opset, const std::vector<const Tensor*>& constants,
                std::vector<Tensor>& computed) {
    std::vector<RtValue> in_values;
    in_values.reserve(constants.size());
    std::vector<const RtValue*> ins;
    for (const Tensor* c : constants) {
      if (!c) {
        ins.push_back(nullptr);
        continue;
      }
      in_values.emplace_back(*c);
      ins.push_back(&in_values.back());
    }
    std::vector<RtValue> outs;
    try {
      outs = evaluate_node(n, s, opset, ins);
    } catch (const std::exception& e) {
      return stop(&n, std::string("evaluation failed: ") + e.what());
    }
    for (size_t i = 0; i < n.outputs.size() && i < outs.size(); ++i) {
      if (!n.outputs[i]) continue;
      if (!outs[i].is_tensor() || outs[i].optional)
        return stop(&n, "output '" + n.outputs[i]->name + "' is not a tensor");
      computed[i] = outs[i].tensor;
    }
    return true;
  }

  // The declared type (from the model or the pass pipeline) does not contradict the bound one.
  static bool agrees(const Type& declared, const Type& bound) {
    if (declared.kind != Type::Kind::kTensor) return false;
    if (declared.dtype != DType::kUndefined && declared.dtype != bound.dtype) return false;
    if (!declared.shape) return true;
    if (declared.shape->rank() != bound.shape->rank()) return false;
    for (size_t k = 0; k < declared.shape->rank(); ++k) {
      const Dim& d = declared.shape->dims[k];
      if (d.known() && d.value != bound.shape->dims[k].value) return false;
    }
    return true;
  }

  const Model& m_;
  int64_t keep_;
  BoundShapes out_;
  std::unordered_map<std::string, int64_t> symbols_;
};

}  // namespace

BoundShapes bind_shapes(const Model& m, const std::vector<RtValue>& feeds, int64_t keep_max_elements,
                        const std::vector<Value*>& captures) {
  return Binder(m, keep_max_elements).run(feeds, captures);
}

}  // namespace kiln
