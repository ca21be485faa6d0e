// insert_qdq: the graph rewrite of static quantization (kiln quantize). Activations get one
// QuantizeLinear -> DequantizeLinear pair each; weights and biases are stored quantized behind a
// DequantizeLinear, as ONNX Runtime's QDQ format has them, so that an int8 engine folds
// DQ -> op -> Q into integer kernels and any other runtime still runs the model.
// Tests: tests/pass/test_insert_qdq.cc (IR in, IR out).
#include "pass/insert_qdq.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "ir/rewrite.h"
#include "ops/registry.h"
#include "pass/pass.h"

namespace kiln {
namespace {

// How an op takes part in quantization:
//   kCompute:     reads int8 activations (an int8 kernel's inputs): its float activation inputs
//                 are quantized; its weight (and bias) are stored quantized;
//   kElementwise: Add/Mul of two activations (residual adds, gating) are computed on int8;
//                 with a constant operand they are part of a decomposed activation and stay float;
//   kTransparent: moves or pools values without arithmetic worth rounding: int8 in, int8 out,
//                 so its input is quantized exactly when its output is.
// Every other op (Relu, Clip, Sigmoid, HardSwish, Softmax, ...) computes in float; its output is
// quantized when a consumer reads int8, so an activation's range is the one that is quantized,
// not the wider one before it.
enum class QuantRole { kCompute, kElementwise, kTransparent };

struct QuantizableOp {
  const char* op;
  QuantRole role;
  std::vector<int> activations;  // -1: every input
  int weight = -1;               // -2: whichever of inputs 0 and 1 is constant
  int bias = -1;
};

const std::vector<QuantizableOp>& quantizable_ops() {
  using R = QuantRole;
  static const std::vector<QuantizableOp> ops = {
      {"Conv", R::kCompute, {0}, 1, 2},
      {"ConvTranspose", R::kCompute, {0}, 1, 2},
      {"MatMul", R::kCompute, {-1}, -2},
      {"Gemm", R::kCompute, {-1}, -2, 2},
      {"Add", R::kElementwise, {-1}},
      {"Mul", R::kElementwise, {-1}},
      {"MaxPool", R::kTransparent, {0}},
      {"AveragePool", R::kTransparent, {0}},
      {"GlobalAveragePool", R::kTransparent, {0}},
      {"Concat", R::kTransparent, {-1}},
      {"Resize", R::kTransparent, {0}},
      {"Transpose", R::kTransparent, {0}},
      {"Reshape", R::kTransparent, {0}},
      {"Flatten", R::kTransparent, {0}},
      {"Squeeze", R::kTransparent, {0}},
      {"Unsqueeze", R::kTransparent, {0}},
  };
  return ops;
}

const QuantizableOp* quantizable(const Node& n, const QdqOptions& opts) {
  if (!n.domain.empty() || opts.exclude.count(n.name) || opts.exclude.count(n.op_type)) return nullptr;
  for (const auto& q : quantizable_ops())
    if (n.op_type == q.op) return &q;
  return nullptr;
}

bool is_float_activation(const Value* v) {
  return v && !v->is_constant() && v->type.kind == Type::Kind::kTensor && v->type.dtype == DType::kFloat32;
}

bool is_float_constant(const Value* v) {
  return v && v->is_constant() && v->initializer.dtype() == DType::kFloat32;
}

// Whether input i of n is one of its quantized activations.
bool is_activation_input(const Node& n, const QuantizableOp& q, size_t i) {
  if (!is_float_activation(n.inputs[i])) return false;
  for (int a : q.activations)
    if (a == -1 || a == static_cast<int>(i)) return true;
  return false;
}

// The index of n's weight input (a constant float tensor), or -1.
int weight_input(const Node& n, const QuantizableOp& q) {
  if (q.weight >= 0)
    return static_cast<int>(n.inputs.size()) > q.weight && is_float_constant(n.inputs[q.weight]) ? q.weight : -1;
  if (q.weight == -2)  // MatMul/Gemm: the constant one of the two operands
    for (int i = 0; i < 2 && i < static_cast<int>(n.inputs.size()); ++i)
      if (is_float_constant(n.inputs[i])) return i;
  return -1;
}

// The axis a weight is quantized along (its output channels), or -1 for per-tensor.
int weight_axis(const Node& n, int input, int rank) {
  AttrReader at(n);
  if (n.op_type == "Conv") return 0;
  if (n.op_type == "ConvTranspose") return at.attr_int("group", 1) == 1 && rank >= 2 ? 1 : -1;
  if (n.op_type == "MatMul") return input == 1 && rank >= 2 ? rank - 1 : -1;
  if (n.op_type == "Gemm") return input == 1 ? (at.attr_int("transB", 0) ? 0 : 1) : -1;
  return -1;
}

struct QuantizedWeight {
  Value* dequantized = nullptr;
  std::vector<float> scales;  // one per channel, or one
};

// Symmetric int8 over [-qmax, qmax] (no -128, as ONNX Runtime's weights): scale = max|w| / qmax
// per channel (or per tensor), zero point 0.
// `min_scale` (empty, or one per channel) raises a channel's scale where its bias would not fit
// int32 otherwise (a channel of near-zero weights with a real bias).
QuantizedWeight quantize_weight(GraphEditor& ed, Value* w, int axis, int qmax, const std::vector<double>& min_scale) {
  const Tensor& t = w->initializer;
  const int64_t channels = axis < 0 ? 1 : t.dim(axis);
  int64_t inner = 1;
  for (int d = axis + 1; d < t.rank() && axis >= 0; ++d) inner *= t.dim(d);
  std::vector<float> absmax(static_cast<size_t>(channels), 0.f);
  const float* src = t.data<float>();
  auto channel_of = [&](int64_t i) { return axis < 0 ? 0 : (i / inner) % channels; };
  for (int64_t i = 0; i < t.numel(); ++i) absmax[channel_of(i)] = std::max(absmax[channel_of(i)], std::fabs(src[i]));
  QuantizedWeight r;
  for (size_t c = 0; c < absmax.size(); ++c) {
    float s = absmax[c] > 0 ? absmax[c] / static_cast<float>(qmax) : 1.f;
    if (c < min_scale.size() && s < min_scale[c]) s = static_cast<float>(min_scale[c]);
    r.scales.push_back(s);
  }
  Tensor q(DType::kInt8, t.dims());
  int8_t* dst = q.data<int8_t>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float v = std::nearbyint(src[i] / r.scales[channel_of(i)]);
    dst[i] = static_cast<int8_t>(std::clamp(v, -static_cast<float>(qmax), static_cast<float>(qmax)));
  }
  Tensor scale = axis < 0 ? Tensor::scalar(DType::kFloat32, r.scales[0]) : Tensor(DType::kFloat32, {channels});
  Tensor zero = axis < 0 ? Tensor::scalar(DType::kInt8, 0) : Tensor(DType::kInt8, {channels});
  for (int64_t c = 0; c < channels && axis >= 0; ++c) scale.data<float>()[c] = r.scales[c];
  Value* qv = ed.add_constant(std::move(q), w->name + "_quantized");
  Value* sv = ed.add_constant(std::move(scale), w->name + "_scale");
  Value* zv = ed.add_constant(std::move(zero), w->name + "_zero_point");
  Node* dq = ed.add_node("DequantizeLinear", {qv, sv, zv}, w->type, w->name + "_DequantizeLinear_Output");
  dq->name = dq->outputs[0]->name;
  if (axis >= 0) dq->attrs["axis"] = Attribute::make_int(axis);
  r.dequantized = dq->outputs[0];
  return r;
}

// Accumulators have headroom when a bias stays within 2^30 steps.
constexpr double kBiasLimit = 1 << 30;

// The smallest weight scale per channel (of `channels`, or 1 for per-tensor) that keeps
// |bias / (input_scale * weight_scale)| within kBiasLimit.
std::vector<double> bias_safe_weight_scales(const Tensor& bias, double input_scale, int64_t channels) {
  std::vector<double> s(static_cast<size_t>(channels), 0.0);
  if (bias.rank() != 1 || (channels != 1 && bias.dim(0) != channels)) return {};
  for (int64_t c = 0; c < bias.dim(0); ++c) {
    double& m = s[channels == 1 ? 0 : c];
    m = std::max(m, std::fabs(bias.data<float>()[c]) / (input_scale * kBiasLimit * 0.999));  // float rounding
  }
  return s;
}

// int32 bias with scale input_scale * weight_scale[c], zero point 0 (what an int8 kernel adds to
// its accumulators). False when a value would not fit int32 (the bias stays float).
bool quantize_bias(GraphEditor& ed, Node& n, int bias_input, float input_scale, const std::vector<float>& wscales) {
  Value* b = n.inputs[bias_input];
  const Tensor& t = b->initializer;
  if (t.rank() != 1 || (wscales.size() != 1 && static_cast<int64_t>(wscales.size()) != t.dim(0))) return false;
  const int64_t channels = t.dim(0);
  const bool per_channel = wscales.size() != 1;
  Tensor q(DType::kInt32, {channels});
  std::vector<float> scales;
  for (int64_t c = 0; c < channels; ++c) {
    const double s = static_cast<double>(input_scale) * wscales[per_channel ? c : 0];
    const double v = std::nearbyint(t.data<float>()[c] / s);
    if (!(std::fabs(v) <= kBiasLimit)) return false;
    q.data<int32_t>()[c] = static_cast<int32_t>(v);
    if (per_channel || c == 0) scales.push_back(static_cast<float>(s));
  }
  // Per tensor: scalar scale and zero point (a per-axis DequantizeLinear needs opset 13).
  Tensor scale = per_channel ? Tensor(DType::kFloat32, {channels}) : Tensor::scalar(DType::kFloat32, scales[0]);
  for (int64_t c = 0; c < channels && per_channel; ++c) scale.data<float>()[c] = scales[c];
  Tensor zero = per_channel ? Tensor(DType::kInt32, {channels}) : Tensor::scalar(DType::kInt32, 0);
  Value* qv = ed.add_constant(std::move(q), b->name + "_quantized");
  Value* sv = ed.add_constant(std::move(scale), b->name + "_scale");
  Value* zv = ed.add_constant(std::move(zero), b->name + "_zero_point");
  Node* dq = ed.add_node("DequantizeLinear", {qv, sv, zv}, b->type, b->name + "_DequantizeLinear_Output");
  dq->name = dq->outputs[0]->name;
  if (per_channel) dq->attrs["axis"] = Attribute::make_int(0);
  n.inputs[bias_input] = dq->outputs[0];
  return true;
}

// One Q/DQ pair after `v`; every consumer of v reads the DequantizeLinear output.
Value* insert_pair(GraphEditor& ed, Value* v, QuantParams p, DType dtype) {
  Value* scale = ed.add_constant(Tensor::scalar(DType::kFloat32, p.scale), v->name + "_scale");
  Value* zero = ed.add_constant(Tensor::scalar(dtype, p.zero_point), v->name + "_zero_point");
  Type qt = v->type;
  qt.dtype = dtype;
  // The DQ node first (rerouting v's uses to it), then the Q node that reads v.
  Node* dq = ed.add_node("DequantizeLinear", {}, v->type, v->name + "_DequantizeLinear_Output");
  ed.replace_all_uses(v, dq->outputs[0]);
  Node* q = ed.add_node("QuantizeLinear", {v, scale, zero}, qt, v->name + "_QuantizeLinear_Output");
  dq->inputs = {q->outputs[0], scale, zero};
  q->name = q->outputs[0]->name;
  dq->name = dq->outputs[0]->name;
  return dq->outputs[0];
}

}  // namespace

QuantParams activation_quant_params(TensorRange r, DType activation_dtype) {
  const double lo = std::min(0.0, static_cast<double>(r.lo)), hi = std::max(0.0, static_cast<double>(r.hi));
  QuantParams p;
  if (!(hi - lo > 0) || !std::isfinite(hi - lo)) return p;
  p.scale = static_cast<float>((hi - lo) / 255.0);
  const double qmin = activation_dtype == DType::kInt8 ? -128 : 0;
  p.zero_point = static_cast<int32_t>(std::clamp(std::nearbyint(qmin - lo / p.scale), qmin, qmin + 255));
  return p;
}

std::vector<const Value*> qdq_candidates(const Model& m, const QdqOptions& opts) {
  const Graph& g = *m.graph;
  std::unordered_set<const Value*> chosen;
  auto choose_inputs = [&](const Node& n, const QuantizableOp& q) {
    for (size_t i = 0; i < n.inputs.size(); ++i)
      if (is_activation_input(n, q, i) && !is_graph_output(g, n.inputs[i])) chosen.insert(n.inputs[i]);
  };
  // Backwards, so that a transparent op sees whether its output was chosen by the ops after it.
  for (auto it = g.nodes.rbegin(); it != g.nodes.rend(); ++it) {
    const Node& n = **it;
    const QuantizableOp* q = quantizable(n, opts);
    if (!q) continue;
    bool reads_int8 = q->role == QuantRole::kCompute;
    if (q->role == QuantRole::kElementwise)
      reads_int8 = n.inputs.size() == 2 && is_float_activation(n.inputs[0]) && is_float_activation(n.inputs[1]);
    if (q->role == QuantRole::kTransparent)
      reads_int8 = !n.outputs.empty() && n.outputs[0] && chosen.count(n.outputs[0]);
    if (reads_int8) choose_inputs(n, *q);
  }
  // In node order (graph inputs first), for stable names and reports.
  std::vector<const Value*> out;
  for (const Value* v : g.inputs)
    if (chosen.count(v)) out.push_back(v);
  for (const auto& n : g.nodes)
    for (const Value* o : n->outputs)
      if (o && chosen.count(o)) out.push_back(o);
  return out;
}

void check_qdq_opset(const Model& m) {
  const int64_t opset = m.opset("");
  if (opset < 10)
    throw Error(ErrorKind::kUnsupported, "quantize: the model's opset " + std::to_string(opset) +
                                             " predates QuantizeLinear (opset 10); convert the model to opset 13 "
                                             "or later first (onnx.version_converter)");
}

QdqResult insert_qdq(Model& m, const std::map<std::string, TensorRange>& ranges, const QdqOptions& opts) {
  check_qdq_opset(m);
  const int64_t opset = m.opset("");
  if (opts.activation_dtype != DType::kUInt8 && opts.activation_dtype != DType::kInt8)
    throw Error(ErrorKind::kUsage, "quantize: activations are uint8 or int8");
  const bool per_channel = opts.per_channel && opset >= 13;
  QdqResult result;
  if (opts.per_channel && !per_channel)
    result.notes.push_back("opset " + std::to_string(opset) +
                           " < 13 has no per-axis DequantizeLinear: weights are quantized per tensor");
  Graph& g = *m.graph;
  GraphEditor ed(g);
  // Candidates are chosen before any rewrite (dequantized weights are not activations).
  const std::vector<const Value*> candidates = qdq_candidates(m, opts);
  std::unordered_map<const Value*, QuantParams> activation_params;
  for (const Value* cv : candidates) {
    auto it = ranges.find(cv->name);
    if (it == ranges.end()) continue;
    activation_params[cv] = activation_quant_params(it->second, opts.activation_dtype);
  }
  // Weights and biases first: the nodes still read the original activations, whose params we know.
  std::vector<Node*> nodes;
  for (auto& n : g.nodes) nodes.push_back(n.get());
  std::map<std::pair<const Value*, int>, QuantizedWeight> weights;
  for (Node* n : nodes) {
    const QuantizableOp* q = quantizable(*n, opts);
    const int wi = q ? weight_input(*n, *q) : -1;
    if (wi < 0) continue;
    Value* w = n->inputs[wi];
    const int axis = per_channel ? weight_axis(*n, wi, w->initializer.rank()) : -1;
    const int other = n->op_type == "MatMul" || n->op_type == "Gemm" ? 1 - wi : 0;
    auto ap = activation_params.find(n->inputs[other]);
    const bool plain_gemm = n->op_type != "Gemm" || (AttrReader(*n).attr_float("alpha", 1.f) == 1.f &&
                                                     AttrReader(*n).attr_float("beta", 1.f) == 1.f);
    const bool quantize_b = q->bias >= 0 && static_cast<int>(n->inputs.size()) > q->bias &&
                            is_float_constant(n->inputs[q->bias]) && ap != activation_params.end() && plain_gemm;
    auto key = std::make_pair(static_cast<const Value*>(w), axis);
    if (!weights.count(key)) {
      std::vector<double> min_scale;
      if (quantize_b)
        min_scale = bias_safe_weight_scales(n->inputs[q->bias]->initializer, ap->second.scale,
                                            axis < 0 ? 1 : w->initializer.dim(axis));
      weights[key] = quantize_weight(ed, w, axis, opts.weight_max(), min_scale);
      ++result.quantized_weights;
    }
    const QuantizedWeight& qw = weights[key];
    n->inputs[wi] = qw.dequantized;
    if (quantize_b) {
      if (quantize_bias(ed, *n, q->bias, ap->second.scale, qw.scales))
        ++result.quantized_biases;
      else
        result.notes.push_back("bias of " + n->display_name() + " kept float (int32 overflow)");
    }
  }
  for (const Value* cv : candidates) {
    auto it = activation_params.find(cv);
    if (it == activation_params.end()) continue;
    Value* v = const_cast<Value*>(cv);
    Value* dq = insert_pair(ed, v, it->second, opts.activation_dtype);
    result.quantized_tensors.push_back(v->name);
    result.dequantized_outputs.push_back(dq->name);
  }
  for (const auto& n : g.nodes) {
    if (n->op_type == "QuantizeLinear" || n->op_type == "DequantizeLinear") continue;
    const QuantizableOp* q = quantizable(*n, opts);
    const bool constant_operand = q && q->role == QuantRole::kElementwise &&
                                  !(n->inputs.size() == 2 && is_float_activation(n->inputs[0]) &&
                                    is_float_activation(n->inputs[1]));
    if (q && !constant_operand) continue;
    bool float_data = false;
    for (const Value* v : n->outputs) float_data |= v && v->type.dtype == DType::kFloat32;
    if (!float_data) continue;  // shape and index arithmetic
    const bool excluded = opts.exclude.count(n->name) || opts.exclude.count(n->op_type);
    // kiln's fused activations (fuse-composites) are written back as standard ops: named plainly.
    QdqResult::FloatOps& f = result.float_ops[n->domain == "kiln" ? n->op_type : n->qualified_op()];
    if (f.why.empty())
      f.why = excluded           ? "excluded (--exclude)"
              : constant_operand ? "with a constant operand (part of a float activation)"
                                 : "no int8 form in kiln quantize; computes in float";
    f.nodes.push_back(n->display_name());
  }
  ed.sort_topologically();
  // The float weights and biases that were replaced.
  PassContext ctx;
  find_pass("dce")->run(m, ctx);
  return result;
}

}  // namespace kiln
