// codegen/llvm: PrimFuncs built by hand with the tir constructors, JIT-compiled for the host and
// run on data; results are compared with values computed here. Also: object emission, error
// messages, and a bandwidth print (not an assertion) for a 5-op elementwise chain.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>
#include <unistd.h>
#include <vector>

#include "codegen/llvm/codegen.h"
#include "core/error.h"
#include "core/float16.h"
#include "frontend/onnx/proto_util.h"
#include "tir/ir.h"

namespace kiln {
namespace {

using namespace tir;
using codegen::JitModule;
using codegen::KernelFn;

std::atomic<int> g_parallel_calls{0};

// The runtime's parallel launch, for tests: two std::threads, one half of [0, n) each.
extern "C" void test_parallel_for(int64_t n, void (*body)(int64_t, int64_t, void*), void* closure) {
  ++g_parallel_calls;
  int64_t mid = n / 2;
  std::thread t([&] { body(0, mid, closure); });
  body(mid, n, closure);
  t.join();
}

// An external "microkernel": y[i] += a * x[i] for i < n.
extern "C" void test_axpy(float* y, const float* x, int64_t n, float a) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

codegen::SymbolMap runtime_symbols() {
  return {{"kiln_parallel_for", reinterpret_cast<void*>(&test_parallel_for)},
          {"test_axpy", reinterpret_cast<void*>(&test_axpy)}};
}

// KILN_CODEGEN_DUMP=1 prints each module's optimized IR.
std::unique_ptr<JitModule> jit(const std::vector<PrimFunc>& funcs) {
  auto m = JitModule::compile(funcs, codegen::TargetOptions{}, runtime_symbols());
  if (std::getenv("KILN_CODEGEN_DUMP")) std::puts(m->llvm_ir().c_str());
  return m;
}

DataType f32x(int lanes) { return {DType::kFloat32, lanes}; }

// C[i] = A[i] + B[i] for i < n, n a scalar parameter.
PrimFunc vector_add_serial() {
  Expr n = make_var("n");
  Buffer a = make_buffer("A", DType::kFloat32, {n});
  Buffer b = make_buffer("B", DType::kFloat32, {n});
  Buffer c = make_buffer("C", DType::kFloat32, {n});
  Expr i = make_var("i");
  Stmt body = for_loop(i, int_imm(0), n, ForKind::kSerial, store(c, {i}, load(a, {i}) + load(b, {i})));
  return {"vadd", {a, b, c}, {n}, body};
}

TEST(CodegenLlvm, VectorAddSerial) {
  auto m = jit({vector_add_serial()});
  KernelFn f = m->lookup("vadd");
  const int64_t n = 1000;
  std::vector<float> a(n), b(n), c(n, -1);
  for (int64_t i = 0; i < n; ++i) a[i] = 0.5f * i, b[i] = 3.0f - i;
  void* bufs[] = {a.data(), b.data(), c.data()};
  int64_t scalars[] = {n};
  f(bufs, scalars);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(c[i], a[i] + b[i]) << i;
  EXPECT_NE(m->llvm_ir().find("define void @vadd"), std::string::npos);
  EXPECT_THROW(m->lookup("nope"), Error);
  // Unoptimized code computes the same.
  codegen::TargetOptions o0;
  o0.opt_level = 0;
  std::fill(c.begin(), c.end(), -1.0f);
  JitModule::compile({vector_add_serial()}, o0, {})->lookup("vadd")(bufs, scalars);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(c[i], a[i] + b[i]) << i;
}

// Main part: for o < n/16: for v < 16 (vectorized): C[o*16+v] = A + B; tail: serial loop.
TEST(CodegenLlvm, VectorizedLoopWithTail) {
  Expr n = make_var("n");
  Buffer a = make_buffer("A", DType::kFloat32, {n});
  Buffer b = make_buffer("B", DType::kFloat32, {n});
  Buffer c = make_buffer("C", DType::kFloat32, {n});
  Expr o = make_var("o"), v = make_var("v"), t = make_var("t");
  Expr main_n = floordiv(n, int_imm(16));
  Expr idx = o * 16 + v;
  Stmt main = for_loop(o, int_imm(0), main_n, ForKind::kSerial,
                       for_loop(v, int_imm(0), int_imm(16), ForKind::kVectorized,
                                store(c, {idx}, load(a, {idx}) * load(b, {idx}))));
  Stmt tail = for_loop(t, main_n * 16, n - main_n * 16, ForKind::kSerial,
                       store(c, {t}, load(a, {t}) * load(b, {t})));
  // The same with explicit 16-lane vectors (Ramp/Broadcast) into D, plus a stride-2 gather.
  Buffer d = make_buffer("D", DType::kFloat32, {n});
  Buffer e = make_buffer("E", DType::kFloat32, {n});
  Expr o2 = make_var("o2");
  Expr ramp16 = ramp(o2 * 16, int_imm(1), 16);
  Stmt vec = for_loop(o2, int_imm(0), main_n, ForKind::kSerial,
                      seq({store(d, {ramp16}, load(a, {ramp16}, 16) * load(b, {ramp16}, 16) +
                                                  broadcast(float_imm(1.0), 16)),
                           store(e, {ramp16}, load(a, {ramp(o2 * 8, int_imm(2), 16)}, 16))}));
  PrimFunc f{"vmul", {a, b, c, d, e}, {n}, seq({main, tail, vec})};
  auto m = jit({f});
  for (int64_t len : {0, 5, 16, 37, 100}) {
    // The stride-2 gather of the last block reads up to element len + 15 of A: pad it.
    std::vector<float> av(len + 16), bv(len), cv(len, -1), dv(len, -7), ev(len, -7);
    for (int64_t i = 0; i < len + 16; ++i) av[i] = 1.5f * i - 3;
    for (int64_t i = 0; i < len; ++i) bv[i] = 0.25f * i;
    void* bufs[] = {av.data(), bv.data(), cv.data(), dv.data(), ev.data()};
    int64_t scalars[] = {len};
    m->lookup("vmul")(bufs, scalars);
    for (int64_t i = 0; i < len; ++i) ASSERT_EQ(cv[i], av[i] * bv[i]) << len << " " << i;
    for (int64_t i = 0; i < len; ++i) {
      bool covered = i < len / 16 * 16;
      ASSERT_EQ(dv[i], covered ? av[i] * bv[i] + 1.0f : -7.0f) << len << " " << i;
      int64_t block = i / 16, lane = i % 16;
      ASSERT_EQ(ev[i], covered ? av[block * 8 + 2 * lane] : -7.0f) << len << " " << i;
    }
  }
  EXPECT_NE(m->llvm_ir().find("<16 x float>"), std::string::npos);
}

// for i < rows (parallel): let s = scale * 2 in for j < cols: C[i, j] = A[i, j] * s + bias[j];
// and, 2-D with 4-lane vectors, C2[i, ramp(4 jo, 1, 4)] = A[i, ramp(4 jo, 1, 4)] + 1 for jo < cols / 4.
TEST(CodegenLlvm, ParallelOuterLoopCapturesValues) {
  Expr rows = make_var("rows"), cols = make_var("cols");
  Buffer a = make_buffer("A", DType::kFloat32, {rows, cols});
  Buffer bias = make_buffer("bias", DType::kFloat32, {cols});
  Buffer c = make_buffer("C", DType::kFloat32, {rows, cols});
  Buffer c2 = make_buffer("C2", DType::kFloat32, {rows, cols});
  Expr i = make_var("i"), j = make_var("j"), jo = make_var("jo"), s = make_var("s", f32());
  Expr scale = make_var("scale", f32());
  Stmt inner = for_loop(j, int_imm(0), cols, ForKind::kSerial,
                        store(c, {i, j}, load(a, {i, j}) * s + load(bias, {j})));
  Expr r4 = ramp(jo * 4, int_imm(1), 4);
  Stmt inner2 = for_loop(jo, int_imm(0), floordiv(cols, int_imm(4)), ForKind::kSerial,
                         store(c2, {i, r4}, load(a, {i, r4}, 4) + broadcast(float_imm(1.0), 4)));
  Stmt body = let_stmt(scale, float_imm(1.5),
                       for_loop(i, int_imm(0), rows, ForKind::kParallel,
                                let_stmt(s, scale * float_imm(2.0), seq({inner, inner2}))));
  auto m = jit({{"par", {a, bias, c, c2}, {rows, cols}, body}});
  EXPECT_EQ(m->llvm_ir().find("masked.gather"), std::string::npos);  // 2-D ramps load contiguously
  const int64_t r = 37, k = 19;
  std::vector<float> av(r * k), bv(k), cv(r * k, 0), c2v(r * k, -5);
  for (int64_t x = 0; x < r * k; ++x) av[x] = 0.1f * x;
  for (int64_t x = 0; x < k; ++x) bv[x] = -1.0f * x;
  void* bufs[] = {av.data(), bv.data(), cv.data(), c2v.data()};
  int64_t scalars[] = {r, k};
  int before = g_parallel_calls;
  m->lookup("par")(bufs, scalars);
  EXPECT_EQ(g_parallel_calls - before, 1);
  for (int64_t x = 0; x < r; ++x)
    for (int64_t y = 0; y < k; ++y) {
      ASSERT_EQ(cv[x * k + y], av[x * k + y] * 3.0f + bv[y]) << x << "," << y;
      ASSERT_EQ(c2v[x * k + y], y < 16 ? av[x * k + y] + 1.0f : -5.0f) << x << "," << y;
    }
}

// out[i] = sum_k A[i*K + k], accumulated in a local buffer; and the same in a global scratch.
TEST(CodegenLlvm, ReductionWithLocalAccumulator) {
  Expr rows = make_var("rows"), kk = make_var("K");
  Buffer a = make_buffer("A", DType::kFloat32, {rows * kk});
  Buffer out = make_buffer("out", DType::kFloat32, {rows});
  Buffer out2 = make_buffer("out2", DType::kFloat32, {rows});
  Buffer acc = make_buffer("acc", DType::kFloat32, {int_imm(1)}, "local");
  Buffer scratch = make_buffer("scratch", DType::kFloat32, {kk}, "global");
  Expr i = make_var("i"), k = make_var("k"), k2 = make_var("k2");
  Stmt red = allocate(acc, seq({store(acc, {int_imm(0)}, float_imm(0.0)),
                                for_loop(k, int_imm(0), kk, ForKind::kSerial,
                                         store(acc, {int_imm(0)}, load(acc, {int_imm(0)}) +
                                                                      load(a, {i * kk + k}))),
                                store(out, {i}, load(acc, {int_imm(0)}))}));
  // out2[i] = max_k of A[i*K + k] * 2, staged through a heap buffer of K floats.
  Stmt staged = allocate(
      scratch,
      seq({for_loop(k2, int_imm(0), kk, ForKind::kSerial, store(scratch, {k2}, load(a, {i * kk + k2}) * float_imm(2.0))),
           store(out2, {i}, float_imm(-1e30)),
           for_loop(k2, int_imm(0), kk, ForKind::kUnrolled,
                    store(out2, {i}, max(load(out2, {i}), load(scratch, {k2}))))}));
  Stmt body = for_loop(i, int_imm(0), rows, ForKind::kSerial, seq({red, staged}));
  auto m = jit({{"rowsum", {a, out, out2}, {rows, kk}, body}});
  const int64_t r = 7, K = 33;
  std::vector<float> av(r * K), ov(r), o2(r);
  for (int64_t x = 0; x < r * K; ++x) av[x] = std::sin(0.3f * x);
  void* bufs[] = {av.data(), ov.data(), o2.data()};
  int64_t scalars[] = {r, K};
  m->lookup("rowsum")(bufs, scalars);
  for (int64_t x = 0; x < r; ++x) {
    float s = 0, mx = -1e30f;
    for (int64_t y = 0; y < K; ++y) s += av[x * K + y], mx = std::max(mx, av[x * K + y] * 2.0f);
    // A local accumulator may be reassociated (vector partial sums): a few ulps of the sum's
    // magnitude, not bit equality with the serial order.
    double magnitude = 0;
    for (int64_t y = 0; y < K; ++y) magnitude += std::fabs(av[x * K + y]);
    EXPECT_NEAR(ov[x], s, 4e-7 * magnitude) << x;
    EXPECT_EQ(o2[x], mx) << x;
  }
  EXPECT_NE(m->llvm_ir().find("fadd reassoc"), std::string::npos);
}

int64_t ref_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a % b < 0) != (b < 0))) ? q - 1 : q;
}
int64_t ref_floormod(int64_t a, int64_t b) { return a - ref_floordiv(a, b) * b; }

TEST(CodegenLlvm, IntegerFloorDivModMinMaxSignedness) {
  Expr n = make_var("n");
  Buffer a = make_buffer("a", DType::kInt64, {n});
  Buffer b = make_buffer("b", DType::kInt64, {n});
  Buffer q = make_buffer("q", DType::kInt64, {n});
  Buffer r = make_buffer("r", DType::kInt64, {n});
  Buffer a32 = make_buffer("a32", DType::kInt32, {n});
  Buffer q32 = make_buffer("q32", DType::kInt32, {n});
  Buffer u8 = make_buffer("u8", DType::kUInt8, {n});
  Buffer u8o = make_buffer("u8o", DType::kUInt8, {n});
  Expr i = make_var("i");
  Stmt body = for_loop(
      i, int_imm(0), n, ForKind::kSerial,
      seq({store(q, {i}, floordiv(load(a, {i}), load(b, {i}))),
           store(r, {i}, floormod(load(a, {i}), load(b, {i}))),
           store(q32, {i}, floormod(load(a32, {i}), int_imm(7, i32())) +
                               floordiv(load(a32, {i}), int_imm(-3, i32()))),
           // unsigned: 200 / 3 and max(200, 100) must not treat 200 as negative
           store(u8o, {i}, binary(ExprKind::kDiv, load(u8, {i}), int_imm(3, {DType::kUInt8, 1})) +
                               max(load(u8, {i}), int_imm(100, {DType::kUInt8, 1})))}));
  auto m = jit({{"divmod", {a, b, q, r, a32, q32, u8, u8o}, {n}, body}});
  std::vector<int64_t> av = {7, -7, 7, -7, 0, 6, -6, 1, -1, 123456789, -123456789};
  std::vector<int64_t> bv = {2, 2, -2, -2, 3, 3, 3, -5, 5, 1000, 1000};
  const int64_t len = static_cast<int64_t>(av.size());
  std::vector<int64_t> qv(len), rv(len);
  std::vector<int32_t> a32v(len), q32v(len);
  std::vector<uint8_t> u8v(len), u8ov(len);
  for (int64_t x = 0; x < len; ++x) a32v[x] = static_cast<int32_t>(av[x] * 3 - 5), u8v[x] = static_cast<uint8_t>(x * 23);
  void* bufs[] = {av.data(), bv.data(), qv.data(), rv.data(), a32v.data(), q32v.data(), u8v.data(), u8ov.data()};
  int64_t scalars[] = {len};
  m->lookup("divmod")(bufs, scalars);
  for (int64_t x = 0; x < len; ++x) {
    EXPECT_EQ(qv[x], ref_floordiv(av[x], bv[x])) << av[x] << " // " << bv[x];
    EXPECT_EQ(rv[x], ref_floormod(av[x], bv[x])) << av[x] << " % " << bv[x];
    EXPECT_EQ(q32v[x], ref_floormod(a32v[x], 7) + ref_floordiv(a32v[x], -3)) << a32v[x];
    EXPECT_EQ(u8ov[x], static_cast<uint8_t>(u8v[x] / 3 + std::max<int>(u8v[x], 100))) << int(u8v[x]);
  }
}

TEST(CodegenLlvm, CastsAndSelect) {
  Expr n = make_var("n");
  Buffer x = make_buffer("x", DType::kFloat32, {n});
  Buffer xi = make_buffer("xi", DType::kInt64, {n});
  Buffer back = make_buffer("back", DType::kFloat32, {n});
  Buffer h = make_buffer("h", DType::kFloat16, {n});
  Buffer hf = make_buffer("hf", DType::kFloat32, {n});
  Buffer sel = make_buffer("sel", DType::kFloat32, {n});
  Buffer flag = make_buffer("flag", DType::kBool, {n});
  Expr i = make_var("i");
  Expr xv = load(x, {i});
  Stmt body = for_loop(
      i, int_imm(0), n, ForKind::kSerial,
      seq({store(xi, {i}, cast(i64(), xv)),
           store(back, {i}, cast(f32(), load(xi, {i})) + float_imm(0.5)),
           store(h, {i}, cast({DType::kFloat16, 1}, xv)),
           store(hf, {i}, cast(f32(), load(h, {i}))),
           store(flag, {i}, binary(ExprKind::kGT, xv, float_imm(0.0))),
           store(sel, {i}, select(load(flag, {i}), xv, xv * float_imm(0.1)))}));
  auto m = jit({{"casts", {x, xi, back, h, hf, sel, flag}, {n}, body}});
  std::vector<float> xv_ = {0.0f, 1.7f, -1.7f, 2.5f, -2.5f, 1e6f, 65504.0f, 1.0009765625f, 1.00048828125f, 3.14159f, -1e-8f};
  const int64_t len = static_cast<int64_t>(xv_.size());
  std::vector<int64_t> xiv(len);
  std::vector<float> backv(len), hfv(len), selv(len);
  std::vector<uint16_t> hv(len);
  std::vector<uint8_t> flagv(len, 7);
  void* bufs[] = {xv_.data(), xiv.data(), backv.data(), hv.data(), hfv.data(), selv.data(), flagv.data()};
  int64_t scalars[] = {len};
  m->lookup("casts")(bufs, scalars);
  for (int64_t k = 0; k < len; ++k) {
    float v = xv_[k];
    EXPECT_EQ(xiv[k], static_cast<int64_t>(v)) << v;
    EXPECT_EQ(backv[k], static_cast<float>(static_cast<int64_t>(v)) + 0.5f) << v;
    EXPECT_EQ(hv[k], Float16::from_float(v)) << v;
    EXPECT_EQ(hfv[k], Float16::to_float(Float16::from_float(v))) << v;
    EXPECT_EQ(flagv[k], v > 0 ? 1 : 0) << v;
    EXPECT_EQ(selv[k], v > 0 ? v : v * 0.1f) << v;
  }
}

// if (i < k && !(i == 3)) out[i] = a[i] else out[i] = (let t = a[i] * 2 in t + t); then a scatter
// out2[0, 2, 4, 6] = 7 and a u8 cast that wraps like a C++ cast through int64.
TEST(CodegenLlvm, IfThenElseLetScatterAndNarrowCasts) {
  Expr n = make_var("n"), k = make_var("k");
  Buffer a = make_buffer("a", DType::kFloat32, {n});
  Buffer out = make_buffer("out", DType::kFloat32, {n});
  Buffer out2 = make_buffer("out2", DType::kFloat32, {n});
  Buffer u8 = make_buffer("u8", DType::kUInt8, {n});
  Expr i = make_var("i"), t = make_var("t", f32());
  Expr cond = binary(ExprKind::kAnd, binary(ExprKind::kLT, i, k),
                     logical_not(binary(ExprKind::kEQ, i, int_imm(3))));
  Stmt body = seq({for_loop(i, int_imm(0), n, ForKind::kSerial,
                            seq({if_then_else(cond, store(out, {i}, load(a, {i})),
                                              store(out, {i}, let(t, load(a, {i}) * float_imm(2.0), t + t))),
                                 store(u8, {i}, cast({DType::kUInt8, 1}, load(a, {i})))})),
                   store(out2, {ramp(int_imm(0), int_imm(2), 4)}, broadcast(float_imm(7.0), 4))});
  auto m = jit({{"branchy", {a, out, out2, u8}, {n, k}, body}});
  const int64_t len = 12;
  std::vector<float> av(len), ov(len), o2(len, 0);
  std::vector<uint8_t> uv(len);
  for (int64_t x = 0; x < len; ++x) av[x] = 60.5f * x - 300.0f;
  void* bufs[] = {av.data(), ov.data(), o2.data(), uv.data()};
  int64_t scalars[] = {len, 8};
  m->lookup("branchy")(bufs, scalars);
  for (int64_t x = 0; x < len; ++x) {
    EXPECT_EQ(ov[x], x < 8 && x != 3 ? av[x] : av[x] * 4.0f) << x;
    EXPECT_EQ(o2[x], x < 8 && x % 2 == 0 ? 7.0f : 0.0f) << x;
    EXPECT_EQ(uv[x], static_cast<uint8_t>(static_cast<int64_t>(av[x]))) << av[x];
  }
}

TEST(CodegenLlvm, MathIntrinsicsMatchStd) {
  Expr n = make_var("n");
  Buffer x = make_buffer("x", DType::kFloat32, {n});
  std::vector<std::string> names = {"exp", "tanh", "erf", "sigmoid", "round", "sqrt", "log", "floor", "fabs"};
  std::vector<Buffer> outs;
  std::vector<Stmt> stores, vstores;
  Expr i = make_var("i"), o = make_var("o");
  for (const std::string& name : names) {
    Buffer b = make_buffer(name, DType::kFloat32, {n});
    outs.push_back(b);
    stores.push_back(store(b, {i}, call(name, f32(), {load(x, {i})})));
  }
  // 8-lane versions of tanh and exp into separate outputs (vector libm calls are per lane).
  Buffer vt = make_buffer("vtanh", DType::kFloat32, {n});
  Buffer ve = make_buffer("vexp", DType::kFloat32, {n});
  Expr r8 = ramp(o * 8, int_imm(1), 8);
  Stmt vec = for_loop(o, int_imm(0), floordiv(n, int_imm(8)), ForKind::kSerial,
                      seq({store(vt, {r8}, call("tanh", f32x(8), {load(x, {r8}, 8)})),
                           store(ve, {r8}, call("exp", f32x(8), {load(x, {r8}, 8)}))}));
  std::vector<Buffer> params{x};
  params.insert(params.end(), outs.begin(), outs.end());
  params.push_back(vt);
  params.push_back(ve);
  Stmt body = seq({for_loop(i, int_imm(0), n, ForKind::kSerial, seq(stores)), vec});
  auto m = jit({{"math", params, {n}, body}});
  const int64_t len = 64;
  std::vector<std::vector<float>> data(params.size(), std::vector<float>(len, 0));
  for (int64_t k = 0; k < len; ++k) data[0][k] = -4.0f + 0.125f * k + (k % 4 == 2 ? 0.0f : 0.01f);
  data[0][40] = 2.5f;  // round half to even
  data[0][41] = 3.5f;
  std::vector<void*> bufs;
  for (auto& d : data) bufs.push_back(d.data());
  int64_t scalars[] = {len};
  m->lookup("math")(bufs.data(), scalars);
  auto ref = [](const std::string& name, float v) -> float {
    if (name == "exp") return std::exp(v);
    if (name == "tanh") return std::tanh(v);
    if (name == "erf") return std::erf(v);
    if (name == "sigmoid") return 1.0f / (1.0f + std::exp(-v));
    if (name == "round") return std::nearbyint(v);
    if (name == "sqrt") return std::sqrt(v);
    if (name == "log") return std::log(v);
    if (name == "floor") return std::floor(v);
    return std::fabs(v);
  };
  for (size_t f = 0; f < names.size(); ++f) {
    for (int64_t k = 0; k < len; ++k) {
      float want = ref(names[f], data[0][k]), got = data[1 + f][k];
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << names[f] << "(" << data[0][k] << ")";
      } else {
        EXPECT_NEAR(got, want, 2e-6f * std::max(1.0f, std::fabs(want))) << names[f] << "(" << data[0][k] << ")";
      }
    }
  }
  for (int64_t k = 0; k < len; ++k) {
    EXPECT_NEAR(data[names.size() + 1][k], std::tanh(data[0][k]), 2e-6f) << k;
    EXPECT_NEAR(data[names.size() + 2][k], std::exp(data[0][k]), 2e-6f * std::exp(data[0][k])) << k;
  }
  EXPECT_EQ(data[1 + 4][40], 2.0f);
  EXPECT_EQ(data[1 + 4][41], 4.0f);
}

// Float32 vector exp is inline code (emit_expr.cc inline_exp) and sigmoid uses it; odd lane
// counts (5) pad to a libmvec variant. Checked against libm over the whole float range: under-
// and overflow ends, infinities, NaN, and 2^n scales near the exponent limits.
TEST(CodegenLlvm, InlineVectorExpMatchesLibm) {
  Expr o = make_var("o");
  Buffer x = make_buffer("x", DType::kFloat32, {int_imm(80)});
  Buffer e16 = make_buffer("e16", DType::kFloat32, {int_imm(80)});
  Buffer s16 = make_buffer("s16", DType::kFloat32, {int_imm(80)});
  Buffer e5 = make_buffer("e5", DType::kFloat32, {int_imm(80)});
  Buffer t5 = make_buffer("t5", DType::kFloat32, {int_imm(80)});
  Expr r16 = ramp(o * 16, int_imm(1), 16), r5 = ramp(o * 5, int_imm(1), 5);
  Stmt body = seq({for_loop(o, int_imm(0), int_imm(5), ForKind::kSerial,
                            seq({store(e16, {r16}, call("exp", f32x(16), {load(x, {r16}, 16)})),
                                 store(s16, {r16}, call("sigmoid", f32x(16), {load(x, {r16}, 16)}))})),
                   for_loop(o, int_imm(0), int_imm(16), ForKind::kSerial,
                            seq({store(e5, {r5}, call("exp", f32x(5), {load(x, {r5}, 5)})),
                                 store(t5, {r5}, call("tanh", f32x(5), {load(x, {r5}, 5)}))}))});
  auto m = jit({{"vexp", {x, e16, s16, e5, t5}, {}, body}});
  std::vector<float> in(80), a(80), b(80), c(80), d(80);
  const float inf = std::numeric_limits<float>::infinity();
  const float special[] = {-inf, inf, std::nanf(""), -104.5f, -103.9f, -87.5f, -87.3f, -80.f, 88.0f, 88.7f,
                           88.73f, 89.5f, 0.f, -0.f, 1e-8f, -1e-8f, 0.34657359f, -0.34657359f, 1.f, -1.f};
  for (int k = 0; k < 80; ++k) in[static_cast<size_t>(k)] = k < 20 ? special[k] : -40.f + 1.013f * static_cast<float>(k - 20);
  void* bufs[] = {in.data(), a.data(), b.data(), c.data(), d.data()};
  m->lookup("vexp")(bufs, nullptr);
  for (size_t k = 0; k < 80; ++k) {
    const float want = std::exp(in[k]);
    for (float got : {a[k], c[k]}) {
      if (std::isnan(want)) EXPECT_TRUE(std::isnan(got)) << in[k];
      else if (std::isinf(want) || want == 0) EXPECT_EQ(got, want) << in[k];
      else EXPECT_NEAR(got, want, 3e-7 * want + 1e-44) << in[k];
    }
    if (!std::isnan(in[k])) {
      EXPECT_NEAR(b[k], 1.0f / (1.0f + std::exp(-in[k])), 3e-7f) << in[k];
      EXPECT_NEAR(d[k], std::tanh(in[k]), 2e-6f) << in[k];
    }
  }
}

// Float32 vector erf is inline code too (emit_expr.cc inline_erf): against libm over both
// ranges (the series below 0.5, where tiny inputs keep their relative accuracy, and the
// exponential form above), the switch point, large values, infinities and NaN.
TEST(CodegenLlvm, InlineVectorErfMatchesLibm) {
  Expr o = make_var("o");
  Buffer x = make_buffer("x", DType::kFloat32, {int_imm(96)});
  Buffer y = make_buffer("y", DType::kFloat32, {int_imm(96)});
  Expr r16 = ramp(o * 16, int_imm(1), 16);
  Stmt body = for_loop(o, int_imm(0), int_imm(6), ForKind::kSerial,
                       store(y, {r16}, call("erf", f32x(16), {load(x, {r16}, 16)})));
  auto m = jit({{"verf", {x, y}, {}, body}});
  std::vector<float> in(96), out(96);
  const float inf = std::numeric_limits<float>::infinity();
  const float special[] = {-inf, inf, std::nanf(""), 0.f, -0.f, 1e-30f, -1e-20f, 1e-7f, 3e-4f, 0.4999999f,
                           0.5f, -0.5f, 0.5000001f, 3.9f, -4.5f, 9.f, 30.f, -1e6f};
  for (int k = 0; k < 96; ++k)
    in[static_cast<size_t>(k)] = k < 18 ? special[k] : -3.9f + 0.1013f * static_cast<float>(k - 18);
  void* bufs[] = {in.data(), out.data()};
  m->lookup("verf")(bufs, nullptr);
  for (size_t k = 0; k < 96; ++k) {
    const double want = std::erf(static_cast<double>(in[k]));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(out[k])) << in[k];
      continue;
    }
    const double err = std::fabs(out[k] - want);
    if (std::fabs(in[k]) < 0.5f)
      EXPECT_LE(err, 2e-7 * std::fabs(want) + 1e-45) << in[k];
    else
      EXPECT_LE(err, 3e-7) << in[k];
    EXPECT_EQ(std::signbit(out[k]), std::signbit(in[k])) << in[k];
  }
}

TEST(CodegenLlvm, ExternalMicrokernelCall) {
  Expr n = make_var("n");
  Buffer y = make_buffer("y", DType::kFloat32, {n});
  Buffer x = make_buffer("x", DType::kFloat32, {n});
  // test_axpy(&y[2], &x[0], n - 2, 0.5f)
  Stmt body = evaluate(call("test_axpy", {DType::kFloat32, 1},
                            {load(y, {int_imm(2)}), load(x, {int_imm(0)}), n - 2, float_imm(0.5)}));
  auto m = jit({{"ext", {y, x}, {n}, body}});
  std::vector<float> yv(10, 1.0f), xv(10);
  for (int k = 0; k < 10; ++k) xv[k] = k;
  void* bufs[] = {yv.data(), xv.data()};
  int64_t scalars[] = {10};
  m->lookup("ext")(bufs, scalars);
  for (int k = 0; k < 10; ++k) EXPECT_EQ(yv[k], k < 2 ? 1.0f : 1.0f + 0.5f * (k - 2)) << k;
}

TEST(CodegenLlvm, ManyKernelsInOneModuleAndObjectFile) {
  PrimFunc add = vector_add_serial();
  PrimFunc add2 = add;
  add2.name = "vadd2";
  auto m = jit({add, add2});
  EXPECT_NE(m->lookup("vadd"), nullptr);
  EXPECT_NE(m->lookup("vadd2"), nullptr);
  auto path = std::filesystem::temp_directory_path() / ("kiln_codegen_test_" + std::to_string(::getpid()) + ".o");
  codegen::emit_object({add, add2}, codegen::TargetOptions{}, path.string());
  std::string bytes = read_file(path.string(), ErrorKind::kUsage);
  std::filesystem::remove(path);
  ASSERT_GT(bytes.size(), 64u);
  EXPECT_EQ(bytes.substr(0, 4), "\x7f" "ELF");
  EXPECT_NE(bytes.find("vadd2"), std::string::npos);
  // A named CPU instead of the host's.
  codegen::TargetOptions v3;
  v3.cpu = "x86-64-v3";
  EXPECT_NE(JitModule::compile({add}, v3, {})->lookup("vadd"), nullptr);
  codegen::TargetOptions bad;
  bad.cpu = "no-such-cpu";
  EXPECT_THROW(JitModule::compile({add}, bad, {}), Error);
  EXPECT_NE(codegen::host_cpu_description().find('('), std::string::npos);
}

TEST(CodegenLlvm, UnsupportedConstructsFailClearly) {
  Expr n = make_var("n");
  Buffer bf = make_buffer("bf", DType::kBFloat16, {n});
  Expr i = make_var("i");
  PrimFunc f{"bf16k", {bf}, {n}, for_loop(i, int_imm(0), n, ForKind::kSerial,
                                          store(bf, {i}, load(bf, {i})))};
  try {
    jit({f});
    FAIL() << "bf16 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("bf16"), std::string::npos) << e.what();
  }
  Buffer x = make_buffer("x", DType::kFloat32, {n});
  PrimFunc g{"unk", {x}, {n}, store(x, {int_imm(0)}, call("no_such_fn", f32(), {load(x, {int_imm(0)})}))};
  try {
    jit({g});
    FAIL() << "unknown intrinsic accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no_such_fn"), std::string::npos) << e.what();
  }
  Buffer dyn = make_buffer("dyn", DType::kFloat32, {n}, "local");
  PrimFunc h{"dynlocal", {x}, {n}, allocate(dyn, store(dyn, {int_imm(0)}, float_imm(1.0)))};
  EXPECT_THROW(jit({h}), Error);
}

// Not an assertion: GB/s of y = max(x * a + b, 0) * c - d over 64M floats (read + write), with
// the outer loop parallel over 2 threads and 16-lane vectors inside, next to a 2-thread memcpy.
// Large outputs written a cache line at a time at aligned addresses use streaming stores with a
// fence; small outputs, unaligned ramps and symbolic sizes use plain stores. Results are exact.
TEST(CodegenLlvm, StreamingStoresForLargeAlignedOutputs) {
  auto kernel = [](const std::string& name, int64_t n, int64_t offset) {
    Buffer x = make_buffer("x", DType::kFloat32, {int_imm(n + 16)});
    Buffer y = make_buffer("y", DType::kFloat32, {int_imm(n + 16)});
    Expr o = make_var("o");
    Expr r = ramp(o * 16 + int_imm(offset), int_imm(1), 16);
    Stmt body = for_loop(o, int_imm(0), int_imm(n / 16), ForKind::kParallel,
                         store(y, {r}, load(x, {r}, 16) * broadcast(float_imm(2.0), 16)));
    return PrimFunc{name, {x, y}, {}, body};
  };
  const int64_t big = int64_t{8} << 20;  // 32 MiB of floats
  auto m = jit({kernel("big", big, 0), kernel("small", 4096, 0), kernel("shifted", big, 3)});
  const std::string& ir = m->llvm_ir();
  auto body_of = [&](const std::string& f) {
    size_t at = ir.find("define internal void @" + f + "_par0");
    EXPECT_NE(at, std::string::npos) << f;
    return ir.substr(at, ir.find("\n}\n", at) - at);
  };
  EXPECT_NE(body_of("big").find("!nontemporal"), std::string::npos);
  EXPECT_NE(body_of("big").find("sfence"), std::string::npos);
  EXPECT_EQ(body_of("small").find("!nontemporal"), std::string::npos);
  EXPECT_EQ(body_of("shifted").find("!nontemporal"), std::string::npos);
  float* xv = static_cast<float*>(std::aligned_alloc(64, (big + 16) * 4));
  float* yv = static_cast<float*>(std::aligned_alloc(64, (big + 16) * 4));
  for (int64_t k = 0; k < big + 16; ++k) xv[k] = static_cast<float>(k % 977);
  void* bufs[] = {xv, yv};
  m->lookup("big")(bufs, nullptr);
  for (int64_t k = 0; k < big; k += 4093) ASSERT_EQ(yv[k], xv[k] * 2.0f) << k;
  ASSERT_EQ(yv[big - 1], xv[big - 1] * 2.0f);
  std::free(xv);
  std::free(yv);
}

TEST(CodegenLlvm, ElementwiseChainBandwidthPrint) {
  const int64_t total = int64_t{64} << 20;
  Expr n = make_var("n");
  Buffer x = make_buffer("x", DType::kFloat32, {n});
  Buffer y = make_buffer("y", DType::kFloat32, {n});
  Expr blk = make_var("blk"), v = make_var("v");
  const int64_t kBlock = 4096;
  Expr r = ramp(blk * kBlock + v * 16, int_imm(1), 16);
  Expr val = load(x, {r}, 16) * broadcast(float_imm(1.5), 16) + broadcast(float_imm(0.25), 16);
  val = max(val, broadcast(float_imm(0.0), 16)) * broadcast(float_imm(0.5), 16) -
        broadcast(float_imm(2.0), 16);
  Stmt body = for_loop(blk, int_imm(0), floordiv(n, int_imm(kBlock)), ForKind::kParallel,
                       for_loop(v, int_imm(0), int_imm(kBlock / 16), ForKind::kSerial, store(y, {r}, val)));
  auto m = jit({{"chain", {x, y}, {n}, body}});
  std::vector<float> xv(total), yv(total);
  for (int64_t k = 0; k < total; ++k) xv[k] = static_cast<float>(k % 1000) - 500.0f;
  void* bufs[] = {xv.data(), yv.data()};
  int64_t scalars[] = {total};
  auto time = [](auto&& fn) {
    double best = 1e9;
    for (int rep = 0; rep < 3; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
      fn();
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
  };
  double t_chain = time([&] { m->lookup("chain")(bufs, scalars); });
  for (int64_t k = 0; k < total; k += 99991) {
    float want = std::max(xv[k] * 1.5f + 0.25f, 0.0f) * 0.5f - 2.0f;
    ASSERT_EQ(yv[k], want) << k;
  }
  double t_copy = time([&] {
    std::thread t([&] { std::memcpy(yv.data(), xv.data(), total / 2 * 4); });
    std::memcpy(yv.data() + total / 2, xv.data() + total / 2, total / 2 * 4);
    t.join();
  });
  const double gb = 2.0 * total * 4 / 1e9;
  std::printf("[bench] 64M-float 5-op chain: %.2f GB/s; 2-thread memcpy: %.2f GB/s; ratio %.0f%%\n",
              gb / t_chain, gb / t_copy, 100.0 * t_copy / t_chain);
}

}  // namespace
}  // namespace kiln
