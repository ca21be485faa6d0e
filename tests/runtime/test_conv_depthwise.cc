// Depthwise Conv (runtime/conv_depthwise.h) in the compiled executor vs the interpreter:
// MobileNet-style 3x3 with bias and a following Clip, stride 2, odd/narrow planes, dilation,
// asymmetric pads, auto_pad SAME, run-time weights, batch 2, 1 and 2 threads; plus the op made
// directly from a GemmDesc (the path ahead-of-time compiled models take).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <sstream>

#include "ir/text.h"
#include "pass/pass.h"
#include "driver/compiled_executor.h"
#include "runtime/conv_depthwise.h"
#include "runtime/interpreter.h"
#include "../common/random_const.h"
#include "../common/engines_agree.h"

namespace kiln {
namespace {

using test::dims_text;
using test::rand_const;

CompileStats check_model(const std::string& text, int threads) { return test::engines_agree(text, threads, 11); }

struct DwCase {
  std::vector<int64_t> x;  // N, C, H, W
  int64_t kh, kw;
  std::string attrs;        // Conv attributes besides group
  std::vector<int64_t> y;  // planned output
  bool bias, clip, runtime_weight;
};

std::string dw_model(const DwCase& c, std::mt19937_64& rng) {
  const int64_t ch = c.x[1];
  std::ostringstream os;
  os << "graph @g(%x: f32[" << dims_text(c.x) << "]" << (c.runtime_weight ? ", %w: f32[" : "")
     << (c.runtime_weight ? dims_text({ch, 1, c.kh, c.kw}) + "]" : "") << ") -> (%y: f32[" << dims_text(c.y)
     << "]) {\n";
  if (!c.runtime_weight) os << "  %w = " << rand_const({ch, 1, c.kh, c.kw}, rng) << "\n";
  if (c.bias) os << "  %b = " << rand_const({ch}, rng) << "\n";
  const std::string conv_out = c.clip ? "%c" : "%y";
  os << "  " << conv_out << " = Conv(%x, %w" << (c.bias ? ", %b" : "") << ") {group=" << ch
     << (c.attrs.empty() ? "" : ", ") << c.attrs << "} : f32[" << dims_text(c.y) << "]\n";
  if (c.clip) {
    os << "  %lo = const f32[] [0.0]\n  %hi = const f32[] [0.5]\n";
    os << "  %y = Clip(%c, %lo, %hi) : f32[" << dims_text(c.y) << "]\n";
  }
  os << "  return %y\n}";
  return os.str();
}

TEST(ConvDepthwise, CompiledMatchesInterpreter) {
  const std::vector<DwCase> cases = {
      {{1, 16, 28, 28}, 3, 3, "pads=[1, 1, 1, 1]", {1, 16, 28, 28}, true, true, false},
      {{1, 24, 29, 31}, 3, 3, "pads=[1, 1, 1, 1], strides=[2, 2]", {1, 24, 15, 16}, true, true, false},
      {{2, 3, 5, 3}, 3, 3, "pads=[1, 1, 1, 1]", {2, 3, 5, 3}, false, false, false},
      {{1, 5, 9, 17}, 5, 5, "pads=[2, 2, 2, 2]", {1, 5, 9, 17}, true, false, false},
      {{1, 5, 12, 20}, 3, 3, "dilations=[2, 2], pads=[2, 1, 2, 3]", {1, 5, 12, 20}, true, false, false},
      {{1, 6, 11, 11}, 3, 3, "strides=[2, 2]", {1, 6, 5, 5}, false, true, false},
      {{1, 7, 10, 13}, 3, 3, "auto_pad=\"SAME_UPPER\", strides=[2, 2]", {1, 7, 5, 7}, true, false, false},
      {{1, 7, 10, 13}, 4, 4, "auto_pad=\"SAME_LOWER\"", {1, 7, 10, 13}, true, false, false},
      {{1, 4, 9, 9}, 3, 3, "pads=[1, 1, 1, 1]", {1, 4, 9, 9}, true, true, true},
  };
  for (int threads : {1, 2}) {
    std::mt19937_64 rng(5);
    for (const DwCase& c : cases) {
      auto s = check_model(dw_model(c, rng), threads);
      EXPECT_EQ(s.fallback_nodes, 0);
      EXPECT_EQ(s.gemm_nodes, c.clip ? 2 : 1);  // the depthwise op (with the Clip), not the generated kernel
    }
  }
}

TEST(ConvDepthwise, MadeFromDescriptor) {
  // A 3x3 stride-1 depthwise conv with constant weight and bias, built without the IR.
  const int64_t c = 3, h = 4, w = 5;
  Tensor wt(DType::kFloat32, {c, 1, 3, 3});
  Tensor bias(DType::kFloat32, {c});
  for (int64_t i = 0; i < wt.numel(); ++i) wt.data<float>()[i] = 0.1f * static_cast<float>(i % 7) - 0.2f;
  for (int64_t i = 0; i < c; ++i) bias.data<float>()[i] = static_cast<float>(i);
  gemm_ops::GemmDesc d;
  d.kind = gemm_ops::GemmKind::kConv;
  d.group = c;
  d.pads = {1, 1, 1, 1};
  d.out_dims = {1, c, h, w};
  d.out_dtype = DType::kFloat32;
  d.operands.resize(3);
  d.operands[0] = {true, DType::kFloat32, {1, c, h, w}, nullptr};
  d.operands[1] = {true, DType::kFloat32, {c, 1, 3, 3}, &wt};
  d.operands[2] = {true, DType::kFloat32, {c}, &bias};
  auto op = conv_ops::make_depthwise_conv_op(d);
  ASSERT_TRUE(op);
  Tensor x(DType::kFloat32, {1, c, h, w});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(i % 11) * 0.25f;
  RtValue xv(x);
  Tensor y = op->run({&xv, nullptr, nullptr});
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t oy = 0; oy < h; ++oy)
      for (int64_t ox = 0; ox < w; ++ox) {
        double want = ch;
        for (int64_t i = 0; i < 3; ++i)
          for (int64_t j = 0; j < 3; ++j) {
            const int64_t iy = oy - 1 + i, ix = ox - 1 + j;
            if (iy >= 0 && iy < h && ix >= 0 && ix < w)
              want += double(x.data<float>()[(ch * h + iy) * w + ix]) * wt.data<float>()[(ch * 3 + i) * 3 + j];
          }
        EXPECT_NEAR(y.data<float>()[(ch * h + oy) * w + ox], want, 1e-5);
      }
  // Not depthwise: group 1, or a weight that is not [C,1,kh,kw].
  d.group = 1;
  EXPECT_FALSE(conv_ops::make_depthwise_conv_op(d));
  d.group = c;
  d.out_dims = {1, c, h + 1, w};
  EXPECT_FALSE(conv_ops::make_depthwise_conv_op(d));
}

}  // namespace
}  // namespace kiln
