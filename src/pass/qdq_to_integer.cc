// qdq-to-integer: a static QDQ MatMul/Gemm — DequantizeLinear of a uint8 activation (one scale
// and zero point) times DequantizeLinear of a constant int8 2-D weight (per tensor or per output
// column) — becomes MatMulInteger on the integers, Cast, one Mul by the product of the scales
// (and Gemm's alpha) and Add of Gemm's bias: the form dynamic quantization writes, which the
// compiled engine runs on the int8 GEMM (runtime/matmul_integer.h). The same value up to float
// rounding: the integer sum is exact, the scales apply once instead of per operand.
// In the engine's pipeline before fold-dequantize (which would turn the weight to float); not in
// `kiln optimize`'s output, which keeps the QDQ form other runtimes' int8 kernels match.
// A MaxPool between a DequantizeLinear and a QuantizeLinear of the same parameters pools the
// integers instead (rewrite_max_pool).
// Tests: tests/pass/golden/qdq-to-integer/*.kir, tests/pass/test_qdq_to_integer.cc (values).
#include <algorithm>
#include <optional>
#include <vector>

#include "ir/rewrite.h"
#include "ops/registry.h"
#include "pass/passes.h"

namespace kiln {
namespace {

// Whether the int8 GEMM beats the float path for this weight here (PassContext::int8_gemm).
// Measured on an EPYC with AVX2 only (Zen 4 with AVX-512 hidden, KILN_ISA=avx2), 1 thread: a QDQ
// ResNet-50 took 155 ms as ConvInteger with 8-bit weights and 128 ms with 7-bit ones against
// 85 ms float (float 3x3 convs run Winograd; int16 products issue as often as fp32 FMAs), while
// 7-bit MatMul weights take the vpmaddubsw kernel, 1.7-1.9x sgemm. So AVX2 keeps convs float.
bool integer_pays(Int8Gemm gemm, const Tensor& weight, bool conv) {
  if (gemm != Int8Gemm::kSevenBit || conv) return gemm == Int8Gemm::kFull;
  const int8_t* w = weight.data<int8_t>();
  return std::all_of(w, w + weight.numel(), [](int8_t v) { return v >= -64 && v <= 63; });
}

bool one_element(const Value* v) { return v && v->is_constant() && v->initializer.numel() == 1; }

const Node* dequantize_producer(const Value* v) {
  const Node* p = v ? v->producer : nullptr;
  if (!p || !p->domain.empty() || p->op_type != "DequantizeLinear" || p->inputs.size() < 2) return nullptr;
  if (AttrReader(*p).attr_int("block_size", 0) != 0) return nullptr;
  return p;
}

const Value* zero_point_of(const Node& dq) { return dq.inputs.size() > 2 ? dq.inputs[2] : nullptr; }

// The activation side: DequantizeLinear(uint8 x, one-element constant scale[, zero point]).
struct QuantizedActivation {
  Value* q = nullptr;
  float scale = 1;
  Value* zero_point = nullptr;  // null: 0
};
std::optional<QuantizedActivation> activation_of(const Value* a) {
  const Node* dq = dequantize_producer(a);
  if (!dq || dq->inputs[0]->type.dtype != DType::kUInt8 || !one_element(dq->inputs[1]) ||
      dq->inputs[1]->initializer.dtype() != DType::kFloat32)
    return std::nullopt;
  const Value* z = zero_point_of(*dq);
  if (z && !one_element(z)) return std::nullopt;
  return QuantizedActivation{dq->inputs[0], dq->inputs[1]->initializer.data<float>()[0], const_cast<Value*>(z)};
}

// The weight side as [K, N]: int8 values, zero points and scales, each one or one per column.
struct QuantizedWeight {
  Tensor q;           // int8 [K, N]
  Tensor zero_point;  // int8, 1 or N elements
  std::vector<float> scale;
};
std::optional<QuantizedWeight> weight_of(const Value* b, bool transposed) {
  const Node* dq = dequantize_producer(b);
  if (!dq) return std::nullopt;
  const Value *w = dq->inputs[0], *s = dq->inputs[1], *z = zero_point_of(*dq);
  if (!w->is_constant() || w->initializer.dtype() != DType::kInt8 || w->initializer.rank() != 2 ||
      !s->is_constant() || s->initializer.dtype() != DType::kFloat32 || (z && !z->is_constant()))
    return std::nullopt;
  const int64_t rows = w->initializer.dim(0), cols = w->initializer.dim(1);
  const int64_t n = transposed ? rows : cols, k = transposed ? cols : rows;
  const int64_t count = s->initializer.numel();
  // Per-axis scales must run along the output columns: axis 1 of [K, N], axis 0 of [N, K].
  const int64_t axis = AttrReader(*dq).attr_int("axis", 1);
  if (count != 1 && (count != n || s->initializer.rank() != 1 || (axis + 2) % 2 != (transposed ? 0 : 1)))
    return std::nullopt;
  if (z && (z->initializer.dtype() != DType::kInt8 || z->initializer.numel() != count)) return std::nullopt;
  QuantizedWeight r{Tensor(DType::kInt8, {k, n}), Tensor(DType::kInt8, count == 1 ? std::vector<int64_t>{}
                                                                                   : std::vector<int64_t>{n}),
                    {}};
  const int8_t* src = w->initializer.data<int8_t>();
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < n; ++j) r.q.data<int8_t>()[i * n + j] = transposed ? src[j * k + i] : src[i * n + j];
  for (int64_t j = 0; j < count; ++j) {
    r.scale.push_back(s->initializer.data<float>()[j]);
    r.zero_point.data<int8_t>()[j] = z ? z->initializer.data<int8_t>()[j] : 0;
  }
  return r;
}

// Cast(integer) * scale in float, replacing `out`'s producer's result: the integer node, Cast and
// Mul, each named after its output. Returns the Mul's output.
Value* scaled_to_float(GraphEditor& ed, Node* integer, const Value* out, Tensor scale) {
  const std::string& base = out->name;
  Node* cast = ed.add_node("Cast", {integer->outputs[0]}, out->type, base + "_Cast");
  cast->attrs["to"] = Attribute::make_int(1);  // FLOAT
  Node* y = ed.add_node("Mul", {cast->outputs[0], ed.add_constant(std::move(scale), base + "_scale")}, out->type,
                        base + "_Mul");
  for (Node* x : {integer, cast, y}) x->name = x->outputs[0]->name;
  return y->outputs[0];
}

// A Conv's weight: int8 [M, C, kh, kw] with zero points absent or 0 and scales one or one per
// output channel (axis 0). Returns the scales.
std::optional<std::vector<float>> conv_weight_scales(const Node* dq) {
  if (!dq) return std::nullopt;
  const Value *w = dq->inputs[0], *s = dq->inputs[1], *z = zero_point_of(*dq);
  if (!w->is_constant() || w->initializer.dtype() != DType::kInt8 || w->initializer.rank() != 4 ||
      !s->is_constant() || s->initializer.dtype() != DType::kFloat32)
    return std::nullopt;
  const int64_t count = s->initializer.numel(), m = w->initializer.dim(0);
  if (count != 1 && (count != m || s->initializer.rank() != 1 || AttrReader(*dq).attr_int("axis", 1) != 0))
    return std::nullopt;
  if (z && (!z->is_constant() || z->initializer.dtype() != DType::kInt8)) return std::nullopt;
  for (int64_t i = 0; z && i < z->initializer.numel(); ++i)
    if (z->initializer.get_int(i) != 0) return std::nullopt;
  const float* ps = s->initializer.data<float>();
  return std::vector<float>(ps, ps + count);
}

// Conv (2-D, group 1, 3+ input channels) -> ConvInteger, Cast, Mul by the scales per channel ([M, 1, 1]), Add of
// the bias reshaped alike (constant-folding folds the Reshape once fold-dequantize made the
// bias a constant).
bool rewrite_conv(GraphEditor& ed, Node& n, Int8Gemm gemm) {
  Value* out = n.outputs[0];
  if (n.inputs.size() < 2 || out->type.dtype != DType::kFloat32 || AttrReader(n).attr_int("group", 1) != 1)
    return false;
  const auto a = activation_of(n.inputs[0]);
  const Node* wdq = a ? dequantize_producer(n.inputs[1]) : nullptr;
  const auto ws = conv_weight_scales(wdq);
  // One- and two-channel stems stay float: the int8 GEMM pads channels to quads of 4 (an RGB
  // stem uses 3 of 4 products, and at 1.3x the float stem's speed; a grayscale one 1 of 4).
  if (!ws || wdq->inputs[0]->initializer.dim(1) < 3 || !integer_pays(gemm, wdq->inputs[0]->initializer, true)) return false;
  const Value* bias = n.inputs.size() > 2 ? n.inputs[2] : nullptr;
  if (bias && bias->type.dtype != DType::kFloat32) return false;
  const std::string base = out->name;
  const int64_t m = wdq->inputs[0]->initializer.dim(0);
  Tensor scale = ws->size() == 1 ? Tensor::scalar(DType::kFloat32, 0.f) : Tensor(DType::kFloat32, {m, 1, 1});
  for (size_t j = 0; j < ws->size(); ++j) scale.data<float>()[j] = a->scale * (*ws)[j];
  std::vector<Value*> ins = {a->q, wdq->inputs[0]};
  if (a->zero_point) ins.push_back(a->zero_point);
  Type int_type = out->type;
  int_type.dtype = DType::kInt32;
  Node* conv = ed.add_node("ConvInteger", ins, int_type, base + "_ConvInteger");
  for (const char* attr : {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"})
    if (const Attribute* at = n.attr(attr)) conv->attrs[attr] = *at;
  Value* result = scaled_to_float(ed, conv, out, std::move(scale));
  if (bias) {
    Node* r = ed.add_node("Reshape", {const_cast<Value*>(bias), ed.add_ints({m, 1, 1}, base + "_bias_shape")},
                          Type::tensor(DType::kFloat32, Shape::of({m, 1, 1})), base + "_bias_channels");
    Node* add = ed.add_node("Add", {result, r->outputs[0]}, out->type, base + "_bias");
    for (Node* x : {r, add}) x->name = x->outputs[0]->name;
    result = add->outputs[0];
  }
  ed.replace_all_uses(out, result);
  return true;
}

bool rewrite(GraphEditor& ed, Node& n, Int8Gemm gemm) {
  const bool is_gemm = n.op_type == "Gemm";
  AttrReader at(n);
  Value* out = n.outputs[0];
  if (n.inputs.size() < 2 || out->type.dtype != DType::kFloat32 || (is_gemm && at.attr_int("transA", 0))) return false;
  const auto a = activation_of(n.inputs[0]);
  auto w = a ? weight_of(n.inputs[1], is_gemm && at.attr_int("transB", 0)) : std::nullopt;
  if (!w || !integer_pays(gemm, w->q, false)) return false;
  const Value* bias = is_gemm && n.inputs.size() > 2 ? n.inputs[2] : nullptr;
  if (bias && bias->type.dtype != DType::kFloat32) return false;
  const float alpha = is_gemm ? at.attr_float("alpha", 1.f) : 1.f, beta = is_gemm ? at.attr_float("beta", 1.f) : 1.f;

  const std::string base = out->name;
  Tensor scale = w->scale.size() == 1 ? Tensor::scalar(DType::kFloat32, 0.f)
                                      : Tensor(DType::kFloat32, {static_cast<int64_t>(w->scale.size())});
  for (size_t j = 0; j < w->scale.size(); ++j) scale.data<float>()[j] = a->scale * w->scale[j] * alpha;
  Value* za = a->zero_point ? a->zero_point : ed.add_constant(Tensor::scalar(DType::kUInt8, 0), base + "_a_zero_point");
  Value* wq = ed.add_constant(std::move(w->q), n.inputs[1]->name + "_integer");
  Value* zw = ed.add_constant(std::move(w->zero_point), n.inputs[1]->name + "_zero_point");
  Type int_type = out->type;
  int_type.dtype = DType::kInt32;
  Node* mm = ed.add_node("MatMulInteger", {a->q, wq, za, zw}, int_type, base + "_MatMulInteger");
  Value* result = scaled_to_float(ed, mm, out, std::move(scale));
  if (bias) {
    Value* c = const_cast<Value*>(bias);
    if (beta != 1.f) {
      Node* scaled = ed.add_node("Mul", {c, ed.add_constant(Tensor::scalar(DType::kFloat32, beta), base + "_beta")},
                                 bias->type, base + "_beta_bias");
      scaled->name = scaled->outputs[0]->name;
      c = scaled->outputs[0];
    }
    Node* add = ed.add_node("Add", {result, c}, out->type, base + "_bias");
    add->name = add->outputs[0]->name;
    result = add->outputs[0];
  }
  ed.replace_all_uses(out, result);
  return true;
}

// One-element constant equal to `b`'s (both absent counts as equal: zero point 0).
bool same_constant(const Value* a, const Value* b) {
  if (!a || !b) return a == b;
  if (!one_element(a) || !one_element(b) || a->initializer.dtype() != b->initializer.dtype()) return false;
  return a->initializer.get_double(0) == b->initializer.get_double(0);
}

// DequantizeLinear(x) -> MaxPool -> QuantizeLinear with the same scale and zero point (QDQ
// quantizers give a pool its input's parameters) is a MaxPool of the integers x: the max commutes
// with the increasing DequantizeLinear (a positive scale), and quantizing a dequantized value
// gives it back. The pool's float output, if anything else reads it, becomes a DequantizeLinear of
// the integer pool. Opset 12+ (MaxPool on 8-bit integers).
bool rewrite_max_pool(GraphEditor& ed, Node& n, const UseMap& uses) {
  Value* out = n.outputs[0];
  if (n.outputs.size() > 1 && n.outputs[1]) return false;  // Indices
  const Node* dq = dequantize_producer(n.inputs.empty() ? nullptr : n.inputs[0]);
  if (!dq || uses.count(out) != 1) return false;
  Value* x = dq->inputs[0];
  const Value* scale = dq->inputs[1];
  if ((x->type.dtype != DType::kUInt8 && x->type.dtype != DType::kInt8) || !one_element(scale) ||
      scale->initializer.dtype() != DType::kFloat32 || !(scale->initializer.data<float>()[0] > 0))
    return false;
  Node* q = uses.of(out)[0];
  if (q->op_type != "QuantizeLinear" || !q->domain.empty() || q->inputs.size() < 2 || q->inputs[0] != out ||
      q->outputs.size() != 1 || q->outputs[0]->type.dtype != x->type.dtype || !same_constant(q->inputs[1], scale) ||
      !same_constant(q->inputs.size() > 2 ? q->inputs[2] : nullptr, zero_point_of(*dq)) || q->attr("precision"))
    return false;
  Node* pool = ed.add_node("MaxPool", {x}, q->outputs[0]->type, out->name + "_integer");
  for (const auto& [k, a] : n.attrs) pool->attrs[k] = a;
  pool->name = pool->outputs[0]->name;
  std::vector<Value*> dq_ins = {pool->outputs[0], const_cast<Value*>(scale)};
  if (const Value* z = zero_point_of(*dq)) dq_ins.push_back(const_cast<Value*>(z));
  Node* back = ed.add_node("DequantizeLinear", dq_ins, out->type, out->name + "_dequantized");
  back->name = back->outputs[0]->name;
  ed.replace_all_uses(q->outputs[0], pool->outputs[0]);
  ed.replace_all_uses(out, back->outputs[0]);
  return true;
}

bool run(Model& m, PassContext& ctx) {
  if (m.opset("") < 10) return false;  // no MatMulInteger
  GraphEditor ed(*m.graph);
  const Int8Gemm gemm = ctx.int8_gemm;
  if (gemm == Int8Gemm::kNone) return false;
  const bool matmuls = ed.rewrite_nodes("MatMul", [&](Node& n) { return rewrite(ed, n, gemm); });
  const bool gemms = ed.rewrite_nodes("Gemm", [&](Node& n) { return rewrite(ed, n, gemm); });
  const bool convs = ed.rewrite_nodes("Conv", [&](Node& n) { return rewrite_conv(ed, n, gemm); });
  const UseMap uses = compute_uses(*m.graph);
  const bool pools = m.opset("") >= 12 &&
                     ed.rewrite_nodes("MaxPool", [&](Node& n) { return rewrite_max_pool(ed, n, uses); });
  return matmuls || gemms || convs || pools;
}

}  // namespace

PassInfo qdq_to_integer_pass() {
  return {"qdq-to-integer",
          "QDQ MatMul/Gemm/Conv of uint8 activations and constant int8 weights to MatMulInteger/ConvInteger (engine only)",
          run};
}

}  // namespace kiln
