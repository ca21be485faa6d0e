// Tensor expressions and schedules: every schedule is lowered to TIR (through the tir passes)
// and run by the TIR evaluator (which also checks every access against the buffer bounds);
// results are compared with direct C++ loops. Also: trace round trips and tensorize contracts.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "core/error.h"
#include "te/te.h"
#include "tir/evaluator.h"
#include "tir/printer.h"

namespace kiln::te {
namespace {

using tir::float_imm;
using tir::int_imm;
using Vec = std::vector<float>;

Expr c(int64_t v) { return int_imm(v); }

Vec iota_data(size_t n, float scale = 0.37f) {
  Vec v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 7919) % 101) * scale - 11.0f;
  return v;
}

void run(const tir::PrimFunc& f, std::vector<Vec*> bufs, std::vector<int64_t> scalars = {}) {
  std::vector<void*> ptrs;
  for (Vec* b : bufs) ptrs.push_back(b->data());
  tir::evaluate(f, ptrs, scalars);
}

void expect_near(const Vec& got, const Vec& want, float tol = 1e-4f) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << "at " << i;
}

struct Add2D {
  Tensor A, B, C;
  Add2D(int64_t n, int64_t m) {
    A = placeholder("A", DType::kFloat32, {c(n), c(m)});
    B = placeholder("B", DType::kFloat32, {c(n), c(m)});
    C = compute("C", {c(n), c(m)}, [&](const std::vector<Expr>& i) {
      return access(A, {i[0], i[1]}) + access(B, {i[0], i[1]});
    });
  }
};

TEST(TeLower, ElementwiseAddSchedules) {
  const int64_t n = 24, m = 64;
  const std::vector<std::pair<std::string, std::function<void(Schedule&)>>> schedules = {
      {"none", [](Schedule&) {}},
      {"split+vectorize",
       [](Schedule& s) {
         s.split("C", "i1", 16);
         s.vectorize("C", "i1.inner");
       }},
      {"tile+reorder",
       [](Schedule& s) {
         s.tile("C", "i0", "i1", 8, 16);
         s.reorder("C", {"i1.outer", "i0.outer", "i1.inner", "i0.inner"});
         s.unroll("C", "i0.inner");
       }},
      {"fuse+parallel",
       [](Schedule& s) {
         s.fuse("C", "i0", "i1");
         s.parallel("C", "i0.i1.fused");
       }},
  };
  for (const auto& [label, apply] : schedules) {
    SCOPED_TRACE(label);
    Add2D t(n, m);
    Schedule s({t.C});
    apply(s);
    tir::PrimFunc f = lower(s, {t.A, t.B, t.C}, "add");
    Vec a = iota_data(n * m), b = iota_data(n * m, 0.11f), out(n * m, -1), want(n * m);
    for (int64_t i = 0; i < n * m; ++i) want[i] = a[i] + b[i];
    run(f, {&a, &b, &out});
    expect_near(out, want, 0);
  }
}

TEST(TeLower, ElementwiseLoopStructureIsPrinted) {
  Add2D t(4, 8);
  Schedule s({t.C});
  s.split("C", "i1", 4);
  s.parallel("C", "i0");
  std::string text = tir::print(lower(s, {t.A, t.B, t.C}, "add", LowerOptions{false}));
  EXPECT_NE(text.find("for C.i0 in [0, 4) parallel:"), std::string::npos) << text;
  EXPECT_NE(text.find("for C.i1.outer in [0, 2):"), std::string::npos) << text;
  EXPECT_NE(text.find("C[C.i0, C.i1.outer*4 + C.i1.inner] = A[C.i0, C.i1.outer*4 + C.i1.inner]"),
            std::string::npos)
      << text;
}

TEST(TeLower, InlineChainOfThree) {
  const int64_t n = 50;
  auto A = placeholder("A", DType::kFloat32, {c(n)});
  auto B = compute("B", {c(n)}, [&](auto& i) { return access(A, {i[0]}) * float_imm(2); });
  auto C = compute("C", {c(n)}, [&](auto& i) { return access(B, {i[0]}) + float_imm(1); });
  auto D = compute("D", {c(n)}, [&](auto& i) { return access(C, {i[0]}) * access(B, {i[0]}); });
  Vec a = iota_data(n), want(n);
  for (int64_t i = 0; i < n; ++i) want[i] = (a[i] * 2 + 1) * (a[i] * 2);
  for (bool inl : {false, true}) {
    Schedule s({D});
    if (inl) {
      s.compute_inline("C");
      s.compute_inline("B");
    }
    tir::PrimFunc f = lower(s, {A, D}, "chain");
    std::string text = tir::print(f);
    EXPECT_EQ(text.find("allocate") == std::string::npos, inl) << text;
    Vec out(n);
    run(f, {&a, &out});
    expect_near(out, want);
  }
}

TEST(TeLower, RowSumWithSplitReduceAxis) {
  const int64_t n = 16, m = 100;
  for (int64_t factor : {0, 8, 4}) {
    SCOPED_TRACE(factor);
    auto A = placeholder("A", DType::kFloat32, {c(n), c(m)});
    auto k = reduce_axis(c(m), "k");
    auto S = compute("S", {c(n)}, [&](auto& i) {
      return reduce(ReduceOp::kSum, access(A, {i[0], k->var}), {k});
    });
    Schedule s({S});
    if (factor) {
      s.split("S", "r0", factor);
      if (factor == 4) s.reorder("S", {"r0.outer", "i0", "r0.inner"});
    }
    tir::PrimFunc f = lower(s, {A, S}, "rowsum");
    Vec a = iota_data(n * m), out(n, 123), want(n, 0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) want[i] += a[i * m + j];
    run(f, {&a, &out});
    expect_near(out, want);
  }
}

TEST(TeLower, RowMaxOverSymbolicRows) {
  auto nv = tir::make_var("n");
  auto X = placeholder("X", DType::kFloat32, {nv, c(10)});
  auto k = reduce_axis(c(10), "k");
  auto S = compute("S", {nv}, [&](auto& i) { return reduce(ReduceOp::kMax, access(X, {i[0], k->var}), {k}); });
  Schedule s({S});
  s.split("S", "r0", 4);
  s.split("S", "i0", 8);
  tir::PrimFunc f = lower(s, {X, S}, "rowmax");
  ASSERT_EQ(f.scalar_params.size(), 1u);
  for (int64_t n : {1, 8, 13}) {
    Vec x = iota_data(n * 10), out(n), want(n, -INFINITY);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < 10; ++j) want[i] = std::max(want[i], x[i * 10 + j]);
    run(f, {&x, &out}, {n});
    expect_near(out, want, 0);
  }
}

struct Matmul {
  Tensor A, B, C;
  Matmul(int64_t m, int64_t n, int64_t k) {
    A = placeholder("A", DType::kFloat32, {c(m), c(k)});
    B = placeholder("B", DType::kFloat32, {c(k), c(n)});
    auto r = reduce_axis(c(k), "k");
    C = compute("C", {c(m), c(n)}, [&](auto& i) {
      return reduce(ReduceOp::kSum, access(A, {i[0], r->var}) * access(B, {r->var, i[1]}), {r});
    });
  }
};

Vec matmul_ref(const Vec& a, const Vec& b, int64_t m, int64_t n, int64_t k) {
  Vec c(m * n, 0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p) c[i * n + j] += a[i * k + p] * b[p * n + j];
  return c;
}

void schedule_matmul(Schedule& s) {
  std::string cl = s.cache_write("C");
  s.tile("C", "i0", "i1", 8, 16);
  s.compute_at(cl, "C", "i1.outer");
  s.split(cl, "r0", 4);
  s.reorder(cl, {"r0.outer", "r0.inner", "i0", "i1"});
  s.vectorize(cl, "i1");
  s.parallel("C", "i0.outer");
}

TEST(TeLower, MatmulTileReorderCacheWrite) {
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{64, 48, 32}, {30, 40, 9}}) {
    SCOPED_TRACE(m);
    Matmul t(m, n, k);
    Schedule s({t.C});
    schedule_matmul(s);
    tir::PrimFunc f = lower(s, {t.A, t.B, t.C}, "matmul");
    std::string text = tir::print(lower(s, {t.A, t.B, t.C}, "matmul", LowerOptions{false}));
    EXPECT_NE(text.find("allocate C.local: f32[8, 16] local"), std::string::npos) << text;
    Vec a = iota_data(m * k), b = iota_data(k * n, 0.05f), out(m * n);
    run(f, {&a, &b, &out});
    expect_near(out, matmul_ref(a, b, m, n, k));
  }
}

TEST(TeLower, ComputeAtInsideConsumerLoop) {
  // C[i] = B[i] + B[i + 1] with B = A * 2 computed per 16-wide tile of C (a 17-element window).
  for (int64_t n : {64, 100}) {
    SCOPED_TRACE(n);
    auto A = placeholder("A", DType::kFloat32, {c(n + 1)});
    auto B = compute("B", {c(n + 1)}, [&](auto& i) { return access(A, {i[0]}) * float_imm(2); });
    auto C = compute("C", {c(n)}, [&](auto& i) { return access(B, {i[0]}) + access(B, {i[0] + c(1)}); });
    Schedule s({C});
    s.split("C", "i0", 16);
    s.vectorize("C", "i0.inner");
    s.compute_at("B", "C", "i0.outer");
    tir::PrimFunc raw = lower(s, {A, C}, "stencil", LowerOptions{false});
    std::string text = tir::print(raw);
    EXPECT_NE(text.find("allocate B: f32[17] local"), std::string::npos) << text;
    Vec a = iota_data(n + 1), out(n), want(n);
    for (int64_t i = 0; i < n; ++i) want[i] = a[i] * 2 + a[i + 1] * 2;
    run(lower(s, {A, C}, "stencil"), {&a, &out});
    expect_near(out, want);
    Vec out2(n);
    run(raw, {&a, &out2});
    expect_near(out2, want);
  }
}

TEST(TeLower, ComputeAtRowOf2D) {
  const int64_t n = 12, m = 20;
  auto A = placeholder("A", DType::kFloat32, {c(n), c(m)});
  auto B = compute("B", {c(n), c(m)}, [&](auto& i) { return access(A, {i[0], i[1]}) + float_imm(1); });
  auto C = compute("C", {c(n), c(m)}, [&](auto& i) {
    return access(B, {i[0], i[1]}) * access(B, {i[0], c(m - 1) - i[1]});
  });
  Schedule s({C});
  s.compute_at("B", "C", "i0");
  Vec a = iota_data(n * m), out(n * m), want(n * m);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) want[i * m + j] = (a[i * m + j] + 1) * (a[i * m + m - 1 - j] + 1);
  run(lower(s, {A, C}, "rows"), {&a, &out});
  expect_near(out, want);
}

TEST(TeLower, Broadcasting) {
  const int64_t n = 7, m = 33;
  auto A = placeholder("A", DType::kFloat32, {c(n), c(m)});
  auto B = placeholder("B", DType::kFloat32, {c(m)});
  auto C = compute("C", {c(n), c(m)}, [&](auto& i) { return access(A, {i[0], i[1]}) + access(B, {i[1]}); });
  Schedule s({C});
  s.split("C", "i1", 8);
  s.vectorize("C", "i1.inner");
  Vec a = iota_data(n * m), b = iota_data(m, 1.5f), out(n * m), want(n * m);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) want[i * m + j] = a[i * m + j] + b[j];
  run(lower(s, {A, B, C}, "bcast"), {&a, &b, &out});
  expect_near(out, want, 0);
}

TEST(TeLower, SymbolicDimIsScalarParam) {
  auto nv = tir::make_var("n");
  auto A = placeholder("A", DType::kFloat32, {nv, c(8)});
  auto C = compute("C", {nv, c(8)}, [&](auto& i) { return access(A, {i[0], i[1]}) * float_imm(3); });
  Schedule s({C});
  s.split("C", "i0", 4);
  s.vectorize("C", "i1");
  tir::PrimFunc f = lower(s, {A, C}, "scale");
  ASSERT_EQ(f.scalar_params.size(), 1u);
  EXPECT_EQ(f.scalar_params[0], nv);
  for (int64_t n : {1, 4, 13}) {
    Vec a = iota_data(n * 8), out(n * 8), want(n * 8);
    for (int64_t i = 0; i < n * 8; ++i) want[i] = a[i] * 3;
    run(f, {&a, &out}, {n});
    expect_near(out, want, 0);
  }
}

// A fused loop over a dim variable times 768, split by 16: the split divides (768 does), so the
// outer extent is n*48 and there is no guard; the fused index recombines into a ramp.
TEST(TeLower, SymbolicSplitThatDivides) {
  auto nv = tir::make_var("n");
  auto A = placeholder("A", DType::kFloat32, {nv, c(768)});
  auto C = compute("C", {nv, c(768)}, [&](auto& i) { return access(A, {i[0], i[1]}) + float_imm(1); });
  Schedule s({C});
  s.fuse("C", "i0", "i1");
  s.split("C", "i0.i1.fused", 16);
  s.vectorize("C", "i0.i1.fused.inner");
  tir::PrimFunc f = lower(s, {A, C}, "add1");
  const std::string text = tir::print(f);
  EXPECT_NE(text.find("in [0, n*48)"), std::string::npos) << text;
  EXPECT_EQ(text.find("if "), std::string::npos) << text;
  EXPECT_NE(text.find("C[ramp(C.i0.i1.fused.outer*16, 1, 16)]"), std::string::npos) << text;
  for (int64_t n : {1, 3}) {
    Vec a = iota_data(n * 768), out(n * 768), want(n * 768);
    for (int64_t i = 0; i < n * 768; ++i) want[i] = a[i] + 1;
    run(f, {&a, &out}, {n});
    expect_near(out, want, 0);
  }
}

TEST(TeLower, NonDividingSplit) {
  auto A = placeholder("A", DType::kFloat32, {c(100)});
  auto C = compute("C", {c(100)}, [&](auto& i) { return access(A, {i[0]}) - float_imm(5); });
  for (bool vec : {false, true}) {
    Schedule s({C});
    s.split("C", "i0", 16);
    if (vec) s.vectorize("C", "i0.inner");
    std::string raw = tir::print(lower(s, {A, C}, "sub", LowerOptions{false}));
    EXPECT_NE(raw.find("if C.i0.outer*16 + C.i0.inner < 100:"), std::string::npos) << raw;
    Vec a = iota_data(100), out(100, 0), want(100);
    for (int i = 0; i < 100; ++i) want[i] = a[i] - 5;
    run(lower(s, {A, C}, "sub"), {&a, &out});
    expect_near(out, want, 0);
  }
}

TEST(TeLower, CacheReadIntoLocalTile) {
  const int64_t n = 32, m = 24;
  auto A = placeholder("A", DType::kFloat32, {c(n), c(m)});
  auto C = compute("C", {c(n), c(m)}, [&](auto& i) { return access(A, {i[0], i[1]}) * float_imm(0.5); });
  Schedule s({C});
  std::string al = s.cache_read("A", "C");
  EXPECT_EQ(al, "A.local");
  s.split("C", "i0", 4);
  s.compute_at(al, "C", "i0.outer");
  std::string raw = tir::print(lower(s, {A, C}, "f", LowerOptions{false}));
  EXPECT_NE(raw.find("allocate A.local: f32[4, 24] local"), std::string::npos) << raw;
  Vec a = iota_data(n * m), out(n * m), want(n * m);
  for (int64_t i = 0; i < n * m; ++i) want[i] = a[i] * 0.5f;
  run(lower(s, {A, C}, "f"), {&a, &out});
  expect_near(out, want, 0);
}

TEST(TeLower, ComputeAtNeedsSingleConsumer) {
  auto A = placeholder("A", DType::kFloat32, {c(8)});
  auto B = compute("B", {c(8)}, [&](auto& i) { return access(A, {i[0]}) + float_imm(1); });
  auto C = compute("C", {c(8)}, [&](auto& i) { return access(B, {i[0]}) * float_imm(2); });
  auto D = compute("D", {c(8)}, [&](auto& i) { return access(B, {i[0]}) + access(C, {i[0]}); });
  Schedule s({D});
  s.compute_at("B", "C", "i0");
  EXPECT_THROW(lower(s, {A, D}, "f"), Error);
}

TEST(TeTrace, RoundTripReplayGivesSameTir) {
  Matmul t(64, 48, 32);
  Schedule s({t.C});
  schedule_matmul(s);
  const std::string text = to_string(s.trace());
  EXPECT_EQ(text.substr(0, text.find('\n')), "cache_write C");
  std::vector<TraceStep> parsed = parse_trace(text);
  ASSERT_EQ(parsed.size(), s.trace().size());
  EXPECT_EQ(to_string(parsed), text);
  Schedule fresh({t.C});
  fresh.replay(parsed);
  EXPECT_EQ(tir::print(lower(fresh, {t.A, t.B, t.C}, "mm")), tir::print(lower(s, {t.A, t.B, t.C}, "mm")));
  EXPECT_EQ(to_string(fresh.trace()), text);
}

TEST(TeTrace, QuotesArgumentsWithSpaces) {
  std::vector<TraceStep> steps{{"split", {"my stage", "i0", "4"}}, {"x", {"a\"b\\c", ""}}};
  EXPECT_EQ(parse_trace(to_string(steps)).size(), 2u);
  auto back = parse_trace(to_string(steps));
  EXPECT_EQ(back[0].args[0], "my stage");
  EXPECT_EQ(back[1].args[0], "a\"b\\c");
  EXPECT_EQ(back[1].args[1], "");
}

TEST(TeTensorize, ChecksContractAndEmitsCall) {
  register_tensor_intrinsic("test_gemm_8x16x32", TensorIntrinsic{{8, 16, 32}});
  Matmul t(64, 48, 32);
  {
    Schedule s({t.C});
    s.tile("C", "i0", "i1", 8, 16);
    s.tensorize("C", "i0.inner", "test_gemm_8x16x32");
    std::string text = tir::print(lower(s, {t.A, t.B, t.C}, "mm", LowerOptions{false}));
    EXPECT_NE(text.find("test_gemm_8x16x32(tir.address_of(C[C.i0.outer*8, C.i1.outer*16]), "
                        "tir.address_of(A[C.i0.outer*8, 0]), tir.address_of(B[0, C.i1.outer*16]), "
                        "8, 16, 32, 48, 32, 48)"),
              std::string::npos)
        << text;
    EXPECT_EQ(text.find("C.r0"), std::string::npos) << text;
  }
  {
    Schedule s({t.C});
    s.tile("C", "i0", "i1", 8, 8);
    s.tensorize("C", "i0.inner", "test_gemm_8x16x32");
    try {
      lower(s, {t.A, t.B, t.C}, "mm");
      FAIL() << "expected a contract error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("expects loop extents [8, 16, 32]"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("[8, 8, 32]"), std::string::npos) << e.what();
    }
  }
}

TEST(TeSchedule, RejectsBadPrimitives) {
  Matmul t(8, 8, 8);
  Schedule s({t.C});
  EXPECT_THROW(s.split("C", "nope", 4), Error);
  EXPECT_THROW(s.split("X", "i0", 4), Error);
  EXPECT_THROW(s.compute_inline("C"), Error);
  EXPECT_THROW(s.parallel("C", "r0"), Error);
  EXPECT_THROW(s.fuse("C", "i1", "r0"), Error);
  EXPECT_THROW(s.tensorize("C", "i0", "no_such_intrinsic"), Error);
  EXPECT_THROW(s.replay(parse_trace("bogus C i0\n")), Error);
  EXPECT_TRUE(s.trace().empty());
}

}  // namespace
}  // namespace kiln::te
