// MatMulInteger on the int8 GEMM (kernels/x86/s8_gemm.h): A[..., M, K] (uint8, computed) x
// B[K, N] (int8, constant, packed once) -> int32, exact. Zero points by correction terms:
// (A - za)(B - zb) = A.B - za * colsum(B) - zb[n] * rowsum(A) + K * za * zb[n], with za a scalar
// (DynamicQuantizeLinear's, computed per run) and zb a scalar or one per column. This is the
// form dynamic quantization writes (kiln quantize --dynamic, onnxruntime.quantization). With the
// dequantization after it absorbed (GemmDesc: requant_scale without y_scale) the output is float.
// Other type pairs and shapes run the reference kernel.
// Tests: tests/runtime/test_gemm_ops.cc (MatMulInteger cases against the reference kernel).
#include "runtime/matmul_integer.h"

#include <algorithm>
#include <optional>
#include <string>

#include "core/error.h"
#include "core/shape.h"
#include "kernels/x86/s8_gemm.h"
#include "runtime/gemm_epilogue.h"
#include "runtime/gemm_op_util.h"

namespace kiln::gemm_ops {
namespace {

class MatMulIntegerOp : public GemmOp {
 public:
  // b_zero: one per column, or empty when B's zero points are absent or all 0.
  MatMulIntegerOp(kernels::PackedB8 b, std::vector<int32_t> colsum, std::vector<int32_t> b_zero, int64_t k,
                  int64_t n, std::vector<int64_t> out_dims)
      : b_(std::move(b)), colsum_(std::move(colsum)), b_zero_(std::move(b_zero)), k_(k), n_(n),
        out_dims_(std::move(out_dims)) {}

  // The dequantizing epilogue (the Cast -> Mul -> [Add] after the node, float out).
  bool take_epilogue(const GemmDesc& d) override {
    std::optional<DequantConstants> dq = dequant_constants(d, n_);
    if (!dq) return false;
    dequant_ = std::move(*dq);
    return true;
  }

  Tensor run(const std::vector<const RtValue*>& ins) override {
    const Tensor& a = ins[0]->tensor;
    const int32_t za = ins.size() > 2 && ins[2] && ins[2]->is_tensor() ? static_cast<int32_t>(ins[2]->tensor.get_int(0)) : 0;
    const int64_t m = a.numel() / k_;
    // The int32 sums are written where the output goes (a float has an int32's size); each block,
    // once summed, is corrected and (dequantizing) converted in place while it is in cache.
    Tensor y = output_tensor(dequant_ ? DType::kFloat32 : DType::kInt32, out_dims_);
    int32_t* c = y.data<int32_t>();
    const uint8_t* pa = a.data<uint8_t>();
    const bool correct = za != 0 || !b_zero_.empty();
    if (correct) bind_correction(za);
    if (!b_zero_.empty()) bind_rowsums(pa, m);
    if (dequant_) bind_scale(ins);
    kernels::S8BlockDone done;
    if (correct || dequant_)
      done = [&](int64_t i0, int64_t rows, int64_t j0, int64_t cols) { finish_block(c, i0, rows, j0, cols, correct); };
    kernels::u8s8_gemm_packed(m, pa, k_, b_, c, n_, pool_parallel(), done);
    return y;
  }

 private:
  // Per column: -za * colsum(B) + K * za * zb, once per run; per element only an add (and, with
  // B zero points, -zb * rowsum(A)). In a per-element form with the zero point looked up they
  // took a fifth of a quantized BERT-like's time.
  void bind_correction(int32_t za) {
    correction_.resize(static_cast<size_t>(n_));
    for (int64_t j = 0; j < n_; ++j) {
      const int32_t zb = b_zero_.empty() ? 0 : b_zero_[static_cast<size_t>(j)];
      correction_[static_cast<size_t>(j)] = -za * colsum_[static_cast<size_t>(j)] + static_cast<int32_t>(k_) * za * zb;
    }
  }

  // A's row sums, for B's zero points: once per run (the blocks of a row band share them).
  void bind_rowsums(const uint8_t* pa, int64_t m) {
    rowsum_.resize(static_cast<size_t>(m));
    current_thread_pool().parallel_for(m, [&](int64_t r0, int64_t r1) {
      for (int64_t i = r0; i < r1; ++i) {
        int32_t s = 0;
        for (int64_t p = 0; p < k_; ++p) s += pa[i * k_ + p];
        rowsum_[static_cast<size_t>(i)] = s;
      }
    });
  }

  // With a run-time factor, the scale per column for this run: the factor times the constant, as
  // the absorbed Mul computes it.
  void bind_scale(const std::vector<const RtValue*>& ins) {
    if (dequant_->scale_factor < 0) return;
    const RtValue* f = ins.at(static_cast<size_t>(dequant_->scale_factor));
    if (!f || !f->is_tensor() || f->tensor.dtype() != DType::kFloat32 || f->tensor.numel() != 1)
      throw Error(ErrorKind::kBadInput, "MatMulInteger: the dequantization's scale factor must be one float");
    const float factor = f->tensor.data<float>()[0];
    run_scale_.resize(dequant_->scale.size());
    for (size_t j = 0; j < run_scale_.size(); ++j) run_scale_[j] = factor * dequant_->scale[j];
  }
  const std::vector<float>& scale() const { return dequant_->scale_factor < 0 ? dequant_->scale : run_scale_; }

  // Block rows [i0, i0 + rows) x columns [j0, j0 + cols) of the sums: zero points corrected, then
  // (dequantizing) float(sum) * scale + bias stored in the sum's place (kernels::S8RowEpilogue).
  void finish_block(int32_t* c, int64_t i0, int64_t rows, int64_t j0, int64_t cols, bool correct) const {
    kernels::S8RowEpilogue e;
    if (correct) e.corr = correction_.data() + j0;
    if (!b_zero_.empty()) e.zb = b_zero_.data() + j0;
    if (dequant_) e.scale = scale().data() + j0;
    if (dequant_ && !dequant_->bias.empty()) e.bias = dequant_->bias.data() + j0;
    for (int64_t i = i0; i < i0 + rows; ++i)
      kernels::s8_finish_row__avx2(e, e.zb ? rowsum_[static_cast<size_t>(i)] : 0, c + i * n_ + j0, cols);
  }

  kernels::PackedB8 b_;
  std::vector<int32_t> colsum_, b_zero_;
  std::vector<int32_t> correction_, rowsum_;  // per run (scratch)
  std::optional<DequantConstants> dequant_;
  std::vector<float> run_scale_;  // per run, with a run-time factor: the scale per column
  int64_t k_, n_;
  std::vector<int64_t> out_dims_;
};

bool scalar_or_absent(const Operand& o, DType dtype) {
  return !o.present || (o.dtype == dtype && checked_numel(o.dims) == 1);
}

}  // namespace

std::unique_ptr<GemmOp> make_matmul_integer_op(const GemmDesc& d) {
  const std::vector<Operand>& o = d.operands;
  // The portable loop (no AVX2) is no faster than the reference kernel.
  if (o.size() < 2 || d.out_dtype != DType::kInt32 || std::string(kernels::s8_gemm_kernel_name()) == "portable")
    return nullptr;
  const Operand& a = o[0];
  const Operand& b = o[1];
  if (a.dtype != DType::kUInt8 || a.dims.empty() || b.dtype != DType::kInt8 || !b.constant || b.dims.size() != 2)
    return nullptr;
  const int64_t k = b.dims[0], n = b.dims[1];
  if (a.dims.back() != k || k <= 0 || n <= 0) return nullptr;
  if (o.size() > 2 && !scalar_or_absent(o[2], DType::kUInt8)) return nullptr;
  // B's zero points per column, resolved once (kiln quantize and ONNX Runtime write a vector of
  // zeros: no row sums then).
  std::vector<int32_t> b_zero;
  if (o.size() > 3 && o[3].present) {
    const Operand& zb = o[3];
    if (zb.dtype != DType::kInt8 || !zb.constant) return nullptr;
    const int64_t count = zb.constant->numel();
    if (count != 1 && !(zb.dims.size() == 1 && count == n)) return nullptr;
    b_zero.assign(static_cast<size_t>(n), 0);
    for (int64_t j = 0; j < n; ++j) b_zero[static_cast<size_t>(j)] = static_cast<int32_t>(zb.constant->get_int(count == 1 ? 0 : j));
    if (std::all_of(b_zero.begin(), b_zero.end(), [](int32_t z) { return z == 0; })) b_zero.clear();
  }
  std::vector<int64_t> out_dims(a.dims.begin(), a.dims.end() - 1);
  out_dims.push_back(n);
  if (out_dims != d.out_dims) return nullptr;
  const int8_t* pb = b.constant->data<int8_t>();
  std::vector<int32_t> colsum(static_cast<size_t>(n), 0);
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < n; ++j) colsum[static_cast<size_t>(j)] += pb[p * n + j];
  return std::make_unique<MatMulIntegerOp>(kernels::pack_b_s8(k, n, pb, n), std::move(colsum), std::move(b_zero), k,
                                           n, std::move(out_dims));
}

}  // namespace kiln::gemm_ops
