// ConvInteger on the int8 GEMM (kernels/x86/s8_gemm.h), exact: with VNNI a weight-stationary
// implicit convolution (NCHW in and out, run_implicit), else channels-last inside the step
// (run_channels_last). Padding holds the
// input's zero point, so (x - zx) . w = x . w - zx * sum(w) for every output. With VNNI the op
// also takes a requantizing epilogue (GemmDesc::requant_*): uint8 out, no int32 tensor.
// Tests: tests/runtime/test_gemm_ops.cc (ConvInteger against the reference kernel).
#include "runtime/conv_integer.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/x86/f32_transpose.h"
#include "kernels/x86/s8_gemm.h"
#include "runtime/conv_geom.h"
#include "runtime/gemm_epilogue.h"
#include "runtime/gemm_op_util.h"

namespace kiln::conv_ops {
namespace {

// Transposes rows x cols bytes (row-major, leading dim ld_src) into cols x rows (leading dim
// ld_dst), rows [r0, r1) only: four rows at a time, so that each column gets one 4-byte store
// (the byte-by-byte loop was a tenth of a quantized ResNet-50's time).
void transpose_rows(const uint8_t* src, int64_t ld_src, int64_t r0, int64_t r1, int64_t cols, uint8_t* dst,
                    int64_t ld_dst) {
  constexpr int64_t kTile = 256;
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4) {
    const uint8_t *a = src + r * ld_src, *b = a + ld_src, *c = b + ld_src, *d = c + ld_src;
    for (int64_t ct = 0; ct < cols; ct += kTile)
      for (int64_t j = ct; j < std::min(ct + kTile, cols); ++j) {
        const uint32_t quad = uint32_t(a[j]) | uint32_t(b[j]) << 8 | uint32_t(c[j]) << 16 | uint32_t(d[j]) << 24;
        std::memcpy(dst + j * ld_dst + r, &quad, 4);
      }
  }
  for (; r < r1; ++r)
    for (int64_t j = 0; j < cols; ++j) dst[j * ld_dst + r] = src[r * ld_src + j];
}

class ConvIntegerOp : public gemm_ops::GemmOp {
 public:
  ConvIntegerOp(const ConvGeom& g, const Tensor& w) : g_(g), k_(g.c * g.kh * g.kw) {
    const int8_t* pw = w.data<int8_t>();  // [M, K], K = (c, i, j)
    colsum_.assign(static_cast<size_t>(g.co), 0);
    for (int64_t m = 0; m < g.co; ++m)
      for (int64_t k = 0; k < k_; ++k) colsum_[static_cast<size_t>(m)] += pw[m * k_ + k];
    if (kernels::s8_gemm_has_vnni()) {
      plan_implicit(pw);
      return;
    }
    // W [M, C, kh, kw] -> B [(i, j, c), M]: K in the order the channels-last columns have it.
    std::vector<int8_t> b(static_cast<size_t>(k_ * g.co));
    for (int64_t m = 0; m < g.co; ++m)
      for (int64_t c = 0; c < g.c; ++c)
        for (int64_t t = 0; t < g.kh * g.kw; ++t)
          b[static_cast<size_t>((t * g.c + c) * g.co + m)] = pw[(m * g.c + c) * g.kh * g.kw + t];
    b_ = kernels::pack_b_s8(k_, g.co, b.data(), g.co);
  }

  // The requantizing epilogue (VNNI only: it runs in the weight-stationary GEMM's tiles).
  bool take_epilogue(const gemm_ops::GemmDesc& d) override {
    if (w8_.data.empty()) return false;
    std::optional<gemm_ops::RequantConstants> rq = gemm_ops::requant_constants(d, g_.co);
    if (!rq) return false;
    requant_ = std::move(*rq);
    return true;
  }

  Tensor run(const std::vector<const RtValue*>& ins) override {
    const ConvGeom& g = g_;
    const uint8_t zx = ins.size() > 2 && ins[2] && ins[2]->is_tensor() ? static_cast<uint8_t>(ins[2]->tensor.get_int(0)) : 0;
    const uint8_t* x = ins[0]->tensor.data<uint8_t>();
    if (requant_) {
      Tensor y = output_tensor(DType::kUInt8, {g.n, g.co, g.ho, g.wo});
      run_implicit(x, zx, y.data<uint8_t>());
      return y;
    }
    Tensor y = output_tensor(DType::kInt32, {g.n, g.co, g.ho, g.wo});
    if (!w8_.data.empty()) run_implicit(x, zx, y.data<int32_t>());
    else run_channels_last(x, zx, y.data<int32_t>());
    return y;
  }

 private:
  // Without VNNI: per image, the input transposed to channels-last, its columns [P, kh*kw*C]
  // gathered as runs of C bytes (the transposed image itself for a 1x1 stride-1 conv),
  // C[P, M] = cols x W^T on the packed B, and C transposed back to NCHW.
  void run_channels_last(const uint8_t* x, uint8_t zx, int32_t* y) {
    const ConvGeom& g = g_;
    const int64_t plane = g.ho * g.wo;
    const bool direct = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pt == 0 && g.pl == 0 && plane == g.h * g.w;
    // Scratch shared by the convs that run on this thread, one at a time (a buffer per op would
    // hold a few MB for each of ResNet-50's 52 convs).
    // (Named here: the pool's workers see their own thread_local instances.)
    thread_local std::vector<uint8_t> nhwc_scratch, cols_scratch;
    thread_local std::vector<int32_t> acc_scratch;
    nhwc_scratch.resize(static_cast<size_t>(g.h * g.w * g.c));
    if (!direct) cols_scratch.resize(static_cast<size_t>(plane * k_));
    acc_scratch.resize(static_cast<size_t>(plane * g.co));
    uint8_t* const nhwc = nhwc_scratch.data();
    uint8_t* const cols = cols_scratch.data();
    int32_t* const acc = acc_scratch.data();
    ThreadPool& pool = current_thread_pool();
    for (int64_t n = 0; n < g.n; ++n) {
      const uint8_t* image = x + n * g.c * g.h * g.w;
      pool.parallel_for(kernels::ceil_div(g.c, 4), [&](int64_t q0, int64_t q1) {  // whole quads of channels per task
        transpose_rows(image, g.h * g.w, 4 * q0, std::min(4 * q1, g.c), g.h * g.w, nhwc, g.c);
      });
      if (!direct) pool.parallel_for(g.ho, [&](int64_t y0, int64_t y1) { im2col(nhwc, zx, y0, y1, cols); });
      kernels::u8s8_gemm_packed(plane, direct ? nhwc : cols, k_, b_, acc, g.co,
                                gemm_ops::pool_parallel());
      int32_t* out = y + n * g.co * plane;
      pool.parallel_for(g.co, [&](int64_t m0, int64_t m1) {
        // acc [P, M] -> out [M, P] (int32 moved as f32 bit patterns: the transpose only shuffles)
        kernels::transpose_f32(plane, m1 - m0, reinterpret_cast<const float*>(acc + m0), g.co,
                               reinterpret_cast<float*>(out + m0 * plane), plane);
      });
      subtract_zero_point(zx, out);
    }
  }

  // VNNI: the implicit convolution, no column matrix. Each image is interleaved once into padded
  // images of channel quads, one per stride phase (a, b) that a tap reads: phase pixel (r, c) is
  // padded pixel (r * sh + a, c * sw + b), laid out [phase][C/4][rows][pitch][4] with zx around
  // the image. Tap (i, j) of output pixel (oy, ox) reads padded pixel (oy * sh + i * dh,
  // ox * sw + j * dw): phase ((i * dh) % sh, (j * dw) % sw) at (oy + i * dh / sh, ox + j * dw / sw),
  // column oy * pitch + ox of the GEMM at an offset fixed per tap and channel quad (K's quads, in
  // (tap, channel quad) order). The GEMM computes whole phase rows (pitch columns of which wo are
  // output pixels) and drops the rest as it stores; Y = W x columns comes out NCHW. Channels are
  // padded to whole quads with zero weights (an RGB stem reads 3 of 4 bytes). A 1x1 stride-1
  // conv is the plain case: one phase, pitch = width, the image interleaved as it is.
  // W [M, C, kh, kw] packed with K in (tap, channel) order (channels padded to whole quads), the
  // phase images' geometry and the offset of every K quad in them.
  void plan_implicit(const int8_t* pw) {
    const ConvGeom& g = g_;
    const int64_t taps = g.kh * g.kw, cq = kernels::ceil_div(g.c, 4), k = taps * 4 * cq;
    std::vector<int8_t> wt(static_cast<size_t>(g.co * k), 0);
    for (int64_t m = 0; m < g.co; ++m)
      for (int64_t c = 0; c < g.c; ++c)
        for (int64_t t = 0; t < taps; ++t) wt[static_cast<size_t>(m * k + t * 4 * cq + c)] = pw[(m * g.c + c) * taps + t];
    w8_ = kernels::pack_w_s8(g.co, k, wt.data(), k);
    const int64_t last_row = (g.kh - 1) * g.dh / g.sh, last_col = (g.kw - 1) * g.dw / g.sw;
    pitch_ = g.wo + last_col;
    rows_ = g.ho + last_row;
    // Quads a plane holds: the rows, then what the last 32-column panel reads past them.
    cq_stride_ = 4 * (kernels::ceil_div(g.ho * pitch_, 32) * 32 + last_row * pitch_ + last_col);
    phases_.clear();
    tap_offsets_.resize(static_cast<size_t>(taps * cq));
    for (int64_t t = 0; t < taps; ++t) {
      const int64_t i = t / g.kw * g.dh, j = t % g.kw * g.dw, phase = i % g.sh * g.sw + j % g.sw;
      auto at = std::find(phases_.begin(), phases_.end(), phase);
      if (at == phases_.end()) at = phases_.insert(phases_.end(), phase);
      const int64_t base = (at - phases_.begin()) * cq * cq_stride_ + 4 * (i / g.sh * pitch_ + j / g.sw);
      for (int64_t q = 0; q < cq; ++q) tap_offsets_[static_cast<size_t>(t * cq + q)] = base + q * cq_stride_;
    }
  }

  // Channel quad q of one image as phase image `phase` (of phases_) at dst: the image's pixels,
  // zx everywhere else.
  void build_phase(const uint8_t* image, uint8_t zx, int64_t phase, int64_t q, uint8_t* dst) const {
    const ConvGeom& g = g_;
    const int64_t a = phase / g.sw, b = phase % g.sw, in_plane = g.h * g.w;
    // Phase rows r and columns c whose padded row r * sh + a - pt / column c * sw + b - pl lies in
    // the image: [r0, r1) x [c0, c1).
    auto first_inside = [](int64_t pad, int64_t stride, int64_t limit) {
      return std::min(limit, pad > 0 ? kernels::ceil_div(pad, stride) : 0);
    };
    const int64_t r0 = first_inside(g.pt - a, g.sh, rows_), c0 = first_inside(g.pl - b, g.sw, pitch_);
    const int64_t r1 = std::max(r0, first_inside(g.h + g.pt - a, g.sh, rows_));
    const int64_t c1 = std::max(c0, first_inside(g.w + g.pl - b, g.sw, pitch_));
    // zx where no pixel lands: all of it, or with whole rows copied only above and below them.
    const bool whole_rows = c0 == 0 && c1 == pitch_;
    if (!whole_rows || r1 == r0) {
      std::memset(dst, zx, static_cast<size_t>(cq_stride_));
    } else {
      std::memset(dst, zx, static_cast<size_t>(4 * r0 * pitch_));
      std::memset(dst + 4 * r1 * pitch_, zx, static_cast<size_t>(cq_stride_ - 4 * r1 * pitch_));
    }
    if (c1 == c0) return;
    // (A padding channel's weights are 0: any row of the image does.)
    const uint8_t* planes[4];
    for (int64_t t = 0; t < 4; ++t) planes[t] = image + std::min(4 * q + t, g.c - 1) * in_plane;
    const uint8_t* rows[4];
    if (whole_rows && g.sh == 1 && g.sw == 1 && pitch_ == g.w) {  // the rows are one run in both
      for (int64_t t = 0; t < 4; ++t) rows[t] = planes[t] + (r0 + a - g.pt) * g.w;
      kernels::interleave_quads_u8__avx2(rows, (r1 - r0) * pitch_, dst + 4 * r0 * pitch_);
      return;
    }
    thread_local std::vector<uint8_t> strided;  // four rows' phase columns (sw > 1)
    strided.resize(static_cast<size_t>(4 * pitch_));
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t iy = r * g.sh + a - g.pt;
      for (int64_t t = 0; t < 4; ++t) {
        const uint8_t* src = planes[t] + iy * g.w + c0 * g.sw + b - g.pl;
        rows[t] = src;
        if (g.sw == 1) continue;
        uint8_t* row = strided.data() + t * pitch_;
        for (int64_t c = 0; c < c1 - c0; ++c) row[c] = src[c * g.sw];
        rows[t] = row;
      }
      kernels::interleave_quads_u8__avx2(rows, c1 - c0, dst + 4 * (r * pitch_ + c0));
    }
  }

  template <typename Out>
  void run_implicit(const uint8_t* x, uint8_t zx, Out* y) {
    const ConvGeom& g = g_;
    const int64_t plane = g.ho * g.wo, cq = kernels::ceil_div(g.c, 4), nphases = static_cast<int64_t>(phases_.size());
    thread_local std::vector<uint8_t> padded_scratch;
    padded_scratch.resize(static_cast<size_t>(nphases * cq * cq_stride_));
    uint8_t* const padded = padded_scratch.data();
    const kernels::QuadColumns cols{padded, tap_offsets_.data()};
    // (Rows without padding columns map straight to the output.)
    const kernels::ColumnGrid grid = pitch_ == g.wo ? kernels::ColumnGrid{} : kernels::ColumnGrid{pitch_, g.wo};
    kernels::Requantize rq;  // (this run's zero-point correction, once for every image)
    if constexpr (std::is_same_v<Out, uint8_t>) rq = requant_->bind(zx, colsum_);
    ThreadPool& pool = current_thread_pool();
    for (int64_t n = 0; n < g.n; ++n) {
      const uint8_t* image = x + n * g.c * g.h * g.w;
      pool.parallel_for(nphases * cq, [&](int64_t k0, int64_t k1) {
        for (int64_t k = k0; k < k1; ++k)
          build_phase(image, zx, phases_[static_cast<size_t>(k / cq)], k % cq, padded + k * cq_stride_);
      });
      Out* out = y + n * g.co * plane;
      if constexpr (std::is_same_v<Out, uint8_t>) {
        kernels::s8u8_gemm_quads_requantize(w8_, g.ho * pitch_, cols, grid, rq, out, plane, gemm_ops::pool_parallel());
      } else {
        kernels::s8u8_gemm_quads(w8_, g.ho * pitch_, cols, grid, out, plane, gemm_ops::pool_parallel());
        subtract_zero_point(zx, out);
      }
    }
  }

  // One image's NCHW output less zx * sum(w) per channel: the padding and every input counted
  // x, not x - zx.
  void subtract_zero_point(uint8_t zx, int32_t* out) const {
    if (zx == 0) return;
    const int64_t plane = g_.ho * g_.wo;
    current_thread_pool().parallel_for(g_.co, [&](int64_t m0, int64_t m1) {
      for (int64_t m = m0; m < m1; ++m) {
        const int32_t correction = static_cast<int32_t>(zx) * colsum_[static_cast<size_t>(m)];
        for (int64_t p = 0; p < plane; ++p) out[m * plane + p] -= correction;
      }
    });
  }

  // Output rows [y0, y1) of the column matrix [P, (i, j, c)] from the channels-last image: one
  // run of C bytes per pixel and tap, zx outside the image.
  void im2col(const uint8_t* nhwc, uint8_t zx, int64_t y0, int64_t y1, uint8_t* cols) const {
    const ConvGeom& g = g_;
    for (int64_t oy = y0; oy < y1; ++oy)
      for (int64_t ox = 0; ox < g.wo; ++ox) {
        uint8_t* dst = cols + (oy * g.wo + ox) * k_;
        for (int64_t i = 0; i < g.kh; ++i) {
          const int64_t iy = oy * g.sh - g.pt + i * g.dh;
          for (int64_t j = 0; j < g.kw; ++j, dst += g.c) {
            const int64_t ix = ox * g.sw - g.pl + j * g.dw;
            if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) std::memset(dst, zx, static_cast<size_t>(g.c));
            else std::memcpy(dst, nhwc + (iy * g.w + ix) * g.c, static_cast<size_t>(g.c));
          }
        }
      }
  }

  ConvGeom g_;
  int64_t k_;
  kernels::PackedB8 b_;   // channels-last path (no VNNI)
  kernels::PackedW8 w8_;  // implicit weight-stationary path (VNNI)
  std::vector<int32_t> colsum_;
  std::optional<gemm_ops::RequantConstants> requant_;
  // The implicit convolution: the phase images' row pitch and rows (pixels), the bytes between
  // their channel-quad planes, the phases the taps read (a * sw + b) and each K quad's offset.
  int64_t pitch_ = 0, rows_ = 0, cq_stride_ = 0;
  std::vector<int64_t> phases_, tap_offsets_;
};

bool absent_or_zero(const gemm_ops::Operand& o) {
  if (!o.present) return true;
  if (!o.constant || o.dtype != DType::kInt8) return false;
  for (int64_t i = 0; i < o.constant->numel(); ++i)
    if (o.constant->get_int(i) != 0) return false;
  return true;
}

}  // namespace

bool conv_integer_requantizes() { return kernels::s8_gemm_has_vnni(); }

std::unique_ptr<gemm_ops::GemmOp> make_conv_integer_op(const gemm_ops::GemmDesc& d) {
  // The portable loop (no AVX2) is no faster than the reference kernel.
  if (std::string(kernels::s8_gemm_kernel_name()) == "portable") return nullptr;
  std::optional<ConvGeom> g = conv_integer_geom(d);
  const auto& o = d.operands;
  if (!g || g->group != 1 || !o[1].constant) return nullptr;
  if (o.size() > 2 && o[2].present && (o[2].dtype != DType::kUInt8 || gemm_ops::numel(o[2].dims) != 1)) return nullptr;
  if (o.size() > 3 && !absent_or_zero(o[3])) return nullptr;
  return std::make_unique<ConvIntegerOp>(*g, *o[1].constant);
}

}  // namespace kiln::conv_ops
