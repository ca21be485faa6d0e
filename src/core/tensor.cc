// Tensor storage, copies and element access.
#include "core/tensor.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <sstream>

#include "core/error.h"
#include "core/large_alloc.h"
#include "core/narrow_float.h"

namespace kiln {

class Storage {
 public:
  Storage(DType dtype, int64_t count, bool zeroed = true, bool populate = false)
      : dtype_(dtype), count_(count), owned_(true) {
    size_t bytes = static_cast<size_t>(count) * dtype_size(dtype);
    size_t rounded = (bytes + Tensor::kAlignment - 1) / Tensor::kAlignment * Tensor::kAlignment;
    if (rounded == 0) rounded = Tensor::kAlignment;
    if (populate && dtype != DType::kString) {  // (contents unspecified: the caller fills it)
      ptr_ = alloc_large(rounded);
      if (!ptr_) throw std::bad_alloc();
      large_ = rounded;
      return;
    }
    ptr_ = std::aligned_alloc(Tensor::kAlignment, rounded);
    if (!ptr_) throw std::bad_alloc();
    if (dtype == DType::kString) {
      auto* s = static_cast<std::string*>(ptr_);
      for (int64_t i = 0; i < count; ++i) new (s + i) std::string();
    } else if (zeroed) {
      std::memset(ptr_, 0, rounded);
    }
  }
  Storage(void* borrowed) : ptr_(borrowed), owned_(false) {}
  ~Storage() {
    if (!owned_) return;
    if (dtype_ == DType::kString) {
      auto* s = static_cast<std::string*>(ptr_);
      for (int64_t i = 0; i < count_; ++i) s[i].~basic_string();
    }
    if (large_) free_large(ptr_, large_);
    else std::free(ptr_);
  }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* ptr() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
  size_t large_ = 0;  // bytes from alloc_large (0: aligned_alloc)
  DType dtype_ = DType::kUndefined;
  int64_t count_ = 0;
  bool owned_ = false;
};

void throw_unsupported_dtype(DType t, const char* what) {
  throw Error(ErrorKind::kUnsupported,
              std::string("element type ") + std::string(dtype_name(t)) + " is not supported by " + what);
}

Tensor::Tensor(DType dtype, std::vector<int64_t> dims) : Tensor(dtype, std::move(dims), true) {}

Tensor::Tensor(DType dtype, std::vector<int64_t> dims, bool zeroed, bool populate)
    : dtype_(dtype), dims_(std::move(dims)) {
  if (dtype_size(dtype) == 0)
    throw Error(ErrorKind::kUnsupported, "cannot allocate a tensor of element type " +
                                             std::string(dtype_name(dtype)));
  numel_ = checked_numel(dims_);
  if (numel_ > (int64_t{1} << 40) / static_cast<int64_t>(dtype_size(dtype)))
    throw Error(ErrorKind::kBadInput, "tensor of shape " + dims_to_string(dims_) + " is too large to allocate");
  storage_ = std::make_shared<Storage>(dtype, numel_, zeroed, populate);
}

Tensor Tensor::uninitialized(DType dtype, std::vector<int64_t> dims) { return Tensor(dtype, std::move(dims), false); }
Tensor Tensor::populated(DType dtype, std::vector<int64_t> dims) { return Tensor(dtype, std::move(dims), false, true); }

Tensor Tensor::view(DType dtype, std::vector<int64_t> dims, void* data) {
  Tensor t;
  t.dtype_ = dtype;
  t.dims_ = std::move(dims);
  t.numel_ = checked_numel(t.dims_);
  t.storage_ = std::make_shared<Storage>(data);
  return t;
}

void* Tensor::raw() const {
  if (!storage_) return nullptr;
  return static_cast<char*>(storage_->ptr()) + offset_;
}

Tensor Tensor::reshaped(std::vector<int64_t> dims) const {
  Tensor t = *this;
  t.numel_ = checked_numel(dims);
  KILN_CHECK(t.numel_ == numel_);
  t.dims_ = std::move(dims);
  return t;
}

Tensor Tensor::clone() const {
  if (!defined()) return {};
  Tensor t(dtype_, dims_);
  if (dtype_ == DType::kString) {
    for (int64_t i = 0; i < numel_; ++i) t.data<std::string>()[i] = data<std::string>()[i];
  } else if (nbytes()) {
    std::memcpy(t.raw(), raw(), nbytes());
  }
  return t;
}

namespace {

// Sub-byte integers are stored unpacked: int4/int2 sign-extended in an int8, uint4/uint2 in a uint8.
bool is_sub_byte_int(DType t) {
  return t == DType::kInt4 || t == DType::kUInt4 || t == DType::kInt2 || t == DType::kUInt2;
}

// The low bits of trunc(v) for a sub-byte integer type, as Cast (ml_dtypes) converts: through
// int32, where NaN and out-of-range values become INT32_MIN (whose low bits are all zero).
int wrap_sub_byte(DType t, double v) {
  const int bits = dtype_packed_bits(t);
  int64_t x = (v > -2147483649.0 && v < 2147483648.0) ? static_cast<int64_t>(v) : 0;
  const int low = static_cast<int>(x & ((1 << bits) - 1));
  const bool is_signed_t = t == DType::kInt4 || t == DType::kInt2;
  return is_signed_t && low >= (1 << (bits - 1)) ? low - (1 << bits) : low;
}

}  // namespace

double Tensor::get_double(int64_t i) const {
  if (is_sub_byte_int(dtype_))
    return dtype_ == DType::kInt4 || dtype_ == DType::kInt2 ? data<int8_t>()[i] : data<uint8_t>()[i];
  if (is_narrow_float(dtype_)) return narrow_float_decode(dtype_, data<uint8_t>()[i]);
  return visit_dtype(dtype_, [&](auto tag) -> double {
    using T = typename decltype(tag)::type;
    return static_cast<double>(static_cast<const T*>(raw())[i]);
  });
}

void Tensor::set_double(int64_t i, double v) {
  if (is_sub_byte_int(dtype_)) {
    data<uint8_t>()[i] = static_cast<uint8_t>(wrap_sub_byte(dtype_, v));
    return;
  }
  if (is_narrow_float(dtype_)) {
    data<uint8_t>()[i] = narrow_float_encode(dtype_, v, /*saturate=*/true);
    return;
  }
  visit_dtype(dtype_, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>)
      static_cast<T*>(raw())[i] = T(static_cast<float>(v));
    else
      static_cast<T*>(raw())[i] = static_cast<T>(v);
  });
}

int64_t Tensor::get_int(int64_t i) const {
  switch (dtype_) {
    case DType::kInt64: return data<int64_t>()[i];
    case DType::kInt32: return data<int32_t>()[i];
    case DType::kUInt64: return static_cast<int64_t>(data<uint64_t>()[i]);
    default: {
      double d = get_double(i);
      return std::isfinite(d) ? static_cast<int64_t>(d) : 0;
    }
  }
}

std::vector<int64_t> Tensor::to_int64_vector() const {
  std::vector<int64_t> out(static_cast<size_t>(numel_));
  for (int64_t i = 0; i < numel_; ++i) out[static_cast<size_t>(i)] = get_int(i);
  return out;
}

bool Tensor::same_as(const Tensor& o) const {
  if (dtype_ != o.dtype_ || dims_ != o.dims_) return false;
  if (dtype_ == DType::kString) {
    for (int64_t i = 0; i < numel_; ++i)
      if (data<std::string>()[i] != o.data<std::string>()[i]) return false;
    return true;
  }
  return nbytes() == 0 || std::memcmp(raw(), o.raw(), nbytes()) == 0;
}

std::string tensor_summary(const Tensor& t, int max_values) {
  std::ostringstream os;
  os << dtype_name(t.dtype()) << dims_to_string(t.dims());
  if (!t.defined()) return os.str() + " (undefined)";
  os << " [";
  int64_t n = std::min<int64_t>(t.numel(), max_values);
  for (int64_t i = 0; i < n; ++i) {
    if (i) os << ", ";
    if (t.dtype() == DType::kString)
      os << '"' << t.data<std::string>()[i] << '"';
    else if (t.dtype() == DType::kBool)
      os << (t.get_double(i) != 0 ? "true" : "false");
    else if (is_float(t.dtype()) || is_integer(t.dtype()))
      os << t.get_double(i);
    else
      os << "?";
  }
  if (t.numel() > n) os << ", ...";
  os << "]";
  return os.str();
}

}  // namespace kiln
