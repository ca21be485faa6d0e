// im2col for Conv 2-D (NCHW, one image): rows (c, i, j) of the column matrix, each holding the
// input tap for every output pixel. Interior runs are copied in bulk (memcpy for stride 1, a
// branch-free strided loop otherwise); only the padded borders are zero-filled. Also packs GEMM
// B panels straight from the image (no column matrix); on AVX-512 with 32-column panels,
// stride-1 convs with output rows as wide as the input (3x3 pad 1) pack each panel row with two
// masked loads, other stride-1/stride-2 convs with masked vector copies per row segment, or,
// for outputs narrower than a 32-column panel, masked gathers; on AVX2 with 16-column panels,
// masked gathers for outputs narrower than 32 columns, 8-wide copies per row segment for wider
// stride-1/stride-2 ones (f32_im2col_avx2.cc).
// Tests: tests/kernels/test_im2col.cc.
#pragma once

#include <cstdint>

namespace kiln::kernels {

struct Im2colGeom {
  int64_t c = 0, h = 0, w = 0;    // input image
  int64_t kh = 0, kw = 0;         // filter
  int64_t ho = 0, wo = 0;         // output
  int64_t sh = 1, sw = 1, dh = 1, dw = 1;
  int64_t pt = 0, pl = 0;         // top / left padding
};

// Writes rows [r_begin, r_end) of col[c*kh*kw, ho*wo] for image `x` ([c, h, w]).
void im2col_rows(const Im2colGeom& g, const float* x, float* col, int64_t r_begin, int64_t r_end);

// Implicit im2col: packs rows [k0, k0+kc) x output pixels [j0, j0+nc) of the column matrix
// straight from image `x` into NR-column panels (the PackBFn layout of f32_gemm_prepacked_a.h: panel q at
// dst + q*kc*nr, kc x nr row-major, columns past nc zeroed).
void im2col_pack_b(const Im2colGeom& g, const float* x, int64_t k0, int64_t kc, int64_t j0, int64_t nc, int nr,
                   float* dst);

}  // namespace kiln::kernels
