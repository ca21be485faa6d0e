// Compiled executor vs the interpreter for the generated-kernel schedules of the hot ops and
// the plan-time folding of shape chains:
// Softmax/LogSoftmax rows (vector partial reductions, rows schedule with tails), LayerNorm, InstanceNorm, Resize,
// MaxPool/AveragePool with the reduce loops outside a vector loop (ceil_mode, pads, narrow
// planes, strides 2-4), reductions over several axes (fused reduce loops), strided slices, channel shuffle Reshape/Transpose/Reshape (grouped reshape index) and reshapes with
// size-1 dims, Split (sizes from an input, from num_outputs, uneven, with an unused and an empty
// output), BatchNormalization (rank 2 to 4, after a non-Conv); 1 and 2 threads.
#include <gtest/gtest.h>

#include <string>

#include "../common/engines_agree.h"

namespace kiln {
namespace {

// Every node runs as a generated kernel (no reference fallback) and agrees with the interpreter.
void check(const std::string& text) {
  for (int threads : {1, 2}) EXPECT_EQ(test::engines_agree(text, threads, 5).fallback_nodes, 0) << text;
}

// The loop nests (TIR) of the kernels the compiled executor makes for `text`.
std::string kernels_of(const std::string& text) {
  Model m = parse_model(text);
  PassContext ctx;
  run_passes(m, {"shape-inference", "fusion", "fuse-epilogues"}, ctx);
  CompiledExecutor exec(m, CompiledOptions());
  exec.run(test::random_feeds(m, 3));
  return exec.kernels_text();
}

TEST(CompiledGenerated, SoftmaxRows) {
  for (const char* shape : {"1,12,37,197", "2,3,16", "4,5", "1,2,33,40", "3,1,1,48"}) {
    std::string s = shape;
    check("graph @g(%x: f32[" + s + "]) -> (%y: f32[" + s + "], %z: f32[" + s + "]) {\n  %y = Softmax(%x) {axis=-1} : f32[" + s +
          "]\n  %z = LogSoftmax(%x) {axis=-1} : f32[" + s + "]\n  return %y, %z\n}");
  }
  // Not over the last axis: the row reads are strided.
  check("graph @g(%x: f32[2,40,35]) -> (%y: f32[2,40,35]) {\n  %y = Softmax(%x) {axis=1} : f32[2,40,35]\n  return %y\n}");
  // Add + Softmax fused (BERT's attention mask).
  check("graph @g(%x: f32[1,4,24,40], %m: f32[1,1,1,40]) -> (%y: f32[1,4,24,40]) {\n"
        "  %a = Add(%x, %m) : f32[1,4,24,40]\n  %y = Softmax(%a) {axis=-1} : f32[1,4,24,40]\n  return %y\n}");
}

TEST(CompiledGenerated, LayerNormAndReductions) {
  check("model ir=8 opsets={\"\": 17}\ngraph @g(%x: f32[2,7,100]) -> (%y: f32[2,7,100]) {\n"
        "  %s = const f32[100] [" + [] { std::string v; for (int i = 0; i < 100; ++i) v += (i ? "," : "") + std::to_string(0.5 + i * 0.01); return v; }() + "]\n"
        "  %b = const f32[100] [" + [] { std::string v; for (int i = 0; i < 100; ++i) v += (i ? "," : "") + std::to_string(i * 0.02 - 1); return v; }() + "]\n"
        "  %y = LayerNormalization(%x, %s, %b) {axis=-1, epsilon=0.001} : f32[2,7,100]\n  return %y\n}");
  // LayerNorm as exported op by op (BERT/ViT): mean, centred square mean, normalize.
  check("model ir=8 opsets={\"\": 13}\ngraph @g(%x: f32[1,7,100]) -> (%y: f32[1,7,100]) {\n"
        "  %two = const f32[] [2.0]\n  %eps = const f32[] [0.00001]\n  %g = const f32[] [1.5]\n"
        "  %m = ReduceMean(%x) {axes=[-1]} : f32[1,7,1]\n  %c = Sub(%x, %m) : f32[1,7,100]\n"
        "  %p = Pow(%c, %two) : f32[1,7,100]\n  %v = ReduceMean(%p) {axes=[-1]} : f32[1,7,1]\n"
        "  %e = Add(%v, %eps) : f32[1,7,1]\n  %s = Sqrt(%e) : f32[1,7,1]\n  %d = Div(%c, %s) : f32[1,7,100]\n"
        "  %y = Mul(%d, %g) : f32[1,7,100]\n  return %y\n}");
  // InstanceNormalization: per image and channel over the spatial axes (3-D and 4-D, a plane
  // narrower than a vector), scale and bias per channel.
  for (const char* shape : {"2,3,5,7", "1,4,37", "1,16,24,24"}) {
    const std::string s = shape;
    const int64_t c = std::stoll(s.substr(s.find(',') + 1));
    std::string sc, bi;
    for (int64_t i = 0; i < c; ++i) {
      sc += (i ? "," : "") + std::to_string(0.5 + 0.25 * static_cast<double>(i));
      bi += (i ? "," : "") + std::to_string(0.1 * static_cast<double>(i) - 0.3);
    }
    check("model ir=8 opsets={\"\": 17}\ngraph @g(%x: f32[" + s + "]) -> (%y: f32[" + s + "]) {\n  %s = const f32[" +
          std::to_string(c) + "] [" + sc + "]\n  %b = const f32[" + std::to_string(c) + "] [" + bi +
          "]\n  %y = InstanceNormalization(%x, %s, %b) {epsilon=0.01} : f32[" + s + "]\n  return %y\n}");
  }
  check("model ir=8 opsets={\"\": 13}\ngraph @g(%x: f32[3,5,70]) -> (%y: f32[3,5,1], %z: f32[3,1,70]) {\n"
        "  %y = ReduceMax(%x) {axes=[2]} : f32[3,5,1]\n  %z = ReduceMean(%x) {axes=[1]} : f32[3,1,70]\n  return %y, %z\n}");
}

// Reductions over several axes: GlobalAveragePool and ReduceMean over H and W run their reduce
// axes as one loop (one vector accumulation per plane, with or without a tail, even below 32
// values per row); over non-adjacent axes, or with a stride, they keep the loop nest.
TEST(CompiledGenerated, MultiAxisReductions) {
  for (const char* shape : {"1,16,14,14", "2,3,56,56", "1,5,7,7", "1,40,1,1", "1,2,3,37"}) {
    std::string s = shape, o = s.substr(0, s.rfind(',', s.rfind(',') - 1)) + ",1,1";
    check("graph @g(%x: f32[" + s + "]) -> (%y: f32[" + o + "]) {\n  %y = GlobalAveragePool(%x) : f32[" + o +
          "]\n  return %y\n}");
  }
  check("model ir=8 opsets={\"\": 13}\ngraph @g(%x: f32[2,6,9,20]) -> (%y: f32[2,6], %z: f32[6,9], %u: f32[2,1,9,1]) {\n"
        "  %y = ReduceMean(%x) {axes=[2, 3], keepdims=0} : f32[2,6]\n"
        "  %ax = const i64[2] [0, 3]\n  %z = ReduceSum(%x, %ax) {keepdims=0} : f32[6,9]\n"
        "  %u = ReduceMax(%x) {axes=[1, 3]} : f32[2,1,9,1]\n  return %y, %z, %u\n}");
  // The plane's loops fuse into one contiguous reduce loop: no index division in the kernel.
  const std::string text = kernels_of("graph @g(%x: f32[1,16,14,14]) -> (%y: f32[1,16,1,1]) {\n"
                                      "  %y = GlobalAveragePool(%x) : f32[1,16,1,1]\n  return %y\n}");
  EXPECT_NE(text.find("r0.r1.fused"), std::string::npos) << text;
  EXPECT_EQ(text.find(" % "), std::string::npos) << text;
}

TEST(CompiledGenerated, PoolingVectorizesAlongW) {
  struct Case {
    const char* x;
    const char* attrs;
    const char* y;
  };
  for (const Case& c : {Case{"1,8,111,111", "kernel_shape=[3,3], strides=[2,2], ceil_mode=1", "1,8,55,55"},
                        Case{"1,4,112,112", "kernel_shape=[3,3], strides=[2,2], pads=[1,1,1,1]", "1,4,56,56"},
                        Case{"2,3,20,37", "kernel_shape=[3,3], strides=[2,2], ceil_mode=1", "2,3,10,18"},
                        Case{"1,2,9,33", "kernel_shape=[2,2], strides=[1,1]", "1,2,8,32"},
                        Case{"1,2,9,18", "kernel_shape=[3,3], strides=[1,1], pads=[1,1,1,1]", "1,2,9,18"},
                        Case{"1,3,20,50", "kernel_shape=[3,3], strides=[3,3]", "1,3,6,16"},
                        Case{"1,2,8,67", "kernel_shape=[2,4], strides=[2,4]", "1,2,4,16"}}) {
    for (const char* op : {"MaxPool", "AveragePool"})
      check(std::string("graph @g(%x: f32[") + c.x + "]) -> (%y: f32[" + c.y + "]) {\n  %y = " + op + "(%x) {" +
            c.attrs + "} : f32[" + c.y + "]\n  return %y\n}");
  }
  // Scheduled: the window's loops outside a 16-wide vector loop (an unscheduled kernel, from
  // schedule rules that failed, would be scalar).
  const std::string text = kernels_of("graph @g(%x: f32[1,4,112,112]) -> (%y: f32[1,4,56,56]) {\n"
                                      "  %y = MaxPool(%x) {kernel_shape=[3,3], strides=[2,2], pads=[1,1,1,1]} : f32[1,4,56,56]\n"
                                      "  return %y\n}");
  EXPECT_NE(text.find("i3.outer"), std::string::npos) << text;
  EXPECT_NE(text.find("ramp("), std::string::npos) << text;
}

// Vector loads with a constant stride of 2-4 along the last axis are one masked contiguous load
// plus a shuffle; the mask must stop at the last element used (here the buffer's last element).
TEST(CompiledGenerated, StridedSlices) {
  for (int step : {2, 3, 4}) {
    const int n = 16 * step + 1, out = 17;
    check("model ir=8 opsets={\"\": 13}\ngraph @g(%x: f32[3," + std::to_string(n) + "]) -> (%y: f32[3," +
          std::to_string(out) + "]) {\n  %st = const i64[1] [0]\n  %en = const i64[1] [" + std::to_string(n) +
          "]\n  %ax = const i64[1] [1]\n  %sp = const i64[1] [" + std::to_string(step) +
          "]\n  %y = Slice(%x, %st, %en, %ax, %sp) : f32[3," + std::to_string(out) + "]\n  return %y\n}");
  }
}

TEST(CompiledGenerated, SplitOutputsAreOneKernel) {
  // Sizes from the `split` input along the channel axis, an output used by an Add (fused) and
  // one returned.
  check("model ir=8 opsets={\"\": 13}\ngraph @g(%x: f32[2,9,5,7]) -> (%a: f32[2,2,5,7], %b: f32[2,7,5,7]) {\n"
        "  %s = const i64[2] [2, 7]\n"
        "  %p, %b = Split(%x, %s) {axis=1} : f32[2,2,5,7], f32[2,7,5,7]\n"
        "  %a = Add(%p, %p) : f32[2,2,5,7]\n  return %a, %b\n}");
  // An empty piece: made by an empty step, the kernel computes the others (a kernel step with
  // an empty output once became an empty step whole, leaving the others unwritten).
  check("model ir=8 opsets={\"\": 13}\ngraph @g(%x: f32[2,9,5,7]) -> (%a: f32[2,2,5,7], %b: f32[2,7,5,7], %c: f32[2,0,5,7]) {\n"
        "  %s = const i64[3] [2, 7, 0]\n"
        "  %p, %b, %c = Split(%x, %s) {axis=1} : f32[2,2,5,7], f32[2,7,5,7], f32[2,0,5,7]\n"
        "  %a = Add(%p, %p) : f32[2,2,5,7]\n  return %a, %b, %c\n}");
  // opset 18's num_outputs with an uneven last piece, along the last axis; one output unused.
  check("model ir=8 opsets={\"\": 18}\ngraph @g(%x: f32[3,10]) -> (%a: f32[3,4], %c: f32[3,2]) {\n"
        "  %a, %b, %c = Split(%x) {axis=-1, num_outputs=3} : f32[3,4], f32[3,4], f32[3,2]\n  return %a, %c\n}");
}

TEST(CompiledGenerated, BatchNormalizationAfterNonConv) {
  for (const char* shape : {"4,6", "2,6,9", "1,6,5,7"}) {
    std::string s = shape;
    check("graph @g(%x: f32[" + s + "], %y0: f32[" + s + "]) -> (%y: f32[" + s + "]) {\n"
          "  %sc = const f32[6] [0.5, 1, 1.5, -2, 0.25, 3]\n  %b = const f32[6] [0, 1, -1, 0.5, 2, -3]\n"
          "  %m = const f32[6] [0.1, -0.2, 0.3, 0, 1, -1]\n  %v = const f32[6] [1, 0.5, 2, 0.25, 4, 0.01]\n"
          "  %a = Add(%x, %y0) : f32[" + s + "]\n"
          "  %y = BatchNormalization(%a, %sc, %b, %m, %v) {epsilon=0.001} : f32[" + s + "]\n  return %y\n}");
  }
}

// A reshape target computed from Shape at run time (as exporters write channel shuffles and
// attention heads): the Shape/Gather/Div/Unsqueeze/Concat chain is folded into plan constants
// and only the Reshape/Transpose run.
TEST(CompiledGenerated, ShapeChainsAreFolded) {
  const std::string text = R"(model ir=8 opsets={"": 13}
graph @g(%x: f32[1,8,5,6]) -> (%y: f32[1,8,5,6]) {
  %s = Shape(%x) : i64[4]
  %i0 = const i64[] [0]
  %i1 = const i64[] [1]
  %two = const i64[] [2]
  %n = Gather(%s, %i0) {axis=0} : i64[]
  %c = Gather(%s, %i1) {axis=0} : i64[]
  %h = Div(%c, %two) : i64[]
  %hw = const i64[2] [5, 6]
  %nu = Unsqueeze(%n, %i0) : i64[1]
  %hu = Unsqueeze(%h, %i0) : i64[1]
  %twou = Unsqueeze(%two, %i0) : i64[1]
  %shape = Concat(%nu, %twou, %hu, %hw) {axis=0} : i64[5]
  %r = Reshape(%x, %shape) : f32[1,2,4,5,6]
  %t = Transpose(%r) {perm=[0, 2, 1, 3, 4]} : f32[1,4,2,5,6]
  %back = const i64[4] [1, 8, 5, 6]
  %y = Reshape(%t, %back) : f32[1,8,5,6]
  return %y
})";
  for (int threads : {1, 2}) {
    CompileStats s = test::engines_agree(text, threads, 7);
    EXPECT_EQ(s.folded_nodes, 8) << threads;  // Shape, 2 Gather, Div, 3 Unsqueeze, Concat
    EXPECT_EQ(s.fallback_nodes, 0);
  }
}

TEST(CompiledGenerated, ChannelShuffleAndReshapes) {
  check("graph @g(%x: f32[1,116,28,28]) -> (%y: f32[1,116,28,28]) {\n"
        "  %s1 = const i64[5] [1,2,58,28,28]\n  %s2 = const i64[4] [1,116,28,28]\n"
        "  %a = Reshape(%x, %s1) : f32[1,2,58,28,28]\n"
        "  %t = Transpose(%a) {perm=[0,2,1,3,4]} : f32[1,58,2,28,28]\n"
        "  %y = Reshape(%t, %s2) : f32[1,116,28,28]\n  return %y\n}");
  check("graph @g(%x: f32[2,1,3,20]) -> (%y: f32[6,1,4,5], %z: f32[2,60]) {\n"
        "  %s1 = const i64[4] [6,1,4,5]\n  %s2 = const i64[2] [2,60]\n"
        "  %e = Exp(%x) : f32[2,1,3,20]\n"
        "  %y = Reshape(%e, %s1) : f32[6,1,4,5]\n  %z = Reshape(%e, %s2) : f32[2,60]\n  return %y, %z\n}");
  check("graph @g(%x: f32[4,6,10]) -> (%y: f32[4,3,2,2,5]) {\n  %s = const i64[5] [4,3,2,2,5]\n"
        "  %n = Neg(%x) : f32[4,6,10]\n  %y = Reshape(%n, %s) : f32[4,3,2,2,5]\n  return %y\n}");
}

// Resize with constant scales/sizes: a generated kernel wherever the sources repeat with a short
// period (checked against the reference plan), else the reference kernel; both agree with the
// interpreter.
TEST(CompiledGenerated, Resize) {
  struct Case {
    std::string in, out, attrs, scales;  // scales: "f32[4] [..]" or sizes "i64[4] [..]"
    bool generated;
  };
  const std::vector<Case> cases = {
      {"1,3,5,7", "1,3,10,14", "mode=\"nearest\"", "f32[4] [1, 1, 2, 2]", true},
      {"1,2,4,5", "1,2,12,15", "mode=\"nearest\", coordinate_transformation_mode=\"asymmetric\", nearest_mode=\"floor\"",
       "f32[4] [1, 1, 3, 3]", true},
      {"1,2,8,10", "1,2,4,5", "mode=\"nearest\"", "f32[4] [1, 1, 0.5, 0.5]", true},
      {"1,3,6,9", "1,3,12,18", "mode=\"linear\"", "f32[4] [1, 1, 2, 2]", true},
      {"2,2,6,4", "2,2,9,6", "mode=\"linear\"", "f32[4] [1, 1, 1.5, 1.5]", true},
      {"1,2,5,6", "1,2,10,12", "mode=\"linear\", coordinate_transformation_mode=\"pytorch_half_pixel\"",
       "f32[4] [1, 1, 2, 2]", true},
      {"1,2,5,6", "1,2,10,12", "mode=\"cubic\"", "f32[4] [1, 1, 2, 2]", true},
      {"1,4,3,5", "1,8,3,10", "mode=\"nearest\"", "f32[4] [1, 2, 1, 2]", true},
      {"1,2,5,6", "1,2,10,12", "mode=\"linear\", coordinate_transformation_mode=\"align_corners\"",
       "f32[4] [1, 1, 2, 2]", false},
      {"1,2,7,5", "1,2,10,12", "mode=\"nearest\"", "sizes", false},  // periods of 10 and 12
      {"1,2,3,4", "1,2,9,12", "mode=\"linear\"", "sizes", true},
  };
  for (const Case& c : cases) {
    const bool sizes = c.scales == "sizes";
    const std::string operands = sizes ? "%x, _, _, %k" : "%x, _, %k";
    const std::string k = sizes ? "i64[4] [" + c.out + "]" : c.scales;
    const std::string text = "model ir=8 opsets={\"\": 13}\ngraph @g(%x: f32[" + c.in + "]) -> (%y: f32[" + c.out +
                             "]) {\n  %k = const " + k + "\n  %y = Resize(" + operands + ") {" + c.attrs + "} : f32[" +
                             c.out + "]\n  return %y\n}";
    for (int threads : {1, 2})
      EXPECT_EQ(test::engines_agree(text, threads, 5).fallback_nodes, c.generated ? 0 : 1) << text;
  }
}

// Segments of the same structure lower once (the later ones reuse the first's TIR), but only
// where the constants their lowerings read agree: two Slices of the same dims with different
// constant starts, or two Pows with different scalar exponents, are lowered apart.
TEST(CompiledGenerated, RepeatedSegmentsLowerOnce) {
  const std::string text = R"(model ir=8 opsets={"": 13}
graph @g(%x: f32[4,32], %y: f32[4,32]) -> (%a: f32[4,32], %b: f32[4,32], %c: f32[4,16], %d: f32[4,16], %e: f32[4,32], %f: f32[4,32]) {
  %s0 = const i64[2] [0, 0]
  %s1 = const i64[2] [0, 16]
  %e16 = const i64[2] [4, 16]
  %e32 = const i64[2] [4, 32]
  %ax = const i64[2] [0, 1]
  %two = const f32[] [2]
  %three = const f32[] [3]
  %x1 = Sigmoid(%x) : f32[4,32]
  %a = Mul(%x1, %x) : f32[4,32]
  %y1 = Sigmoid(%y) : f32[4,32]
  %b = Mul(%y1, %y) : f32[4,32]
  %c = Slice(%a, %s0, %e16, %ax) : f32[4,16]
  %d = Slice(%b, %s1, %e32, %ax) : f32[4,16]
  %e = Pow(%a, %two) : f32[4,32]
  %f = Pow(%b, %three) : f32[4,32]
  return %a, %b, %c, %d, %e, %f
}
)";
  for (int threads : {1, 2}) {
    const CompileStats s = test::engines_agree(text, threads, 7);
    EXPECT_EQ(s.fallback_nodes, 0);
    // Only the second Sigmoid+Mul segment reuses a kernel (a wrong reuse of the first Slice's
    // would also make the outputs disagree).
    EXPECT_EQ(s.reused_lowerings, 1);
  }
}

}  // namespace
}  // namespace kiln
