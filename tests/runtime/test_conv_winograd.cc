// Winograd F(4x4, 3x3) and F(2x2, 3x3) conv ops (runtime/conv_winograd.h) made from a GemmDesc, against a
// double-precision naive conv: pads 0/1/2 and asymmetric/SAME, output sizes not a multiple of
// the 4x4 tile (1x1 to 57x57), channel counts around the microkernel blocking, bias / no bias,
// clamp, rows of tiles wider than a block, one block shared by threads, batch 2, 1 and 2
// threads; the fused residual + SiLU epilogue against the GEMM conv op's; and what it declines
// (stride 2, dilation, 5x5, groups). Runs on the AVX-512 or the AVX2 transforms, whichever the
// default microkernel is (KILN_ISA=avx2 runs the AVX2 ones on an AVX-512 CPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/x86/f32_gemm.h"
#include "kernels/x86/f32_winograd.h"
#include "runtime/conv_winograd.h"
#include "conv_test_util.h"
#include "runtime/thread_pool.h"

namespace kiln {
namespace {

using conv_test::Case;

void check(const Case& cs, int threads, int tile) {
  const float inf = std::numeric_limits<float>::infinity();
  conv_test::check_conv(cs, threads,
                        [&](const gemm_ops::GemmDesc& d, bool clamp) {
                          return clamp ? conv_ops::make_winograd_conv_op(d, -0.5f, 0.75f, tile)
                                       : conv_ops::make_winograd_conv_op(d, -inf, inf, tile);
                        },
                        2e-4, 2e-5);
}

TEST(ConvWinograd, MatchesReference) {
  if (!kernels::winograd_available()) GTEST_SKIP() << "no AVX-512 or AVX2 microkernel";
  const std::vector<Case> cases = {
      {1, 8, 15, 15, 14, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, "NOTSET", true, true},
      {1, 16, 16, 16, 16, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, "NOTSET", true, false},
      {2, 5, 9, 7, 19, 3, 3, {1, 1}, {1, 1}, {0, 0, 0, 0}, "NOTSET", false, false},
      {1, 3, 10, 9, 7, 3, 3, {1, 1}, {1, 1}, {1, 0, 2, 1}, "NOTSET", true, false},
      {1, 4, 6, 5, 3, 3, 3, {1, 1}, {1, 1}, {2, 2, 2, 2}, "NOTSET", true, true},
      {1, 6, 12, 11, 29, 3, 3, {1, 1}, {1, 1}, {0, 0, 0, 0}, "SAME_UPPER", true, false},
      {1, 2, 3, 3, 2, 3, 3, {1, 1}, {1, 1}, {0, 0, 0, 0}, "NOTSET", true, false},  // one output pixel
      {1, 70, 5, 4, 120, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, "NOTSET", true, false},  // K > KC, M > MC
      {1, 32, 57, 57, 20, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, "NOTSET", false, true},
      {1, 33, 6, 150, 34, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, "NOTSET", true, true},  // 38 tiles wide: 2 blocks per row
      {1, 40, 14, 14, 24, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, "NOTSET", true, true},  // one block: shared on 2 threads
  };
  for (int tile : {4, 2})
    for (int threads : {1, 2})
      for (const Case& c : cases) check(c, threads, tile);
}

// The op for tile `tile` of a conv of x_dims (3x3, pad 1) with a bias, a residual and SiLU
// computes what the GEMM conv op computes, to Winograd's rounding.
void expect_epilogue_matches(int tile, const std::vector<int64_t>& x_dims, int64_t co, bool without_residual) {
  const float inf = std::numeric_limits<float>::infinity();
  conv_test::expect_epilogue_matches(
      [&](const gemm_ops::GemmDesc& d) { return conv_ops::make_winograd_conv_op(d, -inf, inf, tile); }, x_dims, co, 3,
      1, 1, without_residual, /*winograd_rounding=*/true);
}

TEST(ConvWinograd, EpilogueMatchesGemmConv) {
  if (!kernels::winograd_available()) GTEST_SKIP() << "no AVX-512 or AVX2 microkernel";
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    ScopedThreadPool scoped(&pool);
    // Batch 2 (the residual per image), partial tiles and tile groups, co not a multiple of the
    // microkernel rows.
    for (int tile : {4, 2}) expect_epilogue_matches(tile, {2, 8, 13, 11}, 14, true);
    expect_epilogue_matches(4, {1, 12, 30, 23}, 9, false);
    expect_epilogue_matches(2, {1, 20, 7, 7}, 31, false);
  }
}

TEST(ConvWinograd, Declines) {
  if (!kernels::winograd_available()) GTEST_SKIP() << "no AVX-512 or AVX2 microkernel";
  Tensor w(DType::kFloat32, {4, 2, 3, 3});
  gemm_ops::GemmDesc d;
  d.kind = gemm_ops::GemmKind::kConv;
  d.out_dims = {1, 4, 3, 3};
  d.out_dtype = DType::kFloat32;
  d.operands.push_back({true, DType::kFloat32, {1, 2, 5, 5}, nullptr});
  d.operands.push_back({true, DType::kFloat32, {4, 2, 3, 3}, &w});
  EXPECT_TRUE(conv_ops::make_winograd_conv_op(d));
  EXPECT_EQ(conv_ops::winograd_tile(d), 2);  // 3x3 outputs: one 4x4 tile, four 2x2 ones
  d.operands[1].constant = nullptr;  // run-time weights
  EXPECT_FALSE(conv_ops::make_winograd_conv_op(d));
  d.operands[1].constant = &w;
  d.strides = {2, 2};
  d.out_dims = {1, 4, 2, 2};
  EXPECT_FALSE(conv_ops::make_winograd_conv_op(d));
  d.strides = {1, 1};
  d.dilations = {2, 2};
  d.out_dims = {1, 4, 1, 1};
  EXPECT_FALSE(conv_ops::make_winograd_conv_op(d));
  Tensor w5(DType::kFloat32, {4, 2, 5, 5});
  d.dilations = {1, 1};
  d.operands[1] = {true, DType::kFloat32, {4, 2, 5, 5}, &w5};
  d.out_dims = {1, 4, 1, 1};
  EXPECT_FALSE(conv_ops::make_winograd_conv_op(d));
}

// Every entry of the transforms' list that runs here (the AVX2 ones on AVX-512 machines too),
// on its own through the kernel API: weights packed for the entry, each block's input
// transform, GEMMs and output transform, against a naive conv (3x3, pad 1, both tile sizes,
// channel counts around the panel widths, planes of one and of several blocks).
TEST(ConvWinograd, EveryEntryOfTheList) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  int ran = 0;
  for (const auto& k : kernels::winograd_f32_kernels()) {
    if (!kernels::isa_supported(k.isa)) continue;
    // The AVX-512 transforms need the 32-column AVX-512 microkernel as the default.
    if (k.isa == target::Isa::kAvx512 && !(kernels::winograd_available() && &kernels::winograd_host_kernels() == k.fn))
      continue;
    ++ran;
    struct Shape { int64_t c, co, h, w; };
    for (int64_t m : {2, 4})
      for (Shape sh : {Shape{3, 5, 9, 11}, Shape{16, 40, 14, 14}, Shape{8, 33, 23, 17}, Shape{1, 1, 1, 1}}) {
        kernels::WinogradGeom g;
        g.m = m, g.c = sh.c, g.co = sh.co, g.h = sh.h, g.w = sh.w, g.pt = g.pl = 1, g.ho = sh.h, g.wo = sh.w;
        std::vector<float> x(g.c * g.h * g.w), w(g.co * g.c * 9), y(g.co * g.ho * g.wo, 12345.0f);
        for (float& v : x) v = uni(rng);
        for (float& v : w) v = uni(rng);
        const kernels::WinogradBlocking b = kernels::winograd_blocking(g);
        const kernels::WinogradWeights u = kernels::winograd_pack_weights(g, w.data(), b, *k.fn);
        std::vector<float> v(static_cast<size_t>(kernels::winograd_block_floats(g, b, k.isa)));
        kernels::RowEpilogue ep;
        for (int64_t blk = 0; blk < b.count(); ++blk) {
          kernels::winograd_input_block(g, b, u, x.data(), blk, 0, g.c, v.data());
          kernels::winograd_gemm_output_block(g, b, u, v.data(), blk, 0, u.panels, ep, y.data());
        }
        for (int64_t o = 0; o < g.co; ++o)
          for (int64_t oy = 0; oy < g.ho; ++oy)
            for (int64_t ox = 0; ox < g.wo; ++ox) {
              double want = 0;
              for (int64_t ci = 0; ci < g.c; ++ci)
                for (int64_t i = 0; i < 3; ++i)
                  for (int64_t j = 0; j < 3; ++j) {
                    const int64_t iy = oy - 1 + i, ix = ox - 1 + j;
                    if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w)
                      want += double(x[(ci * g.h + iy) * g.w + ix]) * w[((o * g.c + ci) * 3 + i) * 3 + j];
                  }
              const float got = y[(o * g.ho + oy) * g.wo + ox];
              ASSERT_NEAR(got, want, 1e-3 + 1e-3 * std::fabs(want))
                  << k.name << " m=" << m << " c=" << g.c << " co=" << g.co << " " << g.h << "x" << g.w << " at " << o
                  << "," << oy << "," << ox;
            }
      }
  }
  // Both entries on an AVX-512 machine (its default microkernel 32 columns wide), AVX2 elsewhere.
  const bool avx512_default = kernels::winograd_available() && kernels::winograd_host_kernels().isa == target::Isa::kAvx512;
  EXPECT_EQ(ran, avx512_default ? 2 : 1);
}

}  // namespace
}  // namespace kiln
