// f32 depthwise 2-D convolution (NCHW, one kh x kw filter per channel) with a fused
// bias + clamp epilogue: an AVX-512 kernel (vectorized along W over a zero-padded, stride-phase
// split copy of each input plane) and a portable scalar kernel, parallel over channel planes.
// Tests: tests/kernels/test_depthwise.cc.
#pragma once

#include <cstdint>
#include <limits>

#include "kernels/x86/f32_gemm.h"

namespace kiln::kernels {

struct DepthwiseGeom {
  int64_t n = 1, c = 1;          // images, channels (= groups)
  int64_t h = 0, w = 0;          // input plane
  int64_t kh = 0, kw = 0;        // filter
  int64_t ho = 0, wo = 0;        // output plane
  int64_t sh = 1, sw = 1;        // strides
  int64_t dh = 1, dw = 1;        // dilations
  int64_t pt = 0, pl = 0;        // top / left padding (bottom/right follow from ho/wo)
};

// y = clamp(conv(x, w) + bias, lo, hi); bias may be null. lo/hi = -inf/+inf: no clamp.
struct DepthwiseEpilogue {
  const float* bias = nullptr;
  float lo = -std::numeric_limits<float>::infinity();
  float hi = std::numeric_limits<float>::infinity();
};

// True when the geometry is one the kernels handle (positive sizes, strides, dilations;
// non-negative pads).
bool depthwise_geom_ok(const DepthwiseGeom& g);

// x: [n, c, h, w], w: [c, 1, kh, kw], y: [n, c, ho, wo]. Uses the AVX-512 kernel when the
// CPU has it and KILN_ISA does not force another ISA (same choice as f32_gemm_default()).
void depthwise_conv2d_f32(const DepthwiseGeom& g, const float* x, const float* w, float* y,
                          const DepthwiseEpilogue& ep, const ParallelFor& parallel = nullptr);

// The portable kernel alone (the reference for tests and the fallback).
void depthwise_conv2d_f32_generic(const DepthwiseGeom& g, const float* x, const float* w, float* y,
                                  const DepthwiseEpilogue& ep, const ParallelFor& parallel = nullptr);
// The AVX-512 kernel alone; only call it when isa_supported(Isa::kAvx512).
void depthwise_conv2d_f32_avx512f(const DepthwiseGeom& g, const float* x, const float* w, float* y,
                                  const DepthwiseEpilogue& ep, const ParallelFor& parallel = nullptr);

}  // namespace kiln::kernels
