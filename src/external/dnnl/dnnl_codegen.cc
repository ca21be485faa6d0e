// Which nodes the oneDNN backend runs, and a region as steps (dnnl_steps.h): one step per node,
// except that the element-wise ops and the residual / scalar binary ops after a conv, MatMul or
// Gemm join it as post-ops, and a per-channel constant Add after one becomes its bias.
#include <algorithm>
#include <cfloat>
#include <map>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "external/dnnl/dnnl_steps.h"

namespace kiln::external::dnnl_backend {
namespace {

using ext::ElementType;

const ext::ValueInfo* input(const ext::Region& r, const ext::Node& n, size_t i) {
  if (i >= n.inputs.size() || n.inputs[i] < 0) return nullptr;
  return &r.values[static_cast<size_t>(n.inputs[i])];
}
const ext::ValueInfo& output(const ext::Region& r, const ext::Node& n) { return r.values[static_cast<size_t>(n.outputs[0])]; }

// oneDNN's tensors have at most 6 dims.
bool is_f32(const ext::ValueInfo* v) { return v && v->type == ElementType::kFloat32 && v->known_rank && v->dims.size() <= 6; }
bool all_known(const ext::ValueInfo& v) {
  for (int64_t d : v.dims)
    if (d < 0) return false;
  return v.known_rank;
}
int64_t rank(const ext::ValueInfo* v) { return v ? static_cast<int64_t>(v->dims.size()) : -1; }
std::string qualified(const ext::Node& n) { return n.domain.empty() ? n.op : n.domain + "::" + n.op; }

// A constant float read as a scalar (Clip bounds), or `fallback` when absent.
bool scalar_constant(const ext::ValueInfo* v, float fallback, float& out) {
  if (!v) {
    out = fallback;
    return true;
  }
  if (!v->constant() || v->type != ElementType::kFloat32 || v->elements() != 1) return false;
  out = *static_cast<const float*>(v->data);
  return true;
}

// The element-wise op as a oneDNN algorithm with its alpha and beta; false when not one.
bool eltwise_of(const ext::Region& r, const ext::Node& n, PostOp& e) {
  const std::string op = qualified(n);
  e.kind = "eltwise";
  static const std::map<std::string, std::string> plain = {
      {"Relu", "relu"}, {"Sigmoid", "logistic"}, {"Tanh", "tanh"}, {"Exp", "exp"}, {"Log", "log"},
      {"Sqrt", "sqrt"}, {"Abs", "abs"}, {"HardSwish", "hardswish"}, {"kiln::HardSwish", "hardswish"}};
  if (auto it = plain.find(op); it != plain.end()) {
    e.alg = it->second;
    return true;
  }
  if (op == "LeakyRelu") {
    e.alg = "relu";
    e.alpha = static_cast<float>(n.attr_float("alpha", 0.01));
    return true;
  }
  if (op == "Elu") {
    e.alg = "elu";
    e.alpha = static_cast<float>(n.attr_float("alpha", 1.0));
    return true;
  }
  if (op == "Neg") {
    e.alg = "linear";
    e.alpha = -1;
    return true;
  }
  if (op == "kiln::Silu") {
    e.alg = "swish";
    e.alpha = 1;
    return true;
  }
  if (op == "kiln::Gelu") {
    const std::string mode = n.attr_string("approximate", "none");
    if (mode != "none" && mode != "tanh") return false;
    e.alg = mode == "tanh" ? "gelu_tanh" : "gelu_erf";
    return true;
  }
  if (op == "Clip") {
    e.alg = "clip_v2";
    if (n.has("min") || n.has("max")) {  // opset < 11
      e.alpha = static_cast<float>(n.attr_float("min", -FLT_MAX));
      e.beta = static_cast<float>(n.attr_float("max", FLT_MAX));
      return true;
    }
    return scalar_constant(input(r, n, 1), -FLT_MAX, e.alpha) && scalar_constant(input(r, n, 2), FLT_MAX, e.beta);
  }
  return false;
}

// The element-wise op as one or more oneDNN algorithms applied in order (HardSigmoid: linear,
// then clip to [0, 1]); false when not element-wise.
bool eltwise_chain_of(const ext::Region& r, const ext::Node& n, std::vector<PostOp>& ops) {
  ops.clear();
  if (qualified(n) == "HardSigmoid") {
    ops.push_back({"eltwise", "linear", static_cast<float>(n.attr_float("alpha", 0.2)),
                   static_cast<float>(n.attr_float("beta", 0.5)), -1});
    ops.push_back({"eltwise", "clip_v2", 0.f, 1.f, -1});
    return true;
  }
  PostOp e;
  if (!eltwise_of(r, n, e)) return false;
  ops.push_back(e);
  return true;
}

const std::map<std::string, std::string>& binary_algs() {
  static const std::map<std::string, std::string> algs = {
      {"Add", "add"}, {"Sub", "sub"}, {"Mul", "mul"}, {"Div", "div"}, {"Max", "max"}, {"Min", "min"}};
  return algs;
}

// src1 broadcasts to src0 (numpy rules, src0 unchanged).
bool broadcasts_to(const std::vector<int64_t>& src1, const std::vector<int64_t>& src0) {
  if (src1.size() > src0.size()) return false;
  const size_t off = src0.size() - src1.size();
  for (size_t i = 0; i < src1.size(); ++i)
    if (src1[i] != 1 && src1[i] != src0[off + i]) return false;
  return true;
}

bool binary_supported(const ext::Region& r, const ext::Node& n) {
  const ext::ValueInfo *a = input(r, n, 0), *b = input(r, n, 1);
  if (n.inputs.size() != 2 || !is_f32(a) || !is_f32(b) || rank(a) > 5 || rank(b) > 5 || rank(a) == 0 && rank(b) == 0) return false;
  const bool commutative = n.op == "Add" || n.op == "Mul" || n.op == "Max" || n.op == "Min";
  return broadcasts_to(b->dims, a->dims) || (commutative && broadcasts_to(a->dims, b->dims));
}

bool conv_supported(const ext::Region& r, const ext::Node& n) {
  const ext::ValueInfo *x = input(r, n, 0), *w = input(r, n, 1), *b = input(r, n, 2);
  const std::string pad = n.attr_string("auto_pad", "NOTSET");
  return is_f32(x) && rank(x) == 4 && is_f32(w) && w->constant() && rank(w) == 4 && (!b || (is_f32(b) && b->constant())) &&
         (pad == "NOTSET" || pad == "VALID" || pad == "SAME_UPPER" || pad == "SAME_LOWER");
}

bool pool_supported(const ext::Region& r, const ext::Node& n) {
  const ext::ValueInfo* x = input(r, n, 0);
  if (!is_f32(x) || rank(x) != 4 || n.outputs.size() != 1) return false;
  for (int64_t d : n.attr_ints("dilations"))
    if (d != 1) return false;
  const std::string pad = n.attr_string("auto_pad", "NOTSET");
  return pad == "NOTSET" || pad == "VALID" || pad == "SAME_UPPER" || pad == "SAME_LOWER";
}

bool constants_f32(const ext::Region& r, const ext::Node& n, size_t from) {
  for (size_t i = from; i < n.inputs.size(); ++i) {
    const ext::ValueInfo* v = input(r, n, i);
    if (v && (!is_f32(v) || !v->constant())) return false;
  }
  return true;
}

bool last_axis(const ext::Node& n, int64_t r, int64_t fallback) {
  int64_t axis = n.attr_int("axis", fallback);
  if (axis < 0) axis += r;
  return axis == r - 1;
}

bool matmul_supported(const ext::Region& r, const ext::Node& n) {
  const ext::ValueInfo *a = input(r, n, 0), *b = input(r, n, 1);
  if (!is_f32(a) || !is_f32(b) || rank(a) < 2 || rank(b) < 2 || rank(a) > 4 || rank(b) > 4) return false;
  // Batch dims broadcast (numpy): oneDNN takes the same rank with size-1 dims.
  std::vector<int64_t> ba(a->dims.begin(), a->dims.end() - 2), bb(b->dims.begin(), b->dims.end() - 2);
  while (ba.size() < bb.size()) ba.insert(ba.begin(), 1);
  while (bb.size() < ba.size()) bb.insert(bb.begin(), 1);
  for (size_t i = 0; i < ba.size(); ++i)
    if (ba[i] != bb[i] && ba[i] != 1 && bb[i] != 1) return false;
  return true;
}

bool gemm_supported(const ext::Region& r, const ext::Node& n) {
  const ext::ValueInfo *a = input(r, n, 0), *b = input(r, n, 1), *c = input(r, n, 2);
  if (!is_f32(a) || rank(a) != 2 || !is_f32(b) || !b->constant() || rank(b) != 2) return false;
  if (n.attr_int("transA", 0) != 0 || n.attr_float("alpha", 1.0) != 1.0) return false;
  if (!c) return true;
  const int64_t out_n = n.attr_int("transB", 0) ? b->dims[0] : b->dims[1];
  return is_f32(c) && c->constant() && n.attr_float("beta", 1.0) == 1.0 && c->elements() == out_n &&
         (rank(c) == 1 || (rank(c) == 2 && c->dims[0] == 1));
}

}  // namespace

bool supported(const ext::Region& r, const ext::Node& n) {
  if (n.outputs.empty() || n.outputs[0] < 0 || !is_f32(&output(r, n))) return false;
  const std::string op = qualified(n);
  std::vector<PostOp> chain;
  if (eltwise_chain_of(r, n, chain)) return is_f32(input(r, n, 0));
  if (binary_algs().count(op)) return binary_supported(r, n);
  if (op == "Conv") return conv_supported(r, n);
  if (op == "MatMul") return matmul_supported(r, n);
  if (op == "Gemm") return gemm_supported(r, n);
  if (op == "MaxPool") return pool_supported(r, n) && n.attr_int("storage_order", 0) == 0;
  // (With ceil_mode, oneDNN would average over the extra end padding too where ONNX counts pads.)
  if (op == "AveragePool")
    return pool_supported(r, n) && !(n.attr_int("ceil_mode", 0) && n.attr_int("count_include_pad", 0));
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool") return is_f32(input(r, n, 0)) && rank(input(r, n, 0)) == 4;
  if (op == "Softmax") return is_f32(input(r, n, 0)) && last_axis(n, rank(input(r, n, 0)), -1);
  if (op == "BatchNormalization")
    return n.outputs.size() == 1 && is_f32(input(r, n, 0)) && rank(input(r, n, 0)) >= 2 && constants_f32(r, n, 1) &&
           n.attr_int("training_mode", 0) == 0;
  if (op == "kiln::LayerNorm" || op == "LayerNormalization") {
    const ext::ValueInfo* x = input(r, n, 0);
    if (n.outputs.size() != 1 || !is_f32(x) || rank(x) < 2 || !last_axis(n, rank(x), -1) || !constants_f32(r, n, 1))
      return false;
    for (size_t i = 1; i < n.inputs.size(); ++i)  // scale and bias: one per element of the last axis
      if (input(r, n, i) && input(r, n, i)->elements() != x->dims.back()) return false;
    return true;
  }
  if (op == "Concat") {
    // All inputs computed (no constants) and of the output's rank.
    const ext::ValueInfo& out = output(r, n);
    if (!is_f32(&out) || rank(&out) < 1 || n.inputs.empty()) return false;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const ext::ValueInfo* v = input(r, n, i);
      if (!is_f32(v) || v->constant() || rank(v) != rank(&out)) return false;
    }
    return true;
  }
  // (Transpose stays native: oneDNN 2.6's reorder with permuted strides ran a BERT attention
  // transpose, 1x12x128x64, 3-6x slower than kiln's generated kernel on an AMD EPYC Zen 5.)
  // A reshape's output dims must be known when the region loads: from a constant target (or
  // axes), or declared static. (A target computed at run time from data could be anything.)
  if (op == "Flatten") return is_f32(input(r, n, 0));
  if (op == "Reshape" || op == "Squeeze" || op == "Unsqueeze") {
    const ext::ValueInfo* target = input(r, n, 1);
    return is_f32(input(r, n, 0)) && n.outputs.size() == 1 && (!target || target->constant() || all_known(output(r, n)));
  }
  return false;
}

namespace {

Step lower_node(const ext::Region& r, const ext::Node& n) {
  Step s;
  s.node = n.name;
  s.output = n.outputs[0];
  for (int v : n.inputs) s.inputs.push_back(v);
  const std::string op = qualified(n);
  std::vector<PostOp> chain;
  if (eltwise_chain_of(r, n, chain)) {
    s.kind = "eltwise";
    s.alg = chain[0].alg;
    s.alpha = chain[0].alpha;
    s.beta = chain[0].beta;
    s.post.assign(chain.begin() + 1, chain.end());  // applied in place after the first
    s.inputs.resize(1);
  } else if (binary_algs().count(op)) {
    s.kind = "binary";
    s.alg = binary_algs().at(op);
    if (!broadcasts_to(input(r, n, 1)->dims, input(r, n, 0)->dims)) std::swap(s.inputs[0], s.inputs[1]);
  } else if (op == "Conv") {
    s.kind = "conv";
    s.group = n.attr_int("group", 1);
    s.strides = n.attr_ints("strides", {1, 1});
    s.dilations = n.attr_ints("dilations", {1, 1});
    s.pads = n.attr_ints("pads", {0, 0, 0, 0});
    s.auto_pad = n.attr_string("auto_pad", "NOTSET");
  } else if (op == "MatMul") {
    s.kind = "matmul";
  } else if (op == "Gemm") {
    s.kind = "inner_product";
    s.trans_b = n.attr_int("transB", 0) != 0;
  } else if (op == "MaxPool" || op == "AveragePool") {
    s.kind = "pool";
    s.alg = op == "MaxPool" ? "max" : n.attr_int("count_include_pad", 0) ? "avg_include" : "avg_exclude";
    s.kernel = n.attr_ints("kernel_shape");
    s.strides = n.attr_ints("strides", {1, 1});
    s.pads = n.attr_ints("pads", {0, 0, 0, 0});
    s.ceil_mode = n.attr_int("ceil_mode", 0) != 0;
    s.auto_pad = n.attr_string("auto_pad", "NOTSET");
  } else if (op == "GlobalAveragePool" || op == "GlobalMaxPool") {
    s.kind = "pool";
    s.global = true;
    s.alg = op == "GlobalMaxPool" ? "max" : "avg_include";
  } else if (op == "Softmax") {
    s.kind = "softmax";
  } else if (op == "BatchNormalization") {
    s.kind = "bnorm";
    s.epsilon = static_cast<float>(n.attr_float("epsilon", 1e-5));
  } else if (op == "kiln::LayerNorm" || op == "LayerNormalization") {
    s.kind = "lnorm";
    s.epsilon = static_cast<float>(n.attr_float("epsilon", 1e-5));
  } else if (op == "Concat") {
    s.kind = "concat";
    s.axis = n.attr_int("axis", 0);
    if (s.axis < 0) s.axis += static_cast<int64_t>(output(r, n).dims.size());
  } else if (op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze") {
    s.kind = "view";
    s.inputs.resize(1);
  } else {
    throw std::runtime_error("node '" + n.name + "': " + op + " is not a oneDNN op");
  }
  return s;
}

// Per output channel (conv: [C,1,1] / [1,C,1,1]) or per column (MatMul/Gemm: [N] / [1,N]).
bool is_bias(const ext::ValueInfo& v, const Step& s, const ext::ValueInfo& out) {
  if (!v.constant() || v.type != ElementType::kFloat32) return false;
  if (s.kind == "conv") {
    const int64_t c = out.dims[1];
    return v.elements() == c && v.dims.size() >= 3 && v.dims.size() <= 4 && v.dims[v.dims.size() - 3] == c;
  }
  const int64_t cols = out.dims.back();
  if (v.elements() != cols || v.dims.empty() || v.dims.back() != cols) return false;
  return s.kind == "inner_product" || s.kind == "matmul";
}

struct Lowering {
  const ext::Region& r;
  std::vector<int> consumers;
  std::vector<bool> is_output;
  std::vector<std::vector<size_t>> users;  // value -> consumer node indices
  std::map<int, size_t> producer;          // value -> producing node index

  explicit Lowering(const ext::Region& region)
      : r(region), consumers(region.values.size()), is_output(region.values.size()), users(region.values.size()) {
    for (size_t k = 0; k < r.nodes.size(); ++k)
      for (int v : r.nodes[k].inputs)
        if (v >= 0) {
          consumers[static_cast<size_t>(v)]++;
          users[static_cast<size_t>(v)].push_back(k);
        }
    for (int v : r.outputs) is_output[static_cast<size_t>(v)] = true;
    for (size_t k = 0; k < r.nodes.size(); ++k)
      for (int v : r.nodes[k].outputs)
        if (v >= 0) producer[v] = k;
  }

  // The node after s's output joins s (a post-op or its bias), or false.
  bool made_after(int v, size_t anchor) const {
    auto it = producer.find(v);
    return it != producer.end() && it->second > anchor;
  }

  bool absorb(Step& s, size_t anchor, const ext::Node& next) {
    const int cur = s.output;
    std::vector<PostOp> chain;
    if (eltwise_chain_of(r, next, chain)) {
      s.post.insert(s.post.end(), chain.begin(), chain.end());
      s.output = next.outputs[0];
      return true;
    }
    const std::string op = qualified(next);
    if (op != "Add" && op != "Mul" && op != "Sub" || next.inputs.size() != 2) return false;
    const bool cur_first = next.inputs[0] == cur;
    const int other = cur_first ? next.inputs[1] : next.inputs[0];
    if (other == cur || (op == "Sub" && !cur_first)) return false;
    const ext::ValueInfo& ov = r.values[static_cast<size_t>(other)];
    const ext::ValueInfo& out = r.values[static_cast<size_t>(cur)];
    const bool has_bias = s.inputs.size() > 2;
    if (op == "Add" && s.post.empty() && !has_bias && is_bias(ov, s, out)) {
      s.inputs.resize(2);
      s.inputs.push_back(other);
      s.output = next.outputs[0];
      return true;
    }
    if (ov.constant() && ov.elements() == 1 && (op == "Mul" || op == "Add" || op == "Sub")) {
      const float c = *static_cast<const float*>(ov.data);
      s.post.push_back({"eltwise", "linear", op == "Mul" ? c : 1.f, op == "Mul" ? 0.f : op == "Add" ? c : -c, -1});
      s.output = next.outputs[0];
      return true;
    }
    // The step runs where its first node is: the other operand must be computed by then.
    if (ov.dims != out.dims || ov.type != ElementType::kFloat32 || made_after(other, anchor)) return false;
    // A residual Add accumulates into the destination (oneDNN's sum post-op, one per primitive).
    bool has_sum = false;
    for (const PostOp& p : s.post) has_sum |= p.kind == "sum";
    const bool sum = op == "Add" && !has_sum && !ov.constant();
    s.post.push_back({sum ? "sum" : "binary", binary_algs().at(op), 0, 0, other});
    s.output = next.outputs[0];
    return true;
  }

  std::vector<Step> run() {
    std::vector<Step> steps;
    std::vector<bool> fused(r.nodes.size());
    for (size_t k = 0; k < r.nodes.size(); ++k) {
      if (fused[k]) continue;
      Step s = lower_node(r, r.nodes[k]);
      if (s.kind == "conv" || s.kind == "matmul" || s.kind == "inner_product") {
        while (s.post.size() < 6) {
          const size_t v = static_cast<size_t>(s.output);
          if (is_output[v] || consumers[v] != 1) break;
          const size_t next = users[v][0];
          if (fused[next] || !absorb(s, k, r.nodes[next])) break;
          fused[next] = true;
        }
      }
      steps.push_back(std::move(s));
    }
    return steps;
  }
};

}  // namespace

std::vector<Step> lower_region(const ext::Region& r) { return Lowering(r).run(); }

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(PostOp, kind, alg, alpha, beta, src1)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Step, kind, node, inputs, output, alg, alpha, beta, epsilon, axis, group, trans_b,
                                   ceil_mode, global, auto_pad, kernel, strides, dilations, pads, post)

std::string save_steps(const std::vector<Step>& steps) {
  nlohmann::json j;
  j["format"] = "kiln-dnnl/1";
  j["steps"] = steps;
  return j.dump();
}

std::vector<Step> load_steps(const std::string& artifact) {
  try {
    const nlohmann::json j = nlohmann::json::parse(artifact);
    if (j.at("format") != "kiln-dnnl/1") throw std::runtime_error("not a kiln-dnnl/1 artifact");
    return j.at("steps").get<std::vector<Step>>();
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("malformed oneDNN artifact: ") + e.what());
  }
}

}  // namespace kiln::external::dnnl_backend
