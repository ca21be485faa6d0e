// Runs a text-IR model through the reference interpreter and the compiled executor (twice: the
// second run uses the cached plan) on seeded random inputs and checks allclose(rtol 1e-4,
// atol 1e-5); for the compiled-executor tests of ops with fast paths.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ir/text.h"
#include "pass/pass.h"
#include "driver/compiled_executor.h"
#include "runtime/interpreter.h"

namespace kiln::test {

// Seeded inputs in [-1, 1] for every graph input (static shapes).
inline std::vector<RtValue> random_feeds(const Model& m, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  std::vector<RtValue> feeds;
  for (const Value* v : m.graph->inputs) {
    Tensor t(v->type.dtype, v->type.shape->sizes());
    for (int64_t i = 0; i < t.numel(); ++i) t.set_double(i, uni(rng));
    feeds.emplace_back(std::move(t));
  }
  return feeds;
}

// allclose(rtol 1e-4, atol 1e-5) of every output; returns false (after one failure naming the
// output, the element and `text`) at the first that differs.
inline bool outputs_agree(const std::vector<RtValue>& got, const std::vector<RtValue>& want, const std::string& text) {
  EXPECT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size() && k < want.size(); ++k) {
    const Tensor& a = got[k].tensor;
    const Tensor& b = want[k].tensor;
    EXPECT_EQ(a.dims(), b.dims()) << text;
    if (a.dims() != b.dims()) continue;
    for (int64_t i = 0; i < a.numel(); ++i) {
      double x = a.get_double(i), y = b.get_double(i);
      if (std::fabs(x - y) > 1e-5 + 1e-4 * std::fabs(y)) {
        ADD_FAILURE() << "output " << k << " [" << i << "]: " << x << " vs " << y << "\n" << text;
        return false;
      }
    }
  }
  return true;
}

// Runs `m` (after its passes) twice through the compiled executor against `want`; returns the
// stats of the plan it used.
inline CompileStats compiled_agrees(const Model& m, const std::vector<RtValue>& feeds, const std::vector<RtValue>& want,
                                    int threads, const std::string& text) {
  CompiledOptions opts;
  opts.threads = threads;
  CompiledExecutor exec(m, opts);
  for (int rep = 0; rep < 2; ++rep)
    if (!outputs_agree(exec.run(feeds), want, text)) break;
  return exec.stats();
}

// Returns the compiled executor's stats of the plan it used.
inline CompileStats engines_agree(const std::string& text, int threads, uint64_t seed) {
  Model m = parse_model(text);
  PassContext ctx;
  run_passes(m, {"shape-inference", "fusion", "fuse-epilogues"}, ctx);
  const std::vector<RtValue> feeds = random_feeds(m, seed);
  Interpreter interp(m);
  return compiled_agrees(m, feeds, interp.run(feeds), threads, text);
}

}  // namespace kiln::test
