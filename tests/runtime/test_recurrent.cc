// RNN / LSTM / GRU (runtime/recurrent.h) in the compiled executor vs the interpreter: forward,
// reverse and bidirectional, layouts 0 and 1, batch 1 (the GEMV path) and 3, with and without
// biases and initial states, GRU with and without linear_before_reset, each output (Y, Y_h,
// Y_c) as the one in use, 1 and 2 threads; the cases the op declines (clip, other activations,
// two outputs in use, sequence_lens) run on the reference kernel; the plan-blob round trip.
#include <gtest/gtest.h>

#include <random>
#include <sstream>

#include "../common/engines_agree.h"
#include "../common/random_const.h"

namespace kiln {
namespace {

using test::dims_text;
using test::rand_const;

struct Case {
  std::string op;  // RNN, LSTM, GRU
  int64_t seq, batch, input, hidden;
  std::string direction = "forward";
  int layout = 0;
  bool bias = true, initial_h = false, initial_c = false;
  std::vector<int> returned = {0};  // outputs the graph returns
  std::string extra;                // more attributes
  bool seq_lens = false;
};

std::string model(const Case& c, std::mt19937_64& rng) {
  const int64_t G = c.op == "LSTM" ? 4 : c.op == "GRU" ? 3 : 1, D = c.direction == "bidirectional" ? 2 : 1;
  const int64_t S = c.seq, N = c.batch, I = c.input, H = c.hidden;
  const bool bf = c.layout == 1;
  const std::vector<int64_t> x = bf ? std::vector<int64_t>{N, S, I} : std::vector<int64_t>{S, N, I};
  const std::vector<int64_t> y = bf ? std::vector<int64_t>{N, S, D, H} : std::vector<int64_t>{S, D, N, H};
  const std::vector<int64_t> st = bf ? std::vector<int64_t>{N, D, H} : std::vector<int64_t>{D, N, H};
  const int outs = c.op == "LSTM" ? 3 : 2;
  const std::vector<std::string> names = {"%y", "%yh", "%yc"};
  const std::vector<std::vector<int64_t>> dims = {y, st, st};
  std::ostringstream os;
  os << "graph @g(%x: f32[" << dims_text(x) << "]";
  if (c.initial_h) os << ", %h0: f32[" << dims_text(st) << "]";
  if (c.initial_c) os << ", %c0: f32[" << dims_text(st) << "]";
  os << ") -> (";
  for (size_t k = 0; k < c.returned.size(); ++k)
    os << (k ? ", " : "") << names[c.returned[k]] << ": f32[" << dims_text(dims[c.returned[k]]) << "]";
  os << ") {\n";
  const double scale = 1.0 / std::sqrt(double(H));
  os << "  %w = " << rand_const({D, G * H, I}, rng, scale) << "\n";
  os << "  %r = " << rand_const({D, G * H, H}, rng, scale) << "\n";
  if (c.bias) os << "  %b = " << rand_const({D, 2 * G * H}, rng, 0.5) << "\n";
  if (c.seq_lens) {
    os << "  %sl = const i32[" << N << "] [";
    for (int64_t b = 0; b < N; ++b) os << (b ? ", " : "") << (b % 2 ? S : S - 1);
    os << "]\n";
  }
  os << "  ";
  for (int k = 0; k < outs; ++k) os << (k ? ", " : "") << names[k];
  os << " = " << c.op << "(%x, %w, %r, " << (c.bias ? "%b" : "_") << ", " << (c.seq_lens ? "%sl" : "_") << ", "
     << (c.initial_h ? "%h0" : "_");
  if (c.op == "LSTM") os << ", " << (c.initial_c ? "%c0" : "_");
  os << ") {hidden_size=" << H << ", direction=\"" << c.direction << "\", layout=" << c.layout
     << (c.extra.empty() ? "" : ", " + c.extra) << "} : ";
  for (int k = 0; k < outs; ++k) os << (k ? ", " : "") << "f32[" << dims_text(dims[k]) << "]";
  os << "\n  return ";
  for (size_t k = 0; k < c.returned.size(); ++k) os << (k ? ", " : "") << names[c.returned[k]];
  os << "\n}";
  return os.str();
}

TEST(Recurrent, CompiledMatchesInterpreter) {
  const std::vector<Case> cases = {
      {"LSTM", 7, 1, 10, 16},
      {"LSTM", 5, 3, 8, 20, "bidirectional", 0, true, true, true, {1}},
      {"LSTM", 6, 2, 9, 17, "reverse", 1, false, true, true, {2}},
      {"LSTM", 4, 1, 33, 64, "bidirectional", 1, true, false, false, {0}},
      {"GRU", 6, 1, 12, 24},
      {"GRU", 5, 3, 7, 19, "bidirectional", 0, true, true, false, {0}, "linear_before_reset=1"},
      {"GRU", 4, 2, 5, 16, "reverse", 1, true, false, false, {1}},
      {"GRU", 3, 1, 16, 40, "forward", 0, true, true, false, {1}, "linear_before_reset=1"},
      {"RNN", 8, 2, 6, 13, "bidirectional", 0, true, true, false, {0}},
      {"RNN", 5, 1, 6, 32, "reverse", 1, false, false, false, {1}},
      // Activations spelled out, equal to the defaults.
      {"LSTM", 3, 2, 4, 8, "forward", 0, true, false, false, {0}, "activations=[\"Sigmoid\", \"Tanh\", \"Tanh\"]"},
  };
  for (int threads : {1, 2}) {
    std::mt19937_64 rng(11);
    for (const Case& c : cases) {
      const std::string text = model(c, rng);
      SCOPED_TRACE(text);
      const CompileStats s = test::engines_agree(text, threads, 5);
      EXPECT_EQ(s.fallback_nodes, 0);
      EXPECT_EQ(s.gemm_nodes, 1);
    }
  }
}

TEST(Recurrent, UncoveredCasesRunTheReferenceKernel) {
  const std::vector<Case> cases = {
      {"LSTM", 4, 2, 5, 8, "forward", 0, true, false, false, {0}, "clip=0.5"},
      {"GRU", 4, 1, 5, 8, "forward", 0, true, false, false, {0}, "activations=[\"Relu\", \"Tanh\"]"},
      {"LSTM", 4, 1, 5, 8, "forward", 0, true, false, false, {0, 1}},  // two outputs in use
      {"RNN", 4, 3, 5, 8, "forward", 0, true, false, false, {0}, "", true},  // sequence_lens
      {"LSTM", 4, 1, 5, 8, "forward", 0, true, false, false, {0}, "input_forget=1"},
  };
  std::mt19937_64 rng(12);
  for (const Case& c : cases) {
    const std::string text = model(c, rng);
    SCOPED_TRACE(text);
    const CompileStats s = test::engines_agree(text, 1, 6);
    EXPECT_EQ(s.gemm_nodes, 0);
    EXPECT_EQ(s.fallback_nodes, 1);
  }
}

}  // namespace
}  // namespace kiln
