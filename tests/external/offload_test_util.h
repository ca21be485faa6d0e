// Shared by the offload tests: text-IR constants filled from a seed, and running a model with
// its regions offloaded against the reference interpreter.
#pragma once

#include <gtest/gtest.h>

#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "../common/engines_agree.h"
#include "driver/offload.h"
#include "ir/text.h"
#include "pass/pass.h"

namespace kiln::test {

// "%name = const f32[dims] [values]" with seeded values in [lo, hi].
inline std::string const_line(const std::string& name, const std::vector<int64_t>& dims, uint64_t seed,
                              double lo = -1.0, double hi = 1.0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uni(lo, hi);
  int64_t n = 1;
  std::ostringstream s;
  s << "  %" << name << " = const f32[";
  for (size_t i = 0; i < dims.size(); ++i) {
    s << (i ? "," : "") << dims[i];
    n *= dims[i];
  }
  s << "] [";
  for (int64_t i = 0; i < n; ++i) s << (i ? ", " : "") << static_cast<float>(uni(rng));
  s << "]\n";
  return s.str();
}

// The model with the engine's pass pipeline and `backends` offloaded (every region, whatever its
// cost), run by the compiled executor against the interpreter on the model as written.
inline CompileStats offload_agrees(const std::string& text, const std::vector<std::string>& backends, int threads = 1,
                                   uint64_t seed = 7) {
  Model ref = parse_model(text);
  const std::vector<RtValue> feeds = random_feeds(ref, seed);
  Interpreter interp(ref);
  const auto want = interp.run(feeds);
  Model m = parse_model(text);
  PassContext ctx;
  ctx.verify = true;
  ctx.offload = offload_backends(backends);
  ctx.offload_min_cost = 0;
  run_passes(m, default_pipeline(), ctx);
  return compiled_agrees(m, feeds, want, threads, text);
}

}  // namespace kiln::test
