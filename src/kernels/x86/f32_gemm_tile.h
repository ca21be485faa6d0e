// Scalar store of an accumulated tile with the GEMM epilogue (tails and the generic kernel).
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/x86/f32_gemm.h"

namespace kiln::kernels {

// acc is MR x NR row-major with leading dimension ld; writes mr x nr of C.
inline void f32_gemm_store_tile(const float* acc, int64_t ld, int64_t mr, int64_t nr, float* c,
                                int64_t ldc, const F32GemmParams& p) {
  for (int64_t i = 0; i < mr; ++i) {
    float* row = c + i * ldc;
    for (int64_t j = 0; j < nr; ++j) {
      float v = acc[i * ld + j];
      if (p.beta != 0.0f) v += p.beta * row[j];
      if (p.bias) v += p.bias[j];
      if (p.row_bias) v += p.row_bias[i];
      if (p.residual) v += p.residual[i * p.ldr + j];
      if (p.relu) v = std::max(v, 0.0f);
      if (p.clamp) v = std::min(std::max(v, p.lo), p.hi);
      v = apply_activation(p.act, v);
      row[j] = v;
    }
  }
}

}  // namespace kiln::kernels
