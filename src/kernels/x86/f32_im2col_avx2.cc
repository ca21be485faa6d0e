// Implicit-im2col B packing on AVX2 (16-column panels of the 6x16 microkernel). Outputs narrower
// than 32 columns (any stride or dilation): two masked gathers per panel row, the per-lane
// offsets and masks made once per block for each tap. Wider stride-1 and stride-2 outputs: each
// panel row assembled from its output-row segments with 8-wide copies (stride 2: two loads and
// one even-lane shuffle per 8 pixels) and 8-wide zero stores for the padded taps; these stores
// run left to right through the packed block and may write up to 7 floats past a segment, onto
// what is written after them (the rest of the row, the next row of the panel), so none needs a
// mask. Per packed float, 1 thread (ResNet shapes, 192-column blocks): gathers 0.7-0.8 ns at 28x28
// and 14x14 outputs where segments take 1.2-1.8 and the portable packer 1.2-1.7; segments 0.6-0.8
// ns at 56 to 112 columns where gathers take 0.8-1.5. Stride-2 convs wider than 1x1 skip both:
// the conv op splits the image into polyphase planes once (im2col_split_phases) and the panels
// are packed from those with unaligned loads and blends (im2col_pack_b_phased).
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "kernels/x86/f32_im2col.h"
#include "kernels/x86/simd.h"

namespace kiln::kernels {
namespace {

constexpr int kNr = 16;

// A run of consecutive pixels of one output row within a panel.
struct Segment {
  int32_t col;     // first panel column
  int32_t len;     // pixels
  int64_t oy, ox;  // output row and column of the first pixel
};

// What a block row (c, i, j) reads: its channel plane, its tap row, and the output columns whose
// tap lands inside the image, [lo, hi), at input column ox * sw + off.
struct RowTap {
  int64_t plane, i, off, lo, hi;
};

// Output columns [from, to) of out zeroed (stores may run 7 floats past `to`).
inline void zero_run(float* out, int64_t from, int64_t to) {
  const __m256 zero = _mm256_setzero_ps();
  for (int64_t o = from; o < to; o += 8) _mm256_storeu_ps(out + o, zero);
}

// out[o] = xr[o * S] for o in [a, b): reads only those floats (the last 8-pixel group masked).
template <int S>
inline void copy_run(float* out, const float* xr, int64_t a, int64_t b) {
  int64_t o = a;
  for (; o + 8 <= b; o += 8) {
    if constexpr (S == 1) {
      _mm256_storeu_ps(out + o, _mm256_loadu_ps(xr + o));
    } else {
      // Floats 2o .. 2o + 14: lo has the evens 0-6 at its even lanes, hi (from 2o + 7) the evens
      // 8-14 at its odd lanes; the in-lane shuffle leaves the 64-bit pairs in the order 0 2 1 3.
      const __m256 lo = _mm256_loadu_ps(xr + 2 * o), hi = _mm256_loadu_ps(xr + 2 * o + 7);
      const __m256 e = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 2, 0));
      _mm256_storeu_ps(out + o, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0))));
    }
  }
  if (o >= b) return;
  const int64_t n = b - o;
  if constexpr (S == 1) {
    _mm256_storeu_ps(out + o, _mm256_maskload_ps(xr + o, F32x8::first(n)));
  } else {
    const int64_t floats = 2 * n - 1;  // 2o .. 2o + 2(n - 1)
    const __m256 lo = _mm256_maskload_ps(xr + 2 * o, F32x8::first(floats));
    const __m256 hi = _mm256_maskload_ps(xr + 2 * o + 7, F32x8::first(floats - 7));
    const __m256 e = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 2, 0));
    _mm256_storeu_ps(out + o, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0))));
  }
}

template <int S>
void pack(const Im2colGeom& g, const float* x, int64_t kc, int64_t panels, const std::vector<RowTap>& taps,
          const std::vector<Segment>& segs, const std::vector<int32_t>& first_seg, const std::vector<int32_t>& filled,
          float* dst) {
  alignas(32) float last_row[kNr + 8];
  for (int64_t q = 0; q < panels; ++q) {
    for (int64_t kk = 0; kk < kc; ++kk) {
      // The block's very last row spills past the block: it is assembled aside.
      const bool last = q == panels - 1 && kk == kc - 1;
      float* d = last ? last_row : dst + (q * kc + kk) * kNr;
      const RowTap& t = taps[static_cast<size_t>(kk)];
      const float* xc = x + t.plane;
      for (int32_t si = first_seg[static_cast<size_t>(q)]; si < first_seg[static_cast<size_t>(q + 1)]; ++si) {
        const Segment& s = segs[static_cast<size_t>(si)];
        float* out = d + s.col - s.ox;  // out[o] holds output column o of this row
        const int64_t end = s.ox + s.len;
        const int64_t iy = s.oy * g.sh - g.pt + t.i * g.dh;
        if (iy < 0 || iy >= g.h) {
          zero_run(out, s.ox, end);
          continue;
        }
        const int64_t a = std::clamp(t.lo, s.ox, end), b = std::clamp(t.hi, a, end);
        zero_run(out, s.ox, a);
        copy_run<S>(out, xc + iy * g.w + t.off, a, b);
        zero_run(out, b, end);
      }
      zero_run(d, filled[static_cast<size_t>(q)], kNr);
      if (last) std::copy_n(last_row, kNr, dst + (q * kc + kk) * kNr);
    }
  }
}

}  // namespace

bool im2col_pack_b_segments_avx2(const Im2colGeom& g, const float* x, int64_t k0, int64_t kc, int64_t j0, int64_t nc,
                                 int nr, float* dst) {
  if (nr != kNr || (g.sw != 1 && g.sw != 2) || kc <= 0 || nc <= 0) return false;
  const int64_t panels = (nc + kNr - 1) / kNr, taps_per_channel = g.kh * g.kw;
  thread_local std::vector<RowTap> taps;
  thread_local std::vector<Segment> segs;
  thread_local std::vector<int32_t> first_seg, filled;
  taps.resize(static_cast<size_t>(kc));
  for (int64_t kk = 0; kk < kc; ++kk) {
    const int64_t r = k0 + kk, c = r / taps_per_channel, i = r / g.kw % g.kh, j = r % g.kw;
    RowTap& t = taps[static_cast<size_t>(kk)];
    t.plane = c * g.h * g.w;
    t.i = i;
    t.off = j * g.dw - g.pl;
    t.lo = std::min(g.wo, t.off >= 0 ? 0 : (-t.off + g.sw - 1) / g.sw);
    t.hi = std::max(t.lo, std::min(g.wo, g.w - t.off <= 0 ? 0 : (g.w - t.off + g.sw - 1) / g.sw));
  }
  // The panels' segments: the same for every block row.
  segs.clear();
  first_seg.resize(static_cast<size_t>(panels + 1));
  filled.resize(static_cast<size_t>(panels));
  for (int64_t q = 0; q < panels; ++q) {
    first_seg[static_cast<size_t>(q)] = static_cast<int32_t>(segs.size());
    int64_t p = j0 + q * kNr;
    const int64_t pend = std::min(j0 + nc, p + kNr);
    int64_t oy = p / g.wo, ox = p % g.wo, col = 0;
    while (p < pend) {
      const int64_t len = std::min(g.wo - ox, pend - p);
      segs.push_back({static_cast<int32_t>(col), static_cast<int32_t>(len), oy, ox});
      col += len;
      p += len;
      ++oy;
      ox = 0;
    }
    filled[static_cast<size_t>(q)] = static_cast<int32_t>(col);
  }
  first_seg[static_cast<size_t>(panels)] = static_cast<int32_t>(segs.size());
  if (g.sw == 1) pack<1>(g, x, kc, panels, taps, segs, first_seg, filled, dst);
  else pack<2>(g, x, kc, panels, taps, segs, first_seg, filled, dst);
  return true;
}

bool im2col_pack_b_gather_avx2(const Im2colGeom& g, const float* x, int64_t k0, int64_t kc, int64_t j0, int64_t nc,
                               int nr, float* dst) {
  if (nr != kNr || g.wo >= 32 || kc <= 0 || nc <= 0 || g.c * g.h * g.w >= (int64_t(1) << 30)) return false;
  const int64_t taps = g.kh * g.kw, panels = (nc + kNr - 1) / kNr;
  // [panel][tap][lane]: the lane's input offset in its channel plane (0 when it reads padding),
  // and its mask (all ones when it reads the image).
  thread_local std::vector<int32_t> offsets, masks;
  thread_local std::vector<int64_t> row_plane;
  thread_local std::vector<int32_t> row_tap;
  offsets.assign(static_cast<size_t>(panels * taps * kNr), 0);
  masks.assign(static_cast<size_t>(panels * taps * kNr), 0);
  for (int64_t q = 0; q < panels; ++q)
    for (int lane = 0; lane < kNr; ++lane) {
      const int64_t p = j0 + q * kNr + lane;
      if (p >= j0 + nc) break;
      const int64_t oy = p / g.wo, ox = p % g.wo;
      for (int64_t tap = 0; tap < taps; ++tap) {
        const int64_t iy = oy * g.sh + (tap / g.kw) * g.dh - g.pt, ix = ox * g.sw + (tap % g.kw) * g.dw - g.pl;
        if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
        const size_t at = static_cast<size_t>((q * taps + tap) * kNr + lane);
        offsets[at] = static_cast<int32_t>(iy * g.w + ix);
        masks[at] = -1;
      }
    }
  row_plane.resize(static_cast<size_t>(kc));
  row_tap.resize(static_cast<size_t>(kc));
  for (int64_t kk = 0; kk < kc; ++kk) {
    row_plane[static_cast<size_t>(kk)] = (k0 + kk) / taps * g.h * g.w;
    row_tap[static_cast<size_t>(kk)] = static_cast<int32_t>((k0 + kk) % taps);
  }
  const __m256 zero = _mm256_setzero_ps();
  for (int64_t q = 0; q < panels; ++q) {
    float* d = dst + q * kc * kNr;
    for (int64_t kk = 0; kk < kc; ++kk) {
      const size_t at = static_cast<size_t>((q * taps + row_tap[static_cast<size_t>(kk)]) * kNr);
      const float* base = x + row_plane[static_cast<size_t>(kk)];
      const __m256i o0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(offsets.data() + at));
      const __m256i o1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(offsets.data() + at + 8));
      const __m256 m0 = _mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(masks.data() + at)));
      const __m256 m1 = _mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(masks.data() + at + 8)));
      _mm256_storeu_ps(d + kk * kNr, _mm256_mask_i32gather_ps(zero, base, o0, m0, 4));
      _mm256_storeu_ps(d + kk * kNr + 8, _mm256_mask_i32gather_ps(zero, base, o1, m1, 4));
    }
  }
  return true;
}

namespace {

}  // namespace

void im2col_split_phases_avx2(const Im2colGeom& g, const float* x, int64_t c0, int64_t c1, float* phases) {
  const Im2colPhaseLayout l = im2col_phase_layout(g);
  // Planes no tap reads (row phase 1 of a one-row filter, column phase 1 of a one-column one)
  // are left as they are: the packer only blends in lanes of the planes it reads.
  const bool odd_columns = g.kw > 1;
  for (int64_t c = c0; c < c1; ++c)
    for (int64_t p = 0; p < std::min<int64_t>(2, g.kh); ++p) {
      float* even = phases + im2col_phase_plane(l, c, p, 0);
      float* odd = phases + im2col_phase_plane(l, c, p, 1);
      for (int64_t u = 0; u < l.hp; ++u) {
        const int64_t iy = 2 * u + p - g.pt;
        float *e = even + u * l.wp, *o = odd + u * l.wp;
        if (iy < 0 || iy >= g.h) {
          std::fill_n(e, l.wp, 0.0f);
          if (odd_columns) std::fill_n(o, l.wp, 0.0f);
          continue;
        }
        const float* row = x + (c * g.h + iy) * g.w;
        for (int64_t v0 = 0; v0 < l.wp; v0 += 8) {
          const int64_t col = 2 * v0 - g.pl;  // input column of e[v0]
          const __m256 lo = F32x8::load_range(row, col, g.w, F32x8::zero()), hi = F32x8::load_range(row, col + 8, g.w, F32x8::zero());
          // Even / odd floats of lo then hi: in-lane shuffles leave the 64-bit pairs as 0 2 1 3.
          const __m256 ev = _mm256_castpd_ps(_mm256_permute4x64_pd(
              _mm256_castps_pd(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0))), _MM_SHUFFLE(3, 1, 2, 0)));
          const __m256 od = _mm256_castpd_ps(_mm256_permute4x64_pd(
              _mm256_castps_pd(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1))), _MM_SHUFFLE(3, 1, 2, 0)));
          if (v0 + 8 <= l.wp) {
            _mm256_storeu_ps(e + v0, ev);
            if (odd_columns) _mm256_storeu_ps(o + v0, od);
          } else {
            F32x8::store_first(e + v0, ev, l.wp - v0);
            if (odd_columns) F32x8::store_first(o + v0, od, l.wp - v0);
          }
        }
      }
    }
}

bool im2col_pack_b_phased_avx2(const Im2colGeom& g, const float* phases, int64_t k0, int64_t kc, int64_t j0,
                               int64_t nc, int nr, float* dst) {
  if (nr != kNr || kc <= 0 || nc <= 0) return false;
  const Im2colPhaseLayout l = im2col_phase_layout(g);
  const int64_t panels = (nc + kNr - 1) / kNr, taps = g.kh * g.kw;
  // Per panel, its output-row segments (where each starts in a phase plane, relative to the
  // row's shift) and, per 8-lane half, the lanes each fills; per block row, its plane and shift.
  struct Run {
    int64_t at;    // plane offset of the segment's first pixel minus its panel column
    __m256 lanes;  // lanes of this half the segment fills (all ones), per half
  };
  thread_local std::vector<Run> runs;  // [panel][half][segment]
  thread_local std::vector<int32_t> first_run;
  thread_local std::vector<int64_t> row_at;
  runs.clear();
  first_run.resize(static_cast<size_t>(2 * panels + 1));
  for (int64_t q = 0; q < panels; ++q)
    for (int64_t h = 0; h < 2; ++h) {
      first_run[static_cast<size_t>(2 * q + h)] = static_cast<int32_t>(runs.size());
      int64_t p = j0 + q * kNr;
      const int64_t pend = std::min(j0 + nc, p + kNr);
      int64_t oy = p / g.wo, ox = p % g.wo, col = 0;
      while (p < pend) {
        const int64_t len = std::min(g.wo - ox, pend - p);
        const int64_t lo = std::max(col, 8 * h), hi = std::min(col + len, 8 * h + 8);
        if (lo < hi) {
          const __m256i in = _mm256_andnot_si256(F32x8::first(lo - 8 * h), F32x8::first(hi - 8 * h));
          runs.push_back({oy * l.wp + ox - col + 8 * h, _mm256_castsi256_ps(in)});
        }
        col += len;
        p += len;
        ++oy;
        ox = 0;
      }
    }
  first_run[static_cast<size_t>(2 * panels)] = static_cast<int32_t>(runs.size());
  row_at.resize(static_cast<size_t>(kc));
  for (int64_t kk = 0; kk < kc; ++kk) {
    const int64_t r = k0 + kk, c = r / taps, i = r % taps / g.kw, j = r % g.kw;
    row_at[static_cast<size_t>(kk)] = im2col_phase_plane(l, c, i % 2, j % 2) + (i / 2) * l.wp + j / 2;
  }
  for (int64_t q = 0; q < panels; ++q) {
    float* d = dst + q * kc * kNr;
    const Run* r0 = runs.data() + first_run[static_cast<size_t>(2 * q)];
    const Run* r1 = runs.data() + first_run[static_cast<size_t>(2 * q + 1)];
    const Run* r2 = runs.data() + first_run[static_cast<size_t>(2 * q + 2)];
    for (int64_t kk = 0; kk < kc; ++kk) {
      // Lanes outside a run read neighbouring floats of the buffer (it has slack at both ends)
      // and are blended away.
      const float* base = phases + row_at[static_cast<size_t>(kk)];
      __m256 v0 = _mm256_setzero_ps(), v1 = _mm256_setzero_ps();
      for (const Run* r = r0; r < r1; ++r) v0 = _mm256_blendv_ps(v0, _mm256_loadu_ps(base + r->at), r->lanes);
      for (const Run* r = r1; r < r2; ++r) v1 = _mm256_blendv_ps(v1, _mm256_loadu_ps(base + r->at), r->lanes);
      _mm256_storeu_ps(d + kk * kNr, v0);
      _mm256_storeu_ps(d + kk * kNr + 8, v1);
    }
  }
  return true;
}

}  // namespace kiln::kernels
