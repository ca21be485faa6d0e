// Folding per-channel affine maps into Conv/ConvTranspose/Gemm/MatMul weights (see affine_fold.h).
#include "pass/affine_fold.h"

#include <unordered_set>

#include <cmath>

#include "ops/registry.h"

namespace kiln {
namespace {

bool float_weight(const Value* v) {
  if (!v || !v->is_constant()) return false;
  DType t = v->initializer.dtype();
  return t == DType::kFloat32 || t == DType::kFloat64;
}

int64_t rank_of(const Value* v) {
  return v && v->type.kind == Type::Kind::kTensor && v->type.shape
             ? static_cast<int64_t>(v->type.shape->rank())
             : -1;
}

Value* folded_constant(GraphEditor& ed, std::string base, Tensor t) {
  // "w_folded_0" folded again is named "w_folded_1", not "w_folded_0_folded_1".
  if (auto at = base.find("_folded_"); at != std::string::npos) base = base.substr(0, at + 7);
  return ed.add_constant(std::move(t), base);
}

// Output channel of each element of the weight tensor.
int64_t weight_channel(const LinearProducer& p, const Tensor& w, int64_t i) {
  switch (p.kind) {
    case LinearProducer::Kind::kConv:
      return i / (w.numel() / w.dim(0));
    case LinearProducer::Kind::kConvTranspose: {
      // W is [C, M/group, k...]; input channel ci of group gi feeds outputs gi*(M/group) + j.
      const int64_t c = w.dim(0), m_per_group = w.dim(1);
      const int64_t group = p.channels / m_per_group;
      const int64_t inner = w.numel() / (c * m_per_group);
      const int64_t ci = i / (m_per_group * inner), j = (i / inner) % m_per_group;
      return ci / (c / group) * m_per_group + j;
    }
    case LinearProducer::Kind::kGemm:
      return AttrReader(*p.node).attr_int("transB", 0) != 0 ? i / w.dim(1) : i % w.dim(1);
    case LinearProducer::Kind::kMatMul:
      return i % w.dim(1);
  }
  return 0;
}

}  // namespace

std::optional<LinearProducer> match_linear_producer(const Graph& g, const UseMap& uses,
                                                    const Value* v) {
  if (!v || !v->producer || v->producer_index != 0 || uses.count(v) != 1 || is_graph_output(g, v))
    return std::nullopt;
  Node* n = v->producer;
  if (!n->domain.empty() || n->owner != &g) return std::nullopt;
  LinearProducer p;
  p.node = n;
  if (n->inputs.size() < 2 || !float_weight(n->inputs[1])) return std::nullopt;
  const Tensor& w = n->inputs[1]->initializer;
  const Value* bias = n->inputs.size() > 2 ? n->inputs[2] : nullptr;
  if (bias && (!float_weight(bias) || bias->initializer.dtype() != w.dtype())) return std::nullopt;
  AttrReader at(*n);
  if (n->op_type == "Conv" || n->op_type == "ConvTranspose") {
    if (w.rank() < 3 || w.dim(0) == 0 || w.dim(1) == 0) return std::nullopt;
    const int64_t group = at.attr_int("group", 1);
    if (group <= 0) return std::nullopt;
    if (n->op_type == "Conv") {
      p.kind = LinearProducer::Kind::kConv;
      p.channels = w.dim(0);
    } else {
      if (w.dim(0) % group != 0) return std::nullopt;
      p.kind = LinearProducer::Kind::kConvTranspose;
      p.channels = w.dim(1) * group;
    }
    if (bias && (bias->initializer.rank() != 1 || bias->initializer.dim(0) != p.channels))
      return std::nullopt;
    p.out_rank = w.rank();
    p.channel_axis = 1;
    return p;
  }
  if (n->op_type == "Gemm") {
    // Pre-7 Gemm had a `broadcast` attribute and stricter C shapes: left alone.
    if (w.rank() != 2 || at.has_attr("broadcast")) return std::nullopt;
    p.kind = LinearProducer::Kind::kGemm;
    p.channels = at.attr_int("transB", 0) != 0 ? w.dim(0) : w.dim(1);
    if (bias && bias->initializer.rank() > 2) return std::nullopt;
    p.out_rank = 2;
    p.channel_axis = 1;
    return p;
  }
  if (n->op_type == "MatMul") {
    if (w.rank() != 2 || n->inputs.size() != 2) return std::nullopt;
    p.kind = LinearProducer::Kind::kMatMul;
    p.channels = w.dim(1);
    int64_t r = rank_of(n->inputs[0]);
    if (r < 0) r = rank_of(v);
    p.out_rank = r;
    p.channel_axis = r >= 1 ? r - 1 : -1;
    return p;
  }
  return std::nullopt;
}

bool is_per_channel(const LinearProducer& p, const Tensor& c) {
  const DType t = c.dtype();
  if (t != DType::kFloat32 && t != DType::kFloat64) return false;
  for (int64_t i = 0; i < c.numel(); ++i)
    if (!std::isfinite(c.get_double(i))) return false;
  // Without a known output rank (MatMul with an input of unknown rank) only rank <= 1 is safe.
  const int64_t r = p.out_rank >= 0 ? p.out_rank : 1;
  if (c.rank() > r) return false;
  for (int j = 0; j < c.rank(); ++j) {
    const int64_t axis = j + (r - c.rank());
    const bool channel = p.out_rank >= 0 ? axis == p.channel_axis : j == c.rank() - 1;
    const int64_t d = c.dim(j);
    if (d != 1 && !(channel && d == p.channels)) return false;
  }
  return true;
}

std::vector<double> channel_values(const LinearProducer& p, const Tensor& c) {
  std::vector<double> out(static_cast<size_t>(p.channels));
  for (int64_t i = 0; i < p.channels; ++i) out[i] = c.get_double(c.numel() == 1 ? 0 : i);
  return out;
}

Value* fold_affine(Graph& g, GraphEditor& ed, const LinearProducer& p,
                   const std::vector<double>& scale, const std::vector<double>& shift) {
  Node* n = p.node;
  Value* wv = n->inputs[1];
  const Tensor& w = wv->initializer;
  const DType dt = w.dtype();
  Value* out = n->outputs[0];
  Value* bias = n->inputs.size() > 2 ? n->inputs[2] : nullptr;
  if (p.kind == LinearProducer::Kind::kGemm && bias) {
    const Tensor& c = bias->initializer;
    if (c.rank() >= 1 && c.dim(c.rank() - 1) != 1 && c.dim(c.rank() - 1) != p.channels)
      return nullptr;
  }
  // S1: the new weight, scaled per output channel.
  Tensor nw(dt, w.dims());
  for (int64_t i = 0; i < w.numel(); ++i)
    nw.set_double(i, w.get_double(i) * scale[weight_channel(p, w, i)]);
  n->inputs[1] = folded_constant(ed, wv->name + "_folded", std::move(nw));
  if (p.kind == LinearProducer::Kind::kMatMul) {
    if (shift.empty()) return out;
    // S2 (MatMul): no bias input, so the shift becomes an Add of a [channels] constant.
    Tensor b(dt, {p.channels});
    for (int64_t i = 0; i < p.channels; ++i) b.set_double(i, shift[i]);
    Value* bv = folded_constant(ed, out->name + "_bias", std::move(b));
    Value* sum = g.add_value(ed.unique_name(out->name + "_biased"), out->type);
    g.add_node("Add", {out, bv}, {sum});
    return sum;
  }
  // S2: the new bias: old bias scaled, plus the shift.
  if (p.kind == LinearProducer::Kind::kGemm) {
    // y = alpha*A*B + beta*C  ->  alpha*A*(B*s) + (beta*C*s + shift), with beta set to 1.
    const double beta = AttrReader(*n).attr_float("beta", 1.f);
    std::vector<int64_t> dims = {p.channels};
    const Tensor* c = bias ? &bias->initializer : nullptr;
    if (c && c->rank() == 2) dims = {c->dim(0), p.channels};
    Tensor nc(dt, dims);
    const int64_t rows = dims.size() == 2 ? dims[0] : 1;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t ch = 0; ch < p.channels; ++ch) {
        double v = 0;
        if (c) {
          const int64_t cr = c->rank() == 2 && c->dim(0) != 1 ? r : 0;
          const int64_t cc = c->rank() >= 1 && c->dim(c->rank() - 1) != 1 ? ch : 0;
          const int64_t cols = c->rank() >= 1 ? c->dim(c->rank() - 1) : 1;
          v = beta * c->get_double(cr * cols + cc) * scale[ch];
        }
        nc.set_double(r * p.channels + ch, v + (shift.empty() ? 0.0 : shift[ch]));
      }
    if (n->inputs.size() < 3) n->inputs.resize(3, nullptr);
    n->inputs[2] = folded_constant(ed, (bias ? bias->name : out->name) + "_folded", std::move(nc));
    n->attrs["beta"] = Attribute::make_float(1.f);
    return out;
  }
  if (!bias && shift.empty()) return out;
  Tensor nb(dt, {p.channels});
  for (int64_t ch = 0; ch < p.channels; ++ch)
    nb.set_double(ch, (bias ? bias->initializer.get_double(ch) * scale[ch] : 0.0) +
                          (shift.empty() ? 0.0 : shift[ch]));
  if (n->inputs.size() < 3) n->inputs.resize(3, nullptr);
  n->inputs[2] =
      folded_constant(ed, (bias ? bias->name : out->name + "_bias") + "_folded", std::move(nb));
  return out;
}

bool fold_until_fixpoint(Graph& g, const AffineFoldFn& try_fold) {
  bool changed = false;
  for (auto& n : g.nodes)
    for (auto& [k, a] : n->attrs) {
      if (a.g) changed |= fold_until_fixpoint(*a.g, try_fold);
      for (auto& sg : a.graphs) changed |= fold_until_fixpoint(*sg, try_fold);
    }
  GraphEditor ed(g);
  for (;;) {
    std::unordered_set<const Node*> folded;
    UseMap uses = compute_uses(g);
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      Node* n = g.nodes[i].get();
      if (!try_fold(g, ed, uses, *n)) continue;
      folded.insert(n);
      uses = compute_uses(g);  // a fold changes who uses the producer's output
    }
    if (folded.empty()) return changed;
    changed = true;
    ed.remove_nodes_if([&](const Node& n) { return folded.count(&n) != 0; });
    ed.erase_dead_values();
    ed.sort_topologically();
  }
}

}  // namespace kiln
