// Tensor: dtype + dims + shared, 64-byte aligned storage (owning) or borrowed memory (view).
// Strings are stored as std::string elements. Tensors are dense and row-major.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/float16.h"
#include "core/shape.h"

namespace kiln {

class Storage;

class Tensor {
 public:
  static constexpr size_t kAlignment = 64;

  Tensor() = default;  // undefined tensor
  // Allocates zero-initialized storage (empty strings for kString).
  Tensor(DType dtype, std::vector<int64_t> dims);
  // Borrows `data`; the caller keeps it alive while the tensor (or copies) exist.
  static Tensor view(DType dtype, std::vector<int64_t> dims, void* data);
  // Allocated but not zeroed (strings are still constructed): for outputs a kernel overwrites
  // entirely, where zeroing would be a whole extra pass over memory.
  static Tensor uninitialized(DType dtype, std::vector<int64_t> dims);
  // Like uninitialized, for a large, long-lived buffer the caller fills (a weight being loaded):
  // from 1 MiB on, its own mapping with the pages populated in one call, where faulting them in
  // one 4 KiB page at a time was most of a 400 MB model's load.
  static Tensor populated(DType dtype, std::vector<int64_t> dims);
  template <class T>
  static Tensor scalar(DType dtype, T value);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t dim(int i) const { return dims_.at(static_cast<size_t>(i)); }
  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }

  void* raw() const;
  template <class T>
  T* data() const {
    return static_cast<T*>(raw());
  }

  // Same storage, new dims (element count must match).
  Tensor reshaped(std::vector<int64_t> dims) const;
  // Deep copy into fresh owning storage.
  Tensor clone() const;
  // Element i converted to double (bool/int/float types; not strings).
  double get_double(int64_t i) const;
  void set_double(int64_t i, double v);
  int64_t get_int(int64_t i) const;
  // All elements as int64 (for shape-like inputs of integer dtype).
  std::vector<int64_t> to_int64_vector() const;
  // Element-wise identical dtype, dims and bytes (NaN payloads compare bitwise).
  bool same_as(const Tensor& o) const;

 private:
  Tensor(DType dtype, std::vector<int64_t> dims, bool zeroed, bool populate = false);
  DType dtype_ = DType::kUndefined;
  std::vector<int64_t> dims_;
  int64_t numel_ = 0;
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;
};

// Maps element types to the C++ type that stores them.
template <class T>
struct TypeTag {
  using type = T;
};

// Calls f(TypeTag<T>{}) for the storage type of `t`; throws kUnsupported for others.
template <class F>
decltype(auto) visit_dtype(DType t, F&& f);

// Like visit_dtype, also accepting kString (as std::string).
template <class F>
decltype(auto) visit_dtype_any(DType t, F&& f) {
  if (t == DType::kString) return f(TypeTag<std::string>{});
  return visit_dtype(t, std::forward<F>(f));
}

std::string tensor_summary(const Tensor& t, int max_values = 6);

template <class T>
Tensor Tensor::scalar(DType dtype, T value) {
  Tensor t(dtype, {});
  t.set_double(0, static_cast<double>(value));
  return t;
}

[[noreturn]] void throw_unsupported_dtype(DType t, const char* what);

template <class F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::kFloat32: return f(TypeTag<float>{});
    case DType::kFloat64: return f(TypeTag<double>{});
    case DType::kFloat16: return f(TypeTag<Float16>{});
    case DType::kBFloat16: return f(TypeTag<BFloat16>{});
    case DType::kInt8: return f(TypeTag<int8_t>{});
    case DType::kInt16: return f(TypeTag<int16_t>{});
    case DType::kInt32: return f(TypeTag<int32_t>{});
    case DType::kInt64: return f(TypeTag<int64_t>{});
    case DType::kUInt8: return f(TypeTag<uint8_t>{});
    case DType::kUInt16: return f(TypeTag<uint16_t>{});
    case DType::kUInt32: return f(TypeTag<uint32_t>{});
    case DType::kUInt64: return f(TypeTag<uint64_t>{});
    case DType::kBool: return f(TypeTag<bool>{});
    default: throw_unsupported_dtype(t, "this operation");
  }
}

}  // namespace kiln
