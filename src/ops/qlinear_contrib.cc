// ONNX Runtime's com.microsoft quantized ops of its QOperator format (what
// onnxruntime.quantization writes with QuantFormat.QOperator): QLinearAdd, QLinearMul,
// QLinearSigmoid, QLinearLeakyRelu, QLinearAveragePool, QLinearGlobalAveragePool,
// QLinearConcat and QGemm. Reference kernels: the inputs are dequantized, the float op's own
// reference kernel computes, and the result is quantized (round half to even, saturate) — the
// definition ONNX Runtime's contrib-op docs give. (QLinearConv, QLinearMatMul: ops/quantize.cc.)
#include <cmath>
#include <limits>
#include <memory>

#include "ops/evaluate.h"
#include "ops/families.h"
#include "ops/op_util.h"
#include "ops/registry.h"

namespace kiln {
namespace {

bool quantized(DType d) { return d == DType::kUInt8 || d == DType::kInt8; }

// One scale or zero point: a scalar (or one-element) tensor.
double scalar_param(const KernelContext& ctx, int i, const char* what) {
  const Tensor& t = ctx.input(i);
  if (t.numel() != 1) ctx.fail(ErrorKind::kUnsupported, std::string(what) + " must be a scalar here");
  return t.get_double(0);
}

// (q - zp) * scale as a float32 tensor; zp is input zi when present.
Tensor dequantize(const KernelContext& ctx, int qi, int si, int zi) {
  const Tensor& q = ctx.input(qi);
  if (!quantized(q.dtype()))
    ctx.fail(ErrorKind::kBadInput, "input " + std::to_string(qi) + " should be uint8 or int8, got " +
                                       std::string(dtype_name(q.dtype())));
  const float scale = static_cast<float>(scalar_param(ctx, si, "scale"));
  const double zp = ctx.has_input(zi) ? scalar_param(ctx, zi, "zero point") : 0.0;
  Tensor f(DType::kFloat32, q.dims());
  for (int64_t i = 0; i < q.numel(); ++i)
    f.data<float>()[i] = static_cast<float>(q.get_double(i) - zp) * scale;
  return f;
}

// round_half_even(x / scale) + zp, saturated to `to`.
Tensor quantize(const KernelContext& ctx, const Tensor& x, int si, int zi, DType to) {
  const float scale = static_cast<float>(scalar_param(ctx, si, "scale"));
  const double zp = ctx.has_input(zi) ? scalar_param(ctx, zi, "zero point") : 0.0;
  const double lo = to == DType::kUInt8 ? 0 : -128, hi = lo + 255;
  Tensor q(to, x.dims());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = std::nearbyint(static_cast<double>(x.data<float>()[i] / scale)) + zp;
    q.set_double(i, std::clamp(v, lo, hi));
  }
  return q;
}

// Runs the float op `op` (default domain, opset 13 semantics) with `attrs` on `inputs`.
Tensor run_float_op(const KernelContext& ctx, const std::string& op, const std::vector<Tensor>& inputs,
                    std::map<std::string, Attribute> attrs = {}) {
  const OpSchema* schema = OpRegistry::global().find("", op, 13);
  if (!schema || !schema->kernel) ctx.fail(ErrorKind::kInternal, "no reference kernel for " + op);
  Graph scratch;
  Node n;
  n.op_type = op;
  n.name = ctx.node().name;
  n.attrs = std::move(attrs);
  std::vector<RtValue> values;
  values.reserve(inputs.size());
  std::vector<const RtValue*> ins;
  for (size_t i = 0; i < inputs.size(); ++i) {
    n.inputs.push_back(scratch.add_value("in" + std::to_string(i)));
    values.emplace_back(inputs[i]);
    ins.push_back(&values.back());
  }
  n.outputs.push_back(scratch.add_value("out"));
  return evaluate_node(n, *schema, 13, ins)[0].tensor;
}

// The node's attributes except those named (ONNX Runtime's own, unknown to the float op).
std::map<std::string, Attribute> attrs_except(const KernelContext& ctx, std::initializer_list<const char*> drop) {
  std::map<std::string, Attribute> a = ctx.node().attrs;
  for (const char* d : drop) a.erase(d);
  return a;
}

DType output_type(const KernelContext& ctx, int zi, int qi) {
  return ctx.has_input(zi) ? ctx.input(zi).dtype() : ctx.input(qi).dtype();
}

// QLinearAdd / QLinearMul (A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp).
template <const char* kOp>
void qlinear_binary_kernel(KernelContext& ctx) {
  const Tensor y = run_float_op(ctx, kOp, {dequantize(ctx, 0, 1, 2), dequantize(ctx, 3, 4, 5)});
  ctx.set_output(0, quantize(ctx, y, 6, 7, output_type(ctx, 7, 0)));
}
constexpr char kAdd[] = "Add";
constexpr char kMul[] = "Mul";

// (X, X_scale, X_zp, Y_scale, Y_zp) around a float op: Sigmoid, LeakyRelu, AveragePool, ...
template <const char* kOp>
void qlinear_unary_kernel(KernelContext& ctx) {
  Tensor x = dequantize(ctx, 0, 1, 2);
  Tensor y;
  if (ctx.attr_int("channels_last", 0) != 0) {
    // NHWC: pooled as NCHW between two transposes.
    const int rank = x.rank();
    std::vector<int64_t> to_first = {0, rank - 1}, to_last = {0};
    for (int d = 1; d < rank - 1; ++d) to_first.push_back(d);
    for (int d = 2; d < rank; ++d) to_last.push_back(d);
    to_last.push_back(1);
    x = run_float_op(ctx, "Transpose", {x}, {{"perm", Attribute::make_ints(to_first)}});
    y = run_float_op(ctx, kOp, {x}, attrs_except(ctx, {"channels_last"}));
    y = run_float_op(ctx, "Transpose", {y}, {{"perm", Attribute::make_ints(to_last)}});
  } else {
    y = run_float_op(ctx, kOp, {x}, attrs_except(ctx, {"channels_last"}));
  }
  ctx.set_output(0, quantize(ctx, y, 3, 4, output_type(ctx, 4, 0)));
}
constexpr char kSigmoid[] = "Sigmoid";
constexpr char kLeakyRelu[] = "LeakyRelu";
constexpr char kAveragePool[] = "AveragePool";
constexpr char kGlobalAveragePool[] = "GlobalAveragePool";

// QLinearConcat (Y_scale, Y_zp, then (X, X_scale, X_zp) per input).
void qlinear_concat_kernel(KernelContext& ctx) {
  if (ctx.num_inputs() < 5 || (ctx.num_inputs() - 2) % 3 != 0)
    ctx.fail(ErrorKind::kInvalidModel, "QLinearConcat takes Y_scale, Y_zero_point and (X, scale, zero point) triples");
  std::vector<Tensor> xs;
  for (int i = 2; i < ctx.num_inputs(); i += 3) xs.push_back(dequantize(ctx, i, i + 1, i + 2));
  const Tensor y = run_float_op(ctx, "Concat", xs, attrs_except(ctx, {}));
  ctx.set_output(0, quantize(ctx, y, 0, 1, output_type(ctx, 1, 2)));
}

// QGemm (A, a_scale, a_zp, B, b_scale, b_zp, C?, y_scale?, y_zp?): B's scale and zero point may
// be per column; C is an int32 bias in a_scale * b_scale units. Float output without y_scale.
void qgemm_kernel(KernelContext& ctx) {
  const bool trans_b = ctx.attr_int("transB", 0) != 0;
  const Tensor a = dequantize(ctx, 0, 1, 2);
  const Tensor& bq = ctx.input(3);
  const Tensor& bs = ctx.input(4);
  if (bq.rank() != 2) ctx.fail(ErrorKind::kBadInput, "QGemm's B must be 2-D");
  const int64_t n = trans_b ? bq.dim(0) : bq.dim(1);
  if (bs.numel() != 1 && bs.numel() != n) ctx.fail(ErrorKind::kBadInput, "QGemm's b_scale must be a scalar or per column");
  const bool has_bz = ctx.has_input(5);
  if (has_bz && ctx.input(5).numel() != bs.numel())
    ctx.fail(ErrorKind::kBadInput, "QGemm's b_zero_point must match b_scale's size");
  Tensor b(DType::kFloat32, bq.dims());
  for (int64_t i = 0; i < bq.numel(); ++i) {
    const int64_t col = bs.numel() == 1 ? 0 : (trans_b ? i / bq.dim(1) : i % bq.dim(1));
    const double zp = has_bz ? ctx.input(5).get_double(col) : 0.0;
    b.data<float>()[i] = static_cast<float>(bq.get_double(i) - zp) * static_cast<float>(bs.get_double(col));
  }
  std::vector<Tensor> ins = {a, b};
  if (ctx.has_input(6)) {
    const Tensor& c = ctx.input(6);
    const float as = static_cast<float>(scalar_param(ctx, 1, "a_scale"));
    Tensor cf(DType::kFloat32, c.dims());
    for (int64_t i = 0; i < c.numel(); ++i) {
      const int64_t col = bs.numel() == 1 ? 0 : i % n;
      cf.data<float>()[i] = static_cast<float>(c.get_double(i)) * as * static_cast<float>(bs.get_double(col));
    }
    ins.push_back(cf);
  }
  const Tensor y = run_float_op(ctx, "Gemm", ins, attrs_except(ctx, {}));
  if (ctx.has_input(7)) ctx.set_output(0, quantize(ctx, y, 7, 8, output_type(ctx, 8, 0)));
  else ctx.set_output(0, y);
}

// Output types: the y zero point's type (input zi), else the first input's; QGemm without
// y_scale is float. Shapes: broadcasting for Add/Mul, input 0's for the elementwise ones, and
// left to run time for pooling, Concat and QGemm.
void infer_output_type(InferContext& ctx, int zi, int fallback, bool same_shape) {
  DType d = ctx.num_inputs() > zi && ctx.has_input(zi) ? ctx.input_type(zi).dtype : ctx.input_type(fallback).dtype;
  Type t = same_shape ? ctx.input_type(0) : Type::tensor(d);
  t.dtype = d;
  ctx.set_output_type(0, t);
}
void infer_qlinear_binary(InferContext& ctx) {
  infer_output_type(ctx, 7, 0, false);
  const Type& a = ctx.input_type(0);
  const Type& b = ctx.input_type(3);
  if (!a.shape || !b.shape) return;
  // Broadcast dims where both are known (the float op checks the rest at run time).
  const size_t rank = std::max(a.shape->rank(), b.shape->rank());
  Shape s;
  for (size_t i = 0; i < rank; ++i) {
    const size_t ia = i + a.shape->rank(), ib = i + b.shape->rank();
    const Dim da = ia >= rank ? a.shape->dims[ia - rank] : Dim(1);
    const Dim db = ib >= rank ? b.shape->dims[ib - rank] : Dim(1);
    if (da.known() && db.known()) s.dims.push_back(Dim(std::max(da.value, db.value)));
    else if (da.known() && da.value == 1) s.dims.push_back(db);
    else if (db.known() && db.value == 1) s.dims.push_back(da);
    else s.dims.push_back(da == db ? da : Dim());
  }
  ctx.set_output_type(0, Type::tensor(ctx.num_inputs() > 7 && ctx.has_input(7) ? ctx.input_type(7).dtype
                                                                               : a.dtype,
                                      s));
}
void infer_qlinear_elementwise(InferContext& ctx) { infer_output_type(ctx, 4, 0, true); }
void infer_qlinear_pool(InferContext& ctx) { infer_output_type(ctx, 4, 0, false); }
// [N, C, 1, ...] (or [N, 1, ..., C] with channels_last).
void infer_qlinear_global_pool(InferContext& ctx) {
  infer_output_type(ctx, 4, 0, true);
  Type t = ctx.input_type(0);
  if (!t.shape || t.shape->rank() < 3) return;
  const bool last = ctx.attr_int("channels_last", 0) != 0;
  const size_t rank = t.shape->rank();
  for (size_t d = last ? 1 : 2; d < (last ? rank - 1 : rank); ++d) t.shape->dims[d] = Dim(1);
  t.dtype = ctx.num_inputs() > 4 && ctx.has_input(4) ? ctx.input_type(4).dtype : t.dtype;
  ctx.set_output_type(0, t);
}
void infer_qlinear_concat(InferContext& ctx) { infer_output_type(ctx, 1, 2, false); }
// [M, N] from A, B and the transposes.
void infer_qgemm(InferContext& ctx) {
  const DType d = ctx.num_inputs() > 7 && ctx.has_input(7)
                      ? (ctx.num_inputs() > 8 && ctx.has_input(8) ? ctx.input_type(8).dtype : ctx.input_type(0).dtype)
                      : DType::kFloat32;
  const Type& a = ctx.input_type(0);
  const Type& b = ctx.input_type(3);
  if (!a.shape || !b.shape || a.shape->rank() != 2 || b.shape->rank() != 2) {
    ctx.set_output_type(0, Type::tensor(d));
    return;
  }
  const Dim m = a.shape->dims[ctx.attr_int("transA", 0) ? 1 : 0];
  const Dim n = b.shape->dims[ctx.attr_int("transB", 0) ? 0 : 1];
  ctx.set_output_type(0, Type::tensor(d, Shape(std::vector<Dim>{m, n})));
}

}  // namespace

void register_qlinear_contrib_ops(OpRegistry& r) {
  const char* ms = "com.microsoft";
  r.add("QLinearAdd", ms).since(1).inputs(7, 8).outputs(1).run(qlinear_binary_kernel<kAdd>).shape(infer_qlinear_binary);
  r.add("QLinearMul", ms).since(1).inputs(7, 8).outputs(1).run(qlinear_binary_kernel<kMul>).shape(infer_qlinear_binary);
  r.add("QLinearSigmoid", ms).since(1).inputs(4, 5).outputs(1).run(qlinear_unary_kernel<kSigmoid>)
      .shape(infer_qlinear_elementwise);
  r.add("QLinearLeakyRelu", ms).since(1).inputs(4, 5).outputs(1).run(qlinear_unary_kernel<kLeakyRelu>)
      .shape(infer_qlinear_elementwise);
  r.add("QLinearAveragePool", ms).since(1).inputs(4, 5).outputs(1).run(qlinear_unary_kernel<kAveragePool>)
      .shape(infer_qlinear_pool);
  r.add("QLinearGlobalAveragePool", ms).since(1).inputs(4, 5).outputs(1)
      .run(qlinear_unary_kernel<kGlobalAveragePool>).shape(infer_qlinear_global_pool);
  r.add("QLinearConcat", ms).since(1).inputs(5, -1).outputs(1).run(qlinear_concat_kernel).shape(infer_qlinear_concat);
  r.add("QGemm", ms).since(1).inputs(6, 9).outputs(1).run(qgemm_kernel).shape(infer_qgemm);
}

}  // namespace kiln
