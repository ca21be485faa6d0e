// Test harness shared by the conv op tests (tests/runtime/test_conv_*.cc): a conv case, the
// GemmDesc and random tensors for it, and the check of an op against a double-precision naive
// conv (clamp range [-0.5, 0.75] when the case asks for one); the check of an op's fused
// epilogue (bias, residual, SiLU) against the GEMM conv op's.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/x86/f32_gemm.h"
#include "runtime/conv_gemm.h"
#include "runtime/gemm_ops.h"
#include "runtime/thread_pool.h"

namespace kiln::conv_test {

struct Case {
  int64_t n, c, h, w, co, kh, kw;
  std::vector<int64_t> strides, dilations, pads;
  std::string auto_pad;
  bool bias, clamp;
};

// Makes the op under test from a descriptor (clamp range when `clamp`), or null when declined.
using ConvFactory = std::function<std::unique_ptr<gemm_ops::GemmOp>(const gemm_ops::GemmDesc&, bool clamp)>;

// Runs the op `make` builds for `cs` on `threads` threads and compares every output with a
// double-precision naive conv: |got - want| <= rtol * (1 + |want|) + atol_per_channel * C.
inline void check_conv(const Case& cs, int threads, const ConvFactory& make, double rtol,
                       double atol_per_channel = 0) {
  const int64_t eh = (cs.kh - 1) * cs.dilations[0] + 1, ew = (cs.kw - 1) * cs.dilations[1] + 1;
  int64_t ho, wo, pt, pl;
  if (cs.auto_pad == "SAME_UPPER") {
    ho = (cs.h + cs.strides[0] - 1) / cs.strides[0], wo = (cs.w + cs.strides[1] - 1) / cs.strides[1];
    pt = std::max<int64_t>(0, (ho - 1) * cs.strides[0] + eh - cs.h) / 2;
    pl = std::max<int64_t>(0, (wo - 1) * cs.strides[1] + ew - cs.w) / 2;
  } else {
    ho = (cs.h + cs.pads[0] + cs.pads[2] - eh) / cs.strides[0] + 1;
    wo = (cs.w + cs.pads[1] + cs.pads[3] - ew) / cs.strides[1] + 1;
    pt = cs.pads[0], pl = cs.pads[1];
  }
  std::mt19937 rng(static_cast<unsigned>(cs.c * 97 + cs.co * 13 + cs.h));
  std::uniform_real_distribution<float> dist(-1, 1);
  Tensor x(DType::kFloat32, {cs.n, cs.c, cs.h, cs.w}), w(DType::kFloat32, {cs.co, cs.c, cs.kh, cs.kw}),
      b(DType::kFloat32, {cs.co});
  for (Tensor* t : {&x, &w, &b})
    for (int64_t i = 0; i < t->numel(); ++i) t->data<float>()[i] = dist(rng);
  gemm_ops::GemmDesc d;
  d.kind = gemm_ops::GemmKind::kConv;
  d.strides = cs.strides, d.dilations = cs.dilations, d.pads = cs.pads, d.auto_pad = cs.auto_pad;
  d.out_dims = {cs.n, cs.co, ho, wo};
  d.out_dtype = DType::kFloat32;
  d.operands.push_back({true, DType::kFloat32, x.dims(), nullptr});
  d.operands.push_back({true, DType::kFloat32, w.dims(), &w});
  if (cs.bias) d.operands.push_back({true, DType::kFloat32, b.dims(), &b});
  auto op = make(d, cs.clamp);
  ASSERT_TRUE(op);
  ThreadPool pool(threads);
  ScopedThreadPool scoped(&pool);
  RtValue xv(x);
  Tensor y = op->run({&xv, nullptr, nullptr});
  ASSERT_EQ(y.dims(), d.out_dims);
  for (int64_t img = 0; img < cs.n; ++img)
    for (int64_t o = 0; o < cs.co; ++o)
      for (int64_t oy = 0; oy < ho; ++oy)
        for (int64_t ox = 0; ox < wo; ++ox) {
          double s = cs.bias ? b.data<float>()[o] : 0.0;
          for (int64_t c = 0; c < cs.c; ++c)
            for (int64_t i = 0; i < cs.kh; ++i)
              for (int64_t j = 0; j < cs.kw; ++j) {
                const int64_t iy = oy * cs.strides[0] - pt + i * cs.dilations[0];
                const int64_t ix = ox * cs.strides[1] - pl + j * cs.dilations[1];
                if (iy < 0 || iy >= cs.h || ix < 0 || ix >= cs.w) continue;
                s += double(x.data<float>()[((img * cs.c + c) * cs.h + iy) * cs.w + ix]) *
                     w.data<float>()[((o * cs.c + c) * cs.kh + i) * cs.kw + j];
              }
          if (cs.clamp) s = std::min(std::max(s, -0.5), 0.75);
          const float got = y.data<float>()[((img * cs.co + o) * ho + oy) * wo + ox];
          ASSERT_NEAR(got, s, rtol * (1 + std::abs(s)) + atol_per_channel * cs.c) << "image " << img << " channel " << o << " at " << oy
                                                           << "," << ox << " (case c=" << cs.c << " co=" << cs.co
                                                           << " " << cs.kh << "x" << cs.kw << ")";
        }
}

// A factory for check_conv from an op maker whose ops take the clamp through take_epilogue
// (GemmDesc::clamp_lo / clamp_hi) rather than as construction arguments.
inline ConvFactory clamp_by_epilogue(std::unique_ptr<gemm_ops::GemmOp> (*make)(const gemm_ops::GemmDesc&)) {
  return [make](const gemm_ops::GemmDesc& d, bool clamp) {
    std::unique_ptr<gemm_ops::GemmOp> op = make(d);
    if (op && clamp) {
      gemm_ops::GemmDesc e = d;
      e.clamp_lo = -0.5f, e.clamp_hi = 0.75f;
      EXPECT_TRUE(op->take_epilogue(e));
    }
    return op;
  };
}

// A Conv descriptor (stride and symmetric pad both ways) over run-time x, constant w and b,
// and a fused residual r (operand 3) with the output's dims.
inline gemm_ops::GemmDesc residual_conv_desc(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& r,
                                             int64_t stride = 1, int64_t pad = 0) {
  gemm_ops::GemmDesc d;
  d.kind = gemm_ops::GemmKind::kConv;
  d.strides = {stride, stride};
  d.pads = {pad, pad, pad, pad};
  d.out_dims = r.dims();
  d.out_dtype = DType::kFloat32;
  d.operands.push_back({true, DType::kFloat32, x.dims(), nullptr});
  d.operands.push_back({true, DType::kFloat32, w.dims(), &w});
  d.operands.push_back({true, DType::kFloat32, b.dims(), &b});
  d.operands.push_back({true, DType::kFloat32, r.dims(), nullptr});
  d.epilogue_residual = 3;
  return d;
}

// The op `make` builds for a conv of x_dims with a [co, c, k, k] weight, a bias, a residual and
// SiLU (and, when `without_residual`, the same without the residual) computes what the GEMM conv
// op (runtime/conv_gemm.h) computes with the same epilogue: within 1e-5, or, with
// `winograd_rounding`, within 1e-5 * (1 + |want|) per input channel.
inline void expect_epilogue_matches(const std::function<std::unique_ptr<gemm_ops::GemmOp>(const gemm_ops::GemmDesc&)>& make,
                                    const std::vector<int64_t>& x_dims, int64_t co, int64_t k, int64_t stride,
                                    int64_t pad, bool without_residual, bool winograd_rounding = false) {
  const int64_t ho = (x_dims[2] + 2 * pad - k) / stride + 1, wo = (x_dims[3] + 2 * pad - k) / stride + 1;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1, 1);
  Tensor x(DType::kFloat32, x_dims), w(DType::kFloat32, {co, x_dims[1], k, k}), b(DType::kFloat32, {co}),
      r(DType::kFloat32, {x_dims[0], co, ho, wo});
  for (Tensor* t : {&x, &w, &b, &r})
    for (int64_t i = 0; i < t->numel(); ++i) t->data<float>()[i] = dist(rng);
  gemm_ops::GemmDesc d = residual_conv_desc(x, w, b, r, stride, pad);
  d.epilogue_activation = static_cast<int32_t>(kernels::Activation::kSilu);
  for (bool residual : {true, false}) {
    if (!residual && !without_residual) continue;
    gemm_ops::GemmDesc e = d;
    if (!residual) e.epilogue_residual = -1;
    std::unique_ptr<gemm_ops::GemmOp> got_op = make(e), want_op = conv_ops::make_gemm_conv_op(e);
    ASSERT_TRUE(got_op && want_op);
    ASSERT_TRUE(got_op->take_epilogue(e));
    ASSERT_TRUE(want_op->take_epilogue(e));
    RtValue xv(x), rv(r);
    const Tensor got = got_op->run({&xv, nullptr, nullptr, &rv}), want = want_op->run({&xv, nullptr, nullptr, &rv});
    ASSERT_EQ(got.dims(), want.dims());
    for (int64_t i = 0; i < got.numel(); ++i) {
      const float g = got.data<float>()[i], v = want.data<float>()[i];
      const double tol = winograd_rounding ? 1e-5 * (1 + std::abs(v)) * double(x_dims[1]) : 1e-5;
      ASSERT_NEAR(g, v, tol) << i << (residual ? " with" : " without") << " residual";
    }
  }
}

}  // namespace kiln::conv_test
