// Batched (broadcasting) MatMul and M = 1 GEMV ops on the f32 kernels (see matmul_batched.h).
#include "runtime/matmul_batched.h"

#include <algorithm>

#include "kernels/x86/f32_gemm.h"
#include "kernels/x86/f32_gemv.h"
#include "kernels/x86/f32_transpose.h"
#include "runtime/gemm_epilogue.h"
#include "runtime/gemm_op_util.h"
#include "runtime/thread_pool.h"

namespace kiln::gemm_ops {
namespace {

// C[M, N] = A[M, K] x B (packed) on the calling thread, for one batch of an attention-sized
// GEMM: each MR-row panel of A is packed once per K block (it stays in L1) and swept across all
// of B's NR panels (in L2), without sgemm_packed's M blocking and A prepacking for parallelism.
void gemm_one_thread(int64_t M, const float* a, int64_t lda, const kernels::PackedB& b, float* c, int64_t ldc) {
  // The kernel that pads M least among those reading this packed B, as sgemm_packed picks.
  const kernels::F32GemmUkernel& uk = b.pinned ? *b.kernel : kernels::f32_gemm_for_rows(M, *b.kernel);
  const int64_t N = b.n, K = b.k, mr = uk.mr, nr = uk.nr, kcb = uk.kc;
  const int64_t panels = (N + nr - 1) / nr;
  // f32_gemm_pack_a packs row-major A with scalar copies on AVX2 (a third of the time of an
  // attention GEMM: 12 heads of 197x197 by 197x64, 330 us of packing against 650 us of
  // microkernels); the register-transposing packer takes 78 us.
  const bool avx2_pack = uk.isa == kernels::Isa::kAvx2 && mr <= 8;
  thread_local std::vector<float> a_panel;
  if (a_panel.size() < static_cast<size_t>(mr * kcb)) a_panel.resize(static_cast<size_t>(mr * kcb));
  for (int64_t i0 = 0; i0 < M; i0 += mr) {
    const int64_t rows = std::min(mr, M - i0);
    for (int64_t k0 = 0; k0 < K; k0 += kcb) {
      const int64_t kc = std::min(kcb, K - k0);
      if (avx2_pack)
        kernels::pack_rows_k_major_avx2(static_cast<int>(mr), rows, kc, a + i0 * lda + k0, lda, 1.0f, a_panel.data());
      else
        kernels::f32_gemm_pack_a(false, rows, kc, a + i0 * lda + k0, lda, 1.0f, static_cast<int>(mr), a_panel.data());
      kernels::F32GemmParams params;
      params.beta = k0 == 0 ? 0.0f : 1.0f;
      for (int64_t q = 0; q < panels; ++q)
        uk.fn(rows, std::min(nr, N - q * nr), kc, a_panel.data(), b.data.data() + b.panel_offset(k0, q),
              c + i0 * ldc + q * nr, ldc, params);
    }
  }
}

class BatchedMatMulOp : public GemmOp {
 public:
  BatchedMatMulOp(MatMulShape s, const Tensor* b_const) : s_(std::move(s)) {
    const int64_t batches = static_cast<int64_t>(s_.a_index.size());
    // B shared by every batch and A's batches in output order: one GEMM over all rows.
    flat_ = true;
    for (int64_t t = 0; t < batches; ++t) flat_ = flat_ && s_.b_index[t] == 0 && s_.a_index[t] == t;
    if (b_const && s_.k > 0 && s_.n > 0) {
      const_b_.resize(static_cast<size_t>(s_.b_matrices));
      for (int64_t i = 0; i < s_.b_matrices; ++i)
        kernels::pack_b_into(false, s_.k, s_.n, b_const->data<float>() + i * s_.k * s_.n, s_.n, const_b_[i], nullptr, pool_parallel());
    }
  }

  Tensor run(const std::vector<const RtValue*>& ins) override {
    Tensor y = output_tensor(DType::kFloat32, s_.out_dims);
    const int64_t M = s_.m, K = s_.k, N = s_.n, batches = static_cast<int64_t>(s_.a_index.size());
    float* out = y.data<float>();
    if (y.numel() == 0) return y;
    if (K == 0) {
      std::fill(out, out + y.numel(), 0.0f);
      return y;
    }
    const float* a = fdata(ins[0]);
    const float* b = fdata(ins[1]);
    auto one = [&](int64_t t, int64_t rows, const kernels::ParallelFor& par) {
      const kernels::PackedB* pb;
      thread_local kernels::PackedB scratch;
      if (!const_b_.empty()) {
        pb = &const_b_[s_.b_index[t]];
      } else {
        kernels::pack_b_into(false, K, N, b + s_.b_index[t] * K * N, N, scratch, nullptr, par);
        pb = &scratch;
      }
      const float* at = a + s_.a_index[t] * M * K;
      // Large B (> 512 KB per batch) needs sgemm_packed's cache blocking.
      if (par || K * N > (1 << 17)) {
        kernels::sgemm_packed(false, rows, at, K, 1.0f, *pb, 0.0f, out + t * M * N, N, par);
      } else {
        gemm_one_thread(rows, at, K, *pb, out + t * M * N, N);
      }
    };
    ThreadPool& pool = current_thread_pool();
    const int64_t threads = pool.num_threads();
    // One thread: no parallel hook, so each GEMM takes the single-thread driver above.
    const kernels::ParallelFor par = threads > 1 ? pool_parallel() : nullptr;
    if (flat_) {
      one(0, batches * M, par);
      return y;
    }
    // Whole batches per thread when they balance (attention: 12 heads); else split each GEMM.
    if (threads > 1 && batches >= threads && (batches % threads == 0 || batches >= 4 * threads)) {
      pool.parallel_for(batches, [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) one(t, M, nullptr);
      });
    } else {
      for (int64_t t = 0; t < batches; ++t) one(t, M, par);
    }
    return y;
  }

 private:
  MatMulShape s_;
  bool flat_ = false;
  std::vector<kernels::PackedB> const_b_;  // per B matrix, when B is a plan-time constant
};

// y[r, :] = alpha * x[r, :] * op(B) + beta * C for each of `rows` rows (C broadcast to [N];
// absent when beta == 0).
class GemvOp : public GemmOp {
 public:
  GemvOp(kernels::PackedGemvB w, float alpha, float beta, const Operand* c, std::vector<int64_t> out, int64_t rows)
      : w_(std::move(w)), alpha_(alpha), beta_(beta), out_(std::move(out)), rows_(rows) {
    if (c) {
      has_c_ = true;
      c_scalar_ = numel(c->dims) == 1;
      bias_.resize(static_cast<size_t>(w_.n));
      if (c->constant) {
        fill_bias(c->constant->data<float>());
        bias_const_ = true;
      }
    }
  }
  // The epilogue bias joins the kernel's bias; the residual, clamp and activation run over the
  // (N-element) output after it.
  bool take_epilogue(const GemmDesc& d) override {
    if (d.epilogue_bias >= 0) {
      const float* e = d.operands[static_cast<size_t>(d.epilogue_bias)].constant->data<float>();
      epilogue_bias_.assign(e, e + w_.n);
      if (!has_c_) {
        has_c_ = bias_const_ = true;
        bias_.assign(static_cast<size_t>(w_.n), 0.0f);
      }
      if (bias_const_)
        for (int64_t j = 0; j < w_.n; ++j) bias_[j] += epilogue_bias_[j];
    }
    tail_.init(d);
    return true;
  }
  Tensor run(const std::vector<const RtValue*>& ins) override {
    Tensor y = output_tensor(DType::kFloat32, out_);
    if (has_c_ && !bias_const_) fill_bias(fdata(ins[2]));
    for (int64_t r = 0; r < rows_; ++r)
      kernels::gemv_packed(fdata(ins[0]) + r * w_.k, alpha_, w_, has_c_ ? bias_.data() : nullptr, false,
                           y.data<float>() + r * w_.n, pool_parallel());
    tail_.apply(y.data<float>(), y.numel(), ins);
    return y;
  }

 private:
  // The run-time C (scaled by beta) plus the epilogue bias, when C is not a constant.
  void fill_bias(const float* c) {
    for (int64_t j = 0; j < w_.n; ++j)
      bias_[j] = beta_ * c[c_scalar_ ? 0 : j] + (epilogue_bias_.empty() ? 0.0f : epilogue_bias_[j]);
  }
  kernels::PackedGemvB w_;
  float alpha_, beta_;
  std::vector<int64_t> out_;
  int64_t rows_ = 1;
  bool has_c_ = false, c_scalar_ = false, bias_const_ = false;
  std::vector<float> bias_;
  std::vector<float> epilogue_bias_;  // GemmDesc::epilogue_bias
  EpilogueTail tail_;                 // residual, clamp, activation
};

}  // namespace

std::optional<MatMulShape> matmul_shape(const std::vector<int64_t>& a_in, const std::vector<int64_t>& b_in) {
  if (a_in.empty() || b_in.empty()) return std::nullopt;
  for (int64_t d : a_in)
    if (d < 0) return std::nullopt;
  for (int64_t d : b_in)
    if (d < 0) return std::nullopt;
  std::vector<int64_t> a = a_in, b = b_in;
  if (a.size() == 1) a.insert(a.begin(), 1);
  if (b.size() == 1) b.push_back(1);
  MatMulShape s;
  s.m = a[a.size() - 2];
  s.k = a.back();
  s.n = b.back();
  if (b[b.size() - 2] != s.k) return std::nullopt;
  const std::vector<int64_t> ab(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  const size_t rank = std::max(ab.size(), bb.size());
  std::vector<int64_t> ad(rank, 1), bd(rank, 1), od(rank);
  std::copy(ab.begin(), ab.end(), ad.begin() + (rank - ab.size()));
  std::copy(bb.begin(), bb.end(), bd.begin() + (rank - bb.size()));
  for (size_t i = 0; i < rank; ++i) {
    if (ad[i] != bd[i] && ad[i] != 1 && bd[i] != 1) return std::nullopt;
    od[i] = ad[i] == 1 ? bd[i] : ad[i];
  }
  s.a_matrices = numel(ad);
  s.b_matrices = numel(bd);
  // Matrix strides per batch dim, 0 where that side is broadcast.
  std::vector<int64_t> as(rank, 0), bs(rank, 0);
  for (int64_t i = static_cast<int64_t>(rank) - 1, sa = 1, sb = 1; i >= 0; --i) {
    as[i] = ad[i] == 1 ? 0 : sa;
    bs[i] = bd[i] == 1 ? 0 : sb;
    sa *= ad[i];
    sb *= bd[i];
  }
  const int64_t batches = numel(od);
  s.a_index.resize(static_cast<size_t>(batches));
  s.b_index.resize(static_cast<size_t>(batches));
  std::vector<int64_t> idx(rank, 0);
  for (int64_t t = 0; t < batches; ++t) {
    int64_t ai = 0, bi = 0;
    for (size_t i = 0; i < rank; ++i) {
      ai += idx[i] * as[i];
      bi += idx[i] * bs[i];
    }
    s.a_index[t] = ai;
    s.b_index[t] = bi;
    for (int64_t i = static_cast<int64_t>(rank) - 1; i >= 0; --i) {
      if (++idx[i] < od[i]) break;
      idx[i] = 0;
    }
  }
  s.out_dims = od;
  if (a_in.size() >= 2) s.out_dims.push_back(s.m);
  if (b_in.size() >= 2) s.out_dims.push_back(s.n);
  return s;
}

std::unique_ptr<GemmOp> make_gemv_op(kernels::PackedGemvB w, float alpha, float beta, const Operand* c,
                                     std::vector<int64_t> out_dims, int64_t rows) {
  return std::make_unique<GemvOp>(std::move(w), alpha, beta, c, std::move(out_dims), rows);
}

std::unique_ptr<GemmOp> make_matmul_fast_path(const GemmDesc& d) {
  const std::vector<Operand>& ins = d.operands;
  if (has_epilogue(d) || ins.size() != 2 || !ins[0].present || !ins[1].present) return nullptr;
  const auto& a = ins[0].dims;
  const auto& b = ins[1].dims;
  auto s = matmul_shape(a, b);
  if (!s || s->out_dims != d.out_dims) return nullptr;
  if (ins[1].constant && b.size() <= 2 && s->m * s->a_matrices == 1 && s->k > 0 && s->n > 0) {
    // Rank-1 B is K x 1: as a 2-D B its row stride is 1 (= N).
    return make_gemv_op(kernels::pack_gemv_b(false, s->k, s->n, ins[1].constant->data<float>(), s->n, pool_parallel()),
                        1.0f, 0.0f, nullptr, d.out_dims);
  }
  if (a.size() >= 2 && b.size() == 2) return nullptr;  // gemm_ops' MatMulOp: one GEMM over all rows
  return std::make_unique<BatchedMatMulOp>(std::move(*s), ins[1].constant);
}

std::unique_ptr<GemmOp> make_gemv_gemm(const GemmDesc& d) {
  const std::vector<Operand>& ins = d.operands;
  if (has_epilogue(d) || ins.size() < 2 || ins.size() > 3) return nullptr;
  if (!ins[0].present || !ins[1].present || !ins[1].constant) return nullptr;
  const auto& a = ins[0].dims;
  const auto& b = ins[1].dims;
  if (a.size() != 2 || b.size() != 2 || d.out_dims.size() != 2) return nullptr;
  const int64_t M = d.trans_a ? a[1] : a[0], K = d.trans_a ? a[0] : a[1];
  const int64_t N = d.trans_b ? b[0] : b[1];
  // With M = 1, A holds its K values contiguously whether or not it is transposed.
  if (M != 1 || K == 0 || N == 0 || (d.trans_b ? b[1] : b[0]) != K) return nullptr;
  if (d.out_dims[0] != 1 || d.out_dims[1] != N) return nullptr;
  const Operand* c = ins.size() > 2 && ins[2].present && d.beta != 0.0f ? &ins[2] : nullptr;
  if (c) {
    const auto& cd = c->dims;
    const int64_t cn = cd.empty() ? 1 : cd.back();
    if (cd.size() > 2 || (cd.size() == 2 && cd[0] != 1) || (cn != 1 && cn != N)) return nullptr;
  }
  return make_gemv_op(kernels::pack_gemv_b(d.trans_b, K, N, ins[1].constant->data<float>(), b[1], pool_parallel()),
                      d.alpha, d.beta, c, d.out_dims);
}

}  // namespace kiln::gemm_ops
