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

bool fold_in(Graph& g) {
  bool changed = false;
  // S1: subgraphs first; they may read this graph's constants.
  for (auto& n : g.nodes)
    for (auto& [k, a] : n->attrs) {
      if (a.g) changed |= fold_in(*a.g);
      for (auto& sg : a.graphs) changed |= fold_in(*sg);
    }
  GraphEditor ed(g);
  for (bool again = true; again;) {
    again = false;
    std::vector<Node*> folded;
    // S2: each BN whose producer is a linear op with constant weights (uses are recomputed after
    // a fold; chains such as Conv -> BN -> BN fold in later sweeps).
    UseMap uses = compute_uses(g);
    for (size_t idx = 0; idx < g.nodes.size(); ++idx) {
      Node* bn = g.nodes[idx].get();
      if (!inference_bn(g, uses, *bn)) continue;
      auto p = match_linear_producer(g, uses, bn->inputs[0]);
      if (!p) continue;
      // BN normalizes axis 1; a MatMul's channel axis is its last one, so only rank-2 outputs fit.
      if (p->kind == LinearProducer::Kind::kMatMul && p->out_rank != 2) continue;
      bool ok = true;
      for (int i = 1; i <= 4; ++i) ok = ok && param_ok(*bn, i, p->channels);
      if (!ok) continue;
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
      if (!ok) continue;
      Value* result = fold_affine(g, ed, *p, scale, shift);
      if (!result) continue;
      ed.replace_all_uses(bn->outputs[0], result);
      folded.push_back(bn);
      uses = compute_uses(g);
    }
    // S3: drop the folded BNs, the old weights, and restore order (a MatMul's Add was appended).
    if (folded.empty()) break;
    changed = again = true;
    ed.remove_nodes_if([&](const Node& n) {
      for (const Node* f : folded)
        if (f == &n) return true;
      return false;
    });
    ed.erase_dead_values();
    ed.sort_topologically();
  }
  return changed;
}

bool run(Model& m, PassContext&) { return fold_in(*m.graph); }

}  // namespace

PassInfo fold_batchnorm_pass() {
  return {"fold-batchnorm",
          "fold inference BatchNormalization into the preceding Conv/Gemm/MatMul weights", run};
}

}  // namespace kiln
