// Private helpers of the elementwise/activation kernels: compile-time dtype sets, row-wise
// broadcast iteration (so inner loops run over contiguous or scalar operands and vectorize),
// and f16/bf16 staging through f32.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/op_util.h"

namespace kiln::ew {

// Bit sets of dtypes accepted by a kernel; checked at compile time so that op functors are
// only instantiated for types they make sense for.
enum TypeSet : unsigned {
  kFloats = 1,      // float, double
  kSigned = 2,      // int8..int64
  kUnsigned = 4,    // uint8..uint64
  kBoolType = 8,    // bool
  kHalves = 16,     // Float16, BFloat16 as storage types (for data movement only)
  kStrings = 32,    // std::string
  kInts = kSigned | kUnsigned,
  kNumeric = kFloats | kInts,
  kAnyType = kNumeric | kBoolType | kHalves | kStrings,
};

[[noreturn]] void fail_dtype(const AttrReader& at, DType t, const char* allowed);

template <unsigned S, class F>
void dispatch(const AttrReader& at, DType t, F&& f) {
  switch (t) {
    case DType::kFloat32: if constexpr ((S & kFloats) != 0) return f(TypeTag<float>{}); break;
    case DType::kFloat64: if constexpr ((S & kFloats) != 0) return f(TypeTag<double>{}); break;
    case DType::kInt8: if constexpr ((S & kSigned) != 0) return f(TypeTag<int8_t>{}); break;
    case DType::kInt16: if constexpr ((S & kSigned) != 0) return f(TypeTag<int16_t>{}); break;
    case DType::kInt32: if constexpr ((S & kSigned) != 0) return f(TypeTag<int32_t>{}); break;
    case DType::kInt64: if constexpr ((S & kSigned) != 0) return f(TypeTag<int64_t>{}); break;
    case DType::kUInt8: if constexpr ((S & kUnsigned) != 0) return f(TypeTag<uint8_t>{}); break;
    case DType::kUInt16: if constexpr ((S & kUnsigned) != 0) return f(TypeTag<uint16_t>{}); break;
    case DType::kUInt32: if constexpr ((S & kUnsigned) != 0) return f(TypeTag<uint32_t>{}); break;
    case DType::kUInt64: if constexpr ((S & kUnsigned) != 0) return f(TypeTag<uint64_t>{}); break;
    case DType::kBool: if constexpr ((S & kBoolType) != 0) return f(TypeTag<bool>{}); break;
    case DType::kFloat16: if constexpr ((S & kHalves) != 0) return f(TypeTag<Float16>{}); break;
    case DType::kBFloat16: if constexpr ((S & kHalves) != 0) return f(TypeTag<BFloat16>{}); break;
    case DType::kString: if constexpr ((S & kStrings) != 0) return f(TypeTag<std::string>{}); break;
    default: break;
  }
  const char* allowed = S == kBoolType ? "bool" : (S & kFloats) == 0 ? "an integer type"
                        : (S & kInts) == 0 ? "a floating-point type" : "a numeric type";
  fail_dtype(at, t, allowed);
}

inline bool is_half(DType t) { return t == DType::kFloat16 || t == DType::kBFloat16; }
// f16/bf16 tensors converted to f32; others returned as is (shared storage).
inline Tensor widen_half(const Tensor& t) {
  return is_half(t.dtype()) ? convert_tensor(t, DType::kFloat32) : t;
}

// Calls f(out_offset, in_offsets, count, in_inner_strides) for each run of `count` output
// elements that is contiguous in the output; inputs advance by their inner stride (0 when
// broadcast). Adjacent dims are merged where every input allows it, so common shapes such as
// [N,C,H,W] + [C,1,1] produce long rows.
template <size_t N, class F>
void for_each_row(const std::vector<int64_t>& out_dims,
                  const std::array<const std::vector<int64_t>*, N>& in_dims, F&& f) {
  int64_t total = 1;
  for (int64_t d : out_dims) total *= d;
  if (total == 0) return;
  std::array<std::vector<int64_t>, N> st;
  for (size_t k = 0; k < N; ++k) st[k] = broadcast_strides(*in_dims[k], out_dims);
  // Merge dims, dropping size-1 dims.
  std::vector<int64_t> dims;
  std::array<std::vector<int64_t>, N> ms;
  for (size_t i = 0; i < out_dims.size(); ++i) {
    const int64_t d = out_dims[i];
    if (d == 1) continue;
    bool merge = !dims.empty();
    for (size_t k = 0; k < N && merge; ++k) merge = ms[k].back() == st[k][i] * d;
    if (merge) {
      dims.back() *= d;
      for (size_t k = 0; k < N; ++k) ms[k].back() = st[k][i];
    } else {
      dims.push_back(d);
      for (size_t k = 0; k < N; ++k) ms[k].push_back(st[k][i]);
    }
  }
  std::array<int64_t, N> off{};
  std::array<int64_t, N> inner{};
  if (dims.empty()) {
    f(int64_t{0}, off, int64_t{1}, inner);
    return;
  }
  const size_t outer_rank = dims.size() - 1;
  const int64_t count = dims.back();
  for (size_t k = 0; k < N; ++k) inner[k] = ms[k].back();
  std::vector<int64_t> idx(outer_rank, 0);
  for (int64_t o = 0; o < total; o += count) {
    f(o, off, count, inner);
    for (size_t ax = outer_rank; ax-- > 0;) {
      if (++idx[ax] < dims[ax]) {
        for (size_t k = 0; k < N; ++k) off[k] += ms[k][ax];
        break;
      }
      for (size_t k = 0; k < N; ++k) off[k] -= ms[k][ax] * (dims[ax] - 1);
      idx[ax] = 0;
    }
  }
}

// y = op(a, b) with broadcasting; a, b of type T, y of type R, y already sized to out_dims.
template <class T, class R, class Op>
void binary_loop(const Tensor& a, const Tensor& b, Tensor& y, Op& op) {
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  R* py = y.data<R>();
  const int64_t n = y.numel();
  if (a.numel() == n && b.numel() == n) {
    for (int64_t i = 0; i < n; ++i) py[i] = op(pa[i], pb[i]);
    return;
  }
  if (b.numel() == 1 && a.numel() == n) {
    const T bv = pb[0];
    for (int64_t i = 0; i < n; ++i) py[i] = op(pa[i], bv);
    return;
  }
  if (a.numel() == 1 && b.numel() == n) {
    const T av = pa[0];
    for (int64_t i = 0; i < n; ++i) py[i] = op(av, pb[i]);
    return;
  }
  for_each_row<2>(y.dims(), {&a.dims(), &b.dims()},
                  [&](int64_t o, const std::array<int64_t, 2>& off, int64_t cnt,
                      const std::array<int64_t, 2>& s) {
                    const T* ra = pa + off[0];
                    const T* rb = pb + off[1];
                    R* ry = py + o;
                    if (s[0] == 1 && s[1] == 1) {
                      for (int64_t i = 0; i < cnt; ++i) ry[i] = op(ra[i], rb[i]);
                    } else if (s[0] == 1 && s[1] == 0) {
                      const T bv = rb[0];
                      for (int64_t i = 0; i < cnt; ++i) ry[i] = op(ra[i], bv);
                    } else if (s[0] == 0 && s[1] == 1) {
                      const T av = ra[0];
                      for (int64_t i = 0; i < cnt; ++i) ry[i] = op(av, rb[i]);
                    } else {
                      for (int64_t i = 0; i < cnt; ++i) ry[i] = op(ra[i * s[0]], rb[i * s[1]]);
                    }
                  });
}

// Base of unary functors without attributes; functors with attributes read them in their
// constructor from the node.
struct UnaryBase {
  explicit UnaryBase(const AttrReader&) {}
};

// y = op(x) elementwise; x's dtype must be in S (f16/bf16 are computed through f32).
template <class Op, unsigned S>
void unary_kernel(KernelContext& ctx) {
  const DType orig = ctx.input(0).dtype();
  Tensor x = widen_half(ctx.input(0));
  const Op op(ctx);
  Tensor y(x.dtype(), x.dims());
  dispatch<S>(ctx, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data<T>();
    T* py = y.data<T>();
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) py[i] = op(px[i]);
  });
  if (is_half(orig)) y = convert_tensor(y, orig);
  ctx.set_output(0, std::move(y));
}

}  // namespace kiln::ew
