// Element types of tensors: every ONNX TensorProto data type, with names, sizes and traits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace kiln {

// Values match onnx.TensorProto.DataType so that import/export is a cast.
enum class DType : int32_t {
  kUndefined = 0,
  kFloat32 = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kFloat64 = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  kComplex64 = 14,
  kComplex128 = 15,
  kBFloat16 = 16,
  kFloat8E4M3FN = 17,
  kFloat8E4M3FNUZ = 18,
  kFloat8E5M2 = 19,
  kFloat8E5M2FNUZ = 20,
  kUInt4 = 21,
  kInt4 = 22,
  kFloat4E2M1 = 23,
  kFloat8E8M0 = 24,
  kUInt2 = 25,
  kInt2 = 26,
};

// Short name used in the text IR ("f32", "i64", "bool", ...).
std::string_view dtype_name(DType t);
// Inverse of dtype_name; nullopt for unknown names.
std::optional<DType> dtype_from_name(std::string_view name);
// Bytes per element in memory (strings: sizeof(std::string); 4- and 2-bit types: 1, unpacked:
// int4/int2 as sign-extended int8, uint4/uint2 as uint8, float4e2m1 as its raw code).
size_t dtype_size(DType t);
// Bits per element in serialized (packed) form for sub-byte types (4 or 2), else 0.
int dtype_packed_bits(DType t);
bool dtype_is_valid(int32_t onnx_code);
bool is_float(DType t);     // f16, bf16, f32, f64, float8 variants, float4e2m1
bool is_integer(DType t);   // signed or unsigned, not bool
bool is_signed(DType t);
// The least and greatest value of an integer dtype (4- and 2-bit ones included; uint64's greatest
// as its int64 bit pattern, -1), or nullopt for other dtypes.
std::optional<std::pair<int64_t, int64_t>> integer_range(DType t);

}  // namespace kiln
