// The signal-processing op family: DFT, STFT, the Hann/Hamming/Blackman windows and
// MelWeightMatrix. Transforms run in double, O(n log n) for every length (radix-2 or Bluestein).
#include <cmath>
#include <complex>
#include <numbers>

#include "ops/families.h"
#include "ops/op_util.h"

namespace kiln {

void register_attention_ops(OpRegistry& r);  // ops/attention.cc

namespace {

constexpr double kPi = std::numbers::pi;

// Scalar integer input i (a 0-d or single-element tensor).
int64_t scalar_int_input(const KernelContext& ctx, int i, const char* what) {
  const Tensor& t = ctx.input(i);
  if (t.numel() != 1 || !(is_integer(t.dtype())))
    ctx.fail(ErrorKind::kBadInput, std::string(what) + " should be an integer scalar, got " +
                                       std::string(dtype_name(t.dtype())) +
                                       dims_to_string(t.dims()));
  return t.get_int(0);
}

double scalar_float_input(const KernelContext& ctx, int i, const char* what) {
  const Tensor& t = ctx.input(i);
  if (t.numel() != 1)
    ctx.fail(ErrorKind::kBadInput, std::string(what) + " should be a scalar, got shape " +
                                       dims_to_string(t.dims()));
  return t.get_double(0);
}

void require_float(const KernelContext& ctx, const Tensor& t, const char* what) {
  if (t.dtype() != DType::kFloat32 && t.dtype() != DType::kFloat64)
    ctx.fail(ErrorKind::kUnsupported, std::string(what) + " should be a float tensor, got " +
                                          std::string(dtype_name(t.dtype())));
}

// Output element type from the `output_datatype` attribute (a TensorProto code).
DType output_datatype(const KernelContext& ctx, int64_t fallback) {
  const int64_t code = ctx.attr_int("output_datatype", fallback);
  if (!dtype_is_valid(static_cast<int32_t>(code)) ||
      !(is_float(static_cast<DType>(code)) || is_integer(static_cast<DType>(code))))
    ctx.fail(ErrorKind::kInvalidModel,
             "output_datatype should be a numeric TensorProto type, got " + std::to_string(code));
  return static_cast<DType>(code);
}

using Complex = std::complex<double>;

bool is_pow2(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

// In-place iterative radix-2 FFT (n a power of two) with exponent sign `sign`.
void fft_pow2(std::vector<Complex>& a, double sign) {
  const size_t n = a.size();
  for (size_t i = 1, j = 0; i < n; ++i) {
    size_t bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) std::swap(a[i], a[j]);
  }
  for (size_t len = 2; len <= n; len <<= 1) {
    const size_t half = len / 2;
    std::vector<Complex> w(half);
    for (size_t k = 0; k < half; ++k)
      w[k] = std::polar(1.0, sign * 2 * kPi * static_cast<double>(k) / static_cast<double>(len));
    for (size_t i = 0; i < n; i += len)
      for (size_t k = 0; k < half; ++k) {
        const Complex u = a[i + k], v = a[i + k + half] * w[k];
        a[i + k] = u + v;
        a[i + k + half] = u - v;
      }
  }
}

// Unnormalized DFT of any length n: out[k] = sum_t a[t] exp(sign 2 pi i k t / n). Powers of two
// use radix-2, small sizes the direct sum, other sizes Bluestein's chirp-z over a radix-2 FFT,
// so every length costs O(n log n).
class Dft {
 public:
  Dft(int64_t n, double sign) : n_(n), sign_(sign) {
    if (is_pow2(n) || n <= 32) {
      if (!is_pow2(n)) {
        tw_.resize(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i)
          tw_[i] = std::polar(1.0, sign * 2 * kPi * static_cast<double>(i) / static_cast<double>(n));
      }
      return;
    }
    m_ = 1;
    while (m_ < 2 * n - 1) m_ <<= 1;
    chirp_.resize(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) {
      const int64_t k2 = (k * k) % (2 * n);  // exact phase: k^2 mod 2n
      chirp_[k] = std::polar(1.0, sign * kPi * static_cast<double>(k2) / static_cast<double>(n));
    }
    bfft_.assign(static_cast<size_t>(m_), Complex(0, 0));
    bfft_[0] = std::conj(chirp_[0]);
    for (int64_t k = 1; k < n; ++k) bfft_[k] = bfft_[m_ - k] = std::conj(chirp_[k]);
    fft_pow2(bfft_, -1.0);
  }

  void run(std::vector<Complex>& a) const {
    if (is_pow2(n_)) {
      fft_pow2(a, sign_);
    } else if (!tw_.empty()) {
      std::vector<Complex> out(static_cast<size_t>(n_));
      for (int64_t k = 0; k < n_; ++k) {
        Complex s(0, 0);
        int64_t idx = 0;
        for (int64_t t = 0; t < n_; ++t, idx = (idx + k) % n_) s += a[t] * tw_[idx];
        out[k] = s;
      }
      a.swap(out);
    } else {
      std::vector<Complex> c(static_cast<size_t>(m_), Complex(0, 0));
      for (int64_t k = 0; k < n_; ++k) c[k] = a[k] * chirp_[k];
      fft_pow2(c, -1.0);
      for (int64_t i = 0; i < m_; ++i) c[i] *= bfft_[i];
      fft_pow2(c, 1.0);
      const double inv_m = 1.0 / static_cast<double>(m_);
      for (int64_t k = 0; k < n_; ++k) a[k] = c[k] * inv_m * chirp_[k];
    }
  }

 private:
  int64_t n_;
  double sign_;
  int64_t m_ = 0;
  std::vector<Complex> tw_, chirp_, bfft_;
};

// ---- DFT -----------------------------------------------------------------------------------

void dft_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  require_float(ctx, x, "input");
  const int r = x.rank();
  if (r < 2 || (x.dims().back() != 1 && x.dims().back() != 2))
    ctx.fail(ErrorKind::kBadInput, "input should have rank >= 2 with last dim 1 (real) or 2 "
                                   "(complex), got " + dims_to_string(x.dims()));
  const bool complex_in = x.dims().back() == 2;
  const bool inverse = ctx.attr_int("inverse", 0) != 0;
  const bool onesided = ctx.attr_int("onesided", 0) != 0;
  int64_t axis = 1;
  if (ctx.opset() >= 20) {
    axis = ctx.has_input(2) ? scalar_int_input(ctx, 2, "axis") : -2;
  } else {
    axis = ctx.attr_int("axis", 1);
  }
  if (axis < -r || axis > r - 2 || axis == -1)
    ctx.fail(ErrorKind::kInvalidModel, "axis should be in [-" + std::to_string(r) + ", -2] or [0, " +
                                           std::to_string(r - 2) + "], got " +
                                           std::to_string(axis));
  if (axis < 0) axis += r;
  const int64_t len = x.dim(static_cast<int>(axis));
  int64_t n = (inverse && onesided) ? 2 * (len - 1) : len;
  if (ctx.has_input(1)) n = scalar_int_input(ctx, 1, "dft_length");
  if (n < 1) ctx.fail(ErrorKind::kBadInput, "dft_length should be >= 1, got " + std::to_string(n));
  if (n > (int64_t{1} << 24))
    ctx.fail(ErrorKind::kBadInput, "dft_length " + std::to_string(n) + " is too large");

  const bool irfft = inverse && onesided;
  const int64_t out_len = (onesided && !inverse) ? n / 2 + 1 : n;
  std::vector<int64_t> out_dims = x.dims();
  out_dims[axis] = out_len;
  out_dims.back() = irfft ? 1 : 2;
  Tensor y(x.dtype(), out_dims);

  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(static_cast<int>(d));
  for (int d = static_cast<int>(axis) + 1; d < r - 1; ++d) inner *= x.dim(d);
  const int64_t cin = complex_in ? 2 : 1, cout = out_dims.back();
  // irfft reads the first n/2+1 bins; the full-spectrum transforms read up to n samples.
  const int64_t used = std::min(len, irfft ? n / 2 + 1 : n);
  const Dft dft(n, inverse ? 1.0 : -1.0);
  std::vector<Complex> a(static_cast<size_t>(n));
  const double norm = inverse ? 1.0 / static_cast<double>(n) : 1.0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      std::fill(a.begin(), a.end(), Complex(0, 0));
      for (int64_t t = 0; t < used; ++t) {
        const int64_t base = ((o * len + t) * inner + i) * cin;
        a[t] = Complex(x.get_double(base), complex_in ? x.get_double(base + 1) : 0.0);
      }
      if (irfft) {
        // Hermitian completion as numpy's irfft: the imaginary parts of the DC bin (and of the
        // Nyquist bin for even n) are dropped.
        a[0] = Complex(a[0].real(), 0);
        if (n % 2 == 0) a[n / 2] = Complex(a[n / 2].real(), 0);
        for (int64_t k = 1; k < (n + 1) / 2; ++k) a[n - k] = std::conj(a[k]);
      }
      dft.run(a);
      for (int64_t k = 0; k < out_len; ++k) {
        const int64_t base = ((o * out_len + k) * inner + i) * cout;
        y.set_double(base, a[k].real() * norm);
        if (cout == 2) y.set_double(base + 1, a[k].imag() * norm);
      }
    }
  }
  ctx.set_output(0, std::move(y));
}

void infer_dft(InferContext& ctx) {
  const Type& xt = ctx.input_type(0);
  if (!xt.shape) {
    ctx.set_output_type(0, Type::tensor(xt.dtype));
    return;
  }
  Shape s = *xt.shape;
  const int64_t r = static_cast<int64_t>(s.rank());
  if (r < 2) return;
  int64_t axis = ctx.opset() >= 20 ? -2 : ctx.attr_int("axis", 1);
  bool axis_known = true;
  if (ctx.opset() >= 20 && ctx.has_input(2)) {
    const Tensor* a = ctx.constant_input(2);
    if (a && a->numel() == 1) axis = a->get_int(0); else axis_known = false;
  }
  const bool inverse = ctx.attr_int("inverse", 0) != 0;
  const bool onesided = ctx.attr_int("onesided", 0) != 0;
  s.dims.back() = Dim(inverse && onesided ? 1 : 2);
  if (!axis_known || axis < -r || axis > r - 2 || axis == -1) {
    for (int64_t d = 0; d + 1 < r; ++d) s.dims[d] = Dim();
    ctx.set_output_type(0, Type::tensor(xt.dtype, s));
    return;
  }
  if (axis < 0) axis += r;
  Dim& d = s.dims[axis];
  int64_t n = -1;
  if (ctx.has_input(1)) {
    const Tensor* t = ctx.constant_input(1);
    if (t && t->numel() == 1) n = t->get_int(0);
  } else if (d.known()) {
    n = (inverse && onesided) ? 2 * (d.value - 1) : d.value;
  }
  if (n < 1) d = Dim(); else d = Dim((onesided && !inverse) ? n / 2 + 1 : n);
  ctx.set_output_type(0, Type::tensor(xt.dtype, s));
}

// ---- STFT ----------------------------------------------------------------------------------

void stft_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  require_float(ctx, x, "signal");
  if (x.rank() != 3 || (x.dim(2) != 1 && x.dim(2) != 2))
    ctx.fail(ErrorKind::kBadInput, "signal should be [batch, length, 1 or 2], got " +
                                       dims_to_string(x.dims()));
  const bool complex_in = x.dim(2) == 2;
  const int64_t batch = x.dim(0), len = x.dim(1);
  const int64_t step = scalar_int_input(ctx, 1, "frame_step");
  if (step < 1) ctx.fail(ErrorKind::kBadInput, "frame_step should be >= 1, got " + std::to_string(step));
  std::vector<double> window;
  if (ctx.has_input(2)) {
    const Tensor& w = ctx.input(2);
    if (w.rank() != 1)
      ctx.fail(ErrorKind::kBadInput, "window should be 1-D, got " + dims_to_string(w.dims()));
    for (int64_t i = 0; i < w.numel(); ++i) window.push_back(w.get_double(i));
  }
  int64_t frame_len = ctx.has_input(2) ? static_cast<int64_t>(window.size()) : len;
  if (ctx.has_input(3)) {
    frame_len = scalar_int_input(ctx, 3, "frame_length");
    if (ctx.has_input(2) && static_cast<int64_t>(window.size()) != frame_len)
      ctx.fail(ErrorKind::kBadInput, "window length " + std::to_string(window.size()) +
                                         " should equal frame_length " + std::to_string(frame_len));
  }
  if (frame_len < 1 || frame_len > len)
    ctx.fail(ErrorKind::kBadInput, "frame_length should be in [1, signal_length=" +
                                       std::to_string(len) + "], got " + std::to_string(frame_len));
  if (!ctx.has_input(2)) window.assign(static_cast<size_t>(frame_len), 1.0);
  const bool onesided = ctx.attr_int("onesided", 1) != 0;
  const int64_t frames = 1 + (len - frame_len) / step;
  const int64_t bins = onesided ? frame_len / 2 + 1 : frame_len;
  Tensor y(x.dtype(), {batch, frames, bins, 2});
  const Dft dft(frame_len, -1.0);
  std::vector<Complex> a(static_cast<size_t>(frame_len));
  const int64_t cin = complex_in ? 2 : 1;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t f = 0; f < frames; ++f) {
      for (int64_t t = 0; t < frame_len; ++t) {
        const int64_t base = (b * len + f * step + t) * cin;
        a[t] = Complex(x.get_double(base), complex_in ? x.get_double(base + 1) : 0.0) * window[t];
      }
      dft.run(a);
      for (int64_t k = 0; k < bins; ++k) {
        const int64_t base = ((b * frames + f) * bins + k) * 2;
        y.set_double(base, a[k].real());
        y.set_double(base + 1, a[k].imag());
      }
    }
  }
  ctx.set_output(0, std::move(y));
}

// ---- Windows -------------------------------------------------------------------------------

enum class WindowKind { kHann, kHamming, kBlackman };

template <WindowKind kKind>
void window_kernel(KernelContext& ctx) {
  const int64_t size = scalar_int_input(ctx, 0, "size");
  if (size < 0 || size > (int64_t{1} << 31))
    ctx.fail(ErrorKind::kBadInput, "size should be in [0, 2^31], got " + std::to_string(size));
  const DType dt = output_datatype(ctx, 1);
  const bool periodic = ctx.attr_int("periodic", 1) != 0;
  const double n1 = static_cast<double>(periodic ? size : size - 1);
  Tensor y(dt, {size});
  for (int64_t i = 0; i < size; ++i) {
    const double a = n1 > 0 ? 2 * kPi * static_cast<double>(i) / n1 : 0.0;
    double v = 0;
    switch (kKind) {
      case WindowKind::kHann: v = 0.5 - 0.5 * std::cos(a); break;
      case WindowKind::kHamming: {
        const double alpha = 25.0 / 46.0;
        v = alpha - (1 - alpha) * std::cos(a);
        break;
      }
      case WindowKind::kBlackman: v = 0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2 * a); break;
    }
    if (n1 <= 0) v = 1.0;  // a one-point symmetric window is all ones
    y.set_double(i, v);
  }
  ctx.set_output(0, std::move(y));
}

void infer_window(InferContext& ctx) {
  const int64_t code = ctx.attr_int("output_datatype", 1);
  if (!dtype_is_valid(static_cast<int32_t>(code))) return;
  Dim d;
  if (const Tensor* t = ctx.constant_input(0); t && t->numel() == 1 && t->get_int(0) >= 0)
    d = Dim(t->get_int(0));
  ctx.set_output_type(0, Type::tensor(static_cast<DType>(code), Shape({d})));
}

// ---- MelWeightMatrix -----------------------------------------------------------------------

void mel_weight_matrix_kernel(KernelContext& ctx) {
  const int64_t num_mel = scalar_int_input(ctx, 0, "num_mel_bins");
  const int64_t dft_length = scalar_int_input(ctx, 1, "dft_length");
  const int64_t sample_rate = scalar_int_input(ctx, 2, "sample_rate");
  const double lower = scalar_float_input(ctx, 3, "lower_edge_hertz");
  const double upper = scalar_float_input(ctx, 4, "upper_edge_hertz");
  const DType dt = output_datatype(ctx, 1);
  if (num_mel < 1 || dft_length < 1 || sample_rate < 1)
    ctx.fail(ErrorKind::kBadInput, "num_mel_bins, dft_length and sample_rate should be >= 1, got " +
                                       std::to_string(num_mel) + ", " + std::to_string(dft_length) +
                                       ", " + std::to_string(sample_rate));
  if (num_mel > (int64_t{1} << 20) || dft_length > (int64_t{1} << 26))
    ctx.fail(ErrorKind::kBadInput, "num_mel_bins or dft_length is too large");
  if (!(lower >= 0 && lower <= upper))
    ctx.fail(ErrorKind::kBadInput, "expected 0 <= lower_edge_hertz <= upper_edge_hertz, got " +
                                       std::to_string(lower) + " and " + std::to_string(upper));
  const int64_t spec_bins = dft_length / 2 + 1;
  // Mel points are spaced by (high - low) / (num_mel + 2), as in the ONNX reference.
  const double low_mel = 2595 * std::log1p(lower / 700) / std::log(10.0);
  const double high_mel = 2595 * std::log1p(upper / 700) / std::log(10.0);
  const double step = (high_mel - low_mel) / static_cast<double>(num_mel + 2);
  std::vector<int64_t> bins(static_cast<size_t>(num_mel + 2));
  for (int64_t i = 0; i < num_mel + 2; ++i) {
    const double mel = static_cast<double>(i) * step + low_mel;
    const double hz = 700 * std::expm1(mel / 2595 * std::log(10.0));
    bins[i] = static_cast<int64_t>(std::floor(static_cast<double>(dft_length + 1) * hz /
                                              static_cast<double>(sample_rate)));
    if (bins[i] < 0 || bins[i] >= spec_bins)
      ctx.fail(ErrorKind::kBadInput, "upper_edge_hertz " + std::to_string(upper) +
                                         " maps beyond the " + std::to_string(spec_bins) +
                                         " spectrogram bins (sample_rate " +
                                         std::to_string(sample_rate) + ")");
  }
  std::vector<double> out(static_cast<size_t>(spec_bins * num_mel), 0.0);
  for (int64_t i = 0; i < num_mel; ++i) {
    const int64_t lo = bins[i], center = bins[i + 1], hi = bins[i + 2];
    if (center == lo) {
      out[center * num_mel + i] = 1;
    } else {
      for (int64_t j = lo; j <= center; ++j)
        out[j * num_mel + i] = static_cast<double>(j - lo) / static_cast<double>(center - lo);
    }
    if (hi > center)
      for (int64_t j = center; j < hi; ++j)
        out[j * num_mel + i] = static_cast<double>(hi - j) / static_cast<double>(hi - center);
  }
  Tensor y(dt, {spec_bins, num_mel});
  for (size_t i = 0; i < out.size(); ++i) y.set_double(static_cast<int64_t>(i), out[i]);
  ctx.set_output(0, std::move(y));
}

}  // namespace

void register_signal_attention_ops(OpRegistry& r) {
  r.add("DFT").since(17).inputs(1, 2).outputs(1).run(dft_kernel).shape(infer_dft).via_float();
  r.add("DFT").since(20).inputs(1, 3).outputs(1).run(dft_kernel).shape(infer_dft).via_float();
  r.add("STFT").since(17).inputs(2, 4).outputs(1).run(stft_kernel).via_float();
  r.add("HannWindow").since(17).inputs(1).outputs(1)
      .run(window_kernel<WindowKind::kHann>).shape(infer_window);
  r.add("HammingWindow").since(17).inputs(1).outputs(1)
      .run(window_kernel<WindowKind::kHamming>).shape(infer_window);
  r.add("BlackmanWindow").since(17).inputs(1).outputs(1)
      .run(window_kernel<WindowKind::kBlackman>).shape(infer_window);
  r.add("MelWeightMatrix").since(17).inputs(5).outputs(1).run(mel_weight_matrix_kernel);
  register_attention_ops(r);
}

}  // namespace kiln
