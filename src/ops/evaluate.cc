// evaluate_node: a node's reference kernel on explicit inputs (see evaluate.h).
#include "ops/evaluate.h"

#include <random>

#include "ops/op_util.h"

namespace kiln {

std::vector<RtValue> evaluate_node(const Node& node, const OpSchema& schema, int64_t opset,
                                   const std::vector<const RtValue*>& inputs) {
  std::mt19937_64 rng(0);
  KernelContext::SubgraphRunner no_subgraphs = [&node](const Graph&, const std::vector<RtValue>&)
      -> std::vector<RtValue> {
    throw Error(ErrorKind::kInternal, "evaluate_node cannot run subgraphs of " + node.display_name());
  };
  return evaluate_node(node, schema, opset, inputs, no_subgraphs, &rng);
}

std::vector<RtValue> evaluate_node(const Node& node, const OpSchema& schema, int64_t opset,
                                   const std::vector<const RtValue*>& inputs,
                                   const KernelContext::SubgraphRunner& runner, std::mt19937_64* rng) {
  KILN_CHECK(schema.kernel != nullptr);
  std::vector<RtValue> converted;  // f32 copies of half inputs; reserved so pointers stay valid
  converted.reserve(inputs.size());
  std::vector<const RtValue*> ins;
  ins.reserve(inputs.size());
  DType half_type = DType::kUndefined;
  for (const RtValue* r : inputs) {
    if (r && schema.half_via_float && r->is_tensor() &&
        (r->tensor.dtype() == DType::kFloat16 || r->tensor.dtype() == DType::kBFloat16)) {
      if (half_type == DType::kUndefined) half_type = r->tensor.dtype();
      converted.emplace_back(convert_tensor(r->tensor, DType::kFloat32));
      r = &converted.back();
    }
    ins.push_back(r);
  }
  std::vector<RtValue> outs(node.outputs.size());
  KernelContext ctx(node, opset, std::move(ins), &outs, runner, rng);
  schema.kernel(ctx);
  if (half_type != DType::kUndefined)
    for (RtValue& r : outs)
      if (r.is_tensor() && r.tensor.dtype() == DType::kFloat32) r.tensor = convert_tensor(r.tensor, half_type);
  return outs;
}

}  // namespace kiln
