// Text-IR constants with seeded random float32 values, for tests that write small models in the
// text IR (ir/text.h): `%w = <random_const>`.
#pragma once

#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace kiln::test {

// "d0,d1,..." (the dims of a text-IR type).
inline std::string dims_text(const std::vector<int64_t>& d) {
  std::ostringstream os;
  for (size_t i = 0; i < d.size(); ++i) os << (i ? "," : "") << d[i];
  return os.str();
}

// "const f32[d0,d1,...] [v, ...]" with values uniform in [-scale, scale).
inline std::string rand_const(const std::vector<int64_t>& dims, std::mt19937_64& rng, double scale = 1.0) {
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  std::ostringstream os;
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  os << "const f32[" << dims_text(dims) << "] [";
  for (int64_t i = 0; i < n; ++i) os << (i ? ", " : "") << uni(rng) * scale;
  os << "]";
  return os.str();
}

}  // namespace kiln::test
