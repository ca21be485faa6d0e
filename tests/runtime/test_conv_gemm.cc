// GEMM conv op (runtime/conv_gemm.h) made from a GemmDesc, against a double-precision naive
// conv: 1x1 direct and strided, 3x3 pad 0/1/2, stride 2, dilation, asymmetric and SAME pads,
// odd sizes and channel counts around the microkernel blocking, bias / no bias, clamp,
// batch 2, 1 and 2 threads; and what it declines.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "runtime/conv_gemm.h"
#include "conv_test_util.h"
#include "runtime/thread_pool.h"

namespace kiln {
namespace {

using conv_test::Case;

void check(const Case& cs, int threads) {
  conv_test::check_conv(cs, threads,
                        [](const gemm_ops::GemmDesc& d, bool clamp) {
                          return clamp ? conv_ops::make_gemm_conv_op(d, -0.5f, 0.75f) : conv_ops::make_gemm_conv_op(d);
                        },
                        1e-4);
}

TEST(ConvGemm, MatchesReference) {
  const std::vector<Case> cases = {
      {1, 13, 7, 9, 17, 1, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, "NOTSET", true, false},
      {2, 16, 9, 9, 33, 1, 1, {2, 2}, {1, 1}, {0, 0, 0, 0}, "NOTSET", false, true},
      {1, 5, 11, 13, 19, 3, 3, {2, 2}, {1, 1}, {1, 1, 1, 1}, "NOTSET", true, false},
      {1, 8, 15, 15, 14, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, "NOTSET", true, true},
      {1, 3, 10, 9, 7, 3, 2, {1, 1}, {2, 1}, {1, 0, 2, 1}, "NOTSET", false, false},
      {1, 3, 23, 21, 8, 7, 7, {2, 2}, {1, 1}, {3, 3, 3, 3}, "NOTSET", true, false},
      {2, 4, 6, 5, 3, 3, 3, {1, 1}, {1, 1}, {2, 2, 2, 2}, "NOTSET", true, true},
      {1, 6, 12, 11, 29, 3, 3, {2, 2}, {1, 1}, {0, 0, 0, 0}, "SAME_UPPER", true, false},
      {1, 70, 5, 4, 120, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, "NOTSET", true, false},  // K > KC, M > MC
      {1, 2, 3, 40, 5, 1, 3, {1, 3}, {1, 1}, {0, 1, 0, 1}, "NOTSET", false, false},
      // Few pixels (7x7): 1x1, 3x3 and stride 2 with a partial last column panel.
      {2, 32, 7, 7, 64, 1, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, "NOTSET", true, true},
      {1, 16, 7, 7, 64, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, "NOTSET", true, true},
      {1, 8, 14, 14, 96, 3, 3, {2, 2}, {1, 1}, {1, 1, 1, 1}, "NOTSET", false, false},
  };
  for (int threads : {1, 2})
    for (const Case& c : cases) check(c, threads);
}

TEST(ConvGemm, Declines) {
  Tensor w(DType::kFloat32, {4, 2, 3, 3});
  gemm_ops::GemmDesc d;
  d.kind = gemm_ops::GemmKind::kConv;
  d.out_dims = {1, 4, 3, 3};
  d.out_dtype = DType::kFloat32;
  d.operands.push_back({true, DType::kFloat32, {1, 2, 5, 5}, nullptr});
  d.operands.push_back({true, DType::kFloat32, {4, 2, 3, 3}, &w});
  EXPECT_TRUE(conv_ops::make_gemm_conv_op(d));
  d.operands[1].constant = nullptr;  // run-time weights: the im2col ConvOp handles those
  EXPECT_FALSE(conv_ops::make_gemm_conv_op(d));
  d.operands[1].constant = &w;
  d.out_dims = {1, 4, 4, 3};  // disagrees with the attributes
  EXPECT_FALSE(conv_ops::make_gemm_conv_op(d));
  d.out_dims = {1, 4, 3, 3};
  d.group = 2;
  EXPECT_FALSE(conv_ops::make_gemm_conv_op(d));
}

}  // namespace
}  // namespace kiln
