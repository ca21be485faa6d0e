// Shapes of the IR: each dim is a known size, a named symbol ("N", "seq") or unknown.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

struct Dim {
  int64_t value = -1;  // >= 0 when known
  std::string symbol;  // set for named symbolic dims; empty + value<0 means unknown

  Dim() = default;
  Dim(int64_t v) : value(v) {}  // NOLINT: implicit from sizes reads naturally
  static Dim named(std::string s) {
    Dim d;
    d.symbol = std::move(s);
    return d;
  }
  bool known() const { return value >= 0; }
  bool operator==(const Dim& o) const { return value == o.value && symbol == o.symbol; }
};

struct Shape {
  std::vector<Dim> dims;

  Shape() = default;
  Shape(std::vector<Dim> d) : dims(std::move(d)) {}  // NOLINT
  static Shape of(const std::vector<int64_t>& sizes);
  size_t rank() const { return dims.size(); }
  bool is_static() const;
  std::vector<int64_t> sizes() const;  // requires is_static()
  bool operator==(const Shape& o) const { return dims == o.dims; }
};

// "[N,3,224,224]"; unknown dims print as "?".
std::string to_string(const Shape& s);
std::string dims_to_string(const std::vector<int64_t>& dims);
// Product of sizes; throws kBadInput on overflow past 2^62 elements.
int64_t checked_numel(const std::vector<int64_t>& dims);

}  // namespace kiln
