// Core types: dtype table, fp16/bf16 rounding, shapes, tensors, .npy round trips, comparison.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>

#include "core/error.h"
#include "core/tensor.h"
#include "driver/compare.h"
#include "driver/npy.h"

namespace kiln {
namespace {

TEST(DType, NamesRoundTrip) {
  for (int code = 1; code <= 22; ++code) {
    auto t = static_cast<DType>(code);
    auto back = dtype_from_name(dtype_name(t));
    ASSERT_TRUE(back.has_value()) << code;
    EXPECT_EQ(*back, t);
  }
  EXPECT_FALSE(dtype_from_name("f33").has_value());
  EXPECT_EQ(dtype_size(DType::kFloat16), 2u);
  EXPECT_TRUE(is_float(DType::kBFloat16));
  EXPECT_TRUE(is_signed(DType::kInt8));
  EXPECT_FALSE(is_signed(DType::kUInt8));
}

TEST(Float16, RoundsToNearestEven) {
  EXPECT_EQ(Float16(1.0f).bits, 0x3c00);
  EXPECT_EQ(Float16(65504.0f).bits, 0x7bff);
  EXPECT_EQ(Float16(65520.0f).bits, 0x7c00);  // rounds up to infinity
  EXPECT_EQ(Float16(1.0f + 1.0f / 2048).bits, 0x3c00);  // tie -> even
  EXPECT_EQ(Float16(1.0f + 3.0f / 2048).bits, 0x3c02);  // tie -> even (up)
  EXPECT_EQ(Float16(5.96046448e-08f).bits, 0x0001);     // smallest subnormal
  EXPECT_TRUE(std::isnan(static_cast<float>(Float16(std::numeric_limits<float>::quiet_NaN()))));
  for (uint32_t h = 0; h < 0x7c00; ++h) {  // every finite positive half converts exactly back
    Float16 x;
    x.bits = static_cast<uint16_t>(h);
    ASSERT_EQ(Float16(static_cast<float>(x)).bits, h);
  }
}

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(BFloat16(1.0f).bits, 0x3f80);
  EXPECT_EQ(BFloat16(bits_float(0x3f808000u)).bits, 0x3f80);  // tie -> even
  EXPECT_EQ(BFloat16(bits_float(0x3f818000u)).bits, 0x3f82);
  EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(Shape, SymbolicDims) {
  Shape s({Dim::named("N"), Dim(3), Dim()});
  EXPECT_EQ(to_string(s), "[N,3,?]");
  EXPECT_FALSE(s.is_static());
  EXPECT_TRUE(Shape::of({2, 3}).is_static());
}

TEST(Tensor, AlignedZeroedAndViews) {
  Tensor t(DType::kFloat32, {3, 5});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % Tensor::kAlignment, 0u);
  EXPECT_EQ(t.numel(), 15);
  for (int64_t i = 0; i < t.numel(); ++i) EXPECT_EQ(t.data<float>()[i], 0.f);
  Tensor r = t.reshaped({15});
  r.data<float>()[4] = 2.5f;
  EXPECT_EQ(t.data<float>()[4], 2.5f);  // shared storage
  Tensor c = t.clone();
  c.data<float>()[4] = 1.f;
  EXPECT_EQ(t.data<float>()[4], 2.5f);
  float buf[2] = {1.f, 2.f};
  Tensor v = Tensor::view(DType::kFloat32, {2}, buf);
  EXPECT_EQ(v.data<float>(), buf);
}

TEST(Tensor, Strings) {
  Tensor t(DType::kString, {2});
  t.data<std::string>()[1] = "kiln";
  Tensor c = t.clone();
  EXPECT_TRUE(c.same_as(t));
  EXPECT_EQ(c.data<std::string>()[0], "");
}

TEST(Tensor, RejectsOverflowingShapes) {
  try {
    Tensor t(DType::kFloat32, {int64_t{1} << 40, int64_t{1} << 40});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
  }
  EXPECT_THROW(Tensor(DType::kFloat32, {-1}), Error);
}

TEST(Npy, RoundTripsEveryNumpyType) {
  for (DType dt : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kInt8, DType::kInt64,
                   DType::kUInt16, DType::kBool}) {
    Tensor t(dt, {2, 3});
    for (int64_t i = 0; i < t.numel(); ++i) t.set_double(i, dt == DType::kBool ? i % 2 : i);
    std::string path = ::testing::TempDir() + "/kiln_test.npy";
    write_npy(path, t);
    Tensor back = read_npy(path);
    EXPECT_TRUE(back.same_as(t)) << dtype_name(dt);
    std::remove(path.c_str());
  }
  Tensor scalar(DType::kInt32, {});
  std::string path = ::testing::TempDir() + "/kiln_scalar.npy";
  write_npy(path, scalar);
  EXPECT_EQ(read_npy(path).rank(), 0);
}

TEST(Npy, RejectsMalformedFiles) {
  EXPECT_THROW(parse_npy("garbage", "x.npy"), Error);
  std::string truncated = "\x93NUMPY\x01\x00\x20\x00{'descr': '<f4', 'fortran_order'";
  EXPECT_THROW(parse_npy(truncated, "x.npy"), Error);
}

TEST(Compare, TolerancesAndNaN) {
  Tensor a(DType::kFloat32, {3}), b(DType::kFloat32, {3});
  a.data<float>()[0] = 1.0f;
  b.data<float>()[0] = 1.0005f;  // within rtol 1e-3
  a.data<float>()[1] = b.data<float>()[1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(compare_tensors(a, b), "");
  b.data<float>()[2] = 1e-4f;  // outside atol 1e-5
  EXPECT_NE(compare_tensors(a, b), "");
  Tensor i(DType::kInt64, {3});
  EXPECT_NE(compare_tensors(i, a), "");  // dtype differs
}

}  // namespace
}  // namespace kiln
