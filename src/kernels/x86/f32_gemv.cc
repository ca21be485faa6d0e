// Packing, dispatch and the portable kernel of f32 GEMV (see f32_gemv.h).
#include "kernels/x86/f32_gemv.h"

#include <algorithm>
#include <cstring>

namespace kiln::kernels {

int64_t PackedGemvB::block_width(int64_t b) const {
  const int64_t rest = n - b * kBlock;
  return std::min<int64_t>(kBlock, (rest + 15) / 16 * 16);
}

PackedGemvB pack_gemv_b(bool trans_b, int64_t K, int64_t N, const float* B, int64_t ldb,
                        const ParallelFor& parallel) {
  PackedGemvB p;
  p.k = K;
  p.n = N;
  // Full blocks are K x 64; the last one is narrower, so the buffer is bounded by blocks * K * 64.
  p.data.assign(static_cast<size_t>(p.blocks() * K * PackedGemvB::kBlock), 0.0f);
  auto pack = [&](int64_t begin, int64_t end) {
    for (int64_t blk = begin; blk < end; ++blk) {
      const int64_t j0 = blk * PackedGemvB::kBlock, w = p.block_width(blk);
      const int64_t cols = std::min<int64_t>(w, N - j0);
      float* dst = p.data.data() + blk * K * PackedGemvB::kBlock;
      if (!trans_b) {
        for (int64_t k = 0; k < K; ++k) std::memcpy(dst + k * w, B + k * ldb + j0, sizeof(float) * cols);
      } else {
        // Row j of B is column j of op(B): walk B rows contiguously, scatter with stride w.
        for (int64_t j = 0; j < cols; ++j) {
          const float* src = B + (j0 + j) * ldb;
          for (int64_t k = 0; k < K; ++k) dst[k * w + j] = src[k];
        }
      }
    }
  };
  if (parallel && p.blocks() > 1) {
    parallel(p.blocks(), pack);
  } else {
    pack(0, p.blocks());
  }
  return p;
}

void gemv_blocks_generic(const float* x, float alpha, const PackedGemvB& b, const float* bias,
                         bool relu, float* y, int64_t b0, int64_t b1) {
  float acc[PackedGemvB::kBlock];
  for (int64_t blk = b0; blk < b1; ++blk) {
    const int64_t w = b.block_width(blk), j0 = blk * PackedGemvB::kBlock;
    const float* p = b.block_data(blk);
    std::fill(acc, acc + w, 0.0f);
    for (int64_t k = 0; k < b.k; ++k) {
      const float xk = x[k];
      const float* row = p + k * w;
      for (int64_t j = 0; j < w; ++j) acc[j] += xk * row[j];
    }
    const int64_t cols = std::min<int64_t>(w, b.n - j0);
    for (int64_t j = 0; j < cols; ++j) {
      float v = alpha * acc[j] + (bias ? bias[j0 + j] : 0.0f);
      y[j0 + j] = relu ? std::max(v, 0.0f) : v;
    }
  }
}

const std::vector<IsaKernel<GemvBlocksFn>>& gemv_f32_kernels() {
  static const std::vector<IsaKernel<GemvBlocksFn>> list = {KILN_GEMV_F32_KERNELS(KILN_ISA_KERNEL_ENTRY)};
  return list;
}

void gemv_packed(const float* x, float alpha, const PackedGemvB& b, const float* bias, bool relu,
                 float* y, const ParallelFor& parallel) {
  static const GemvBlocksFn blocks_fn = host_kernel(gemv_f32_kernels());
  auto run = [&](int64_t b0, int64_t b1) { blocks_fn(x, alpha, b, bias, relu, y, b0, b1); };
  const int64_t blocks = b.blocks();
  // Small heads are not worth waking workers for (~64 KB of weights per thread at least).
  if (parallel && blocks > 1 && b.k * b.n >= (1 << 14)) {
    parallel(blocks, run);
  } else {
    run(0, blocks);
  }
}

}  // namespace kiln::kernels
