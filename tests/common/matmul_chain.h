// A chain of square MatMuls y = x·w·…·w in kiln's text IR, the weights an input (no constants):
// a run long enough to cancel mid-way (tests/capi/test_run_control.cc, tests/stress).
#pragma once

#include <cstdint>
#include <string>

namespace kiln::test {

inline std::string matmul_chain_text(int64_t n, int chain) {
  const std::string t = "f32[" + std::to_string(n) + "," + std::to_string(n) + "]";
  std::string s = "graph @chain(%x: " + t + ", %w: " + t + ") -> (%y: " + t + ") {\n";
  std::string prev = "%x";
  for (int i = 0; i < chain; ++i) {
    const std::string out = i + 1 == chain ? "%y" : "%m" + std::to_string(i);
    s += "  " + out + " = MatMul(" + prev + ", %w) : " + t + "\n";
    prev = out;
  }
  return s + "  return %y\n}";
}

}  // namespace kiln::test
