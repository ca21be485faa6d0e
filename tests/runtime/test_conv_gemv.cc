// Single-pixel conv op (runtime/conv_gemv.h) made from a GemmDesc, against a double-precision
// naive conv: channel counts around the GEMV's 16- and 64-column blocks, batch 2, bias / no bias,
// clamp, strides and a bottom/right pad that leave one output pixel, 1 and 2 threads; its fused
// epilogue (residual, activation) against the GEMM conv op; and what it declines.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>

#include "conv_test_util.h"
#include "kernels/x86/f32_gemm.h"
#include "runtime/conv_gemm.h"
#include "runtime/conv_gemv.h"
#include "runtime/thread_pool.h"

namespace kiln {
namespace {

using conv_test::Case;

TEST(ConvGemv, MatchesReference) {
  const std::vector<Case> cases = {
      {1, 1152, 1, 1, 48, 1, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, "NOTSET", true, false},
      {1, 48, 1, 1, 1152, 1, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, "NOTSET", true, true},
      {2, 17, 1, 1, 70, 1, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, "NOTSET", false, true},
      {2, 5, 1, 1, 3, 1, 1, {2, 2}, {1, 1}, {0, 0, 1, 1}, "NOTSET", true, false},
      {1, 1, 1, 1, 1, 1, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, "NOTSET", false, false},
  };
  for (int threads : {1, 2})
    for (const Case& c : cases) conv_test::check_conv(c, threads, conv_test::clamp_by_epilogue(&conv_ops::make_gemv_conv_op), 1e-4);
}

// Bias, residual and SiLU fused: the same values as the GEMM conv op with the same epilogue.
TEST(ConvGemv, EpilogueMatchesGemmConv) {
  conv_test::expect_epilogue_matches(&conv_ops::make_gemv_conv_op, {2, 40, 1, 1}, 24, 1, 1, 0, true);
}

TEST(ConvGemv, Declines) {
  Tensor w(DType::kFloat32, {4, 2, 1, 1}), w3(DType::kFloat32, {4, 2, 3, 3});
  gemm_ops::GemmDesc d;
  d.kind = gemm_ops::GemmKind::kConv;
  d.out_dims = {1, 4, 1, 1};
  d.out_dtype = DType::kFloat32;
  d.operands.push_back({true, DType::kFloat32, {1, 2, 1, 1}, nullptr});
  d.operands.push_back({true, DType::kFloat32, {4, 2, 1, 1}, &w});
  EXPECT_TRUE(conv_ops::make_gemv_conv_op(d));
  gemm_ops::GemmDesc e = d;
  e.operands[1].constant = nullptr;  // run-time weights
  EXPECT_FALSE(conv_ops::make_gemv_conv_op(e));
  e = d;
  e.operands[0].dims = {1, 2, 2, 2};  // more than one pixel
  e.out_dims = {1, 4, 2, 2};
  EXPECT_FALSE(conv_ops::make_gemv_conv_op(e));
  e = d;
  e.pads = {1, 1, 1, 1};  // the one output pixel of a stride-3 conv would read padding
  e.strides = {3, 3};
  EXPECT_FALSE(conv_ops::make_gemv_conv_op(e));
  e = d;
  e.operands[0].dims = {1, 2, 3, 3};  // a 3x3 kernel on a 3x3 image
  e.operands[1] = {true, DType::kFloat32, {4, 2, 3, 3}, &w3};
  EXPECT_FALSE(conv_ops::make_gemv_conv_op(e));
}

}  // namespace
}  // namespace kiln
