// Batched 2-D transposes (see transpose_op.h).
#include "runtime/transpose_op.h"

#include <algorithm>

#include "kernels/x86/f32_transpose.h"
#include "runtime/gemm_epilogue.h"
#include "runtime/gemm_op_util.h"

namespace kiln::transpose_ops {
namespace {

class TransposeOp : public gemm_ops::GemmOp {
 public:
  TransposeOp(BatchedTranspose t, std::vector<int64_t> out_dims) : t_(t), out_dims_(std::move(out_dims)) {}

  Tensor run(const std::vector<const RtValue*>& ins) override {
    Tensor y = output_tensor(DType::kFloat32, out_dims_);
    const float* x = ins[0]->tensor.data<float>();
    float* yp = y.data<float>();
    // Tasks of whole 16-row bands (about 64 KiB each), so that every thread gets work on the
    // layout changes of a 7x7 or 14x14 conv chain.
    const int64_t band = std::max<int64_t>(16, (16384 / std::max<int64_t>(t_.cols, 1) + 15) / 16 * 16);
    const int64_t bands = (t_.rows + band - 1) / band;
    kernels::run_parallel(gemm_ops::pool_parallel(), t_.batch * bands, [&](int64_t begin, int64_t end) {
      for (int64_t task = begin; task < end; ++task) {
        const int64_t b = task / bands, r0 = task % bands * band, rows = std::min(band, t_.rows - r0);
        const int64_t plane = t_.rows * t_.cols;
        kernels::transpose_f32(rows, t_.cols, x + b * plane + r0 * t_.cols, t_.cols, yp + b * plane + r0, t_.rows);
      }
    });
    return y;
  }

 private:
  BatchedTranspose t_;
  std::vector<int64_t> out_dims_;
};

}  // namespace

std::optional<BatchedTranspose> batched_transpose(const std::vector<int64_t>& dims, const std::vector<int64_t>& perm) {
  const int64_t n = static_cast<int64_t>(dims.size());
  if (static_cast<int64_t>(perm.size()) != n) return std::nullopt;
  int64_t k = 0;
  while (k < n && perm[static_cast<size_t>(k)] == k) ++k;
  if (k == n) return std::nullopt;
  // perm[k..] = j, j+1, ..., n-1, k, k+1, ..., j-1 for j = perm[k] > k.
  const int64_t j = perm[static_cast<size_t>(k)];
  if (j <= k || j >= n) return std::nullopt;
  for (int64_t t = 0; t < n - k; ++t) {
    const int64_t want = t < n - j ? j + t : k + (t - (n - j));
    if (perm[static_cast<size_t>(k + t)] != want) return std::nullopt;
  }
  BatchedTranspose r;
  for (int64_t a = 0; a < n; ++a) {
    const int64_t d = dims[static_cast<size_t>(a)];
    if (d < 0) return std::nullopt;
    (a < k ? r.batch : a < j ? r.rows : r.cols) *= d;
  }
  return r;
}

std::unique_ptr<gemm_ops::GemmOp> make_transpose_op(const gemm_ops::GemmDesc& d) {
  if (d.kind != gemm_ops::GemmKind::kTranspose || d.out_dtype != DType::kFloat32 || d.operands.size() != 1 ||
      !d.operands[0].present || d.operands[0].dtype != DType::kFloat32 || gemm_ops::has_epilogue(d))
    return nullptr;
  const std::vector<int64_t>& in = d.operands[0].dims;
  std::optional<BatchedTranspose> t = batched_transpose(in, d.perm);
  if (!t || t->batch * t->rows * t->cols == 0) return nullptr;
  std::vector<int64_t> out;
  for (int64_t p : d.perm) out.push_back(in[static_cast<size_t>(p)]);
  if (out != d.out_dims) return nullptr;
  return std::make_unique<TransposeOp>(*t, out);
}

}  // namespace kiln::transpose_ops
