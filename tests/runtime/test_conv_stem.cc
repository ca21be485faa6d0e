// Stem conv op (runtime/conv_stem.h) made from a GemmDesc, against a double-precision naive conv:
// ResNet's 7x7 and the MobileNets' 3x3 stems (small planes), SAME_UPPER, no pad, bias / no bias,
// clamp, batch 2, 1 and 2 threads; its fused residual and activation against the GEMM conv op;
// and what it declines (and that conv_select picks it for stems). Runs the AVX-512 or the AVX2
// kernel, whichever ISA the default microkernel has; skipped on other CPUs.
#include <gtest/gtest.h>

#include <memory>
#include <random>

#include "conv_test_util.h"
#include "kernels/x86/f32_gemm.h"
#include "runtime/conv_gemm.h"
#include "runtime/conv_select.h"
#include "runtime/conv_stem.h"
#include "runtime/thread_pool.h"

namespace kiln {
namespace {

using conv_test::Case;

bool have_stem_kernel() {
  const kernels::Isa isa = kernels::f32_gemm_default().isa;
  return isa == kernels::Isa::kAvx512 || isa == kernels::Isa::kAvx2;
}

TEST(ConvStemOp, MatchesReference) {
  if (!have_stem_kernel()) GTEST_SKIP() << "no AVX-512 or AVX2";
  const std::vector<Case> cases = {
      {1, 3, 30, 30, 64, 7, 7, {2, 2}, {1, 1}, {3, 3, 3, 3}, "NOTSET", false, true},
      {2, 3, 21, 19, 32, 3, 3, {2, 2}, {1, 1}, {1, 1, 1, 1}, "NOTSET", true, false},
      {1, 3, 25, 25, 24, 3, 3, {2, 2}, {1, 1}, {0, 0, 0, 0}, "NOTSET", true, true},
      {1, 2, 17, 40, 10, 3, 3, {2, 2}, {1, 1}, {0, 0, 0, 0}, "SAME_UPPER", true, false},
      {1, 4, 9, 9, 5, 5, 5, {2, 2}, {1, 1}, {2, 1, 1, 2}, "NOTSET", false, false},
  };
  for (int threads : {1, 2})
    for (const Case& c : cases) conv_test::check_conv(c, threads, conv_test::clamp_by_epilogue(&conv_ops::make_stem_conv_op), 1e-4);
}

// Bias, residual and SiLU: the same values as the GEMM conv op with the same epilogue.
TEST(ConvStemOp, EpilogueMatchesGemmConv) {
  if (!have_stem_kernel()) GTEST_SKIP() << "no AVX-512 or AVX2";
  conv_test::expect_epilogue_matches(&conv_ops::make_stem_conv_op, {1, 3, 20, 20}, 12, 3, 2, 1, true);
}

TEST(ConvStemOp, Declines) {
  Tensor w(DType::kFloat32, {8, 3, 3, 3}), w5(DType::kFloat32, {8, 5, 3, 3});
  gemm_ops::GemmDesc d;
  d.kind = gemm_ops::GemmKind::kConv;
  d.strides = {2, 2};
  d.pads = {1, 1, 1, 1};
  d.out_dims = {1, 8, 8, 8};
  d.out_dtype = DType::kFloat32;
  d.operands.push_back({true, DType::kFloat32, {1, 3, 16, 16}, nullptr});
  d.operands.push_back({true, DType::kFloat32, {8, 3, 3, 3}, &w});
  EXPECT_EQ(conv_ops::make_stem_conv_op(d) != nullptr, have_stem_kernel());
  EXPECT_EQ(conv_ops::make_conv_op(d) != nullptr, true);  // the stem op, or the GEMM conv without AVX-512
  gemm_ops::GemmDesc e = d;
  e.strides = {1, 1};  // stride 1
  e.out_dims = {1, 8, 16, 16};
  EXPECT_FALSE(conv_ops::make_stem_conv_op(e));
  e = d;
  e.operands[1].constant = nullptr;  // run-time weights
  EXPECT_FALSE(conv_ops::make_stem_conv_op(e));
  e = d;
  e.dilations = {2, 2};
  e.out_dims = {1, 8, 7, 7};
  EXPECT_FALSE(conv_ops::make_stem_conv_op(e));
  e = d;
  e.operands[0].dims = {1, 5, 16, 16};  // five input channels
  e.operands[1] = {true, DType::kFloat32, {8, 5, 3, 3}, &w5};
  EXPECT_FALSE(conv_ops::make_stem_conv_op(e));
}

}  // namespace
}  // namespace kiln
