// fold-scale-bias: folds a Mul by a constant per-output-channel (or scalar) factor, or an Add of a
// constant per-channel (or scalar) bias, that directly follows a Conv, ConvTranspose or Gemm (Mul
// only: MatMul) into the producer's weight and bias; a missing bias input is created.
// Requires: the producer's output used only by that Mul/Add; constant f32/f64 weights and bias;
// the constant broadcasts without changing the output shape and varies only along the output
// channel axis (NCHW Conv: [C,1,1] or [1,C,1,1]; Gemm/MatMul: [N] or [1,N]).
// Guarantees: outputs unchanged up to rounding; anything that is not per-channel stays.
// Tests: tests/pass/golden/fold-scale-bias/*.kir
#include "pass/affine_fold.h"
#include "pass/passes.h"

namespace kiln {
namespace {

// Tries to fold the Mul/Add `n` into the producer of one of its operands.
bool try_fold(Graph& g, GraphEditor& ed, const UseMap& uses, Node& n) {
  const bool mul = n.op_type == "Mul";
  if ((!mul && n.op_type != "Add") || !n.domain.empty() || n.inputs.size() != 2 ||
      n.outputs.size() != 1)
    return false;
  for (int side = 0; side < 2; ++side) {
    Value* data = n.inputs[side];
    Value* konst = n.inputs[1 - side];
    if (!data || !konst || !konst->is_constant()) continue;
    auto p = match_linear_producer(g, uses, data);
    if (!p || (!mul && p->kind == LinearProducer::Kind::kMatMul)) continue;
    const Tensor& c = konst->initializer;
    if (c.dtype() != p->node->inputs[1]->initializer.dtype() || !is_per_channel(*p, c)) continue;
    std::vector<double> values = channel_values(*p, c);
    Value* result = mul ? fold_affine(g, ed, *p, values, {})
                        : fold_affine(g, ed, *p, std::vector<double>(values.size(), 1.0), values);
    if (!result) continue;
    ed.replace_all_uses(n.outputs[0], result);
    return true;
  }
  return false;
}

// Sweeps until nothing folds, so Conv -> Mul -> Add chains fold completely.
bool fold_in(Graph& g) { return fold_until_fixpoint(g, try_fold); }

bool run(Model& m, PassContext&) { return fold_in(*m.graph); }

}  // namespace

PassInfo fold_scale_bias_pass() {
  return {"fold-scale-bias",
          "fold per-channel constant Mul/Add after Conv/Gemm/MatMul into weights and bias", run};
}

}  // namespace kiln
