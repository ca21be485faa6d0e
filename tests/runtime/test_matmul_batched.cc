// Batched/broadcast MatMul and M = 1 GEMV ops (runtime/matmul_batched.h) vs the interpreter:
// attention-like N-D x N-D with computed operands, broadcast batch dims on either side, rank-1
// operands, constant batched B, M/N/K = 1 and odd tails, 1 and several threads; GEMV MatMul and
// Gemm (transB, alpha/beta, C as [N], [1,N], scalar, computed); the numpy-matmul shape helper.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "runtime/matmul_batched.h"
#include "../common/engines_agree.h"
#include "../common/random_const.h"

namespace kiln {
namespace {

using test::rand_const;

std::string dims_str(const std::vector<int64_t>& d) {
  std::string s = "f32[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

// MatMul of two graph inputs (both computed at run time) on 1 and 3 threads; expects the fast op.
void check_matmul_inputs(const std::vector<int64_t>& a, const std::vector<int64_t>& b, const std::vector<int64_t>& y) {
  const std::string text = "graph @g(%a: " + dims_str(a) + ", %b: " + dims_str(b) + ") -> (%y: " + dims_str(y) +
                           ") {\n  %y = MatMul(%a, %b) : " + dims_str(y) + "\n  return %y\n}";
  for (int threads : {1, 3}) {
    auto s = test::engines_agree(text, threads, 11);
    EXPECT_EQ(s.gemm_nodes, 1) << text;
    EXPECT_EQ(s.fallback_nodes, 0) << text;
  }
}

TEST(MatMulBatched, AttentionShapes) {
  check_matmul_inputs({1, 3, 17, 8}, {1, 3, 8, 13}, {1, 3, 17, 13});   // Q x K^T
  check_matmul_inputs({1, 3, 17, 17}, {1, 3, 17, 8}, {1, 3, 17, 8});   // P x V
  check_matmul_inputs({2, 4, 33, 40}, {2, 4, 40, 35}, {2, 4, 33, 35});  // several M/N panels, 8 batches
}

TEST(MatMulBatched, BroadcastBatchDims) {
  check_matmul_inputs({5, 7}, {2, 3, 7, 4}, {2, 3, 5, 4});              // A broadcast
  check_matmul_inputs({2, 1, 5, 6}, {1, 3, 6, 4}, {2, 3, 5, 4});        // both sides
  check_matmul_inputs({3, 5, 6}, {1, 6, 9}, {3, 5, 9});                 // B batch of 1: one flat GEMM
  check_matmul_inputs({1, 5, 6}, {4, 6, 9}, {4, 5, 9});
  check_matmul_inputs({2, 1, 1, 6}, {3, 6, 1}, {2, 3, 1, 1});           // M = N = 1
  check_matmul_inputs({2, 3, 4, 1}, {2, 3, 1, 5}, {2, 3, 4, 5});        // K = 1
}

TEST(MatMulBatched, RankOneOperands) {
  check_matmul_inputs({6}, {2, 6, 5}, {2, 5});
  check_matmul_inputs({2, 4, 6}, {6}, {2, 4});
  check_matmul_inputs({7}, {7}, {});
  check_matmul_inputs({3, 7}, {7}, {3});
  check_matmul_inputs({7}, {7, 19}, {19});  // computed B: not a GEMV
}

TEST(MatMulBatched, ConstantBatchedB) {
  std::mt19937_64 rng(21);
  const std::string text = "graph @g(%a: f32[2,3,9,10]) -> (%y: f32[2,3,9,17]) {\n  %b = " +
                           rand_const({3, 10, 17}, rng) + "\n  %y = MatMul(%a, %b) : f32[2,3,9,17]\n  return %y\n}";
  for (int threads : {1, 2}) EXPECT_EQ(test::engines_agree(text, threads, 3).gemm_nodes, 1);
}

TEST(MatMulBatched, GemvMatMul) {
  std::mt19937_64 rng(22);
  for (int64_t n : {1, 17, 100, 130}) {
    const std::string y = "f32[1," + std::to_string(n) + "]";
    const std::string text = "graph @g(%a: f32[1,37]) -> (%y: " + y + ") {\n  %b = " + rand_const({37, n}, rng) +
                             "\n  %y = MatMul(%a, %b) : " + y + "\n  return %y\n}";
    for (int threads : {1, 2}) EXPECT_EQ(test::engines_agree(text, threads, 4).gemm_nodes, 1);
  }
  // Rank-1 A and rank-1 B constants.
  const std::string text = "graph @g(%a: f32[23]) -> (%y: f32[], %z: f32[40]) {\n  %b = " + rand_const({23}, rng) +
                           "\n  %c = " + rand_const({23, 40}, rng) +
                           "\n  %y = MatMul(%a, %b) : f32[]\n  %z = MatMul(%a, %c) : f32[40]\n  return %y, %z\n}";
  EXPECT_EQ(test::engines_agree(text, 2, 5).gemm_nodes, 2);
}

TEST(MatMulBatched, GemvGemm) {
  std::mt19937_64 rng(23);
  const std::string w = rand_const({70, 129}, rng), bias = rand_const({70}, rng), row = rand_const({1, 70}, rng);
  const std::string text = "graph @g(%a: f32[1,129], %at: f32[129,1], %cr: f32[70]) -> (%y0: f32[1,70], "
                           "%y1: f32[1,70], %y2: f32[1,70], %y3: f32[1,70], %y4: f32[1,70]) {\n  %w = " + w +
                           "\n  %c = " + bias + "\n  %c2 = " + row + "\n  %s = const f32[] [0.25]" +
                           "\n  %y0 = Gemm(%a, %w, %c) {transB=1} : f32[1,70]"
                           "\n  %y1 = Gemm(%at, %w, %c2) {alpha=0.5, beta=-2.0, transA=1, transB=1} : f32[1,70]"
                           "\n  %y2 = Gemm(%a, %w, %s) {beta=3.0, transB=1} : f32[1,70]"
                           "\n  %y3 = Gemm(%a, %w, %cr) {transB=1} : f32[1,70]"
                           "\n  %y4 = Gemm(%a, %w) {alpha=2.0, transB=1} : f32[1,70]"
                           "\n  return %y0, %y1, %y2, %y3, %y4\n}";
  for (int threads : {1, 2}) EXPECT_EQ(test::engines_agree(text, threads, 6).gemm_nodes, 5);
  // Plain (not transposed) B.
  const std::string t2 = "graph @g(%a: f32[1,31]) -> (%y: f32[1,45]) {\n  %w = " + rand_const({31, 45}, rng) +
                         "\n  %y = Gemm(%a, %w) : f32[1,45]\n  return %y\n}";
  EXPECT_EQ(test::engines_agree(t2, 2, 7).gemm_nodes, 1);
}

TEST(MatMulBatched, ShapeHelper) {
  using gemm_ops::matmul_shape;
  auto s = matmul_shape({2, 1, 5, 6}, {3, 6, 4});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->out_dims, (std::vector<int64_t>{2, 3, 5, 4}));
  EXPECT_EQ(s->a_index, (std::vector<int64_t>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(s->b_index, (std::vector<int64_t>{0, 1, 2, 0, 1, 2}));
  EXPECT_FALSE(matmul_shape({2, 5, 6}, {3, 6, 4}));  // batch 2 vs 3
  EXPECT_FALSE(matmul_shape({5, 6}, {7, 4}));        // K mismatch
  EXPECT_FALSE(matmul_shape({}, {6}));               // scalars are not allowed
  auto z = matmul_shape({2, 3, 0}, {0, 4});          // K = 0
  ASSERT_TRUE(z);
  EXPECT_EQ(z->out_dims, (std::vector<int64_t>{2, 3, 4}));
}

// K = 0 (empty reduction) gives zeros; empty batch gives an empty output.
TEST(MatMulBatched, EmptyDims) {
  gemm_ops::GemmDesc d;
  d.kind = gemm_ops::GemmKind::kMatMul;
  d.out_dtype = DType::kFloat32;
  d.operands.resize(2);
  for (auto& o : d.operands) {
    o.present = true;
    o.dtype = DType::kFloat32;
  }
  d.operands[0].dims = {2, 3, 0};
  d.operands[1].dims = {2, 0, 4};
  d.out_dims = {2, 3, 4};
  auto op = gemm_ops::make_gemm_op(d);
  ASSERT_TRUE(op);
  RtValue a(Tensor(DType::kFloat32, {2, 3, 0})), b(Tensor(DType::kFloat32, {2, 0, 4}));
  Tensor y = op->run({&a, &b});
  ASSERT_EQ(y.dims(), (std::vector<int64_t>{2, 3, 4}));
  for (int64_t i = 0; i < y.numel(); ++i) EXPECT_EQ(y.data<float>()[i], 0.0f);
  d.operands[0].dims = {0, 3, 5};
  d.operands[1].dims = {1, 5, 4};
  d.out_dims = {0, 3, 4};
  op = gemm_ops::make_gemm_op(d);
  ASSERT_TRUE(op);
  RtValue a2(Tensor(DType::kFloat32, {0, 3, 5})), b2(Tensor(DType::kFloat32, {1, 5, 4}));
  EXPECT_EQ(op->run({&a2, &b2}).numel(), 0);
}

}  // namespace
}  // namespace kiln
