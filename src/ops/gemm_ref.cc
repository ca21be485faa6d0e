// Reference GEMM: Goto-style blocking (pack B panel, pack A block, MRxNR register tile) in plain
// C++ whose fixed-size inner loops the compiler vectorizes for the baseline ISA.
#include "ops/gemm_ref.h"

#include <algorithm>
#include <vector>

namespace kiln {
namespace {

template <class T>
struct Tile;
// Register tile: MR rows of A times NR columns of B. 4x8 floats keep 8 of the 16 baseline SSE
// registers as accumulators, leaving room for B loads; larger tiles spilled and ran 2x slower.
template <>
struct Tile<float> {
  static constexpr int kMR = 4, kNR = 8;
};
template <>
struct Tile<double> {
  static constexpr int kMR = 4, kNR = 4;
};

constexpr int64_t kKC = 256;  // depth of one packed panel (fits A sliver + B sliver in L1)
constexpr int64_t kMC = 64;   // rows of A per packed block (L2)
constexpr int64_t kNC = 2048; // columns of B per packed panel (L3)

// Packs op(A)[m0:m0+mc, k0:k0+kc] into MR-row slivers, k-major inside a sliver, zero-padded.
template <class T>
void pack_a(bool trans, const T* A, int64_t lda, int64_t m0, int64_t mc, int64_t k0, int64_t kc,
            T* out) {
  constexpr int MR = Tile<T>::kMR;
  for (int64_t i0 = 0; i0 < mc; i0 += MR) {
    const int64_t rows = std::min<int64_t>(MR, mc - i0);
    for (int64_t k = 0; k < kc; ++k) {
      T* dst = out + (i0 / MR) * kc * MR + k * MR;
      for (int64_t i = 0; i < MR; ++i) {
        if (i < rows) {
          const int64_t m = m0 + i0 + i, kk = k0 + k;
          dst[i] = trans ? A[kk * lda + m] : A[m * lda + kk];
        } else {
          dst[i] = T(0);
        }
      }
    }
  }
}

// Packs op(B)[k0:k0+kc, n0:n0+nc] into NR-column slivers, k-major inside a sliver, zero-padded.
template <class T>
void pack_b(bool trans, const T* B, int64_t ldb, int64_t k0, int64_t kc, int64_t n0, int64_t nc,
            T* out) {
  constexpr int NR = Tile<T>::kNR;
  for (int64_t j0 = 0; j0 < nc; j0 += NR) {
    const int64_t cols = std::min<int64_t>(NR, nc - j0);
    T* sliver = out + (j0 / NR) * kc * NR;
    if (!trans && cols == NR) {
      for (int64_t k = 0; k < kc; ++k) {
        const T* src = B + (k0 + k) * ldb + n0 + j0;
        std::copy(src, src + NR, sliver + k * NR);
      }
      continue;
    }
    for (int64_t k = 0; k < kc; ++k) {
      T* dst = sliver + k * NR;
      for (int64_t j = 0; j < NR; ++j) {
        if (j < cols) {
          const int64_t n = n0 + j0 + j, kk = k0 + k;
          dst[j] = trans ? B[n * ldb + kk] : B[kk * ldb + n];
        } else {
          dst[j] = T(0);
        }
      }
    }
  }
}

template <class T>
void micro_kernel(int64_t kc, const T* __restrict a, const T* __restrict b,
                  T* __restrict acc) {
  constexpr int MR = Tile<T>::kMR, NR = Tile<T>::kNR;
  T c[MR][NR] = {};
  for (int64_t k = 0; k < kc; ++k) {
    const T* bk = b + k * NR;
    const T* ak = a + k * MR;
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) {
      const T ai = ak[i];
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) c[i][j] += ai * bk[j];
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i * NR + j] = c[i][j];
}

// Few rows (a recurrent step, a GEMV): packing B would cost more than the product, so each row of
// C accumulates straight from B: row-major B by axpys over its rows, transposed B by dot products
// with 8 partial sums (independent lanes the compiler vectorizes without reassociating).
template <class T>
void gemm_few_rows(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
                   const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  std::vector<T> arow(static_cast<size_t>(K)), acc(static_cast<size_t>(N));
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t k = 0; k < K; ++k) arow[static_cast<size_t>(k)] = trans_a ? A[k * lda + m] : A[m * lda + k];
    const T* a = arow.data();
    T* c = acc.data();
    if (!trans_b) {
      std::fill(acc.begin(), acc.end(), T(0));
      for (int64_t k = 0; k < K; ++k) {
        const T ak = a[k];
        const T* b = B + k * ldb;
        for (int64_t n = 0; n < N; ++n) c[n] += ak * b[n];
      }
    } else {
      for (int64_t n = 0; n < N; ++n) {
        const T* b = B + n * ldb;
        T part[8] = {};
        int64_t k = 0;
        for (; k + 8 <= K; k += 8)
#pragma GCC unroll 8
          for (int l = 0; l < 8; ++l) part[l] += a[k + l] * b[k + l];
        for (; k < K; ++k) part[0] += a[k] * b[k];
        c[n] = ((part[0] + part[4]) + (part[1] + part[5])) + ((part[2] + part[6]) + (part[3] + part[7]));
      }
    }
    T* crow = C + m * ldc;
    for (int64_t n = 0; n < N; ++n) crow[n] = beta == T(0) ? alpha * c[n] : beta * crow[n] + alpha * c[n];
  }
}

template <class T>
void gemm_impl(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
               int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  auto scale_c = [&]() {
    for (int64_t m = 0; m < M; ++m) {
      T* row = C + m * ldc;
      if (beta == T(0)) {
        std::fill(row, row + N, T(0));
      } else if (beta != T(1)) {
        for (int64_t n = 0; n < N; ++n) row[n] *= beta;
      }
    }
  };
  if (K <= 0 || alpha == T(0)) {
    scale_c();
    return;
  }
  if (M <= Tile<T>::kMR) return gemm_few_rows(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  constexpr int MR = Tile<T>::kMR, NR = Tile<T>::kNR;
  // Packed buffers hold whole slivers, so round the block sizes up to the tile.
  const int64_t nc_max = (std::min(kNC, N) + NR - 1) / NR * NR;
  const int64_t kc_max = std::min(kKC, K);
  const int64_t mc_max = (std::min(kMC, M) + MR - 1) / MR * MR;
  std::vector<T> packed_b(static_cast<size_t>(nc_max * kc_max));
  std::vector<T> packed_a(static_cast<size_t>(mc_max * kc_max));
  alignas(64) T acc[MR * NR];

  for (int64_t n0 = 0; n0 < N; n0 += kNC) {
    const int64_t nc = std::min(kNC, N - n0);
    for (int64_t k0 = 0; k0 < K; k0 += kKC) {
      const int64_t kc = std::min(kKC, K - k0);
      const bool first = k0 == 0;
      pack_b(trans_b, B, ldb, k0, kc, n0, nc, packed_b.data());
      for (int64_t m0 = 0; m0 < M; m0 += kMC) {
        const int64_t mc = std::min(kMC, M - m0);
        pack_a(trans_a, A, lda, m0, mc, k0, kc, packed_a.data());
        for (int64_t j0 = 0; j0 < nc; j0 += NR) {
          const int64_t cols = std::min<int64_t>(NR, nc - j0);
          const T* bs = packed_b.data() + (j0 / NR) * kc * NR;
          for (int64_t i0 = 0; i0 < mc; i0 += MR) {
            const int64_t rows = std::min<int64_t>(MR, mc - i0);
            micro_kernel<T>(kc, packed_a.data() + (i0 / MR) * kc * MR, bs, acc);
            for (int64_t i = 0; i < rows; ++i) {
              T* crow = C + (m0 + i0 + i) * ldc + n0 + j0;
              const T* arow = acc + i * NR;
              if (!first) {
                for (int64_t j = 0; j < cols; ++j) crow[j] += alpha * arow[j];
              } else if (beta == T(0)) {
                for (int64_t j = 0; j < cols; ++j) crow[j] = alpha * arow[j];
              } else {
                for (int64_t j = 0; j < cols; ++j) crow[j] = beta * crow[j] + alpha * arow[j];
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace

void gemm_ref(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
              const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
              int64_t ldc) {
  gemm_impl<float>(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void gemm_ref(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
              const double* A, int64_t lda, const double* B, int64_t ldb, double beta, double* C,
              int64_t ldc) {
  gemm_impl<double>(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace kiln
