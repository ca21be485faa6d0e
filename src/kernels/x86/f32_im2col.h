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
#include <vector>

#include "kernels/x86/isa_list.h"

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
// dst + q*kc*nr, kc x nr row-major, columns past nc zeroed). The first packer of the family's
// list for the default microkernel's ISA that takes the case, else the portable one.
void im2col_pack_b(const Im2colGeom& g, const float* x, int64_t k0, int64_t kc, int64_t j0, int64_t nc, int nr,
                   float* dst);

// One packer of im2col_pack_b: false (nothing written) when the geometry or panel width is not
// its case. The family's list (isa_list.h), in the order im2col_pack_b tries them; an entry
// is called only when the CPU has its ISA (isa_supported). The portable packer takes every case.
using Im2colPackFn = bool (*)(const Im2colGeom& g, const float* x, int64_t k0, int64_t kc, int64_t j0, int64_t nc,
                              int nr, float* dst);
#define KILN_IM2COL_PACK_F32_KERNELS(X)                              \
  X(im2col_pack_b_shifted_avx512f, ::kiln::target::Isa::kAvx512)  \
  X(im2col_pack_b_gather_avx512f, ::kiln::target::Isa::kAvx512)   \
  X(im2col_pack_b_segments_avx512f, ::kiln::target::Isa::kAvx512) \
  X(im2col_pack_b_gather_avx2, ::kiln::target::Isa::kAvx2)        \
  X(im2col_pack_b_segments_avx2, ::kiln::target::Isa::kAvx2)      \
  X(im2col_pack_b_generic, ::kiln::target::Isa::kGeneric)
#define KILN_DECLARE_IM2COL_PACK(NAME, ISA)                                                                 \
  bool NAME(const Im2colGeom& g, const float* x, int64_t k0, int64_t kc, int64_t j0, int64_t nc, int nr, \
            float* dst);
KILN_IM2COL_PACK_F32_KERNELS(KILN_DECLARE_IM2COL_PACK)
#undef KILN_DECLARE_IM2COL_PACK
const std::vector<IsaKernel<Im2colPackFn>>& im2col_pack_f32_kernels();

// Stride-2 convs (dilation 1) on AVX2: the image split once into its four polyphase planes,
// zero padding included (plane (p, q) of channel c: xpad(2u + p, 2v + q) for u < hp, v < wp),
// so that a column-matrix row (c, i, j) reads plane (c, i % 2, j % 2) shifted by (i / 2, j / 2)
// without bounds checks: 16-pixel panel rows become a few unaligned loads and blends instead of
// strided gathers.
struct Im2colPhaseLayout {
  int64_t hp = 0, wp = 0;  // plane rows / columns: ho + (kh - 1) / 2, wo + (kw - 1) / 2
};
inline Im2colPhaseLayout im2col_phase_layout(const Im2colGeom& g) {
  return {g.ho + (g.kh - 1) / 2, g.wo + (g.kw - 1) / 2};
}
// Floats before the first plane and after the last (the packer's loads reach 15 floats past the
// runs they blend).
inline constexpr int64_t kIm2colPhaseSlack = 16;
// Offset of plane (c, p, q) in the split buffer.
inline int64_t im2col_phase_plane(const Im2colPhaseLayout& l, int64_t c, int64_t p, int64_t q) {
  return kIm2colPhaseSlack + ((c * 2 + p) * 2 + q) * l.hp * l.wp;
}
inline int64_t im2col_phase_floats(const Im2colGeom& g) {
  const Im2colPhaseLayout l = im2col_phase_layout(g);
  return 4 * g.c * l.hp * l.wp + 2 * kIm2colPhaseSlack;
}
// True when the split pays and runs here: the default f32 microkernel is AVX2, stride 2,
// dilation 1.
bool im2col_phases_supported(const Im2colGeom& g);
// Channels [c0, c1) of image x into the split buffer `phases` (im2col_phase_floats(g) floats);
// the slack and the planes no tap reads (kh or kw of 1) are left as they are: the packer's loads
// touch them, but blend none of their lanes in.
void im2col_split_phases(const Im2colGeom& g, const float* x, int64_t c0, int64_t c1, float* phases);
// im2col_pack_b from the split image; false (nothing written) unless nr == 16.
bool im2col_pack_b_phased(const Im2colGeom& g, const float* phases, int64_t k0, int64_t kc, int64_t j0, int64_t nc,
                          int nr, float* dst);

}  // namespace kiln::kernels
