// Shape helpers.
#include "core/shape.h"

#include "core/error.h"

namespace kiln {

Shape Shape::of(const std::vector<int64_t>& sizes) {
  Shape s;
  for (int64_t v : sizes) s.dims.emplace_back(v);
  return s;
}

bool Shape::is_static() const {
  for (const auto& d : dims)
    if (!d.known()) return false;
  return true;
}

std::vector<int64_t> Shape::sizes() const {
  std::vector<int64_t> out;
  out.reserve(dims.size());
  for (const auto& d : dims) out.push_back(d.value);
  return out;
}

std::string to_string(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.dims.size(); ++i) {
    if (i) out += ",";
    const Dim& d = s.dims[i];
    out += d.known() ? std::to_string(d.value) : (d.symbol.empty() ? "?" : d.symbol);
  }
  return out + "]";
}

// Concrete sizes print as given (a bad negative size shows as itself, not as an unknown dim).
std::string dims_to_string(const std::vector<int64_t>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? "," : "") + std::to_string(dims[i]);
  return out + "]";
}

int64_t checked_numel(const std::vector<int64_t>& dims) {
  constexpr int64_t kLimit = int64_t{1} << 62;
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) throw Error(ErrorKind::kBadInput, "negative dimension in shape " + dims_to_string(dims));
    if (d != 0 && n > kLimit / d)
      throw Error(ErrorKind::kBadInput, "shape " + dims_to_string(dims) + " has too many elements");
    n *= d;
  }
  return n;
}

}  // namespace kiln
