// The reference Cast to and from the 4- and 2-bit integer types (ops/elementwise_cast.cc) on the
// values the spec defines: floats in range truncate toward zero, integers out of range keep their
// low bits (two's complement for the signed types). The onnx wheel's cases for these casts also
// feed out-of-range floats, whose result the spec leaves undefined, so the conformance generator
// drops them and these checks hold the defined part.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "ir/text.h"
#include "runtime/interpreter.h"

namespace kiln {
namespace {

// ONNX TensorProto.DataType numbers of the Cast targets used here (Cast's `to` attribute).
int onnx_type_number(const std::string& name) {
  if (name == "i4") return 22;
  if (name == "u4") return 21;
  if (name == "i2") return 26;
  if (name == "u2") return 25;
  if (name == "i32") return 6;
  if (name == "i64") return 7;
  ADD_FAILURE() << "no ONNX type number for " << name;
  return 0;
}

std::vector<int64_t> cast_values(DType from, const std::string& from_name, const std::string& to_name,
                                 const std::vector<double>& values) {
  const int64_t n = static_cast<int64_t>(values.size());
  std::ostringstream text;
  text << "graph @g(%x: " << from_name << "[" << n << "]) -> (%y: " << to_name << "[" << n << "]) {\n"
       << "  %y = Cast(%x) {to=" << onnx_type_number(to_name) << "} : " << to_name << "[" << n << "]\n  return %y\n}";
  Model m = parse_model(text.str());
  Tensor x(from, {n});
  for (int64_t i = 0; i < n; ++i) x.set_double(i, values[i]);
  Interpreter interp(m);
  const auto out = interp.run({RtValue(x)});
  std::vector<int64_t> got;
  for (int64_t i = 0; i < n; ++i) got.push_back(out.at(0).tensor.get_int(i));
  return got;
}

TEST(CastSubByte, FloatsInRangeTruncateTowardZero) {
  EXPECT_EQ(cast_values(DType::kFloat32, "f32", "i4", {-8.9, -8, -7.5, -0.5, 0, 0.7, 6.99, 7.9}),
            (std::vector<int64_t>{-8, -8, -7, 0, 0, 0, 6, 7}));
  EXPECT_EQ(cast_values(DType::kFloat32, "f32", "u4", {-0.9, 0, 1.5, 14.2, 15.9}),
            (std::vector<int64_t>{0, 0, 1, 14, 15}));
  EXPECT_EQ(cast_values(DType::kFloat32, "f32", "i2", {-2.5, -2, -1.5, 0.4, 1.9}),
            (std::vector<int64_t>{-2, -2, -1, 0, 1}));
  EXPECT_EQ(cast_values(DType::kFloat16, "f16", "u2", {0, 1.25, 2.5, 3.75}), (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(CastSubByte, IntegersOutOfRangeKeepTheLowBits) {
  // 200 = 0b1100'1000 -> 0b1000 = -8 as int4; -9 = ...0111 -> 7; 16 -> 0.
  EXPECT_EQ(cast_values(DType::kInt32, "i32", "i4", {200, -9, 16, 7, -8, -1}),
            (std::vector<int64_t>{-8, 7, 0, 7, -8, -1}));
  EXPECT_EQ(cast_values(DType::kInt32, "i32", "u4", {-1, 17, 255}), (std::vector<int64_t>{15, 1, 15}));
  EXPECT_EQ(cast_values(DType::kInt64, "i64", "i2", {2, 3, -3, 5}), (std::vector<int64_t>{-2, -1, 1, 1}));
  EXPECT_EQ(cast_values(DType::kInt32, "i32", "u2", {5, -1, 4}), (std::vector<int64_t>{1, 3, 0}));
}

TEST(CastSubByte, SubByteIntegersWidenExactly) {
  EXPECT_EQ(cast_values(DType::kInt4, "i4", "i32", {-8, -1, 0, 7}), (std::vector<int64_t>{-8, -1, 0, 7}));
  EXPECT_EQ(cast_values(DType::kUInt4, "u4", "i64", {0, 9, 15}), (std::vector<int64_t>{0, 9, 15}));
  EXPECT_EQ(cast_values(DType::kInt2, "i2", "i4", {-2, -1, 0, 1}), (std::vector<int64_t>{-2, -1, 0, 1}));
}

}  // namespace
}  // namespace kiln
