// Value comparison for conformance tests and engine agreement checks.
#include "driver/compare.h"

#include <cmath>
#include <ios>
#include <sstream>

#include "core/narrow_float.h"

namespace kiln {

std::string compare_tensors(const Tensor& got, const Tensor& want, const Tolerance& tol) {
  if (got.dtype() != want.dtype())
    return "dtype " + std::string(dtype_name(got.dtype())) + ", expected " + std::string(dtype_name(want.dtype()));
  if (got.dims() != want.dims())
    return "shape " + dims_to_string(got.dims()) + ", expected " + dims_to_string(want.dims());
  const int64_t n = want.numel();
  if (want.dtype() == DType::kString) {
    for (int64_t i = 0; i < n; ++i)
      if (got.data<std::string>()[i] != want.data<std::string>()[i])
        return "element " + std::to_string(i) + " is \"" + got.data<std::string>()[i] + "\", expected \"" +
               want.data<std::string>()[i] + "\"";
    return "";
  }
  const DType dt = want.dtype();
  const bool half = dt == DType::kFloat16 || dt == DType::kBFloat16;
  if (is_narrow_float(dt)) {
    // float8 / float8e8m0 / float4e2m1: exact, on decoded values (any NaN code equals any other
    // NaN code; zeros must agree in sign).
    for (int64_t i = 0; i < n; ++i) {
      const float g = narrow_float_decode(dt, got.data<uint8_t>()[i]);
      const float w = narrow_float_decode(dt, want.data<uint8_t>()[i]);
      if ((std::isnan(g) && std::isnan(w)) || (g == w && std::signbit(g) == std::signbit(w))) continue;
      std::ostringstream os;
      os << "element " << i << " is " << g << " (code 0x" << std::hex << int(got.data<uint8_t>()[i])
         << "), expected " << w << " (code 0x" << int(want.data<uint8_t>()[i]) << ")";
      return os.str();
    }
    return "";
  }
  if (!is_float(dt)) {
    if (dt != DType::kBool && !is_integer(dt)) return got.same_as(want) ? "" : "bytes differ";
    // Integers (sub-byte ones included, stored one per byte) and bool: exact.
    for (int64_t i = 0; i < n; ++i)
      if (got.get_double(i) != want.get_double(i)) {
        std::ostringstream os;
        os << "element " << i << " is " << got.get_double(i) << ", expected " << want.get_double(i);
        return os.str();
      }
    return "";
  }
  const double rtol = half ? tol.half_rtol : tol.rtol, atol = half ? tol.half_atol : tol.atol;
  int64_t bad = 0, first = -1;
  double max_err = 0;
  for (int64_t i = 0; i < n; ++i) {
    double g = got.get_double(i), w = want.get_double(i);
    if (std::isnan(w) || std::isnan(g)) {
      if (std::isnan(w) != std::isnan(g)) {
        if (first < 0) first = i;
        ++bad;
      }
      continue;
    }
    if (std::isinf(w) || std::isinf(g)) {
      if (g != w) {
        if (first < 0) first = i;
        ++bad;
      }
      continue;
    }
    double err = std::fabs(g - w);
    max_err = std::max(max_err, err);
    if (err > atol + rtol * std::fabs(w)) {
      if (first < 0) first = i;
      ++bad;
    }
  }
  if (!bad) return "";
  std::ostringstream os;
  os << bad << " of " << n << " elements differ; first at " << first << ": " << got.get_double(first)
     << " vs expected " << want.get_double(first) << " (max abs error " << max_err << ")";
  return os.str();
}

std::string compare_values(const RtValue& got, const RtValue& want, const Tolerance& tol) {
  if (want.is_none()) return got.is_none() ? "" : "expected an empty optional";
  if (got.is_none()) return "got an empty value";
  if (want.is_sequence()) {
    if (!got.is_sequence()) return "expected a sequence, got a tensor";
    if (got.sequence.size() != want.sequence.size())
      return "sequence has " + std::to_string(got.sequence.size()) + " items, expected " +
             std::to_string(want.sequence.size());
    for (size_t i = 0; i < want.sequence.size(); ++i) {
      std::string r = compare_tensors(got.sequence[i], want.sequence[i], tol);
      if (!r.empty()) return "sequence item " + std::to_string(i) + ": " + r;
    }
    return "";
  }
  if (!got.is_tensor()) return "expected a tensor, got a sequence";
  return compare_tensors(got.tensor, want.tensor, tol);
}

}  // namespace kiln
