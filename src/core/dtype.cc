// DType names and sizes.
#include "core/dtype.h"

#include <array>
#include <cstdint>
#include <string>

namespace kiln {
namespace {

struct DTypeInfo {
  DType type;
  std::string_view name;
  size_t size;
};

constexpr std::array<DTypeInfo, 27> kInfos = {{
    {DType::kUndefined, "undef", 0},
    {DType::kFloat32, "f32", 4},
    {DType::kUInt8, "u8", 1},
    {DType::kInt8, "i8", 1},
    {DType::kUInt16, "u16", 2},
    {DType::kInt16, "i16", 2},
    {DType::kInt32, "i32", 4},
    {DType::kInt64, "i64", 8},
    {DType::kString, "str", sizeof(std::string)},
    {DType::kBool, "bool", 1},
    {DType::kFloat16, "f16", 2},
    {DType::kFloat64, "f64", 8},
    {DType::kUInt32, "u32", 4},
    {DType::kUInt64, "u64", 8},
    {DType::kComplex64, "c64", 8},
    {DType::kComplex128, "c128", 16},
    {DType::kBFloat16, "bf16", 2},
    {DType::kFloat8E4M3FN, "f8e4m3fn", 1},
    {DType::kFloat8E4M3FNUZ, "f8e4m3fnuz", 1},
    {DType::kFloat8E5M2, "f8e5m2", 1},
    {DType::kFloat8E5M2FNUZ, "f8e5m2fnuz", 1},
    {DType::kUInt4, "u4", 1},
    {DType::kInt4, "i4", 1},
    {DType::kFloat4E2M1, "f4e2m1", 1},
    {DType::kFloat8E8M0, "f8e8m0", 1},
    {DType::kUInt2, "u2", 1},
    {DType::kInt2, "i2", 1},
}};

}  // namespace

bool dtype_is_valid(int32_t onnx_code) {
  return onnx_code > 0 && onnx_code < static_cast<int32_t>(kInfos.size());
}

std::string_view dtype_name(DType t) {
  auto i = static_cast<size_t>(t);
  return i < kInfos.size() ? kInfos[i].name : "invalid";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& info : kInfos)
    if (info.name == name && info.type != DType::kUndefined) return info.type;
  return std::nullopt;
}

size_t dtype_size(DType t) {
  auto i = static_cast<size_t>(t);
  return i < kInfos.size() ? kInfos[i].size : 0;
}

int dtype_packed_bits(DType t) {
  switch (t) {
    case DType::kUInt4: case DType::kInt4: case DType::kFloat4E2M1: return 4;
    case DType::kUInt2: case DType::kInt2: return 2;
    default: return 0;
  }
}

bool is_float(DType t) {
  switch (t) {
    case DType::kFloat16: case DType::kBFloat16: case DType::kFloat32: case DType::kFloat64:
    case DType::kFloat8E4M3FN: case DType::kFloat8E4M3FNUZ: case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ: case DType::kFloat8E8M0: case DType::kFloat4E2M1:
      return true;
    default:
      return false;
  }
}

bool is_signed(DType t) {
  switch (t) {
    case DType::kInt8: case DType::kInt16: case DType::kInt32: case DType::kInt64:
    case DType::kInt4: case DType::kInt2:
      return true;
    default:
      return false;
  }
}

bool is_integer(DType t) {
  switch (t) {
    case DType::kUInt8: case DType::kUInt16: case DType::kUInt32: case DType::kUInt64:
    case DType::kUInt4: case DType::kUInt2:
      return true;
    default:
      return is_signed(t);
  }
}

std::optional<std::pair<int64_t, int64_t>> integer_range(DType t) {
  using R = std::pair<int64_t, int64_t>;
  switch (t) {
    case DType::kUInt8: return R{0, UINT8_MAX};
    case DType::kInt8: return R{INT8_MIN, INT8_MAX};
    case DType::kUInt16: return R{0, UINT16_MAX};
    case DType::kInt16: return R{INT16_MIN, INT16_MAX};
    case DType::kUInt32: return R{0, UINT32_MAX};
    case DType::kInt32: return R{INT32_MIN, INT32_MAX};
    case DType::kUInt64: return R{0, -1};
    case DType::kInt64: return R{INT64_MIN, INT64_MAX};
    case DType::kUInt4: return R{0, 15};
    case DType::kInt4: return R{-8, 7};
    case DType::kUInt2: return R{0, 3};
    case DType::kInt2: return R{-2, 1};
    default: return std::nullopt;
  }
}

}  // namespace kiln
