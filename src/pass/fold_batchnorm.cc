// fold-batchnorm: folds an inference-mode BatchNormalization into the Conv, ConvTranspose, Gemm
// or MatMul that produces its input: W' = W * a and b' = (b - mean) * a + B per output channel,
// with a = scale / sqrt(var + eps); the BN disappears (after a MatMul it becomes an Add of b').
// Requires: the producer's output used only by the BN; its weight (and bias) and all four BN
// parameters constant; f32/f64 weights; BN output 0 the only one used; no training mode.
// Guarantees: outputs unchanged up to rounding; a BN without such a producer is left alone.
// Tests: tests/pass/golden/fold-batchnorm/*.kir
#include <cmath>

#include "ops/registry.h"
#include "pass/affine_fold.h"
#include "pass/passes.h"

namespace kiln {
namespace {

bool param_ok(const Node& bn, int i, int64_t channels) {
  const Value* v = bn.inputs.size() > static_cast<size_t>(i) ? bn.inputs[i] : nullptr;
  if (!v || !v->is_constant()) return false;
  const Tensor& t = v->initializer;
  const DType d = t.dtype();
  if (d != DType::kFloat32 && d != DType::kFloat64 && d != DType::kFloat16 && d != DType::kBFloat16)
    return false;
  return t.rank() == 1 && t.dim(0) == channels;
}

// An inference-mode BN: only output 0 used, no training_mode, per-channel (spatial) statistics.
bool inference_bn(const Graph& g, const UseMap& uses, const Node& bn) {
  if (bn.op_type != "BatchNormalization" || !bn.domain.empty() || bn.inputs.size() != 5)
    return false;
  if (bn.outputs.empty() || !bn.outputs[0]) return false;
  for (size_t i = 1; i < bn.outputs.size(); ++i)
    if (bn.outputs[i] && (uses.count(bn.outputs[i]) || is_graph_output(g, bn.outputs[i])))
      return false;
  AttrReader at(bn);
  if (at.attr_int("training_mode", 0) != 0) return false;
  if (at.has_attr("is_test") && at.attr_int("is_test") == 0) return false;
  if (at.has_attr("spatial") && at.attr_int("spatial") == 0) return false;
  return true;
}

// Folds `bn` into the linear op producing its input when that op has constant weights.
bool try_fold_bn(Graph& g, GraphEditor& ed, const UseMap& uses, Node& node) {
  Node* bn = &node;
  if (!inference_bn(g, uses, *bn)) return false;
  auto p = match_linear_producer(g, uses, bn->inputs[0]);
  if (!p) return false;
  // BN normalizes axis 1; a MatMul's channel axis is its last one, so only rank-2 outputs fit.
  if (p->kind == LinearProducer::Kind::kMatMul && p->out_rank != 2) return false;
  bool ok = true;
  for (int i = 1; i <= 4; ++i) ok = ok && param_ok(*bn, i, p->channels);
  if (!ok) return false;
  const double eps = AttrReader(*bn).attr_float("epsilon", 1e-5f);
  std::vector<double> scale(static_cast<size_t>(p->channels)), shift(scale.size());
  for (int64_t c = 0; c < p->channels; ++c) {
    const double var = bn->inputs[4]->initializer.get_double(c);
    const double a = bn->inputs[1]->initializer.get_double(c) / std::sqrt(var + eps);
    scale[c] = a;
    shift[c] =
        bn->inputs[2]->initializer.get_double(c) - bn->inputs[3]->initializer.get_double(c) * a;
    if (!std::isfinite(a) || !std::isfinite(shift[c])) ok = false;
  }
  if (!ok) return false;
  Value* result = fold_affine(g, ed, *p, scale, shift);
  if (!result) return false;
  ed.replace_all_uses(bn->outputs[0], result);
  return true;
}

bool fold_in(Graph& g) { return fold_until_fixpoint(g, try_fold_bn); }

bool run(Model& m, PassContext&) { return fold_in(*m.graph); }

}  // namespace

PassInfo fold_batchnorm_pass() {
  return {"fold-batchnorm",
          "fold inference BatchNormalization into the preceding Conv/Gemm/MatMul weights", run};
}

}  // namespace kiln
