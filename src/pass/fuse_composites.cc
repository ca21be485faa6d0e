// fuse-composites: replaces decomposed patterns that PyTorch exports by single ops of kiln's own
// domain "kiln" (ops/kiln_composites.cc), and imports opset "kiln": 1 when it does:
//   GELU       x*0.5*(1+erf(x/sqrt2)) (Div or Mul by 1/sqrt2, any association of the products)
//              and the tanh form 0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3)))  -> kiln::Gelu
//   SiLU       x*Sigmoid(x)                                                   -> kiln::Silu
//   HardSwish  x*HardSigmoid(x){1/6,0.5}, x*Clip(x+3,0,6)/6 (or *1/6)          -> kiln::HardSwish
//   LayerNorm  ReduceMean, Sub, Pow 2 | Mul self, ReduceMean, Add eps, Sqrt, Div,
//              [Mul gamma], [Add beta], over trailing axes                   -> kiln::LayerNorm
// fuse-attention (same matcher, not in the default pipeline: kiln::Attention has only a reference
// kernel, slower than the compiled engine's GEMM + softmax path for the unfused pattern):
//   Attention  MatMul(Q, K^T) [* or / scalar] [+ mask] -> Softmax(last axis) -> MatMul(., V)
//                                                                             -> kiln::Attention
// Requires: nothing beyond a verified model; shapes (from shape inference) enable LayerNorm with
// gamma/beta and Attention, which need ranks. Every constant of a pattern is checked (within
// float rounding of its dtype) and every intermediate must have no other consumer.
// Guarantees: outputs unchanged up to rounding; the final value keeps its name and type.
// Tests: tests/pass/golden/fuse-composites/*.kir, tests/pass/golden/fuse-attention/*.kir
#include <cmath>
#include <set>

#include "ir/rewrite.h"
#include "ops/registry.h"
#include "pass/passes.h"

namespace kiln {
namespace {

// Which patterns a run matches: the elementwise/normalization composites, or attention.
enum class Patterns { kComposites, kAttention };

struct Fuser {
  Graph& g;
  int64_t opset;
  Patterns patterns;
  GraphEditor ed;
  UseMap uses;
  std::set<const Node*> dead;
  int fused = 0;

  Fuser(Graph& graph, int64_t op, Patterns p)
      : g(graph), opset(op), patterns(p), ed(graph), uses(compute_uses(graph)) {}

  // ---- matching helpers ----

  // The producer of `v` when it is a live default-domain `op` of this graph.
  Node* def(const Value* v, const char* op) const {
    if (!v || !v->producer || v->producer->owner != &g) return nullptr;
    Node* n = v->producer;
    if (n->op_type != op || !n->domain.empty() || dead.count(n)) return nullptr;
    return n;
  }
  bool single_use(const Value* v) const {
    return v && uses.count(v) == 1 && !is_graph_output(g, v);
  }
  // The only consumer of `v` when it is a live default-domain `op`.
  Node* sole_user(const Value* v, const char* op) const {
    if (!single_use(v)) return nullptr;
    Node* n = uses.of(v)[0];
    if (n->op_type != op || !n->domain.empty() || dead.count(n) || n->owner != &g) return nullptr;
    return n;
  }
  // For a two-input node with `v` as one operand: the other operand (nullptr when v is absent).
  static Value* other(const Node* n, const Value* v) {
    if (!n || n->inputs.size() != 2 || n->outputs.size() != 1) return nullptr;
    if (n->inputs[0] == v) return n->inputs[1];
    if (n->inputs[1] == v) return n->inputs[0];
    return nullptr;
  }
  static int64_t rank(const Value* v) {
    return v && v->type.kind == Type::Kind::kTensor && v->type.shape
               ? static_cast<int64_t>(v->type.shape->rank())
               : -1;
  }
  // Float or not yet inferred: every pattern also contains an op (Erf with a 1/sqrt2 factor,
  // Tanh, Sigmoid, Sqrt, Softmax, a float constant) that only float values pass.
  static bool is_float(DType d) {
    return d == DType::kFloat32 || d == DType::kFloat64 || d == DType::kFloat16 ||
           d == DType::kBFloat16 || d == DType::kUndefined;
  }
  // A one-element constant close to `expected` that cannot change the shape it broadcasts with
  // (rank <= max_rank; max_rank < 0 means "unknown": only 0-D constants qualify).
  static bool scalar_const(const Value* c, double expected, int64_t max_rank) {
    if (!c || !c->is_constant()) return false;
    const Tensor& t = c->initializer;
    if (t.numel() != 1 || t.dtype() == DType::kString || t.rank() > std::max<int64_t>(max_rank, 0))
      return false;
    const bool half = t.dtype() == DType::kFloat16 || t.dtype() == DType::kBFloat16;
    const double tol = (half ? 4e-3 : 1e-6) * std::fabs(expected);
    return std::fabs(t.get_double(0) - expected) <= tol;
  }
  static bool float_attr_near(const Node& n, const char* name, float fallback, double expected) {
    return std::fabs(AttrReader(n).attr_float(name, fallback) - expected) <=
           1e-6 * std::fabs(expected);
  }

  // ---- rewriting ----

  // The fused node takes over `out` (name and type kept); the matched nodes become dead.
  Node* replace(const std::vector<Node*>& matched, Value* out, const char* op,
                std::vector<Value*> inputs) {
    for (Node* n : matched) dead.insert(n);
    Node* f = g.add_node(op, std::move(inputs), {out}, "kiln");
    ++fused;
    return f;
  }

  // ---- GELU ----

  // Tail shared by both GELU forms: `e` = erf(...) or tanh(...); then (1 + e) * x * 0.5 in any
  // association. Returns the final value and appends the matched nodes.
  Value* gelu_tail(Value* e, Value* x, std::vector<Node*>& nodes) {
    const int64_t r = rank(x);
    Node* add = sole_user(e, "Add");
    if (!add || !scalar_const(other(add, e), 1.0, r)) return nullptr;
    Value* a = add->outputs[0];
    Node* m1 = sole_user(a, "Mul");
    Value* p = other(m1, a);
    if (!p) return nullptr;
    nodes.push_back(add);
    nodes.push_back(m1);
    Value* m1_out = m1->outputs[0];
    if (p == x || scalar_const(p, 0.5, r)) {
      // (x*a)*0.5 or (0.5*a)*x
      Node* m2 = sole_user(m1_out, "Mul");
      Value* q = other(m2, m1_out);
      if (!q || !(p == x ? scalar_const(q, 0.5, r) : q == x)) return nullptr;
      nodes.push_back(m2);
      return m2->outputs[0];
    }
    // (x*0.5)*a
    Node* h = def(p, "Mul");
    if (!h || !single_use(p) || !scalar_const(other(h, x), 0.5, r)) return nullptr;
    nodes.push_back(h);
    return m1_out;
  }

  bool gelu_erf(Node* erf) {
    Value* u = erf->inputs[0];
    Node* scale = def(u, "Div");
    Value* x = nullptr;
    if (scale && single_use(u) &&
        scalar_const(scale->inputs[1], std::sqrt(2.0), rank(scale->inputs[0]))) {
      x = scale->inputs[0];
    } else if ((scale = def(u, "Mul")) && single_use(u)) {
      for (int i = 0; i < 2 && !x; ++i)
        if (scalar_const(scale->inputs[1 - i], std::sqrt(0.5), rank(scale->inputs[i])))
          x = scale->inputs[i];
    }
    if (!x || !is_float(x->type.dtype)) return false;
    std::vector<Node*> nodes = {scale, erf};
    Value* out = gelu_tail(erf->outputs[0], x, nodes);
    if (!out) return false;
    replace(nodes, out, "Gelu", {x});
    return true;
  }

  bool gelu_tanh(Node* tanh) {
    // tanh(sqrt(2/pi) * (x + 0.044715 * x^3))
    Value* u = tanh->inputs[0];
    Node* ms = def(u, "Mul");
    if (!ms || !single_use(u)) return false;
    Value* s = nullptr;
    for (int i = 0; i < 2 && !s; ++i)
      if (scalar_const(ms->inputs[1 - i], std::sqrt(2.0 / M_PI), rank(ms->inputs[i])))
        s = ms->inputs[i];
    Node* add = def(s, "Add");
    if (!add || !single_use(s)) return false;
    for (int i = 0; i < 2; ++i) {
      Value* x = add->inputs[i];
      Value* q = add->inputs[1 - i];
      Node* mq = def(q, "Mul");
      if (!mq || !single_use(q) || !is_float(x->type.dtype)) continue;
      const int64_t r = rank(x);
      Value* cube = nullptr;
      for (int j = 0; j < 2 && !cube; ++j)
        if (scalar_const(mq->inputs[1 - j], 0.044715, r)) cube = mq->inputs[j];
      if (!cube || !single_use(cube)) continue;
      std::vector<Node*> nodes = {mq, add, ms, tanh};
      if (Node* pw = def(cube, "Pow")) {
        if (pw->inputs[0] != x || !scalar_const(pw->inputs[1], 3.0, r)) continue;
        nodes.push_back(pw);
      } else if (Node* m3 = def(cube, "Mul")) {
        // x * (x * x) in either order
        Value* sq = other(m3, x);
        Node* m2 = def(sq, "Mul");
        if (!m2 || !single_use(sq) || m2->inputs[0] != x || m2->inputs[1] != x) continue;
        nodes.push_back(m3);
        nodes.push_back(m2);
      } else {
        continue;
      }
      Value* out = gelu_tail(tanh->outputs[0], x, nodes);
      if (!out) return false;
      Node* f = replace(nodes, out, "Gelu", {x});
      f->attrs["approximate"] = Attribute::make_string("tanh");
      return true;
    }
    return false;
  }

  // ---- SiLU and HardSwish ----

  bool silu(Node* sig) {
    Value* x = sig->inputs[0];
    Node* mul = sole_user(sig->outputs[0], "Mul");
    if (!mul || other(mul, sig->outputs[0]) != x || !is_float(x->type.dtype)) return false;
    replace({sig, mul}, mul->outputs[0], "Silu", {x});
    return true;
  }

  bool hard_sigmoid_swish(Node* hs) {
    Value* x = hs->inputs[0];
    if (!float_attr_near(*hs, "alpha", 0.2f, 1.0 / 6.0) || !float_attr_near(*hs, "beta", 0.5f, 0.5))
      return false;
    Node* mul = sole_user(hs->outputs[0], "Mul");
    if (!mul || other(mul, hs->outputs[0]) != x || !is_float(x->type.dtype)) return false;
    replace({hs, mul}, mul->outputs[0], "HardSwish", {x});
    return true;
  }

  // The value of Clip's bound `i` (1 = min, 2 = max); nullopt when absent or not constant.
  std::optional<double> clip_bound(const Node& clip, int i) const {
    if (opset < 11) {
      const char* name = i == 1 ? "min" : "max";
      if (!clip.attr(name)) return std::nullopt;
      return AttrReader(clip).attr_float(name, 0.f);
    }
    const Value* b = clip.inputs.size() > static_cast<size_t>(i) ? clip.inputs[i] : nullptr;
    if (!b || !b->is_constant() || b->initializer.numel() != 1 || b->initializer.rank() != 0)
      return std::nullopt;
    return b->initializer.get_double(0);
  }

  // `v` divided by 6 (Div by 6 or Mul by 1/6) by its only user; returns that user.
  Node* div6(const Value* v, int64_t r) {
    if (Node* d = sole_user(v, "Div"))
      return d->inputs[0] == v && scalar_const(d->inputs[1], 6.0, r) ? d : nullptr;
    if (Node* m = sole_user(v, "Mul")) return scalar_const(other(m, v), 1.0 / 6.0, r) ? m : nullptr;
    return nullptr;
  }

  bool clip_swish(Node* clip) {
    // x * Clip(x + 3, 0, 6) / 6
    auto lo = clip_bound(*clip, 1), hi = clip_bound(*clip, 2);
    if (!lo || !hi || *lo != 0.0 || *hi != 6.0) return false;
    Value* a3 = clip->inputs[0];
    Node* add = def(a3, "Add");
    if (!add || !single_use(a3)) return false;
    for (int i = 0; i < 2; ++i) {
      Value* x = add->inputs[i];
      const int64_t r = rank(x);
      const Value* three = add->inputs[1 - i];
      if (!scalar_const(three, 3.0, r) || three->initializer.dtype() == DType::kUndefined ||
          !is_float(three->initializer.dtype()) || !is_float(x->type.dtype))
        continue;
      Value* c = clip->outputs[0];
      if (Node* d = div6(c, r)) {
        Node* mul = sole_user(d->outputs[0], "Mul");
        if (!mul || other(mul, d->outputs[0]) != x) continue;
        replace({add, clip, d, mul}, mul->outputs[0], "HardSwish", {x});
        return true;
      }
      Node* mul = sole_user(c, "Mul");
      if (!mul || other(mul, c) != x) continue;
      Node* d = div6(mul->outputs[0], r);
      if (!d) continue;
      replace({add, clip, mul, d}, d->outputs[0], "HardSwish", {x});
      return true;
    }
    return false;
  }

  // ---- LayerNorm ----

  // ReduceMean's axes as negative axes (-k..-1 sorted), when they are a suffix of `x`'s dims
  // and keepdims is 1; empty otherwise.
  std::vector<int64_t> mean_axes(const Node& rm, const Value* x) const {
    AttrReader at(rm);
    if (at.attr_int("keepdims", 1) != 1) return {};
    std::vector<int64_t> axes;
    if (opset < 18) {
      axes = at.attr_ints("axes");
    } else {
      const Value* a = rm.inputs.size() > 1 ? rm.inputs[1] : nullptr;
      if (!a || !a->is_constant() || a->initializer.rank() != 1) return {};
      axes = a->initializer.to_int64_vector();
    }
    const int64_t r = rank(x);
    std::set<int64_t> set;
    for (int64_t a : axes) {
      if (a >= 0) {
        if (r < 0 || a >= r) return {};
        a -= r;
      }
      if (r >= 0 && a < -r) return {};
      set.insert(a);
    }
    const int64_t k = static_cast<int64_t>(set.size());
    if (k == 0 || k != static_cast<int64_t>(axes.size()) || *set.begin() != -k) return {};
    return std::vector<int64_t>(set.begin(), set.end());
  }

  // A constant gamma/beta that broadcasts over the normalized dims only (rank <= k, each dim 1
  // or equal to the known dim of x).
  bool affine_param(const Value* p, const Value* x, int64_t k) const {
    if (!p || !p->is_constant()) return false;
    if (x->type.dtype != DType::kUndefined && p->initializer.dtype() != x->type.dtype) return false;
    const Tensor& t = p->initializer;
    if (t.rank() > k) return false;
    const int64_t r = rank(x);
    for (int j = 0; j < t.rank(); ++j) {
      if (t.dim(j) == 1) continue;
      if (r < 0) return false;
      const Dim& d = x->type.shape->dims[static_cast<size_t>(r - t.rank() + j)];
      if (!d.known() || d.value != t.dim(j)) return false;
    }
    return true;
  }

  bool layer_norm(Node* rm1) {
    Value* x = rm1->inputs[0];
    if (!x || !is_float(x->type.dtype)) return false;
    std::vector<int64_t> axes = mean_axes(*rm1, x);
    if (axes.empty()) return false;
    const int64_t k = static_cast<int64_t>(axes.size());
    const int64_t r = rank(x) >= 0 ? rank(x) : k;  // bound for scalar constants
    Value* mean = rm1->outputs[0];
    Node* sub = sole_user(mean, "Sub");
    if (!sub || sub->inputs[0] != x || sub->inputs[1] != mean) return false;
    Value* d = sub->outputs[0];
    if (is_graph_output(g, d)) return false;
    // S1: d's users are exactly the square (Pow d,2 or Mul d,d) and the final Div.
    std::set<Node*> users(uses.of(d).begin(), uses.of(d).end());
    if (users.size() != 2) return false;
    Node* sq = nullptr;
    Node* div = nullptr;
    for (Node* u : users) {
      if (dead.count(u) || !u->domain.empty()) return false;
      if (u->op_type == "Div" && u->inputs[0] == d)
        div = u;
      else if (u->op_type == "Pow" && u->inputs[0] == d && scalar_const(u->inputs[1], 2.0, r))
        sq = u;
      else if (u->op_type == "Mul" && u->inputs[0] == d && u->inputs[1] == d)
        sq = u;
    }
    const size_t expected_uses = sq && sq->op_type == "Mul" ? 3 : 2;
    if (!sq || !div || uses.count(d) != expected_uses) return false;
    // S2: variance = ReduceMean(square) over the same axes; + eps; Sqrt; the Div's divisor.
    Node* rm2 = sole_user(sq->outputs[0], "ReduceMean");
    if (!rm2 || rm2->inputs[0] != sq->outputs[0] || mean_axes(*rm2, x) != axes) return false;
    Node* add = sole_user(rm2->outputs[0], "Add");
    Value* eps = other(add, rm2->outputs[0]);
    if (!eps || !eps->is_constant() || eps->initializer.numel() != 1 || eps->initializer.rank() > r)
      return false;
    const double eps_value = eps->initializer.get_double(0);
    if (!(eps_value >= 0 && eps_value < 1)) return false;
    Node* sqrt = sole_user(add->outputs[0], "Sqrt");
    if (!sqrt || div->inputs[1] != sqrt->outputs[0] || !single_use(sqrt->outputs[0])) return false;
    std::vector<Node*> nodes = {rm1, sub, sq, rm2, add, sqrt, div};
    // S3: optional Mul gamma, then optional Add beta.
    Value* out = div->outputs[0];
    Value* gamma = nullptr;
    Value* beta = nullptr;
    if (Node* mg = sole_user(out, "Mul"); mg && affine_param(other(mg, out), x, k)) {
      gamma = other(mg, out);
      nodes.push_back(mg);
      out = mg->outputs[0];
    }
    if (Node* ab = sole_user(out, "Add"); ab && affine_param(other(ab, out), x, k)) {
      beta = other(ab, out);
      nodes.push_back(ab);
      out = ab->outputs[0];
    }
    Node* f = replace(nodes, out, "LayerNorm", {x, gamma, beta});
    while (f->inputs.size() > 1 && !f->inputs.back()) f->inputs.pop_back();
    f->attrs["axis"] = Attribute::make_int(-k);
    f->attrs["epsilon"] = Attribute::make_float(static_cast<float>(eps_value));
    return true;
  }

  // ---- Attention ----

  bool softmax_on_last_axis(const Node& sm) const {
    const int64_t r = rank(sm.inputs[0]);
    int64_t axis = AttrReader(sm).attr_int("axis", opset < 13 ? 1 : -1);
    if (axis == -1 && opset >= 13) return true;
    if (r < 0) return false;
    if (axis < 0) axis += r;
    return axis == r - 1;
  }

  bool attention(Node* sm) {
    if (!softmax_on_last_axis(*sm)) return false;
    std::vector<Node*> nodes = {sm};
    Value* z = sm->inputs[0];
    if (!single_use(z)) return false;
    // S1: walk back: [Add mask] <- [Mul|Div scalar] <- MatMul(Q, Kt).
    Value* mask = nullptr;
    Value* mm_out = nullptr;
    double scale = 1.0;
    std::vector<Node*> scaled;
    auto scores = [&](Value* s) {
      scaled.clear();
      scale = 1.0;
      if (def(s, "MatMul")) return s;
      if (!single_use(s)) return static_cast<Value*>(nullptr);
      if (Node* sc = def(s, "Mul")) {
        for (int i = 0; i < 2; ++i) {
          const Value* c = sc->inputs[1 - i];
          if (def(sc->inputs[i], "MatMul") && c->is_constant() && c->initializer.numel() == 1 &&
              c->initializer.rank() <= std::max<int64_t>(rank(sc->inputs[i]), 0)) {
            scale = c->initializer.get_double(0);
            scaled.push_back(sc);
            return sc->inputs[i];
          }
        }
      } else if (Node* dv = def(s, "Div")) {
        const Value* c = dv->inputs[1];
        if (def(dv->inputs[0], "MatMul") && c->is_constant() && c->initializer.numel() == 1 &&
            c->initializer.rank() <= std::max<int64_t>(rank(dv->inputs[0]), 0)) {
          scale = 1.0 / c->initializer.get_double(0);
          scaled.push_back(dv);
          return dv->inputs[0];
        }
      }
      return static_cast<Value*>(nullptr);
    };
    if (Node* add = def(z, "Add")) {
      for (int i = 0; i < 2 && !mm_out; ++i) {
        if (add->inputs[0] == add->inputs[1] || !single_use(add->inputs[i])) continue;
        mm_out = scores(add->inputs[i]);
        if (mm_out) mask = add->inputs[1 - i];
      }
      nodes.push_back(add);
    } else {
      mm_out = scores(z);
    }
    nodes.insert(nodes.end(), scaled.begin(), scaled.end());
    Node* mm = def(mm_out, "MatMul");
    if (!mm || !single_use(mm_out) || !std::isfinite(scale)) return false;
    nodes.push_back(mm);
    Value* q = mm->inputs[0];
    Value* kt = mm->inputs[1];
    // S2: the second MatMul, with the probabilities as its left operand.
    Node* pv = sole_user(sm->outputs[0], "MatMul");
    if (!pv || pv->inputs[0] != sm->outputs[0]) return false;
    Value* v = pv->inputs[1];
    const int64_t kr = rank(kt);
    if (rank(q) < 2 || kr < 2 || rank(v) < 2 || !is_float(q->type.dtype)) return false;
    nodes.push_back(pv);
    // S3: K in [..., Sk, D] layout: absorb or compose the transpose that produced K^T.
    std::vector<int64_t> swap(static_cast<size_t>(kr));
    for (int64_t i = 0; i < kr; ++i) swap[i] = i;
    std::swap(swap[kr - 2], swap[kr - 1]);
    Value* key = nullptr;
    Node* tr = def(kt, "Transpose");
    std::vector<int64_t> perm = tr ? AttrReader(*tr).attr_ints("perm") : std::vector<int64_t>{};
    if (tr && single_use(kt) && static_cast<int64_t>(perm.size()) == kr) {
      std::swap(perm[kr - 2], perm[kr - 1]);
      nodes.push_back(tr);
      bool identity = true;
      for (int64_t i = 0; i < kr; ++i) identity = identity && perm[i] == i;
      if (identity) {
        key = tr->inputs[0];
      } else {
        key = g.add_value(ed.unique_name(kt->name + "_k"), Type());
        Node* t2 = g.add_node("Transpose", {tr->inputs[0]}, {key});
        t2->attrs["perm"] = Attribute::make_ints(perm);
      }
    } else {
      key = g.add_value(ed.unique_name(kt->name + "_k"), Type());
      Node* t2 = g.add_node("Transpose", {kt}, {key});
      t2->attrs["perm"] = Attribute::make_ints(swap);
    }
    if (key->type.dtype == DType::kUndefined && kt->type.kind == Type::Kind::kTensor) {
      key->type = Type::tensor(kt->type.dtype);
      if (kt->type.shape) {
        Shape sh = *kt->type.shape;
        std::swap(sh.dims[kr - 2], sh.dims[kr - 1]);
        key->type.shape = sh;
      }
    }
    std::vector<Value*> inputs = {q, key, v};
    if (mask) inputs.push_back(mask);
    Node* f = replace(nodes, pv->outputs[0], "Attention", inputs);
    f->attrs["scale"] = Attribute::make_float(static_cast<float>(scale));
    f->attrs["has_mask"] = Attribute::make_int(mask ? 1 : 0);
    return true;
  }

  // ---- driver ----

  bool try_node(Node* n) {
    if (dead.count(n) || !n->domain.empty()) return false;
    const std::string& op = n->op_type;
    if (patterns == Patterns::kAttention) return op == "Softmax" && attention(n);
    if (op == "Erf") return gelu_erf(n);
    if (op == "Tanh") return gelu_tanh(n);
    if (op == "Sigmoid") return silu(n);
    if (op == "HardSigmoid") return hard_sigmoid_swish(n);
    if (op == "Clip") return clip_swish(n);
    if (op == "ReduceMean") return layer_norm(n);
    return false;
  }

  void run() {
    // S1: match every anchor; the matched nodes are only marked, so the use map stays valid
    // (a matched intermediate is never part of a second match: `def`/`sole_user` skip dead nodes).
    const size_t count = g.nodes.size();
    for (size_t i = 0; i < count; ++i) try_node(g.nodes[i].get());
    if (!fused) return;
    // S2: remove the replaced nodes (their outputs now belong to the fused ops or are unused).
    ed.remove_nodes_if([&](const Node& n) { return dead.count(&n) != 0; });
    ed.erase_dead_values();
    ed.sort_topologically();
  }
};

bool fuse(Model& m, Patterns patterns) {
  const int64_t opset = m.opset("");
  const bool fused = rewrite_graphs(*m.graph, [&](Graph& g) {
    Fuser f(g, opset, patterns);
    f.run();
    return f.fused > 0;
  });
  if (fused) m.opsets["kiln"] = 1;
  return fused;
}

bool run(Model& m, PassContext&) { return fuse(m, Patterns::kComposites); }
bool run_attention(Model& m, PassContext&) { return fuse(m, Patterns::kAttention); }

}  // namespace

PassInfo fuse_composites_pass() {
  return {"fuse-composites", "replace exported GELU/LayerNorm/SiLU/HardSwish patterns by kiln ops", run};
}

PassInfo fuse_attention_pass() {
  return {"fuse-attention", "replace exported attention (MatMul, scale, mask, Softmax, MatMul) by kiln::Attention",
          run_attention, /*in_default_pipeline=*/false};
}

}  // namespace kiln
