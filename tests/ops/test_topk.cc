// The reference TopK (ops/topk.cc) against a stable sort of each slice: largest and smallest,
// ties (the lower index first), NaN (the largest value; among NaNs the lower index first), a
// middle axis (strided slices), k from 0 to the whole axis (the one-pass selection for small k
// and the partial sort), integer values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <sstream>

#include "ir/text.h"
#include "runtime/interpreter.h"

namespace kiln {
namespace {

struct Slice {
  std::vector<double> values;
  std::vector<int64_t> indices;
};

// The expected top k of one slice: a stable sort by the TopK order.
Slice expected(const std::vector<double>& v, int64_t k, bool largest) {
  std::vector<int64_t> order(v.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    const bool na = std::isnan(v[a]), nb = std::isnan(v[b]);
    if (na || nb) return na && !nb ? largest : (!na && nb ? !largest : false);
    return largest ? v[a] > v[b] : v[a] < v[b];
  });
  Slice s;
  for (int64_t j = 0; j < k; ++j) {
    s.indices.push_back(order[j]);
    s.values.push_back(v[order[j]]);
  }
  return s;
}

void check(const std::string& dtype, const std::vector<int64_t>& dims, int64_t axis, int64_t k, bool largest,
           uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> small(-4, 4);  // many ties
  std::ostringstream dtext, otext;
  int64_t n = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    dtext << (i ? "," : "") << dims[i];
    otext << (i ? "," : "") << (static_cast<int64_t>(i) == axis ? k : dims[i]);
    n *= dims[i];
  }
  std::ostringstream text;
  text << "graph @g(%x: " << dtype << "[" << dtext.str() << "]) -> (%v: " << dtype << "[" << otext.str()
       << "], %i: i64[" << otext.str() << "]) {\n  %k = const i64[1] [" << k << "]\n"
       << "  %v, %i = TopK(%x, %k) {axis=" << axis << ", largest=" << (largest ? 1 : 0) << "} : " << dtype << "["
       << otext.str() << "], i64[" << otext.str() << "]\n  return %v, %i\n}";
  Model m = parse_model(text.str());
  Tensor x(dtype == "f32" ? DType::kFloat32 : DType::kInt32, dims);
  for (int64_t i = 0; i < n; ++i) {
    const bool nan = dtype == "f32" && rng() % 17 == 0;
    x.set_double(i, nan ? NAN : small(rng) * 0.5);
  }
  Interpreter interp(m);
  const auto out = interp.run({RtValue(x)});
  ASSERT_EQ(out.size(), 2u);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= dims[i];
  for (size_t i = axis + 1; i < dims.size(); ++i) inner *= dims[i];
  const int64_t len = dims[axis];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      std::vector<double> slice;
      for (int64_t j = 0; j < len; ++j) slice.push_back(x.get_double((o * len + j) * inner + in));
      const Slice want = expected(slice, k, largest);
      for (int64_t j = 0; j < k; ++j) {
        const int64_t at = (o * k + j) * inner + in;
        ASSERT_EQ(out[1].tensor.get_int(at), want.indices[j])
            << dtype << " k=" << k << " largest=" << largest << " slice " << o << "," << in << " rank " << j;
        const double got = out[0].tensor.get_double(at);
        ASSERT_TRUE(got == want.values[j] || (std::isnan(got) && std::isnan(want.values[j])));
      }
    }
}

TEST(TopK, MatchesStableSortWithTiesAndNaN) {
  uint64_t seed = 1;
  for (bool largest : {true, false})
    for (int64_t k : {0, 1, 3, 5, 16, 17, 40, 80}) {
      check("f32", {30, 80}, 1, k, largest, seed++);
      check("f32", {3, 80, 5}, 1, k, largest, seed++);  // strided slices
      check("i32", {7, 80}, 1, k, largest, seed++);
    }
}

}  // namespace
}  // namespace kiln
