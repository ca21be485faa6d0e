// kiln::External (see external.h): registration, reference kernel, inference through the body.
#include "ops/external.h"

#include "ops/families.h"
#include "ops/registry.h"

namespace kiln {

bool is_external(const Node& n) { return n.domain == kExternalDomain && n.op_type == kExternalOp; }

std::unordered_map<const Value*, Type> infer_external_body(const Node& external, const std::vector<Type>& inputs,
                                                           const std::vector<const Tensor*>& constants) {
  AttrReader attrs(external);
  const Graph& body = *attrs.attr_graph("body");
  const int64_t opset = attrs.attr_int("opset", 0);
  std::unordered_map<const Value*, Type> types;
  std::unordered_map<const Value*, const Tensor*> known;
  for (size_t i = 0; i < body.inputs.size() && i < inputs.size(); ++i) {
    types[body.inputs[i]] = inputs[i];
    if (i < constants.size() && constants[i]) known[body.inputs[i]] = constants[i];
  }
  const auto type_of = [&](const Value* v) {
    auto it = types.find(v);
    return it != types.end() ? it->second : v->type;
  };
  for (const auto& n : body.nodes) {
    const int64_t node_opset = n->domain.empty() ? opset : 1;
    const OpSchema* schema = OpRegistry::global().find(n->domain, n->op_type, node_opset);
    std::vector<Type> in_types;
    std::vector<const Tensor*> values;
    for (const Value* v : n->inputs) {
      in_types.push_back(v ? type_of(v) : Type());
      auto k = v ? known.find(v) : known.end();
      values.push_back(v && v->is_constant() ? &v->initializer : k != known.end() ? k->second : nullptr);
    }
    std::vector<Type> out_types;
    if (schema && schema->infer) {
      InferContext ctx(*n, node_opset, std::move(in_types), std::move(values));
      schema->infer(ctx);
      out_types = ctx.output_types();
    }
    for (size_t k = 0; k < n->outputs.size(); ++k) {
      const Value* v = n->outputs[k];
      if (!v) continue;
      // The inferred type where it has static dims, else the declared one where that does (a
      // Reshape to a target known only at run time, declared with its output shape).
      const auto is_static = [](const Type& t) {
        return t.kind == Type::Kind::kTensor && t.dtype != DType::kUndefined && t.shape && t.shape->is_static();
      };
      const bool inferred = k < out_types.size() && out_types[k].kind == Type::Kind::kTensor &&
                            out_types[k].dtype != DType::kUndefined && out_types[k].shape;
      types[v] = inferred && (is_static(out_types[k]) || !is_static(v->type)) ? out_types[k] : v->type;
    }
  }
  return types;
}

namespace {

void external_kernel(KernelContext& ctx) {
  const Graph& body = *ctx.attr_graph("body");
  std::vector<RtValue> args;
  for (int i = 0; i < ctx.num_inputs(); ++i) args.push_back(ctx.input_value(i));
  if (args.size() != body.inputs.size() || body.outputs.size() != static_cast<size_t>(ctx.num_outputs()))
    ctx.fail(ErrorKind::kInvalidModel, "the region's body has " + std::to_string(body.inputs.size()) + " inputs and " +
                                           std::to_string(body.outputs.size()) + " outputs, the node " +
                                           std::to_string(args.size()) + " and " + std::to_string(ctx.num_outputs()));
  std::vector<RtValue> outs = ctx.run_subgraph(body, args);
  for (size_t i = 0; i < outs.size(); ++i) ctx.set_output_value(static_cast<int>(i), std::move(outs[i]));
}

void infer_external(InferContext& ctx) {
  std::vector<Type> inputs;
  std::vector<const Tensor*> constants;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    inputs.push_back(ctx.has_input(i) ? ctx.input_type(i) : Type());
    constants.push_back(ctx.constant_input(i));
  }
  const std::unordered_map<const Value*, Type> types = infer_external_body(ctx.node(), inputs, constants);
  const Graph& body = *ctx.attr_graph("body");
  for (size_t i = 0; i < body.outputs.size() && static_cast<int>(i) < ctx.num_outputs(); ++i) {
    auto it = types.find(body.outputs[i]);
    ctx.set_output_type(static_cast<int>(i), it != types.end() ? it->second : body.outputs[i]->type);
  }
}

}  // namespace

void register_external_ops(OpRegistry& r) {
  r.add(kExternalOp, kExternalDomain)
      .since(1)
      .inputs(0, -1)
      .outputs(1, -1)
      .takes_subgraphs()
      .run(external_kernel)
      .shape(infer_external);
}

}  // namespace kiln
