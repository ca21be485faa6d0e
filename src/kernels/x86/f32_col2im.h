// col2im for ConvTranspose 2-D (NCHW, one output channel): adds each tap's column row (the
// contribution of every input pixel through that tap) into the output plane at its strided
// positions. Stride 1 adds contiguous runs; stride 2 on AVX-512 / AVX2 interleaves two neighbouring
// taps' rows (or one tap's with zeros) into contiguous output vectors; other strides add
// element by element. Tests: tests/kernels/test_col2im.cc.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/x86/isa_list.h"

namespace kiln::kernels {

struct Col2imGeom {
  int64_t h = 0, w = 0;    // input plane (a column row holds h * w values)
  int64_t kh = 0, kw = 0;  // filter
  int64_t ho = 0, wo = 0;  // output plane
  int64_t sh = 1, sw = 1, dh = 1, dw = 1;
  int64_t pt = 0, pl = 0;  // where the output starts in the full result (may be negative)
};

// plane[(iy*sh - pt + i*dh) * wo + ix*sw - pl + j*dw] += col[(i*kw + j) * h*w + iy*w + ix] for
// every tap (i, j) and input pixel (iy, ix) whose position falls inside the ho x wo plane.
void col2im_add_plane(const Col2imGeom& g, const float* col, float* plane);

// d[2k] += s0[k], d[2k + 1] += s1[k] for k < n: stride-2 neighbouring taps interleaved (the
// family's list, isa_list.h; without an entry for the host's ISA a portable loop runs).
using Col2imPairRowFn = void (*)(const float* s0, const float* s1, int64_t n, float* d);
#define KILN_COL2IM_PAIR_ROW_KERNELS(X)                       \
  X(col2im_pair_row_avx512f, ::kiln::target::Isa::kAvx512) \
  X(col2im_pair_row_avx2, ::kiln::target::Isa::kAvx2)
#define KILN_DECLARE_COL2IM(NAME, ISA) void NAME(const float* s0, const float* s1, int64_t n, float* d);
KILN_COL2IM_PAIR_ROW_KERNELS(KILN_DECLARE_COL2IM)
#undef KILN_DECLARE_COL2IM
const std::vector<IsaKernel<Col2imPairRowFn>>& col2im_pair_row_kernels();

}  // namespace kiln::kernels
