// TIR: constructors and their type checks, the printer, the simplifier and bound analysis, and
// every tir pass checked by running the function before and after it through the evaluator on
// random data (results must be identical, including tails of non-dividing splits).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/error.h"
#include "tir/evaluator.h"
#include "tir/passes.h"
#include "tir/printer.h"
#include "tir/rewrite.h"
#include "tir/simplify.h"

namespace kiln::tir {
namespace {

Expr c(int64_t v) { return int_imm(v); }
Expr f(double v) { return float_imm(v); }

int count_stmts(const Stmt& s, StmtKind k) {
  int n = 0;
  visit_stmts(s, [&](const Stmt& x) { n += x->kind == k; });
  return n;
}
int count_loops(const Stmt& s, ForKind k) {
  int n = 0;
  visit_stmts(s, [&](const Stmt& x) { n += x->kind == StmtKind::kFor && x->for_kind == k; });
  return n;
}
bool has_vector_store(const Stmt& s) {
  bool v = false;
  visit_stmts(s, [&](const Stmt& x) {
    v = v || (x->kind == StmtKind::kStore && x->value->type.lanes > 1);
  });
  return v;
}

// Random contents for every buffer param, evaluation, and the bytes of every buffer after it.
struct Run {
  std::vector<std::vector<char>> data;
};
int64_t numel_of(const Buffer& b, const std::vector<int64_t>& scalars, const PrimFunc& fn) {
  int64_t n = 1;
  for (const Expr& d : b->shape) {
    VarMap vm;
    for (size_t i = 0; i < fn.scalar_params.size(); ++i) vm[fn.scalar_params[i].get()] = c(scalars[i]);
    int64_t v = 0;
    EXPECT_TRUE(is_const_int(simplify(substitute(d, vm)), &v));
    n *= v;
  }
  return n;
}
Run run(const PrimFunc& fn, const std::vector<int64_t>& scalars = {}, uint32_t seed = 7) {
  std::mt19937 rng(seed);
  Run r;
  std::vector<void*> ptrs;
  for (const Buffer& b : fn.buffer_params) {
    int64_t n = numel_of(b, scalars, fn);
    std::vector<char> bytes(n * dtype_size(b->dtype));
    for (int64_t i = 0; i < n; ++i) {
      char* p = bytes.data() + i * dtype_size(b->dtype);
      switch (b->dtype) {
        case DType::kFloat32: {
          float v = std::uniform_real_distribution<float>(-2, 2)(rng);
          std::memcpy(p, &v, 4);
          break;
        }
        case DType::kFloat64: {
          double v = std::uniform_real_distribution<double>(-2, 2)(rng);
          std::memcpy(p, &v, 8);
          break;
        }
        case DType::kBool: *p = rng() & 1; break;
        default:
          for (size_t k = 0; k < dtype_size(b->dtype); ++k) p[k] = static_cast<char>(rng());
      }
    }
    r.data.push_back(std::move(bytes));
  }
  for (auto& d : r.data) ptrs.push_back(d.data());
  evaluate(fn, ptrs, scalars);
  return r;
}
void expect_same(const PrimFunc& a, const PrimFunc& b, const std::vector<int64_t>& scalars = {}) {
  Run ra = run(a, scalars), rb = run(b, scalars);
  ASSERT_EQ(ra.data.size(), rb.data.size());
  for (size_t i = 0; i < ra.data.size(); ++i)
    EXPECT_TRUE(ra.data[i] == rb.data[i]) << "buffer " << a.buffer_params[i]->name << " differs\n"
                                          << print(a) << print(b);
}

// C[i, j] = A[i, j] * B[i, j] + 1 over [rows, 64), j split by 16 with the inner loop `inner`.
PrimFunc mul_add_2d(int64_t rows, ForKind inner) {
  Buffer A = make_buffer("A", DType::kFloat32, {c(rows), c(64)});
  Buffer B = make_buffer("B", DType::kFloat32, {c(rows), c(64)});
  Buffer C = make_buffer("C", DType::kFloat32, {c(rows), c(64)});
  Expr i = make_var("i"), jo = make_var("jo"), ji = make_var("ji");
  Expr j = jo * 16 + ji;
  Stmt body = store(C, {i, j}, load(A, {i, j}) * load(B, {i, j}) + f(1));
  Stmt nest = for_loop(i, c(0), c(rows), ForKind::kParallel,
                       for_loop(jo, c(0), c(4), ForKind::kSerial, for_loop(ji, c(0), c(16), inner, body)));
  return PrimFunc{"mul_add", {A, B, C}, {}, nest};
}

// out[i] = a[i] + b[i] for i < n, with i split by `factor` and a tail guard.
PrimFunc guarded_add(int64_t n, int64_t factor, ForKind inner) {
  Buffer A = make_buffer("A", DType::kFloat32, {c(n)});
  Buffer B = make_buffer("B", DType::kFloat32, {c(n)});
  Buffer C = make_buffer("C", DType::kFloat32, {c(n)});
  Expr io = make_var("io"), ii = make_var("ii");
  Expr i = io * factor + ii;
  Stmt body = if_then_else(binary(ExprKind::kLT, i, c(n)), store(C, {i}, load(A, {i}) + load(B, {i})));
  int64_t outer = (n + factor - 1) / factor;
  Stmt nest = for_loop(io, c(0), c(outer), ForKind::kParallel, for_loop(ii, c(0), c(factor), inner, body));
  return PrimFunc{"guarded_add", {A, B, C}, {}, nest};
}

// ---- constructors ----------------------------------------------------------------------------

TEST(TirIr, ConstructorsCheckTypes) {
  Expr x = make_var("x", f32()), n = make_var("n");
  EXPECT_THROW(x + n, Error);                               // f32 + i64
  EXPECT_THROW(floordiv(x, x), Error);                      // floordiv on floats
  EXPECT_THROW(if_then_else(n, evaluate(n)), Error);        // non-bool condition
  EXPECT_THROW(binary(ExprKind::kAnd, n, n), Error);        // logic on ints
  Expr v = broadcast(x, 8);
  EXPECT_EQ((x + v)->type, f32().with_lanes(8));            // scalar side broadcast
  EXPECT_EQ(binary(ExprKind::kLT, v, x)->type, boolean().with_lanes(8));
  EXPECT_THROW(broadcast(x, 4) + v, Error);                 // lane mismatch
  Buffer A = make_buffer("A", DType::kFloat32, {c(64)});
  Expr l = load(A, {n}, 16);
  EXPECT_EQ(l->type, f32().with_lanes(16));
  EXPECT_EQ(l->operands[0]->kind, ExprKind::kRamp);
  EXPECT_THROW(store(A, {n}, n), Error);                    // i64 value into f32 buffer
  EXPECT_EQ(to_string(f32().with_lanes(16)), "f32x16");
  EXPECT_EQ(for_kind_name(ForKind::kVectorized), "vectorized");
  int64_t k = 0;
  EXPECT_TRUE(is_const_int(c(5), &k));
  EXPECT_EQ(k, 5);
  EXPECT_FALSE(is_const_int(n));
  Stmt s = seq({evaluate(n), seq({evaluate(n), nullptr}), nullptr});
  EXPECT_EQ(s->seq.size(), 2u);
  EXPECT_EQ(seq({evaluate(n)})->kind, StmtKind::kEvaluate);
}

// ---- printer ---------------------------------------------------------------------------------

TEST(TirPrinter, SmallNest) {
  Buffer A = make_buffer("A", DType::kFloat32, {c(4096)});
  Buffer B = make_buffer("B", DType::kFloat32, {c(4096)});
  Buffer C = make_buffer("C", DType::kFloat32, {c(4096)});
  Expr i0 = make_var("i0"), i1 = make_var("i1");
  Expr idx = i0 * 64 + i1;
  Stmt body = store(C, {idx}, load(A, {idx}) + load(B, {idx}));
  PrimFunc fn{"add", {A, B, C}, {},
              for_loop(i0, c(0), c(64), ForKind::kParallel, for_loop(i1, c(0), c(64), ForKind::kSerial, body))};
  EXPECT_EQ(print(fn),
            "func add(A: f32[4096], B: f32[4096], C: f32[4096]) {\n"
            "  for i0 in [0, 64) parallel:\n"
            "    for i1 in [0, 64):\n"
            "      C[i0*64 + i1] = A[i0*64 + i1] + B[i0*64 + i1]\n"
            "}\n");
  EXPECT_EQ(print((i0 + i1) * c(2)), "(i0 + i1)*2");
  EXPECT_EQ(print(i0 - (i1 - c(1))), "i0 - (i1 - 1)");
  EXPECT_EQ(print(floormod(i0, c(8)) + floordiv(i1, c(8))), "i0 % 8 + i1 // 8");
  EXPECT_EQ(print(load(A, {i0}, 8)), "A[ramp(i0, 1, 8)]");
  EXPECT_EQ(print(cast(i32(), i0)), "i32(i0)");
  EXPECT_EQ(print(f(0.5)), "0.5");
}

// ---- simplifier ------------------------------------------------------------------------------

TEST(TirSimplify, Identities) {
  Expr x = make_var("x"), y = make_var("y"), fx = make_var("fx", f32());
  EXPECT_EQ(simplify(x + c(0)), x);
  EXPECT_EQ(simplify(c(0) + x), x);
  EXPECT_EQ(simplify(x * c(1)), x);
  EXPECT_EQ(print(simplify(x * c(0))), "0");
  EXPECT_EQ(print(simplify(x - x)), "0");
  EXPECT_EQ(print(simplify(fx - fx)), "fx - fx");  // not for floats (inf - inf is nan)
  EXPECT_EQ(print(simplify(fx * f(1))), "fx");
  EXPECT_EQ(print(simplify(x + c(1) + c(2))), "x + 3");
  EXPECT_EQ(print(simplify(c(1) + x + c(2) + y)), "x + y + 3");
  EXPECT_EQ(print(simplify(c(3) * x)), "x*3");
  EXPECT_EQ(print(simplify(x * c(4) * c(8))), "x*32");
  EXPECT_EQ(print(simplify(x - c(1))), "x - 1");
  EXPECT_EQ(print(simplify(x + y - y)), "x");
  EXPECT_EQ(print(simplify(min(c(3), c(5)) + max(c(3), c(5)))), "8");
  EXPECT_EQ(simplify(floordiv(x, c(1))), x);
  EXPECT_EQ(print(simplify(floormod(x, c(1)))), "0");
  EXPECT_EQ(print(simplify(floordiv(c(-7), c(2)))), "-4");
  EXPECT_EQ(print(simplify(floormod(c(-7), c(2)))), "1");
  EXPECT_EQ(print(simplify(c(-7) / c(2))), "-3");
  EXPECT_EQ(print(simplify(floordiv(x * c(8), c(8)))), "x");
  EXPECT_EQ(print(simplify(floordiv(x * c(64) + c(128), c(64)))), "x + 2");
  EXPECT_EQ(print(simplify(floormod(x * c(64) + y, c(64)))), "y % 64");
  // A multiple of g plus less than g, divided by a multiple of g (16-wide rows of a 64-group).
  EXPECT_EQ(print(simplify(floordiv(x * c(16) + c(15), c(64)))), "x // 4");
  EXPECT_EQ(print(simplify(floormod(x * c(16) + c(15), c(64)))), "x % 4*16 + 15");
  EXPECT_EQ(print(simplify(floordiv(x * c(16) + c(16), c(64)))), "(x*16 + 16) // 64");
  EXPECT_EQ(print(simplify(floordiv(ramp(x * c(16), c(1), 16), broadcast(c(64), 16)))), "broadcast(x // 4, 16)");
  // Lane-invariant loads and math calls become broadcasts of their scalar form.
  Buffer V = make_buffer("V", DType::kFloat32, {c(8)});
  EXPECT_EQ(print(simplify(call("sqrt", DataType{DType::kFloat32, 4}, {load(V, {broadcast(x, 4)}) + broadcast(f(1), 4)}))),
            "broadcast(sqrt(V[x] + 1.0), 4)");
  EXPECT_EQ(print(simplify(binary(ExprKind::kLT, c(3), x))), "x > 3");
  // A fused index split back into coordinates recombines: (x // 12544*112 + x // 112 % 112)*112
  // + x % 112 is x; mismatched divisors or coefficients stay.
  EXPECT_EQ(simplify((floordiv(x, c(12544)) * c(112) + floormod(floordiv(x, c(112)), c(112))) * c(112) +
                     floormod(x, c(112))),
            x);
  EXPECT_EQ(print(simplify(floordiv(x, c(8)) * c(16) + floormod(x, c(8)) * c(2) + y)), "x*2 + y");
  EXPECT_EQ(print(simplify(floordiv(x, c(8)) * c(7) + floormod(x, c(8)))), "x // 8*7 + x % 8");
  EXPECT_EQ(print(simplify(floordiv(y, c(8)) * c(8) + floormod(x, c(8)))), "y // 8*8 + x % 8");
  // Constant folding per type: i32 wraps, f32 rounds, casts convert.
  Expr big = int_imm(2147483647, i32());
  EXPECT_EQ(simplify(big + int_imm(1, i32()))->int_value, -2147483648LL);
  EXPECT_EQ(simplify(int_imm(200, {DType::kUInt8, 1}) + int_imm(100, {DType::kUInt8, 1}))->int_value, 44);
  EXPECT_EQ(simplify(f(0.1) + f(0.2))->float_value, static_cast<double>(0.1f + 0.2f));
  EXPECT_EQ(simplify(float_imm(0.1, {DType::kFloat64, 1}) * float_imm(3, {DType::kFloat64, 1}))->float_value,
            0.1 * 3);
  EXPECT_EQ(simplify(cast(i32(), f(-2.7)))->int_value, -2);
  EXPECT_EQ(simplify(cast(f32(), c(3)))->float_value, 3.0);
  EXPECT_EQ(simplify(cast({DType::kInt8, 1}, c(300)))->int_value, 44);
  EXPECT_EQ(print(simplify(binary(ExprKind::kLT, f(1), f(2)))), "true");
  EXPECT_EQ(simplify(select(binary(ExprKind::kLT, c(1), c(2)), x, y)), x);
  EXPECT_EQ(simplify(select(binary(ExprKind::kLT, x, y), y, y)), y);
  EXPECT_EQ(print(simplify(logical_not(binary(ExprKind::kLT, x, y)))), "x >= y");
  // Vector index forms.
  Expr r = simplify(broadcast(x * c(64), 16) + ramp(c(0), c(1), 16));
  EXPECT_EQ(print(r), "ramp(x*64, 1, 16)");
  EXPECT_EQ(print(simplify(ramp(x, c(1), 8) * c(3))), "ramp(x*3, 3, 8)");
  EXPECT_EQ(print(simplify(broadcast(c(2), 4) + broadcast(c(3), 4))), "broadcast(5, 4)");
}

TEST(TirSimplify, BoundProofs) {
  Expr i = make_var("i"), io = make_var("io"), ii = make_var("ii");
  VarBounds vb{{i.get(), IntBound::range(0, 63)}, {io.get(), IntBound::range(0, 5)},
               {ii.get(), IntBound::range(0, 15)}};
  EXPECT_EQ(bound_of(io * 16 + ii, vb), IntBound::range(0, 95));
  EXPECT_EQ(bound_of(floormod(i, c(8)), vb), IntBound::range(0, 7));
  EXPECT_EQ(bound_of(floordiv(i, c(8)), vb), IntBound::range(0, 7));
  EXPECT_EQ(prove(binary(ExprKind::kLT, i, c(64)), vb), std::optional<bool>(true));
  EXPECT_EQ(prove(binary(ExprKind::kGE, i, c(64)), vb), std::optional<bool>(false));
  EXPECT_EQ(prove(binary(ExprKind::kLT, i, c(32)), vb), std::nullopt);
  EXPECT_EQ(prove(binary(ExprKind::kLT, io * 16 + ii, c(100)), vb), std::optional<bool>(true));
  EXPECT_EQ(prove(binary(ExprKind::kLT, i + c(1), i + c(5))), std::optional<bool>(true));
  EXPECT_EQ(simplify(floormod(i, c(64)), vb), i);
  EXPECT_EQ(print(simplify(floordiv(i, c(64)), vb)), "0");
  EXPECT_EQ(simplify(floormod(io * 16 + ii, c(16)), vb), ii);
  EXPECT_EQ(simplify(floordiv(io * 16 + ii, c(16)), vb), io);
  EXPECT_EQ(simplify(min(i, c(64)), vb), i);
  EXPECT_EQ(print(simplify(max(i, c(64)), vb)), "64");
}

TEST(TirSimplify, Statements) {
  Buffer A = make_buffer("A", DType::kFloat32, {c(64)});
  Expr i = make_var("i"), j = make_var("j");
  // Extent-1 loops vanish (var -> min), provable ifs fold, empty loops and seqs go away.
  Stmt s = for_loop(i, c(0), c(64), ForKind::kSerial,
                    for_loop(j, c(3), c(1), ForKind::kSerial,
                             seq({if_then_else(binary(ExprKind::kLT, i, c(64)),
                                               store(A, {i + j - c(3)}, f(1)),
                                               store(A, {i}, f(2))),
                                  for_loop(make_var("k"), c(0), c(0), ForKind::kSerial, store(A, {i}, f(3)))})));
  EXPECT_EQ(print(simplify(s)), "for i in [0, 64):\n  A[i] = 1.0\n");
  Stmt dead = if_then_else(binary(ExprKind::kGE, i, c(0)), seq({}));
  EXPECT_EQ(simplify(dead)->kind, StmtKind::kSeq);
  EXPECT_TRUE(simplify(dead)->seq.empty());
}

// Random integer expressions over two loop vars: simplify (which uses the loop bounds) must not
// change any value.
Expr random_expr(std::mt19937& rng, const Expr& x, const Expr& y, int depth) {
  int pick = static_cast<int>(rng() % (depth > 0 ? 11 : 3));
  auto sub = [&] { return random_expr(rng, x, y, depth - 1); };
  auto small = [&](int64_t lo, int64_t hi) { return c(lo + static_cast<int64_t>(rng() % (hi - lo + 1))); };
  switch (pick) {
    case 0: return x;
    case 1: return y;
    case 2: return small(-20, 20);
    case 3: return sub() + sub();
    case 4: return sub() - sub();
    case 5: return sub() * small(-4, 9);
    case 6: return floordiv(sub(), small(1, 70));
    case 7: return floormod(sub(), small(1, 70));
    case 8: return min(sub(), sub());
    case 9: return max(sub(), sub());
    default: {
      ExprKind k = static_cast<ExprKind>(static_cast<int>(ExprKind::kEQ) + static_cast<int>(rng() % 6));
      return select(binary(k, sub(), sub()), sub(), sub());
    }
  }
}

TEST(TirSimplify, RandomExpressionsKeepTheirValues) {
  std::mt19937 rng(1234);
  Buffer out = make_buffer("out", DType::kInt64, {c(13 * 17)});
  Expr x = make_var("x"), y = make_var("y");
  int changed = 0;
  for (int trial = 0; trial < 300; ++trial) {
    Expr e = random_expr(rng, x, y, 4);
    Stmt body = store(out, {x * 17 + y + c(5)}, e);
    PrimFunc fn{"r", {out}, {},
                for_loop(x, c(0), c(13), ForKind::kSerial, for_loop(y, c(-5), c(17), ForKind::kSerial, body))};
    PrimFunc simp = simplify(fn);
    changed += print(simp) != print(fn);
    expect_same(fn, simp);
    if (HasFailure()) {
      ADD_FAILURE() << print(e);
      return;
    }
  }
  EXPECT_GT(changed, 150);
}

// ---- evaluator -------------------------------------------------------------------------------

TEST(TirEvaluator, DtypesAndLanes) {
  Buffer X = make_buffer("X", DType::kUInt8, {c(8)});
  Buffer Y = make_buffer("Y", DType::kInt32, {c(8)});
  Buffer Z = make_buffer("Z", DType::kFloat64, {c(8)});
  Buffer M = make_buffer("M", DType::kBool, {c(8)});
  Buffer W = make_buffer("W", DType::kInt8, {c(8)});
  Expr i = make_var("i");
  Expr xi = cast(i32(), load(X, {i}));
  Stmt body = seq({store(Y, {i}, xi * int_imm(3, i32()) - int_imm(100, i32())),
                   store(Z, {i}, cast({DType::kFloat64, 1}, load(Y, {i})) / float_imm(4, {DType::kFloat64, 1})),
                   store(M, {i}, binary(ExprKind::kGT, load(Y, {i}), int_imm(0, i32()))),
                   store(W, {i}, cast({DType::kInt8, 1}, load(Y, {i})))});
  PrimFunc fn{"k", {X, Y, Z, M, W}, {}, for_loop(i, c(0), c(8), ForKind::kSerial, body)};
  uint8_t x[8] = {0, 1, 2, 50, 100, 200, 255, 33};
  int32_t y[8];
  double z[8];
  uint8_t m[8];
  int8_t w[8];
  evaluate(fn, {x, y, z, m, w}, {});
  for (int k = 0; k < 8; ++k) {
    int32_t e = x[k] * 3 - 100;
    EXPECT_EQ(y[k], e);
    EXPECT_EQ(z[k], e / 4.0);
    EXPECT_EQ(m[k], e > 0);
    EXPECT_EQ(w[k], static_cast<int8_t>(e));
  }
  // Vector lanes elementwise, and out-of-bounds accesses are caught.
  Buffer F = make_buffer("F", DType::kFloat32, {c(8)});
  PrimFunc vec{"v", {F}, {}, store(F, {ramp(c(0), c(1), 8)}, cast(f32().with_lanes(8), ramp(c(0), c(2), 8)))};
  float fv[8];
  evaluate(vec, {fv}, {});
  EXPECT_EQ(fv[7], 14.0f);
  PrimFunc oob{"o", {F}, {}, store(F, {c(8)}, f(0))};
  EXPECT_THROW(evaluate(oob, {fv}, {}), Error);
}

TEST(TirEvaluator, SymbolicShape) {
  Expr n = make_var("n");
  Buffer A = make_buffer("A", DType::kFloat32, {n, c(3)});
  Buffer S = make_buffer("S", DType::kFloat32, {n});
  Expr i = make_var("i"), k = make_var("k");
  Stmt body = seq({store(S, {i}, f(0)),
                   for_loop(k, c(0), c(3), ForKind::kSerial,
                            store(S, {i}, load(S, {i}) + call("exp", f32(), {load(A, {i, k})})))});
  PrimFunc fn{"rowsum", {A, S}, {n}, for_loop(i, c(0), n, ForKind::kSerial, body)};
  std::vector<float> a = {0, 0, 0, 1, 2, 3}, s(2);
  evaluate(fn, {a.data(), s.data()}, {2});
  EXPECT_EQ(s[0], 3.0f);
  EXPECT_FLOAT_EQ(s[1], std::exp(1.0f) + std::exp(2.0f) + std::exp(3.0f));
  expect_same(fn, flatten_storage(fn), {5});
}

// ---- passes ----------------------------------------------------------------------------------

TEST(TirFlatten, RowMajorIndices) {
  PrimFunc fn = mul_add_2d(5, ForKind::kSerial);
  PrimFunc flat = flatten_storage(fn);
  EXPECT_EQ(flat.buffer_params[0]->shape.size(), 1u);
  EXPECT_EQ(print(flat.buffer_params[0]->shape[0]), "320");
  EXPECT_NE(print(flat).find("C[i*64 + jo*16 + ji] = A[i*64 + jo*16 + ji]*B[i*64 + jo*16 + ji] + 1.0"),
            std::string::npos)
      << print(flat);
  expect_same(fn, flat);
}

TEST(TirVectorize, DenseLoadsAndStores) {
  PrimFunc fn = flatten_storage(mul_add_2d(5, ForKind::kVectorized));
  PrimFunc vec = vectorize_loops(fn);
  std::string text = print(vec);
  EXPECT_EQ(count_loops(vec.body, ForKind::kVectorized), 0);
  EXPECT_NE(text.find("C[ramp(i*64 + jo*16, 1, 16)] = A[ramp(i*64 + jo*16, 1, 16)]*B[ramp(i*64 + jo*16, 1, 16)] + broadcast(1.0, 16)"),
            std::string::npos)
      << text;
  expect_same(fn, vec);
}

TEST(TirVectorize, StridedGatherAndInvariantLoads) {
  Buffer A = make_buffer("A", DType::kFloat32, {c(96)});
  Buffer S = make_buffer("S", DType::kFloat32, {c(1)});
  Buffer C = make_buffer("C", DType::kFloat32, {c(32)});
  Expr j = make_var("j");
  Stmt body = store(C, {j}, load(A, {j * 3}) * load(S, {c(0)}) + call("exp", f32(), {load(A, {floordiv(j, c(2))})}));
  PrimFunc fn{"g", {A, S, C}, {}, for_loop(j, c(0), c(32), ForKind::kVectorized, body)};
  PrimFunc vec = vectorize_loops(fn);
  std::string text = print(vec);
  EXPECT_NE(text.find("A[ramp(0, 3, 32)]"), std::string::npos) << text;
  EXPECT_TRUE(has_vector_store(vec.body)) << text;
  expect_same(fn, vec);
}

TEST(TirVectorize, MatmulWithInnerReductionLoopAndLet) {
  // C[i, j] = sum_k A[i, k] * B[k, j], j vectorized by 8 over an inner serial k loop.
  Buffer A = make_buffer("A", DType::kFloat32, {c(4), c(5)});
  Buffer B = make_buffer("B", DType::kFloat32, {c(5), c(24)});
  Buffer C = make_buffer("C", DType::kFloat32, {c(4), c(24)});
  Expr i = make_var("i"), jo = make_var("jo"), ji = make_var("ji"), k = make_var("k"), j = make_var("j");
  Stmt body = let_stmt(j, jo * 8 + ji,
                       seq({store(C, {i, j}, f(0)),
                            for_loop(k, c(0), c(5), ForKind::kUnrolled,
                                     store(C, {i, j}, load(C, {i, j}) + load(A, {i, k}) * load(B, {k, j})))}));
  PrimFunc fn{"mm", {A, B, C}, {},
              for_loop(i, c(0), c(4), ForKind::kParallel,
                       for_loop(jo, c(0), c(3), ForKind::kSerial, for_loop(ji, c(0), c(8), ForKind::kVectorized, body)))};
  PrimFunc flat = flatten_storage(fn);
  PrimFunc out = simplify(unroll_loops(vectorize_loops(flat)));
  std::string text = print(out);
  EXPECT_TRUE(has_vector_store(out.body)) << text;
  EXPECT_EQ(count_stmts(out.body, StmtKind::kFor), 2) << text;
  EXPECT_NE(text.find("broadcast(A[i*5 + 4], 8)*B[ramp(jo*8 + 96, 1, 8)]"), std::string::npos) << text;
  expect_same(fn, out);
}

TEST(TirVectorize, FallsBackToSerial) {
  Buffer A = make_buffer("A", DType::kFloat32, {c(33)});
  Buffer S = make_buffer("S", DType::kFloat32, {c(1)});
  Expr j = make_var("j");
  // A reduction into one place, and a shifted read of the written buffer (loop-carried).
  PrimFunc red{"r", {A, S}, {}, for_loop(j, c(0), c(32), ForKind::kVectorized,
                                         store(S, {c(0)}, load(S, {c(0)}) + load(A, {j})))};
  PrimFunc shift{"s", {A, S}, {}, for_loop(j, c(0), c(32), ForKind::kVectorized,
                                           store(A, {j + c(1)}, load(A, {j}) * f(2)))};
  for (const PrimFunc& fn : {red, shift}) {
    PrimFunc out = vectorize_loops(fn);
    EXPECT_EQ(count_loops(out.body, ForKind::kSerial), 1) << print(out);
    EXPECT_FALSE(has_vector_store(out.body));
    expect_same(fn, out);
  }
}

TEST(TirUnroll, RepeatsBodies) {
  PrimFunc fn = flatten_storage(mul_add_2d(3, ForKind::kUnrolled));
  PrimFunc un = unroll_loops(fn);
  EXPECT_EQ(count_loops(un.body, ForKind::kUnrolled), 0);
  EXPECT_EQ(count_stmts(un.body, StmtKind::kStore), 16);
  EXPECT_NE(print(un).find("C[i*64 + jo*16 + 15]"), std::string::npos) << print(un);
  expect_same(fn, un);
}

TEST(TirPartition, TailOfNonDividingSplit) {
  // Extent 100 split by 16: 6 full iterations, then a tail of 4.
  PrimFunc fn = guarded_add(100, 16, ForKind::kSerial);
  PrimFunc part = partition_loops(fn);
  std::string text = print(part);
  EXPECT_EQ(count_stmts(part.body, StmtKind::kIfThenElse), 0) << text;
  EXPECT_NE(text.find("for io in [0, 6) parallel:"), std::string::npos) << text;
  EXPECT_NE(text.find("for ii in [0, 4):"), std::string::npos) << text;
  expect_same(fn, part);
}

TEST(TirPartition, ThenVectorizeWithTail) {
  PrimFunc fn = guarded_add(100, 16, ForKind::kVectorized);
  // Without partitioning the guard depends on the lane: the loop stays serial.
  PrimFunc plain = vectorize_loops(fn);
  EXPECT_FALSE(has_vector_store(plain.body));
  expect_same(fn, plain);
  PrimFunc part = vectorize_loops(partition_loops(fn));
  std::string text = print(part);
  EXPECT_TRUE(has_vector_store(part.body)) << text;
  EXPECT_NE(text.find("C[ramp(io*16, 1, 16)]"), std::string::npos) << text;
  EXPECT_NE(text.find("C[ramp(96, 1, 4)]"), std::string::npos) << text;
  expect_same(fn, part);
}

// The same over a symbolic n (a dim variable): the outer extent is ceil(n / 16) and the
// partition point n // 16 comes from the guard's structure, not from bounds.
PrimFunc guarded_add_symbolic(const Expr& n, ForKind inner) {
  Buffer A = make_buffer("A", DType::kFloat32, {n});
  Buffer B = make_buffer("B", DType::kFloat32, {n});
  Buffer C = make_buffer("C", DType::kFloat32, {n});
  Expr io = make_var("io"), ii = make_var("ii");
  Expr i = io * 16 + ii;
  Stmt body = if_then_else(binary(ExprKind::kLT, i, n), store(C, {i}, load(A, {i}) + load(B, {i})));
  Stmt nest = for_loop(io, c(0), floordiv(n + c(15), c(16)), ForKind::kParallel, for_loop(ii, c(0), c(16), inner, body));
  return PrimFunc{"guarded_add", {A, B, C}, {n}, nest};
}

TEST(TirPartition, SymbolicSplitGuard) {
  Expr n = make_var("n");
  PrimFunc fn = guarded_add_symbolic(n, ForKind::kVectorized);
  PrimFunc part = simplify(vectorize_loops(partition_loops(fn)));
  const std::string text = print(part);
  EXPECT_NE(text.find("for io in [0, n // 16) parallel:"), std::string::npos) << text;
  EXPECT_NE(text.find("C[ramp(io*16, 1, 16)]"), std::string::npos) << text;
  EXPECT_EQ(count_stmts(part.body, StmtKind::kIfThenElse), 1) << text;  // only in the tail
  for (int64_t v : {1, 15, 16, 37, 100}) expect_same(fn, part, {v});
}

// A fused loop over [a, b] of dim variables indexes its buffer as (f // b)*b + f % b; the
// simplifier folds it back to f (also nested under a constant inner dim), so that the vector
// loop sees a ramp.
TEST(TirSimplify, RecombinesSymbolicDivMod) {
  Expr f = make_var("f"), b = make_var("b");
  EXPECT_EQ(print(simplify(floordiv(f, b) * b + floormod(f, b))), "f");
  Expr y = floordiv(f, c(64));
  EXPECT_EQ(print(simplify((floordiv(y, b) * b + floormod(y, b)) * c(64) + floormod(f, c(64)))), "f");
  EXPECT_EQ(print(simplify(floordiv(f, b * c(64)) * b + floormod(y, b))), "f // 64");
  // Other divisors stay.
  Expr a = make_var("a");
  EXPECT_NE(print(simplify(floordiv(f, a) * b + floormod(f, b))), "f");
}

TEST(TirPasses, FullPipeline) {
  for (int64_t n : {100, 64, 7, 1}) {
    for (ForKind inner : {ForKind::kVectorized, ForKind::kUnrolled, ForKind::kSerial}) {
      PrimFunc fn = guarded_add(n, 16, inner);
      PrimFunc out = simplify(unroll_loops(vectorize_loops(partition_loops(simplify(flatten_storage(fn))))));
      EXPECT_EQ(count_stmts(out.body, StmtKind::kIfThenElse), 0) << print(out);
      expect_same(fn, out);
    }
  }
  PrimFunc fn = mul_add_2d(7, ForKind::kVectorized);
  expect_same(fn, simplify(unroll_loops(vectorize_loops(partition_loops(simplify(flatten_storage(fn)))))));
}

// out[i] = init; for r0, r1: out[i] = out[i] op A[i*12 + r0*4 + r1] (flat storage).
PrimFunc row_reduce(ExprKind op, bool index_uses_r = false) {
  Buffer A = make_buffer("A", DType::kFloat32, {c(60)});
  Buffer O = make_buffer("O", DType::kFloat32, {c(5)});
  Expr i = make_var("i"), r0 = make_var("r0"), r1 = make_var("r1");
  Expr at = index_uses_r ? floormod(i + r0, c(5)) : i;
  Stmt update = store(O, {at}, binary(op, load(O, {at}), load(A, {i * c(12) + r0 * c(4) + r1})));
  Stmt body = seq({store(O, {at}, f(op == ExprKind::kMul ? 1 : 0)),
                   for_loop(r0, c(0), c(3), ForKind::kSerial, for_loop(r1, c(0), c(4), ForKind::kSerial, update))});
  return PrimFunc{"row_reduce", {A, O}, {}, for_loop(i, c(0), c(5), ForKind::kParallel, body)};
}

TEST(TirLocalize, AccumulatorsMoveToLocalBuffers) {
  for (ExprKind op : {ExprKind::kAdd, ExprKind::kMul, ExprKind::kMax, ExprKind::kMin}) {
    PrimFunc fn = row_reduce(op);
    PrimFunc out = localize_accumulators(fn);
    std::string text = print(out);
    EXPECT_NE(text.find("allocate O_acc0: f32[1] local"), std::string::npos) << text;
    EXPECT_EQ(count_stmts(out.body, StmtKind::kStore), 3) << text;
    EXPECT_NE(text.find("O[i] = O_acc0[0]"), std::string::npos) << text;
    expect_same(fn, out);
  }
  // A vector accumulation (after vectorize_loops: pooling) gets a one-vector accumulator.
  {
    Buffer A = make_buffer("A", DType::kFloat32, {c(64)});
    Buffer O = make_buffer("O", DType::kFloat32, {c(16)});
    Expr r = make_var("r");
    Stmt body = seq({store(O, {ramp(c(0), c(1), 16)}, broadcast(f(-1e30), 16)),
                     for_loop(r, c(0), c(4), ForKind::kSerial,
                              store(O, {ramp(c(0), c(1), 16)},
                                    binary(ExprKind::kMax, load(O, {ramp(c(0), c(1), 16)}),
                                           load(A, {ramp(r, c(4), 16)}))))});
    PrimFunc fn{"vector_max", {A, O}, {}, body};
    PrimFunc out = localize_accumulators(fn);
    std::string text = print(out);
    EXPECT_NE(text.find("allocate O_acc0: f32[16] local"), std::string::npos) << text;
    expect_same(fn, out);
    EXPECT_EQ(print(localize_accumulators(fn, true)), text);  // the run after vectorize_loops
    // That run leaves scalar accumulations (and local accumulators) alone.
    PrimFunc scalar = row_reduce(ExprKind::kAdd);
    EXPECT_EQ(print(localize_accumulators(scalar, true)), print(scalar));
    PrimFunc once = localize_accumulators(scalar);
    EXPECT_EQ(print(localize_accumulators(once, true)), print(once));
  }
  // The output index moves with the reduction: nothing to localize.
  PrimFunc moving = row_reduce(ExprKind::kAdd, true);
  EXPECT_EQ(print(localize_accumulators(moving)), print(moving));
}

// O[i] = reduce(op, f(A[i*E + r]) for r in [0, E)) over 3 rows, localized; `stride` != 1 reads
// A across rows (not contiguous along r), `with_exp` sums exp(A - B[i]) (Softmax's sum).
PrimFunc row_reduce_len(ExprKind op, int64_t e, int64_t stride = 1, bool with_exp = false) {
  Buffer A = make_buffer("A", DType::kFloat32, {c(3 * e)});
  Buffer B = make_buffer("B", DType::kFloat32, {c(3)});
  Buffer O = make_buffer("O", DType::kFloat32, {c(3)});
  Expr i = make_var("i"), r = make_var("r");
  Expr a = stride == 1 ? load(A, {i * c(e) + r}) : load(A, {r * c(3) + i});
  if (with_exp) a = call("exp", f32(), {a - load(B, {i})});
  double init = op == ExprKind::kMax ? -1e30 : op == ExprKind::kMin ? 1e30 : op == ExprKind::kMul ? 1 : 0;
  Stmt body = seq({store(O, {i}, f(init)),
                   for_loop(r, c(0), c(e), ForKind::kSerial, store(O, {i}, binary(op, load(O, {i}), a)))});
  return localize_accumulators(PrimFunc{"row_reduce_len", {A, B, O}, {}, for_loop(i, c(0), c(3), ForKind::kSerial, body)});
}

// Runs the rest of the lowering pipeline after vectorize_reductions.
PrimFunc finish(const PrimFunc& f) { return simplify(unroll_loops(vectorize_loops(partition_loops(f)))); }

void expect_close(const PrimFunc& a, const PrimFunc& b, double rtol) {
  Run ra = run(a), rb = run(b);
  ASSERT_EQ(ra.data.size(), rb.data.size());
  for (size_t k = 0; k < ra.data.size(); ++k) {
    ASSERT_EQ(ra.data[k].size(), rb.data[k].size());
    for (size_t j = 0; j + 4 <= ra.data[k].size(); j += 4) {
      float x = 0, y = 0;
      std::memcpy(&x, ra.data[k].data() + j, 4);
      std::memcpy(&y, rb.data[k].data() + j, 4);
      EXPECT_NEAR(x, y, rtol * (1 + std::fabs(y))) << "buffer " << k << " element " << j / 4 << "\n" << print(b);
    }
  }
}

TEST(TirVectorizeReductions, RowsBecomeVectorPartials) {
  for (ExprKind op : {ExprKind::kAdd, ExprKind::kMax, ExprKind::kMin}) {
    for (int64_t e : {32, 37, 64, 197}) {
      PrimFunc fn = row_reduce_len(op, e);
      PrimFunc out = vectorize_reductions(fn);
      std::string text = print(out);
      // 16 partial lanes, 32 (two registers) from rows of 64 on.
      const int64_t lanes = e >= 64 ? 32 : 16;
      EXPECT_NE(text.find("O_acc0_v: f32[" + std::to_string(lanes) + "] local"), std::string::npos) << text;
      // A tail vector exactly when the lanes do not divide the row.
      EXPECT_EQ(text.find("O_acc0_t") != std::string::npos, e % lanes != 0) << text;
      PrimFunc done = finish(out);
      EXPECT_TRUE(has_vector_store(done.body)) << print(done);
      if (op == ExprKind::kAdd) expect_close(fn, done, 1e-5);
      else expect_same(fn, done);  // min/max are exact in any order
    }
  }
  // Softmax's sum of exp(A - B[i]): the exp runs on vectors.
  PrimFunc fn = row_reduce_len(ExprKind::kAdd, 197, 1, true);
  PrimFunc done = finish(vectorize_reductions(fn));
  EXPECT_NE(print(done).find("exp(A[ramp("), std::string::npos) << print(done);
  expect_close(fn, done, 1e-5);
}

// A row of symbolic length (Softmax over a sequence dim): 16 partial lanes over n // 16 blocks,
// then a scalar tail loop.
TEST(TirVectorizeReductions, SymbolicRows) {
  Expr n = make_var("n");
  for (ExprKind op : {ExprKind::kAdd, ExprKind::kMax}) {
    Buffer A = make_buffer("A", DType::kFloat32, {c(3) * n});
    Buffer O = make_buffer("O", DType::kFloat32, {c(3)});
    Expr i = make_var("i"), r = make_var("r");
    Stmt body = seq({store(O, {i}, f(op == ExprKind::kMax ? -1e30 : 0)),
                     for_loop(r, c(0), n, ForKind::kSerial, store(O, {i}, binary(op, load(O, {i}), load(A, {i * n + r}))))});
    PrimFunc fn = localize_accumulators(PrimFunc{"rows", {A, O}, {n}, for_loop(i, c(0), c(3), ForKind::kSerial, body)});
    PrimFunc out = finish(vectorize_reductions(fn));
    const std::string text = print(out);
    EXPECT_NE(text.find("O_acc0_v: f32[16] local"), std::string::npos) << text;
    EXPECT_TRUE(has_vector_store(out.body)) << text;
    for (int64_t v : {1, 15, 16, 33, 128}) {
      auto ra = run(fn, {v});
      auto rb = run(out, {v});
      const float* x = reinterpret_cast<const float*>(ra.data[1].data());
      const float* y = reinterpret_cast<const float*>(rb.data[1].data());
      for (int k = 0; k < 3; ++k) EXPECT_NEAR(x[k], y[k], 1e-4 * (1 + std::fabs(x[k]))) << "n=" << v << "\n" << text;
    }
  }
}

TEST(TirVectorizeReductions, LeavesShortAndStridedRowsAlone) {
  for (PrimFunc fn : {row_reduce_len(ExprKind::kAdd, 31), row_reduce_len(ExprKind::kMax, 40, 3),
                      row_reduce_len(ExprKind::kMul, 5)})
    EXPECT_EQ(print(vectorize_reductions(fn)), print(fn));
}

// M[i] = max over row i of A; O[i, j] = A[i, j] - M[i]: two loops over the rows.
PrimFunc row_chain(int64_t read_offset) {
  Buffer A = make_buffer("A", DType::kFloat32, {c(4 * 20)});
  Buffer M = make_buffer("M", DType::kFloat32, {c(5)});
  Buffer O = make_buffer("O", DType::kFloat32, {c(4 * 20)});
  Expr i = make_var("i"), j = make_var("j"), r = make_var("r"), k = make_var("k");
  Stmt first = for_loop(i, c(0), c(4), ForKind::kSerial,
                        seq({store(M, {i}, f(-1e30)),
                             for_loop(r, c(0), c(20), ForKind::kSerial,
                                      store(M, {i}, max(load(M, {i}), load(A, {i * c(20) + r}))))}));
  Stmt second = for_loop(k, c(0), c(4), ForKind::kSerial,
                         for_loop(j, c(0), c(20), ForKind::kSerial,
                                  store(O, {k * c(20) + j}, load(A, {k * c(20) + j}) - load(M, {read_offset == 0 ? k : k + c(read_offset)}))));
  return PrimFunc{"row_chain", {A, M, O}, {}, allocate(make_buffer("unused", DType::kFloat32, {c(1)}, "local"), seq({first, second}))};
}

TEST(TirFuseLoops, RowChainsBecomeOneLoop) {
  PrimFunc fn = row_chain(0);
  PrimFunc out = fuse_loops(fn);
  EXPECT_EQ(count_stmts(out.body, StmtKind::kFor), 3) << print(out);  // rows, max, normalize
  expect_same(fn, out);
  // Reading the next row's max (written by a later iteration) keeps the loops apart.
  PrimFunc ahead = row_chain(1);
  EXPECT_EQ(print(fuse_loops(ahead)), print(ahead));
}

// A row buffer: the first loop writes row i of E (E[i*20 + r], vectorized in 4-lane ramps), the
// second reads the whole row i (a sum over it, then each element). `shift` moves the second's
// reads by that many elements: past the row's end they read the next row, which a later
// iteration writes.
PrimFunc row_buffer_chain(int64_t shift) {
  Buffer A = make_buffer("A", DType::kFloat32, {c(4 * 20)});
  Buffer E = make_buffer("E", DType::kFloat32, {c(4 * 20 + 4)});
  Buffer S = make_buffer("S", DType::kFloat32, {c(4)});
  Buffer O = make_buffer("O", DType::kFloat32, {c(4 * 20)});
  Expr i = make_var("i"), k = make_var("k"), r = make_var("r"), q = make_var("q"), j = make_var("j");
  Stmt first = for_loop(i, c(0), c(4), ForKind::kSerial,
                        for_loop(r, c(0), c(5), ForKind::kSerial,
                                 store(E, {ramp(i * c(20) + r * c(4), c(1), 4)},
                                       load(A, {ramp(i * c(20) + r * c(4), c(1), 4)}) * broadcast(f(2), 4))));
  Stmt second = for_loop(
      k, c(0), c(4), ForKind::kSerial,
      seq({store(S, {k}, f(0)),
           for_loop(q, c(0), c(20), ForKind::kSerial, store(S, {k}, load(S, {k}) + load(E, {k * c(20) + q + c(shift)}))),
           for_loop(j, c(0), c(20), ForKind::kSerial, store(O, {k * c(20) + j}, load(E, {k * c(20) + j}) - load(S, {k})))}));
  return PrimFunc{"row_buffer_chain", {A, E, S, O}, {}, allocate(make_buffer("unused", DType::kFloat32, {c(1)}, "local"), seq({first, second}))};
}

TEST(TirFuseLoops, RowBuffersFuseWithinTheirRow) {
  PrimFunc fn = row_buffer_chain(0);
  PrimFunc out = fuse_loops(fn);
  EXPECT_EQ(count_stmts(out.body, StmtKind::kFor), 4) << print(out);  // rows, exp row, sum, output
  expect_same(fn, out);
  // Reads that reach into the next row keep the loops apart.
  for (int64_t shift : {1, 4}) {
    PrimFunc ahead = row_buffer_chain(shift);
    EXPECT_EQ(print(fuse_loops(ahead)), print(ahead)) << "shift " << shift;
  }
}

// row_buffer_chain with E allocated inside the function (global scope), fused into one row loop;
// `read_after` also reads E after the loop, `outer` wraps the row loop in another loop.
PrimFunc allocated_row_chain(bool read_after, bool outer) {
  PrimFunc chain = fuse_loops(row_buffer_chain(0));
  const Buffer A = chain.buffer_params[0], E = chain.buffer_params[1], S = chain.buffer_params[2], O = chain.buffer_params[3];
  Stmt body = chain.body->body;  // inside the "unused" allocation
  if (read_after) body = seq({body, store(S, {c(0)}, load(E, {c(5)}))});
  if (outer) body = for_loop(make_var("o"), c(0), c(2), ForKind::kSerial, body);
  return PrimFunc{"allocated_row_chain", {A, S, O}, {}, allocate(E, body)};
}

int count_local_allocs(const Stmt& s, const std::string& name) {
  int n = 0;
  visit_stmts(s, [&](const Stmt& x) { n += x->kind == StmtKind::kAllocate && x->buffer->name == name && x->buffer->scope == "local"; });
  return n;
}

TEST(TirLocalizeRowBuffers, RowBufferBecomesLocal) {
  PrimFunc fn = allocated_row_chain(false, false);
  PrimFunc out = localize_row_buffers(fn);
  EXPECT_EQ(count_local_allocs(out.body, "E"), 1) << print(out);
  EXPECT_NE(print(out).find("E: f32[20] local"), std::string::npos) << print(out);
  expect_same(fn, out);
  // Read after the loop, or a loop inside another: the buffer stays as it is.
  for (bool read_after : {true, false}) {
    PrimFunc keep = allocated_row_chain(read_after, !read_after);
    EXPECT_EQ(print(localize_row_buffers(keep)), print(keep));
  }
}

TEST(TirSubstitute, ReplacesUsesNotBindings) {
  Expr i = make_var("i"), n = make_var("n");
  Buffer A = make_buffer("A", DType::kFloat32, {c(64)});
  Stmt s = for_loop(i, c(0), n, ForKind::kSerial, store(A, {i + n}, f(0)));
  EXPECT_EQ(print(substitute(s, n, c(8))), "for i in [0, 8):\n  A[i + 8] = 0.0\n");
  EXPECT_EQ(print(substitute(i * c(2), i, ramp(c(0), c(1), 4))), "ramp(0, 1, 4)*broadcast(2, 4)");
}

}  // namespace
}  // namespace kiln::tir
