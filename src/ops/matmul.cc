// Matrix products: MatMul, Gemm, MatMulInteger and Det; Einsum lives in ops/einsum.cc and is
// registered from here. Float paths run the cache-blocked gemm_ref per batch.
#include <cmath>
#include <type_traits>

#include "ops/families.h"
#include "ops/gemm_ref.h"
#include "ops/op_util.h"

namespace kiln {

void register_einsum_ops(OpRegistry& r);  // ops/einsum.cc

namespace {

template <class T>
constexpr bool kIsHalf = std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;

// C[M,N] (+)= A[M,K] * B[K,N] for integer types. Products wrap modulo 2^bits like numpy's fixed
// width integers; unsigned 64-bit arithmetic makes the wrap well defined.
template <class T>
void gemm_int(int64_t M, int64_t N, int64_t K, const T* A, const T* B, T* C) {
  std::vector<uint64_t> acc(static_cast<size_t>(N));
  for (int64_t i = 0; i < M; ++i) {
    std::fill(acc.begin(), acc.end(), uint64_t{0});
    for (int64_t k = 0; k < K; ++k) {
      const uint64_t a = static_cast<uint64_t>(static_cast<int64_t>(A[i * K + k]));
      if (a == 0) continue;
      const T* brow = B + k * N;
      for (int64_t j = 0; j < N; ++j)
        acc[static_cast<size_t>(j)] += a * static_cast<uint64_t>(static_cast<int64_t>(brow[j]));
    }
    for (int64_t j = 0; j < N; ++j) C[i * N + j] = static_cast<T>(acc[static_cast<size_t>(j)]);
  }
}

template <class T>
void gemm_plain(int64_t M, int64_t N, int64_t K, const T* A, const T* B, T* C) {
  if constexpr (std::is_floating_point_v<T>) {
    gemm_ref(false, false, M, N, K, T(1), A, K, B, N, T(0), C, N);
  } else {
    gemm_int<T>(M, N, K, A, B, C);
  }
}

// numpy matmul: 1-D operands are promoted (and the added dim removed from the result), leading
// dims broadcast.
Tensor matmul_tensors(const AttrReader& at, const Tensor& a, const Tensor& b) {
  if (a.rank() == 0 || b.rank() == 0)
    at.fail(ErrorKind::kBadInput, "MatMul inputs must have rank >= 1, got shapes " +
                                      dims_to_string(a.dims()) + " and " +
                                      dims_to_string(b.dims()));
  if (a.dtype() != b.dtype())
    at.fail(ErrorKind::kBadInput, "MatMul inputs must have the same dtype, got " +
                                      std::string(dtype_name(a.dtype())) + " and " +
                                      std::string(dtype_name(b.dtype())));
  std::vector<int64_t> ad = a.dims(), bd = b.dims();
  const bool a_vec = ad.size() == 1, b_vec = bd.size() == 1;
  if (a_vec) ad.insert(ad.begin(), 1);
  if (b_vec) bd.push_back(1);
  const int64_t M = ad[ad.size() - 2], K = ad.back(), N = bd.back();
  if (bd[bd.size() - 2] != K)
    at.fail(ErrorKind::kBadInput, "MatMul inner dimensions differ: " + dims_to_string(a.dims()) +
                                      " x " + dims_to_string(b.dims()));
  std::vector<int64_t> a_batch(ad.begin(), ad.end() - 2), b_batch(bd.begin(), bd.end() - 2);
  std::vector<int64_t> batch = broadcast_dims(at, {a_batch, b_batch});
  std::vector<int64_t> out_dims = batch;
  if (!a_vec) out_dims.push_back(M);
  if (!b_vec) out_dims.push_back(N);
  Tensor y(a.dtype(), out_dims);
  if (y.numel() == 0 || K == 0) return y;  // storage starts zeroed: empty sums are 0
  visit_dtype(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kIsHalf<T> || std::is_same_v<T, bool>) {
      at.fail(ErrorKind::kUnsupported, "MatMul does not support " +
                                           std::string(dtype_name(a.dtype())) + " here");
    } else {
      const T* A = a.data<T>();
      const T* B = b.data<T>();
      T* C = y.data<T>();
      if (b_batch.empty()) {
        // A shared B: all batches of A are one tall [batch*M, K] matrix.
        gemm_plain<T>(y.numel() / N, N, K, A, B, C);
        return;
      }
      std::vector<std::vector<int64_t>> strides = {broadcast_strides(a_batch, batch),
                                                   broadcast_strides(b_batch, batch)};
      for_each_broadcast(batch, strides, [&](int64_t i, const int64_t* off) {
        gemm_plain<T>(M, N, K, A + off[0] * M * K, B + off[1] * K * N, C + i * M * N);
      });
    }
  });
  return y;
}

void matmul_kernel(KernelContext& ctx) {
  ctx.set_output(0, matmul_tensors(ctx, ctx.input(0), ctx.input(1)));
}

// Static shape of numpy matmul; unknown pieces stay unknown.
std::optional<Shape> matmul_shape(const Type& a, const Type& b) {
  if (!a.shape || !b.shape || a.shape->rank() == 0 || b.shape->rank() == 0) return std::nullopt;
  std::vector<Dim> ad = a.shape->dims, bd = b.shape->dims;
  const bool a_vec = ad.size() == 1, b_vec = bd.size() == 1;
  if (a_vec) ad.insert(ad.begin(), Dim(1));
  if (b_vec) bd.push_back(Dim(1));
  const Dim &ka = ad.back(), &kb = bd[bd.size() - 2];
  if (ka.known() && kb.known() && ka.value != kb.value)
    throw Error(ErrorKind::kBadInput, "MatMul inner dimensions differ: " + to_string(*a.shape) + " and " +
                                          to_string(*b.shape));
  std::vector<Dim> ab(ad.begin(), ad.end() - 2), bb(bd.begin(), bd.end() - 2);
  const size_t rank = std::max(ab.size(), bb.size());
  std::vector<Dim> batch(rank, Dim(1));
  for (const auto* src : {&ab, &bb}) {
    const size_t off = rank - src->size();
    for (size_t i = 0; i < src->size(); ++i) {
      const Dim& d = (*src)[i];
      Dim& o = batch[off + i];
      if (d.known() && d.value == 1) continue;
      if (o.known() && o.value == 1) o = d;
      else if (!(o == d)) o = Dim();
    }
  }
  Shape s(batch);
  if (!a_vec) s.dims.push_back(ad[ad.size() - 2]);
  if (!b_vec) s.dims.push_back(bd.back());
  return s;
}

void infer_matmul(InferContext& ctx) {
  const Type& a = ctx.input_type(0);
  ctx.set_output_type(0, Type::tensor(a.dtype, matmul_shape(a, ctx.input_type(1))));
}

// ---- Gemm ---------------------------------------------------------------------------------

void gemm_kernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const bool ta = ctx.attr_int("transA", 0) != 0, tb = ctx.attr_int("transB", 0) != 0;
  const double alpha = ctx.attr_float("alpha", 1.f), beta = ctx.attr_float("beta", 1.f);
  if (a.rank() != 2 || b.rank() != 2)
    ctx.fail(ErrorKind::kBadInput, "Gemm inputs must be 2-D, got " + dims_to_string(a.dims()) +
                                       " and " + dims_to_string(b.dims()));
  if (a.dtype() != b.dtype())
    ctx.fail(ErrorKind::kBadInput, "Gemm A and B must have the same dtype");
  const int64_t M = ta ? a.dim(1) : a.dim(0), K = ta ? a.dim(0) : a.dim(1);
  const int64_t Kb = tb ? b.dim(1) : b.dim(0), N = tb ? b.dim(0) : b.dim(1);
  if (K != Kb)
    ctx.fail(ErrorKind::kBadInput, "Gemm inner dimensions differ: op(A) is [" + std::to_string(M) +
                                       "," + std::to_string(K) + "], op(B) is [" +
                                       std::to_string(Kb) + "," + std::to_string(N) + "]");
  Tensor y(a.dtype(), {M, N});
  const bool has_c = ctx.has_input(2) && beta != 0.0;
  const Tensor* c = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  if (c) {
    if (c->dtype() != a.dtype()) ctx.fail(ErrorKind::kBadInput, "Gemm C must have A's dtype");
    // C broadcasts unidirectionally to [M, N].
    bool fits = c->rank() <= 2;
    for (int i = 0; fits && i < c->rank(); ++i) {
      const int64_t d = c->dim(c->rank() - 1 - i), want = i == 0 ? N : M;
      fits = d == 1 || d == want;
    }
    if (!fits)
      ctx.fail(ErrorKind::kBadInput, "Gemm C of shape " + dims_to_string(c->dims()) +
                                         " does not broadcast to [" + std::to_string(M) + "," +
                                         std::to_string(N) + "]");
  }
  visit_dtype(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kIsHalf<T> || std::is_same_v<T, bool>) {
      ctx.fail(ErrorKind::kUnsupported, "Gemm does not support " +
                                            std::string(dtype_name(a.dtype())) + " here");
    } else {
      T* Y = y.data<T>();
      if (has_c) {
        const T* C = c->data<T>();
        std::vector<int64_t> cs = broadcast_strides(c->dims(), {M, N});
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) Y[i * N + j] = C[i * cs[0] + j * cs[1]];
      }
      if constexpr (std::is_floating_point_v<T>) {
        gemm_ref(ta, tb, M, N, K, static_cast<T>(alpha), a.data<T>(), a.dim(1), b.data<T>(),
                 b.dim(1), has_c ? static_cast<T>(beta) : T(0), Y, N);
      } else {
        // Integer Gemm: exact integer dot products, scaled in double like the reference.
        const T* A = a.data<T>();
        const T* B = b.data<T>();
        for (int64_t i = 0; i < M; ++i) {
          for (int64_t j = 0; j < N; ++j) {
            uint64_t acc = 0;
            for (int64_t k = 0; k < K; ++k) {
              T av = ta ? A[k * M + i] : A[i * K + k];
              T bv = tb ? B[j * K + k] : B[k * N + j];
              acc += static_cast<uint64_t>(static_cast<int64_t>(av)) *
                     static_cast<uint64_t>(static_cast<int64_t>(bv));
            }
            T dot = static_cast<T>(acc);
            if (alpha == 1.0 && (!has_c || beta == 1.0)) {
              Y[i * N + j] = static_cast<T>(dot + (has_c ? Y[i * N + j] : T(0)));
            } else {
              double v = alpha * static_cast<double>(dot) +
                         (has_c ? beta * static_cast<double>(Y[i * N + j]) : 0.0);
              Y[i * N + j] = static_cast<T>(static_cast<int64_t>(v));
            }
          }
        }
      }
    }
  });
  ctx.set_output(0, std::move(y));
}

void infer_gemm(InferContext& ctx) {
  const Type& a = ctx.input_type(0);
  const Type& b = ctx.input_type(1);
  std::optional<Shape> s;
  if (a.shape && b.shape && a.shape->rank() == 2 && b.shape->rank() == 2) {
    const bool ta = ctx.attr_int("transA", 0) != 0, tb = ctx.attr_int("transB", 0) != 0;
    s = Shape({a.shape->dims[ta ? 1 : 0], b.shape->dims[tb ? 0 : 1]});
  }
  ctx.set_output_type(0, Type::tensor(a.dtype, s));
}

// ---- MatMulInteger ------------------------------------------------------------------------

// x - zero_point widened to int32. A 1-D zero point of length rows (rows != 1) is per row of a
// matrix operand (`per_row`), otherwise it broadcasts numpy-style (per column for B).
Tensor subtract_zero_point(const AttrReader& at, const Tensor& x, const Tensor* zp, bool per_row) {
  Tensor out = convert_tensor(x, DType::kInt32);
  if (!zp) return out;
  if (zp->dtype() != x.dtype())
    at.fail(ErrorKind::kBadInput, "zero point dtype " + std::string(dtype_name(zp->dtype())) +
                                      " differs from its input's " +
                                      std::string(dtype_name(x.dtype())));
  Tensor z = convert_tensor(*zp, DType::kInt32);
  std::vector<int64_t> zd = z.dims();
  if (per_row && zd.size() == 1 && zd[0] != 1 && x.rank() >= 2) zd.push_back(1);
  std::vector<int64_t> bd = broadcast_dims(at, {x.dims(), zd});
  if (bd != x.dims())
    at.fail(ErrorKind::kBadInput, "zero point of shape " + dims_to_string(zp->dims()) +
                                      " does not fit input of shape " + dims_to_string(x.dims()));
  int32_t* o = out.data<int32_t>();
  const int32_t* zv = z.data<int32_t>();
  for_each_broadcast(x.dims(), {broadcast_strides(zd, x.dims())},
                     [&](int64_t i, const int64_t* off) { o[i] -= zv[off[0]]; });
  return out;
}

void matmul_integer_kernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  for (const Tensor* t : {&a, &b})
    if (t->dtype() != DType::kUInt8 && t->dtype() != DType::kInt8)
      ctx.fail(ErrorKind::kBadInput, "MatMulInteger inputs must be uint8 or int8, got " +
                                         std::string(dtype_name(t->dtype())));
  Tensor a32 = subtract_zero_point(ctx, a, ctx.has_input(2) ? &ctx.input(2) : nullptr, true);
  Tensor b32 = subtract_zero_point(ctx, b, ctx.has_input(3) ? &ctx.input(3) : nullptr, false);
  ctx.set_output(0, matmul_tensors(ctx, a32, b32));
}

void infer_matmul_integer(InferContext& ctx) {
  ctx.set_output_type(0, Type::tensor(DType::kInt32,
                                      matmul_shape(ctx.input_type(0), ctx.input_type(1))));
}

// ---- Det ----------------------------------------------------------------------------------

void det_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2 || x.dim(x.rank() - 1) != x.dim(x.rank() - 2))
    ctx.fail(ErrorKind::kBadInput, "Det needs [..., M, M] input, got " + dims_to_string(x.dims()));
  const int64_t n = x.dim(x.rank() - 1);
  std::vector<int64_t> out_dims(x.dims().begin(), x.dims().end() - 2);
  Tensor y(x.dtype(), out_dims);
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_floating_point_v<T>) {
      ctx.fail(ErrorKind::kUnsupported, "Det needs a float input, got " +
                                            std::string(dtype_name(x.dtype())));
    } else {
      const T* src = x.data<T>();
      T* dst = y.data<T>();
      std::vector<double> m(static_cast<size_t>(n * n));
      for (int64_t b = 0; b < y.numel(); ++b) {
        for (int64_t i = 0; i < n * n; ++i) m[static_cast<size_t>(i)] = src[b * n * n + i];
        // LU decomposition with partial pivoting; det = sign * prod(diagonal).
        double det = 1.0;
        for (int64_t c = 0; c < n && det != 0.0; ++c) {
          int64_t p = c;
          for (int64_t r = c + 1; r < n; ++r)
            if (std::abs(m[r * n + c]) > std::abs(m[p * n + c])) p = r;
          if (m[p * n + c] == 0.0) {
            det = 0.0;
            break;
          }
          if (p != c) {
            for (int64_t k = 0; k < n; ++k) std::swap(m[c * n + k], m[p * n + k]);
            det = -det;
          }
          const double piv = m[c * n + c];
          det *= piv;
          for (int64_t r = c + 1; r < n; ++r) {
            const double f = m[r * n + c] / piv;
            for (int64_t k = c; k < n; ++k) m[r * n + k] -= f * m[c * n + k];
          }
        }
        dst[b] = static_cast<T>(det);
      }
    }
  });
  ctx.set_output(0, std::move(y));
}

void infer_det(InferContext& ctx) {
  const Type& x = ctx.input_type(0);
  std::optional<Shape> s;
  if (x.shape && x.shape->rank() >= 2)
    s = Shape(std::vector<Dim>(x.shape->dims.begin(), x.shape->dims.end() - 2));
  ctx.set_output_type(0, Type::tensor(x.dtype, s));
}

}  // namespace

void register_matmul_ops(OpRegistry& r) {
  r.add("MatMul").since(1).inputs(2).outputs(1).kind(PatternKind::kOutFusable).run(matmul_kernel)
      .shape(infer_matmul).via_float();
  r.add("Gemm").since(1).inputs(2, 3).outputs(1).kind(PatternKind::kOutFusable).run(gemm_kernel)
      .shape(infer_gemm).via_float();
  r.add("MatMulInteger").since(10).inputs(2, 4).outputs(1).kind(PatternKind::kOutFusable)
      .run(matmul_integer_kernel).shape(infer_matmul_integer);
  r.add("Det").since(11).inputs(1).outputs(1).kind(PatternKind::kOpaque).run(det_kernel)
      .shape(infer_det).via_float();
  register_einsum_ops(r);
}

}  // namespace kiln
