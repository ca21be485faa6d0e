// bind-shapes: shape inference with one call's input dims bound, plus compile-time evaluation of
// the values the shapes decide. See bind_shapes.h.
#include "pass/bind_shapes.h"

#include "ops/external.h"

#include <algorithm>
#include <exception>

#include "ops/evaluate.h"
#include "ops/registry.h"
#include "pass/fuse_epilogues.h"
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
    // A tiny input's value (a sample rate, a flag) may pick an If branch for this call's plan;
    // never a plan constant (the plan serves every value of these shapes).
    if (x.numel() <= kSpeculativeMaxElements && x.dtype() != DType::kString) speculative_[&in] = x;
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
    // kiln::External infers through its body like any op (ops/external.cc).
    if (n.has_subgraphs() && !is_external(n)) return bind_control_flow(n, opset);
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
    } else if (!schema->random && schema->kernel) {
      speculate(n, *schema, opset, constants);
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

  // If: the branch the condition picks when its value is known here, else both branches, which
  // must then agree on every output's dtype and dims. Scan (opset 9+): the body with the
  // initial states and one slice of each scan input bound; the states must keep their dims.
  // Loop: see bind_loop. Others (Scan opset 8) stop.
  bool bind_control_flow(const Node& n, int64_t opset) {
    if (!n.domain.empty() && n.domain != "ai.onnx") return stop(&n, "control flow outside ai.onnx is planned at run time");
    if (n.op_type == "If") return bind_if(n);
    if (n.op_type == "Scan" && opset >= 9) return bind_scan(n);
    if (n.op_type == "Loop") return bind_loop(n);
    return stop(&n, "control flow is planned at run time");
  }

  // Loop: the body with the carried values bound, which must keep their dims. Without scan
  // outputs that is all (any trip count gives the same shapes); with them the trip count must be
  // a plan constant and the loop must not stop early (no condition, or a constant true one that
  // the body passes on unchanged).
  bool bind_loop(const Node& n) {
    const Attribute* body_attr = n.attr("body");
    const Graph* body = body_attr ? body_attr->g.get() : nullptr;
    if (!body || n.inputs.size() < 2) return stop(&n, "Loop without its body");
    const size_t n_carried = n.inputs.size() - 2;
    if (body->inputs.size() != n_carried + 2 || body->outputs.size() < n_carried + 1)
      return stop(&n, "Loop's body does not fit its inputs");
    const size_t n_scan = body->outputs.size() - 1 - n_carried;
    std::vector<BoundValue> body_inputs{BoundValue{DType::kInt64, {}, Tensor()}, BoundValue{DType::kBool, {}, Tensor()}};
    for (size_t i = 0; i < n_carried; ++i) {
      BoundValue v = out_.values[n.inputs[2 + i]];
      v.value = Tensor();
      body_inputs.push_back(std::move(v));
    }
    int64_t trips = -1;
    if (n_scan > 0) {
      const Value* m = n.inputs[0];
      const Value* cond = n.inputs[1];
      const BoundValue* mb = m ? &out_.values[m] : nullptr;
      const BoundValue* cb = cond ? &out_.values[cond] : nullptr;
      if (!mb || !mb->value.defined() || mb->value.numel() != 1)
        return stop(&n, "a Loop with scan outputs needs its trip count, which is known only at run time");
      if (cb && (!cb->value.defined() || cb->value.numel() != 1 || cb->value.get_double(0) == 0))
        return stop(&n, "a Loop's condition is known only at run time");
      if (!passes_condition_on(*body))
        return stop(&n, "the Loop's body computes its condition: it may stop early");
      trips = std::max<int64_t>(0, static_cast<int64_t>(mb->value.get_double(0)));
    }
    if (!bind_body(n, *body, body_inputs)) return false;
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (!n.outputs[i]) continue;
      BoundValue v = out_.values[body->outputs[1 + i]];
      v.value = Tensor();
      if (i < n_carried) {
        if (v.dtype != body_inputs[2 + i].dtype || v.dims != body_inputs[2 + i].dims)
          return stop(&n, "carried value '" + n.outputs[i]->name + "' changes shape in the body");
      } else {
        v.dims.insert(v.dims.begin(), trips);
      }
      out_.values[n.outputs[i]] = std::move(v);
    }
    return true;
  }

  // The body's condition output is its condition input (through Identity nodes), or a constant
  // true: the loop runs its whole trip count.
  static bool passes_condition_on(const Graph& body) {
    const Value* v = through_identities(body.outputs[0]);
    if (v == body.inputs[1]) return true;
    return v && v->is_constant() && v->initializer.numel() == 1 && v->initializer.get_double(0) != 0;
  }

  // Binds body `g` (inputs `input_types`, its captured values already bound) in this binder's map.
  bool bind_body(const Node& n, const Graph& g, const std::vector<BoundValue>& input_types) {
    if (g.inputs.size() != input_types.size())
      return stop(&n, "body '" + g.name + "' has " + std::to_string(g.inputs.size()) + " inputs, expected " +
                          std::to_string(input_types.size()));
    for (size_t i = 0; i < g.inputs.size(); ++i) out_.values[g.inputs[i]] = input_types[i];
    for (const Value* c : g.constants) bind_constant(*c);
    for (const auto& bn : g.nodes)
      if (!bind_node(*bn)) return false;
    for (const Value* v : g.outputs)
      if (!out_.values.count(v)) return stop(&n, "body output '" + v->name + "' has no known shape");
    return true;
  }

  bool bind_if(const Node& n) {
    const Graph* then_g = n.attr("then_branch") ? n.attr("then_branch")->g.get() : nullptr;
    const Graph* else_g = n.attr("else_branch") ? n.attr("else_branch")->g.get() : nullptr;
    if (!then_g || !else_g || n.inputs.empty() || !n.inputs[0]) return stop(&n, "If without its branches");
    std::vector<const Graph*> branches{then_g, else_g};
    const BoundValue& cond = out_.values[n.inputs[0]];
    bool known = false;  // the condition is a plan constant: the outputs may carry values
    if (cond.value.defined() && cond.value.numel() == 1) {
      branches = {cond.value.get_double(0) != 0 ? then_g : else_g};
      known = true;
    } else if (auto sp = speculative_.find(n.inputs[0]); sp != speculative_.end() && sp->second.numel() == 1) {
      // This call's branch: a later call whose condition picks the other branch with other output
      // shapes is caught by the plan's shape check (PlanShapeMismatch) and replanned.
      branches = {sp->second.get_double(0) != 0 ? then_g : else_g};
    }
    for (const Graph* b : branches) {
      if (b->outputs.size() < n.outputs.size()) return stop(&n, "a branch has fewer outputs than the node");
      if (!bind_body(n, *b, {})) return false;
    }
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (!n.outputs[i]) continue;
      const BoundValue& first = out_.values[branches[0]->outputs[i]];
      for (const Graph* b : branches) {
        const BoundValue& other = out_.values[b->outputs[i]];
        if (other.dtype != first.dtype || other.dims != first.dims)
          return stop(&n, "the branches give output '" + n.outputs[i]->name + "' different shapes");
      }
      out_.values[n.outputs[i]] = BoundValue{first.dtype, first.dims, known ? first.value : Tensor()};
    }
    return true;
  }

  bool bind_scan(const Node& n) {
    const Attribute* body_attr = n.attr("body");
    const Graph* body = body_attr ? body_attr->g.get() : nullptr;
    const Attribute* nsi = n.attr("num_scan_inputs");
    if (!body || !nsi) return stop(&n, "Scan without its body or num_scan_inputs");
    const size_t n_scan_in = static_cast<size_t>(nsi->i);
    if (n_scan_in == 0 || n_scan_in > n.inputs.size() || body->outputs.size() < n.inputs.size() - n_scan_in)
      return stop(&n, "Scan's inputs do not fit its body");
    const size_t n_state = n.inputs.size() - n_scan_in, n_scan_out = body->outputs.size() - n_state;
    auto axes = [&](const char* name, size_t count) {
      const Attribute* a = n.attr(name);
      std::vector<int64_t> v = a ? a->ints : std::vector<int64_t>();
      if (v.empty()) v.assign(count, 0);
      return v;
    };
    const std::vector<int64_t> in_axes = axes("scan_input_axes", n_scan_in);
    const std::vector<int64_t> out_axes = axes("scan_output_axes", n_scan_out);
    if (in_axes.size() != n_scan_in || out_axes.size() != n_scan_out) return stop(&n, "Scan's axes do not fit");
    std::vector<BoundValue> body_inputs;
    for (size_t i = 0; i < n_state; ++i) body_inputs.push_back(out_.values[n.inputs[i]]);
    int64_t len = -1;
    for (size_t j = 0; j < n_scan_in; ++j) {
      BoundValue slice = out_.values[n.inputs[n_state + j]];
      const int64_t rank = static_cast<int64_t>(slice.dims.size());
      const int64_t axis = in_axes[j] < 0 ? in_axes[j] + rank : in_axes[j];
      if (axis < 0 || axis >= rank) return stop(&n, "scan input axis out of range");
      if (len >= 0 && slice.dims[static_cast<size_t>(axis)] != len) return stop(&n, "scan inputs differ in length");
      len = slice.dims[static_cast<size_t>(axis)];
      slice.dims.erase(slice.dims.begin() + axis);
      slice.value = Tensor();
      body_inputs.push_back(std::move(slice));
    }
    if (!bind_body(n, *body, body_inputs)) return false;
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (!n.outputs[i]) continue;
      BoundValue v = out_.values[body->outputs[i]];
      v.value = Tensor();
      if (i < n_state) {
        if (v.dtype != body_inputs[i].dtype || v.dims != body_inputs[i].dims)
          return stop(&n, "state '" + n.outputs[i]->name + "' changes shape in the body");
      } else {
        const int64_t rank = static_cast<int64_t>(v.dims.size()) + 1;
        const int64_t axis = out_axes[i - n_state] < 0 ? out_axes[i - n_state] + rank : out_axes[i - n_state];
        if (axis < 0 || axis >= rank) return stop(&n, "scan output axis out of range");
        v.dims.insert(v.dims.begin() + axis, len);
      }
      out_.values[n.outputs[i]] = std::move(v);
    }
    return true;
  }

  // Tiny values computed from tiny inputs (speculative_), for picking If branches only; nothing
  // is stopped when this fails.
  void speculate(const Node& n, const OpSchema& s, int64_t opset, const std::vector<const Tensor*>& constants) {
    std::vector<const Tensor*> inputs = constants;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (inputs[i] || !n.inputs[i]) continue;
      auto it = speculative_.find(n.inputs[i]);
      if (it == speculative_.end()) return;
      inputs[i] = &it->second;
    }
    try {
      std::vector<RtValue> outs = run_node(n, s, opset, inputs);
      for (size_t i = 0; i < n.outputs.size() && i < outs.size(); ++i)
        if (n.outputs[i] && outs[i].is_tensor() && outs[i].tensor.numel() <= kSpeculativeMaxElements)
          speculative_[n.outputs[i]] = outs[i].tensor;
    } catch (const std::exception&) {
      // Not needed to plan: the run reports it if it matters.
    }
  }

  // The node's reference kernel on `inputs` (null: absent); throws what the kernel throws.
  static std::vector<RtValue> run_node(const Node& n, const OpSchema& s, int64_t opset,
                                       const std::vector<const Tensor*>& inputs) {
    std::vector<RtValue> in_values;
    in_values.reserve(inputs.size());
    std::vector<const RtValue*> ins;
    for (const Tensor* t : inputs) {
      if (!t) {
        ins.push_back(nullptr);
        continue;
      }
      in_values.emplace_back(*t);
      ins.push_back(&in_values.back());
    }
    return evaluate_node(n, s, opset, ins);
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
    std::vector<RtValue> outs;
    try {
      outs = run_node(n, s, opset, constants);
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

  static constexpr int64_t kSpeculativeMaxElements = 16;

  const Model& m_;
  int64_t keep_;
  BoundShapes out_;
  std::unordered_map<const Value*, Tensor> speculative_;
  std::unordered_map<std::string, int64_t> symbols_;
};

}  // namespace

BoundShapes bind_shapes(const Model& m, const std::vector<RtValue>& feeds, int64_t keep_max_elements,
                        const std::vector<Value*>& captures) {
  return Binder(m, keep_max_elements).run(feeds, captures);
}

}  // namespace kiln
