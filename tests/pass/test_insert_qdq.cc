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
  %y = GlobalAveragePool(%r) : f32[1,2,1,1]
  return %y
}
)";

std::map<std::string, TensorRange> ranges(std::initializer_list<std::pair<const std::string, TensorRange>> r) {
  return r;
}

TEST(InsertQdq, ConvReluPerChannel) {
  Model m = parse_model(kConvRelu);
  QdqResult r = insert_qdq(m, ranges({{"x", {-1.f, 1.f}}, {"c", {-3.f, 3.f}}, {"r", {0.f, 2.55f}}}), {});
  // The Conv output feeds only the Relu: the Relu's output is quantized instead; y is a graph output.
  EXPECT_EQ(r.quantized_tensors, (std::vector<std::string>{"x", "r"}));
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
  %x_QuantizeLinear_Output_11 = QuantizeLinear(%x, %x_scale_8, %x_zero_point_9) #x_QuantizeLinear_Output_11 : u8[1,2,3,3]
  %x_DequantizeLinear_Output_10 = DequantizeLinear(%x_QuantizeLinear_Output_11, %x_scale_8, %x_zero_point_9) #x_DequantizeLinear_Output_10 : f32[1,2,3,3]
  %w_DequantizeLinear_Output_3 = DequantizeLinear(%w_quantized_0, %w_scale_1, %w_zero_point_2) {axis=0} #w_DequantizeLinear_Output_3 : f32[2,2,1,1]
  %b_DequantizeLinear_Output_7 = DequantizeLinear(%b_quantized_4, %b_scale_5, %b_zero_point_6) {axis=0} #b_DequantizeLinear_Output_7 : f32[2]
  %c = Conv(%x_DequantizeLinear_Output_10, %w_DequantizeLinear_Output_3, %b_DequantizeLinear_Output_7) : f32[1,2,3,3]
  %r = Relu(%c) : f32[1,2,3,3]
  %r_QuantizeLinear_Output_15 = QuantizeLinear(%r, %r_scale_12, %r_zero_point_13) #r_QuantizeLinear_Output_15 : u8[1,2,3,3]
  %r_DequantizeLinear_Output_14 = DequantizeLinear(%r_QuantizeLinear_Output_15, %r_scale_12, %r_zero_point_13) #r_DequantizeLinear_Output_14 : f32[1,2,3,3]
  %y = GlobalAveragePool(%r_DequantizeLinear_Output_14) : f32[1,2,1,1]
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
  EXPECT_EQ(q.quantized_tensors, (std::vector<std::string>{"x", "m", "z", "a", "t"}));
  EXPECT_EQ(q.quantized_weights, 2);
  EXPECT_EQ(q.quantized_biases, 1);
  ASSERT_EQ(q.notes.size(), 1u);
  EXPECT_NE(q.notes[0].find("per tensor"), std::string::npos);
  for (const auto& n : m.graph->nodes)
    if (n->op_type == "DequantizeLinear") EXPECT_EQ(n->attr("axis"), nullptr) << n->name;
}

TEST(InsertQdq, ExcludedNodesAndTensorsWithoutRangeStayFloat) {
  Model m = parse_model(kMatMulAdd);
  QdqOptions opts;
  opts.exclude = {"add0", "Gemm"};
  opts.activation_dtype = DType::kInt8;
  // Without a range for z, z stays float; the Add and the Gemm are excluded, so t is only an
  // input of the Mul.
  QdqResult q = insert_qdq(m, {{"x", {-1.f, 1.f}}, {"m", {-5.f, 5.f}}, {"a", {-6.f, 6.f}}, {"t", {0.f, 1.f}}}, opts);
  EXPECT_EQ(q.quantized_tensors, (std::vector<std::string>{"x", "m", "a", "t"}));
  EXPECT_EQ(q.quantized_weights, 1);  // the MatMul's; the Gemm is excluded
  EXPECT_EQ(q.quantized_biases, 0);
  for (const auto& n : m.graph->nodes)
    if (n->op_type == "QuantizeLinear") EXPECT_EQ(n->outputs[0]->type.dtype, DType::kInt8) << n->name;
  const Node* gemm = m.graph->find_local("t")->producer;
  EXPECT_TRUE(gemm->inputs[1]->is_constant());  // float weight
}

TEST(InsertQdq, KeepsTheModelsMeaningUpToQuantizationError) {
  Model ref = parse_model(kConvRelu);
  Model m = parse_model(kConvRelu);
  insert_qdq(m, ranges({{"x", {-1.f, 1.f}}, {"c", {-3.f, 3.f}}, {"r", {0.f, 3.f}}}), {});
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
