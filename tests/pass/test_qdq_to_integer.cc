// qdq-to-integer (pass/qdq_to_integer.cc): the rewritten MatMul/Gemm compute the same values as
// the QDQ form (the golden files show the IR), including zero points, per-column scales, a
// transposed weight, alpha and beta.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/text.h"
#include "pass/pass.h"
#include "runtime/interpreter.h"

namespace kiln {
namespace {

const char* kQdqMatMuls = R"(
model ir=8 opsets={"": 13}
graph @main(%x: f32[2,3,5]) -> (%y: f32[2,3,4], %g: f32[6,4], %c: f32[1,2,1,3]) {
  %xs = const f32[] [0.03]
  %xz = const u8[] [120]
  %wq = const i8[5,4] [1, -2, 3, -4, 5, -6, 7, -8, 127, -127, 0, 9, 10, -11, 12, -13, 14, 15, -16, 17]
  %ws = const f32[4] [0.25, 0.125, 0.0625, 0.5]
  %wz = const i8[4] [0, 3, -2, 0]
  %q = QuantizeLinear(%x, %xs, %xz) : u8[2,3,5]
  %xd = DequantizeLinear(%q, %xs, %xz) : f32[2,3,5]
  %w = DequantizeLinear(%wq, %ws, %wz) {axis=1} : f32[5,4]
  %y = MatMul(%xd, %w) : f32[2,3,4]
  %flat_shape = const i64[2] [6, 5]
  %flat = Reshape(%xd, %flat_shape) : f32[6,5]
  %fq = QuantizeLinear(%flat, %xs, %xz) : u8[6,5]
  %fd = DequantizeLinear(%fq, %xs, %xz) : f32[6,5]
  %tq = const i8[4,5] [3, -1, 4, -1, 5, -9, 2, -6, 5, 3, -5, 8, -9, 7, 9, 3, -2, 3, 8, -4]
  %ts = const f32[4] [0.5, 0.25, 0.75, 1]
  %t = DequantizeLinear(%tq, %ts) {axis=0} : f32[4,5]
  %b = const f32[4] [1, -2, 0.5, 3]
  %g = Gemm(%fd, %t, %b) {alpha=0.5, beta=1.5, transB=1} : f32[6,4]
  %image_shape = const i64[4] [1, 6, 1, 5]
  %image = Reshape(%q, %image_shape) : u8[1,6,1,5]
  %id = DequantizeLinear(%image, %xs, %xz) : f32[1,6,1,5]
  %cq = const i8[2,6,2,2] [2, 55, -114, 110, -1, -102, -48, -71, 62, 112, -2, 66, -76, -1, -122, -18, 80, 15, -35, 71, -47, -92, -57, 99, -64, -61, -128, -126, -21, -18, -44, -43, 20, 32, -27, -24, -35, -28, 68, 24, -117, 56, 84, -44, -54, 7, -95, 41]
  %cs = const f32[2] [0.5, 0.25]
  %cw = DequantizeLinear(%cq, %cs) {axis=0} : f32[2,6,2,2]
  %cb = const f32[2] [0.75, -1]
  %c = Conv(%id, %cw, %cb) {pads=[1, 0, 0, 1], strides=[1, 2]} : f32[1,2,1,3]
  return %y, %g, %c
}
)";

TEST(QdqToInteger, KeepsTheValues) {
  Model ref = parse_model(kQdqMatMuls);
  Model m = parse_model(kQdqMatMuls);
  PassContext ctx;
  ASSERT_TRUE(find_pass("qdq-to-integer")->run(m, ctx));
  int integer_nodes = 0;
  for (const auto& n : m.graph->nodes) {
    EXPECT_NE(n->op_type, "MatMul");
    EXPECT_NE(n->op_type, "Gemm");
    EXPECT_NE(n->op_type, "Conv");
    integer_nodes += n->op_type == "MatMulInteger" || n->op_type == "ConvInteger";
  }
  EXPECT_EQ(integer_nodes, 3);
  Tensor x(DType::kFloat32, {2, 3, 5});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = std::sin(static_cast<float>(i) * 1.7f) * 3.f;
  Interpreter a(ref), b(m);
  const auto ya = a.run({RtValue(x)}), yb = b.run({RtValue(x)});
  ASSERT_EQ(ya.size(), 3u);
  for (size_t o = 0; o < ya.size(); ++o) {
    const Tensor &ta = ya[o].tensor, &tb = yb[o].tensor;
    ASSERT_EQ(ta.dims(), tb.dims());
    for (int64_t i = 0; i < ta.numel(); ++i)
      EXPECT_NEAR(ta.data<float>()[i], tb.data<float>()[i], 1e-5 * (1 + std::fabs(ta.data<float>()[i]))) << o << " " << i;
  }
}

// Where only 7-bit MatMul weights run faster than float (AVX2: PassContext::int8_gemm
// kSevenBit), a weight with values outside [-64, 63] and every Conv stay float; without an int8
// GEMM nothing is rewritten.
TEST(QdqToInteger, RewritesOnlyWhatTheInt8GemmRunsFaster) {
  auto integer_ops = [](Int8Gemm gemm) {
    Model m = parse_model(kQdqMatMuls);
    PassContext ctx;
    ctx.int8_gemm = gemm;
    find_pass("qdq-to-integer")->run(m, ctx);
    size_t count = 0;
    for (const auto& n : m.graph->nodes) count += n->op_type == "MatMulInteger" || n->op_type == "ConvInteger";
    return count;
  };
  EXPECT_EQ(integer_ops(Int8Gemm::kFull), 3u);
  EXPECT_EQ(integer_ops(Int8Gemm::kSevenBit), 1u);  // the Gemm's weights are within [-16, 9]
  EXPECT_EQ(integer_ops(Int8Gemm::kNone), 0u);
}

}  // namespace
}  // namespace kiln
