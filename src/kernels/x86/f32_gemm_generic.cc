// Portable f32 GEMM microkernel (baseline x86-64 / any target): 4 rows x 8 columns.
#include "kernels/x86/f32_gemm.h"
#include "kernels/x86/f32_gemm_tile.h"

namespace kiln::kernels {

void f32_gemm_ukernel_4x8__generic(int64_t mr, int64_t nr, int64_t kc, const float* a,
                                   const float* b, float* c, int64_t ldc, const F32GemmParams& p) {
  constexpr int kMr = 4, kNr = 8;
  float acc[kMr * kNr] = {};
  for (int64_t k = 0; k < kc; ++k) {
    for (int i = 0; i < kMr; ++i) {
      const float ai = a[i];
      for (int j = 0; j < kNr; ++j) acc[i * kNr + j] += ai * b[j];
    }
    a += kMr;
    b += p.b_stride ? p.b_stride : kNr;
  }
  f32_gemm_store_tile(acc, kNr, mr, nr, c, ldc, p);
}

}  // namespace kiln::kernels
