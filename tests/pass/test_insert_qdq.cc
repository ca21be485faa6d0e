// insert_qdq (pass/insert_qdq.h), IR in / IR out: which activations get Q/DQ pairs, int8
// weights per channel or per tensor, int32 biases, activations before Relu, graph outputs kept
// float, excluded nodes, and the model's semantics kept up to quantization error.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/text.h"
#include "pass/insert_qdq.h"
#include "runtime/interpreter.h"

namespace kiln {
namespace {

const char* kConvRelu = R"(
model ir=8 opsets={"": 13}
graph @main(%x: f32[1,2,3,3]) -> (%y: f32[1,2,1,1]) {
  %w = const f32[2,2,1,1] [1, -0.5, 0.25, 2]
  %b = const f32[2] [0.5, -1]
  %c = Conv(%x, %w, %b) : f32[1,2,3,3]
  %r = Relu(%c) : f32[1,2,3,3]
  %p = GlobalAveragePool(%r) : f32[1,2,1,1]
  %y = Conv(%p, %w) : f32[1,2,1,1]
  return %y
}
)";

std::map<std::string, TensorRange> ranges(std::initializer_list<std::pair<const std::string, TensorRange>> r) {
  return r;
}

TEST(InsertQdq, ConvReluPerChannel) {
  Model m = parse_model(kConvRelu);
  QdqResult r = insert_qdq(
      m, ranges({{"x", {-1.f, 1.f}}, {"c", {-3.f, 3.f}}, {"r", {0.f, 2.55f}}, {"p", {0.f, 2.f}}}), {});
  // The second Conv reads p as int8, so the pooling reads r as int8 too; the Relu computes in
  // float, so c (before it) stays float; y is a graph output. One weight serves both Convs.
  EXPECT_EQ(r.quantized_tensors, (std::vector<std::string>{"x", "r", "p"}));
  EXPECT_EQ(r.quantized_weights, 1);
  EXPECT_EQ(r.quantized_biases, 1);
  EXPECT_TRUE(r.notes.empty());
  EXPECT_EQ(print_model(m), R"(model ir=8 opsets={"": 13}
graph @main(%x: f32[1,2,3,3]) -> (%y: f32[1,2,1,1]) {
  %w_quantized_0 = const i8[2,2,1,1] [127, -64, 16, 127]
  %w_scale_1 = const f32[2] [0.007874016, 0.015748031]
  %w_zero_point_2 = const i8[2] [0, 0]
  %b_quantized_4 = const i32[2] [8096, -8096]
  %b_scale_5 = const f32[2] [6.175699e-05, 0.00012351398]
  %b_zero_point_6 = const i32[2] [0, 0]
  %x_scale_8 = const f32[] [0.007843138]
  %x_zero_point_9 = const u8[] [127]
  %r_scale_12 = const f32[] [0.01]
  %r_zero_point_13 = const u8[] [0]
  %p_scale_16 = const f32[] [0.007843138]
  %p_zero_point_17 = const u8[] [0]
  %x_QuantizeLinear_Output_11 = QuantizeLinear(%x, %x_scale_8, %x_zero_point_9) #x_QuantizeLinear_Output_11 : u8[1,2,3,3]
  %x_DequantizeLinear_Output_10 = DequantizeLinear(%x_QuantizeLinear_Output_11, %x_scale_8, %x_zero_point_9) #x_DequantizeLinear_Output_10 : f32[1,2,3,3]
  %w_DequantizeLinear_Output_3 = DequantizeLinear(%w_quantized_0, %w_scale_1, %w_zero_point_2) {axis=0} #w_DequantizeLinear_Output_3 : f32[2,2,1,1]
  %b_DequantizeLinear_Output_7 = DequantizeLinear(%b_quantized_4, %b_scale_5, %b_zero_point_6) {axis=0} #b_DequantizeLinear_Output_7 : f32[2]
  %c = Conv(%x_DequantizeLinear_Output_10, %w_DequantizeLinear_Output_3, %b_DequantizeLinear_Output_7) : f32[1,2,3,3]
  %r = Relu(%c) : f32[1,2,3,3]
  %r_QuantizeLinear_Output_15 = QuantizeLinear(%r, %r_scale_12, %r_zero_point_13) #r_QuantizeLinear_Output_15 : u8[1,2,3,3]
  %r_DequantizeLinear_Output_14 = DequantizeLinear(%r_QuantizeLinear_Output_15, %r_scale_12, %r_zero_point_13) #r_DequantizeLinear_Output_14 : f32[1,2,3,3]
  %p = GlobalAveragePool(%r_DequantizeLinear_Output_14) : f32[1,2,1,1]
  %p_QuantizeLinear_Output_19 = QuantizeLinear(%p, %p_scale_16, %p_zero_point_17) #p_QuantizeLinear_Output_19 : u8[1,2,1,1]
  %p_DequantizeLinear_Output_18 = DequantizeLinear(%p_QuantizeLinear_Output_19, %p_scale_16, %p_zero_point_17) #p_DequantizeLinear_Output_18 : f32[1,2,1,1]
  %y = Conv(%p_DequantizeLinear_Output_18, %w_DequantizeLinear_Output_3) : f32[1,2,1,1]
  return %y
}
)");
}

const char* kMatMulAdd = R"(
model ir=8 opsets={"": 12}
graph @main(%x: f32[2,4], %z: f32[2,3]) -> (%y: f32[2,3]) {
  %w = const f32[4,3] [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
  %g = const f32[3,4] [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0]
  %bias = const f32[3] [1, 2, 3]
  %m = MatMul(%x, %w) : f32[2,3]
  %a = Add(%m, %z) #add0 : f32[2,3]
  %t = Gemm(%x, %g, %bias) {transB=1} : f32[2,3]
  %y = Mul(%a, %t) : f32[2,3]
  return %y
}
)";

TEST(InsertQdq, OpsetBelow13QuantizesWeightsPerTensor) {
  Model m = parse_model(kMatMulAdd);
  std::map<std::string, TensorRange> r;
  for (const char* n : {"x", "z", "m", "a", "t"}) r[n] = {-10.f, 10.f};
  QdqResult q = insert_qdq(m, r, {});
  EXPECT_EQ(q.quantized_tensors, (std::vector<std::string>{"x", "z", "m", "a", "t"}));
  EXPECT_EQ(q.quantized_weights, 2);
  EXPECT_EQ(q.quantized_biases, 1);
  ASSERT_EQ(q.notes.size(), 1u);
  EXPECT_NE(q.notes[0].find("per tensor"), std::string::npos);
  for (const auto& n : m.graph->nodes) {
    if (n->op_type == "DequantizeLinear") {
      EXPECT_EQ(n->attr("axis"), nullptr) << n->name;
    }
  }
}

TEST(InsertQdq, ExcludedNodesAndTensorsWithoutRangeStayFloat) {
  Model m = parse_model(kMatMulAdd);
  QdqOptions opts;
  opts.exclude = {"add0", "Gemm"};
  opts.activation_dtype = DType::kInt8;
  // The Add and the Gemm are excluded: m (read only by the Add) stays float, x is still read by
  // the MatMul, and a and t by the Mul. z has no range here either.
  QdqResult q = insert_qdq(m, {{"x", {-1.f, 1.f}}, {"m", {-5.f, 5.f}}, {"a", {-6.f, 6.f}}, {"t", {0.f, 1.f}}}, opts);
  EXPECT_EQ(q.quantized_tensors, (std::vector<std::string>{"x", "a", "t"}));
  EXPECT_EQ(q.quantized_weights, 1);  // the MatMul's; the Gemm is excluded
  EXPECT_EQ(q.quantized_biases, 0);
  for (const auto& n : m.graph->nodes) {
    if (n->op_type == "QuantizeLinear") {
      EXPECT_EQ(n->outputs[0]->type.dtype, DType::kInt8) << n->name;
    }
  }
  const Node* gemm = m.graph->find_local("t")->producer;
  EXPECT_TRUE(gemm->inputs[1]->is_constant());  // float weight
  // The report's "left in float" list: the excluded nodes, by op.
  ASSERT_EQ(q.float_ops.count("Add"), 1u);
  EXPECT_EQ(q.float_ops.at("Add").why, "excluded (--exclude)");
  EXPECT_EQ(q.float_ops.at("Add").nodes, (std::vector<std::string>{"add0"}));
  ASSERT_EQ(q.float_ops.count("Gemm"), 1u);
  EXPECT_EQ(q.float_ops.count("Mul"), 0u);  // quantized (two activations)
}

TEST(InsertQdq, KeepsTheModelsMeaningUpToQuantizationError) {
  Model ref = parse_model(kConvRelu);
  Model m = parse_model(kConvRelu);
  insert_qdq(m, ranges({{"x", {-1.f, 1.f}}, {"c", {-3.f, 3.f}}, {"r", {0.f, 3.f}}, {"p", {0.f, 3.f}}}), {});
  Tensor x(DType::kFloat32, {1, 2, 3, 3});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = std::sin(static_cast<float>(i)) * 0.9f;
  Interpreter a(ref), b(m);
  const Tensor ya = a.run({RtValue(x)})[0].tensor, yb = b.run({RtValue(x)})[0].tensor;
  for (int64_t i = 0; i < ya.numel(); ++i) EXPECT_NEAR(ya.data<float>()[i], yb.data<float>()[i], 0.02) << i;
}

TEST(InsertQdq, RefusesOpsetsWithoutQuantizeLinear) {
  Model m = parse_model(R"(
model ir=4 opsets={"": 9}
graph @main(%x: f32[2]) -> (%y: f32[2]) {
  %r = Relu(%x) : f32[2]
  %y = Sigmoid(%r) : f32[2]
  return %y
}
)");
  try {
    insert_qdq(m, {{"x", {0.f, 1.f}}}, {});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("opset 9"), std::string::npos) << e.what();
  }
}

TEST(InsertQdq, ChannelOfNearZeroWeightsWithABiasGetsAScaleTheBiasFits) {
  Model m = parse_model(R"(
model ir=8 opsets={"": 13}
graph @main(%x: f32[1,2,3,3]) -> (%y: f32[1,2,3,3]) {
  %w = const f32[2,2,1,1] [1, -0.5, 1e-12, 0]
  %b = const f32[2] [0.5, 5]
  %y = Conv(%x, %w, %b) : f32[1,2,3,3]
  return %y
}
)");
  QdqResult r = insert_qdq(m, ranges({{"x", {-1.f, 1.f}}}), {});
  EXPECT_EQ(r.quantized_biases, 1);
  EXPECT_TRUE(r.notes.empty());
  const Tensor& ws = m.graph->find_local("w_scale_1")->initializer;
  const float sx = activation_quant_params({-1.f, 1.f}, DType::kUInt8).scale;
  EXPECT_FLOAT_EQ(ws.data<float>()[0], 1.f / 127);
  EXPECT_NEAR(ws.data<float>()[1], 5.0 / (sx * double(1 << 30)), 1e-9);  // not 1e-12 / 127
  const Tensor& bq = m.graph->find_local("b_quantized_4")->initializer;
  EXPECT_LE(std::abs(bq.data<int32_t>()[1]), 1 << 30);
}

TEST(InsertQdq, ActivationParams) {
  QuantParams u = activation_quant_params({0.5f, 2.55f}, DType::kUInt8);  // widened to [0, 2.55]
  EXPECT_FLOAT_EQ(u.scale, 0.01f);
  EXPECT_EQ(u.zero_point, 0);
  QuantParams s = activation_quant_params({-2.55f, 0.f}, DType::kInt8);
  EXPECT_FLOAT_EQ(s.scale, 0.01f);
  EXPECT_EQ(s.zero_point, 127);
  QuantParams e = activation_quant_params({0.f, 0.f}, DType::kUInt8);
  EXPECT_EQ(e.scale, 1.f);
  EXPECT_EQ(e.zero_point, 0);
}

}  // namespace
}  // namespace kiln
