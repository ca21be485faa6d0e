// RNN / LSTM / GRU (runtime/recurrent.h) in the compiled executor vs the interpreter: forward,
// reverse and bidirectional, layouts 0 and 1, batch 1 (the GEMV path) and 3, with and without
// biases and initial states, GRU with and without linear_before_reset, each output (Y, Y_h,
// Y_c) as the one in use and several in use (the step returns the final states after its
// output 0), clip, LSTM peepholes and input_forget, sequence_lens (constant and at run time,
// with lengths 0 and S, out of range), 1 and 2 threads; the cases the op declines (other
// activations, run-time peepholes) run on the reference kernel.
#include <gtest/gtest.h>

#include <random>
#include <sstream>

#include "../common/engines_agree.h"

// The case tables below leave trailing Case fields at their defaults.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
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
  int seq_lens = 0;  // 0: none, 1: a constant, 2: a graph input %sl
  bool peepholes = false;
  bool runtime_peepholes = false;
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
  if (c.seq_lens == 2) os << ", %sl: i32[" << N << "]";
  if (c.runtime_peepholes) os << ", %p: f32[" << D << "," << 3 * H << "]";
  os << ") -> (";
  for (size_t k = 0; k < c.returned.size(); ++k)
    os << (k ? ", " : "") << names[c.returned[k]] << ": f32[" << dims_text(dims[c.returned[k]]) << "]";
  os << ") {\n";
  const double scale = 1.0 / std::sqrt(double(H));
  os << "  %w = " << rand_const({D, G * H, I}, rng, scale) << "\n";
  os << "  %r = " << rand_const({D, G * H, H}, rng, scale) << "\n";
  if (c.bias) os << "  %b = " << rand_const({D, 2 * G * H}, rng, 0.5) << "\n";
  if (c.seq_lens == 1) {  // S, S - 2, 0, S, ...
    os << "  %sl = const i32[" << N << "] [";
    for (int64_t b = 0; b < N; ++b) os << (b ? ", " : "") << (b % 3 == 0 ? S : b % 3 == 1 ? S - 2 : 0);
    os << "]\n";
  }
  if (c.peepholes) os << "  %p = " << rand_const({D, 3 * H}, rng, 0.5) << "\n";
  os << "  ";
  for (int k = 0; k < outs; ++k) os << (k ? ", " : "") << names[k];
  os << " = " << c.op << "(%x, %w, %r, " << (c.bias ? "%b" : "_") << ", " << (c.seq_lens ? "%sl" : "_") << ", "
     << (c.initial_h ? "%h0" : "_");
  if (c.op == "LSTM") os << ", " << (c.initial_c ? "%c0" : "_");
  if (c.peepholes || c.runtime_peepholes) os << ", %p";
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
      // clip (small, so that it bites), peepholes, input_forget, constant sequence_lens.
      {"LSTM", 6, 1, 7, 16, "bidirectional", 0, true, true, true, {0}, "clip=0.3", 0, true},
      {"LSTM", 5, 3, 6, 12, "reverse", 1, true, true, true, {2}, "input_forget=1", 1, true},
      {"LSTM", 5, 4, 6, 12, "bidirectional", 0, true, true, true, {0}, "clip=0.5", 1},
      {"LSTM", 5, 4, 6, 12, "forward", 1, true, true, true, {1}, "", 1},
      {"GRU", 6, 3, 5, 10, "bidirectional", 1, true, true, false, {0}, "clip=0.4", 1},
      {"GRU", 6, 3, 5, 10, "reverse", 0, true, true, false, {1}, "linear_before_reset=1, clip=0.4", 1},
      {"RNN", 7, 4, 5, 9, "bidirectional", 0, true, true, false, {1}, "clip=0.2", 1},
      // Several outputs in use: Y with the final states, or both states (silero-VAD's LSTM).
      {"LSTM", 4, 1, 5, 8, "forward", 0, true, false, false, {0, 1}},
      {"LSTM", 1, 1, 16, 32, "forward", 0, true, true, true, {1, 2}},
      {"LSTM", 5, 4, 6, 12, "bidirectional", 1, true, true, true, {2, 0, 1}, "", 1},
      {"GRU", 5, 3, 7, 11, "reverse", 0, true, true, false, {1, 0}, "linear_before_reset=1"},
      {"RNN", 6, 2, 5, 9, "bidirectional", 1, true, false, false, {0, 1}},
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
      {"GRU", 4, 1, 5, 8, "forward", 0, true, false, false, {0}, "activations=[\"Relu\", \"Tanh\"]"},
      {"LSTM", 4, 2, 5, 8, "forward", 0, true, false, false, {0}, "", 0, false, true},  // run-time P
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

// sequence_lens fed at run time: lengths S, 0, 3 and 1 in one batch, two runs of one executor
// with other lengths; a length outside [0, S] is a bad input (as the reference kernel says).
TEST(Recurrent, RunTimeSequenceLens) {
  for (const std::string op : {"LSTM", "GRU"})
    for (int output : {0, 1}) {
      std::mt19937_64 rng(21);
      Case c{op, 5, 4, 6, 8, "bidirectional", 0, true, true, op == "LSTM", {output}, "", 2};
      Model m = parse_model(model(c, rng));
      PassContext ctx;
      run_passes(m, {"shape-inference", "fusion", "fuse-epilogues"}, ctx);
      std::vector<RtValue> feeds = test::random_feeds(m, 3);
      Tensor& sl = feeds[op == "LSTM" ? 3 : 2].tensor;
      ASSERT_EQ(sl.dtype(), DType::kInt32);
      Interpreter interp(m);
      CompiledExecutor exec(m, CompiledOptions());
      for (const std::vector<int32_t>& lens : {std::vector<int32_t>{5, 0, 3, 1}, std::vector<int32_t>{2, 5, 5, 4}}) {
        std::copy(lens.begin(), lens.end(), sl.data<int32_t>());
        const auto want = interp.run(feeds);
        const auto got = exec.run(feeds);
        ASSERT_EQ(got.size(), 1u);
        const Tensor& a = got[0].tensor;
        const Tensor& b = want[0].tensor;
        ASSERT_EQ(a.dims(), b.dims());
        for (int64_t i = 0; i < a.numel(); ++i)
          ASSERT_NEAR(a.data<float>()[i], b.data<float>()[i], 1e-5 + 1e-4 * std::fabs(b.data<float>()[i]))
              << op << " output " << output << " at " << i;
      }
      EXPECT_EQ(exec.stats().gemm_nodes, 1);
      sl.data<int32_t>()[2] = 6;
      try {
        exec.run(feeds);
        ADD_FAILURE() << "a length past the sequence ran";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
        EXPECT_NE(std::string(e.what()).find("sequence_lens[2] = 6"), std::string::npos) << e.what();
      }
    }
}

}  // namespace
}  // namespace kiln
