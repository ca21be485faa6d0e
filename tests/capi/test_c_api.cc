// The C API (include/kiln/c_api.h) through the full library (kiln_capi): load errors (missing,
// garbage, truncated library), metadata, run-time argument errors (status + message, no crash),
// ONNX models, and an ahead-of-time compiled library (driver/aot.h) made here from a small
// model, whose outputs must be bit-identical to the JIT compiled executor's, also when run from
// several threads at once; and the runtime-only library's refusal of ONNX files.
#include <dlfcn.h>
#include <elf.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <unistd.h>

#include "driver/aot.h"
#include "frontend/onnx/onnx_io.h"
#include "frontend/onnx/proto_util.h"
#include "ir/text.h"
#include "kiln/c_api.h"
#include "pass/pass.h"
#include "driver/compiled_executor.h"
#include "driver/offload.h"
#include "kiln/extension.h"
#include "tune/records.h"
#include "../common/random_const.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

using test::rand_const;

// Conv (sgemm) -> Relu (a kernel; graph output y) -> Mul and a Gemm (graph output z).
std::string model_text() {
  std::mt19937_64 rng(11);
  return "graph @g(%x: f32[1,3,8,8]) -> (%y: f32[1,4,8,8], %z: f32[1,5]) {\n"
         "  %w = " + rand_const({4, 3, 3, 3}, rng) + "\n"
         "  %b = " + rand_const({4}, rng) + "\n"
         "  %g = " + rand_const({5, 256}, rng) + "\n"
         "  %s = const i64[2] [1, 256]\n"
         "  %c = Conv(%x, %w, %b) {pads=[1, 1, 1, 1]} : f32[1,4,8,8]\n"
         "  %y = Relu(%c) : f32[1,4,8,8]\n"
         "  %m = Mul(%y, %y) : f32[1,4,8,8]\n"
         "  %f = Reshape(%m, %s) : f32[1,256]\n"
         "  %z = Gemm(%f, %g) {transB=1} : f32[1,5]\n"
         "  return %y, %z\n"
         "}";
}

class CApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("kiln_capi_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    Model m = parse_model(model_text());
    std::string bytes = serialize_onnx_model(m);
    std::ofstream(dir_ / "small.onnx", std::ios::binary) << bytes;
    AotOptions o;
    compile_shared_library((dir_ / "small.onnx").string(), (dir_ / "small.so").string(), o);
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  static std::string path(const char* name) { return (dir_ / name).string(); }

  // The JIT compiled executor's outputs for input x, on the same pass pipeline as the export.
  static std::vector<Tensor> jit_outputs(const std::vector<float>& x) {
    Model m = load_onnx_model(path("small.onnx"));
    PassContext ctx;
    run_passes(m, default_pipeline(), ctx);
    CompiledExecutor ex(m);
    Tensor t(DType::kFloat32, {1, 3, 8, 8});
    std::memcpy(t.raw(), x.data(), t.nbytes());
    std::vector<Tensor> out;
    for (auto& v : ex.run({RtValue(t)})) out.push_back(v.tensor);
    return out;
  }

  static fs::path dir_;
};
fs::path CApi::dir_;

std::vector<float> input_values() {
  std::vector<float> x(3 * 8 * 8);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)));
  return x;
}

kiln_tensor tensor(kiln_dtype dt, std::vector<int64_t> dims, void* data, size_t bytes) {
  kiln_tensor t{};
  t.dtype = dt;
  t.rank = static_cast<int32_t>(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) t.dims[i] = dims[i];
  t.data = data;
  t.size_bytes = bytes;
  return t;
}

// Runs model on x; returns the status, filling y and z.
kiln_status run_small(kiln_model* model, std::vector<float>& x, std::vector<float>& y, std::vector<float>& z) {
  y.assign(4 * 8 * 8, 0.0f);
  z.assign(5, 0.0f);
  kiln_tensor in = tensor(KILN_DTYPE_FLOAT32, {1, 3, 8, 8}, x.data(), x.size() * 4);
  kiln_tensor out[2] = {tensor(KILN_DTYPE_FLOAT32, {}, y.data(), y.size() * 4),
                        tensor(KILN_DTYPE_FLOAT32, {}, z.data(), z.size() * 4)};
  return kiln_run(model, &in, 1, out, 2);
}

TEST_F(CApi, VersionAndNames) {
  EXPECT_EQ(kiln_api_version(), KILN_C_API_VERSION);
  EXPECT_STREQ(kiln_status_name(KILN_ERROR_BAD_INPUT), "bad input");
  EXPECT_EQ(kiln_dtype_size(KILN_DTYPE_FLOAT32), 4u);
  EXPECT_EQ(kiln_dtype_size(KILN_DTYPE_UNDEFINED), 0u);
}

TEST_F(CApi, LoadErrors) {
  kiln_model* m = reinterpret_cast<kiln_model*>(0x1);
  EXPECT_EQ(kiln_model_load_file(path("missing.so").c_str(), nullptr, &m), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(m, nullptr);
  EXPECT_NE(std::string(kiln_last_error()).find("missing.so"), std::string::npos) << kiln_last_error();
  EXPECT_EQ(kiln_model_load_file(nullptr, nullptr, &m), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_model_load_file(path("small.so").c_str(), nullptr, nullptr), KILN_ERROR_INVALID_ARGUMENT);

  std::ofstream(path("garbage.onnx"), std::ios::binary) << "this is not a model at all";
  EXPECT_EQ(kiln_model_load_file(path("garbage.onnx").c_str(), nullptr, &m), KILN_ERROR_INVALID_MODEL);
  EXPECT_STRNE(kiln_last_error(), "");

  std::ofstream(path("garbage.so"), std::ios::binary) << "\x7f" "ELF and then nothing that makes sense";
  EXPECT_EQ(kiln_model_load_file(path("garbage.so").c_str(), nullptr, &m), KILN_ERROR_INVALID_MODEL);

  // Truncated library: cut inside its loaded segments (the tail of the file may hold only
  // symbols and debug info, which a library can do without), and down to its headers.
  std::string so = read_file(path("small.so"), ErrorKind::kUsage);
  Elf64_Ehdr eh;
  std::memcpy(&eh, so.data(), sizeof eh);
  size_t loaded_end = 0;
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, so.data() + eh.e_phoff + static_cast<size_t>(i) * sizeof ph, sizeof ph);
    if (ph.p_type == PT_LOAD) loaded_end = std::max<size_t>(loaded_end, ph.p_offset + ph.p_filesz);
  }
  ASSERT_GT(loaded_end, 4096u);
  for (size_t keep : {loaded_end - 1, loaded_end / 2, size_t{4096}, size_t{100}}) {
    std::ofstream(path("truncated.so"), std::ios::binary) << so.substr(0, keep);
    EXPECT_EQ(kiln_model_load_file(path("truncated.so").c_str(), nullptr, &m), KILN_ERROR_INVALID_MODEL) << keep;
    EXPECT_NE(std::string(kiln_last_error()).find("truncated"), std::string::npos) << kiln_last_error();
    EXPECT_EQ(kiln_model_load_memory(so.data(), keep, nullptr, &m), KILN_ERROR_INVALID_MODEL) << keep;
  }
  // A shared library that is not a kiln model.
  Dl_info libm;
  ASSERT_NE(dladdr(dlsym(RTLD_DEFAULT, "cos"), &libm), 0);
  EXPECT_EQ(kiln_model_load_file(libm.dli_fname, nullptr, &m), KILN_ERROR_INVALID_MODEL) << libm.dli_fname;
  EXPECT_NE(std::string(kiln_last_error()).find("no kiln seal"), std::string::npos) << kiln_last_error();

  EXPECT_EQ(kiln_model_load_embedded(nullptr, &m), KILN_ERROR_UNSUPPORTED);
  kiln_options bad = KILN_OPTIONS_INIT;
  bad.threads = -1;
  EXPECT_EQ(kiln_model_load_file(path("small.so").c_str(), &bad, &m), KILN_ERROR_INVALID_ARGUMENT);
}

void check_metadata(kiln_model* m) {
  ASSERT_EQ(kiln_model_num_inputs(m), 1u);
  ASSERT_EQ(kiln_model_num_outputs(m), 2u);
  kiln_tensor_info info;
  ASSERT_EQ(kiln_model_input_info(m, 0, &info), KILN_OK);
  EXPECT_STREQ(info.name, "x");
  EXPECT_EQ(info.dtype, KILN_DTYPE_FLOAT32);
  EXPECT_EQ(std::vector<int64_t>(info.dims, info.dims + info.rank), (std::vector<int64_t>{1, 3, 8, 8}));
  ASSERT_EQ(kiln_model_output_info(m, 1, &info), KILN_OK);
  EXPECT_STREQ(info.name, "z");
  EXPECT_EQ(std::vector<int64_t>(info.dims, info.dims + info.rank), (std::vector<int64_t>{1, 5}));
  EXPECT_EQ(kiln_model_output_info(m, 2, &info), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("out of range"), std::string::npos);
}

void check_run_errors(kiln_model* m) {
  std::vector<float> x = input_values(), y(256), z(5);
  kiln_tensor in = tensor(KILN_DTYPE_FLOAT32, {1, 3, 8, 8}, x.data(), x.size() * 4);
  kiln_tensor out[2] = {tensor(KILN_DTYPE_FLOAT32, {}, y.data(), y.size() * 4),
                        tensor(KILN_DTYPE_FLOAT32, {}, z.data(), z.size() * 4)};
  // Output too small.
  out[1].size_bytes = 16;
  EXPECT_EQ(kiln_run(m, &in, 1, out, 2), KILN_ERROR_BAD_INPUT);
  EXPECT_NE(std::string(kiln_last_error()).find("needs 20 bytes"), std::string::npos) << kiln_last_error();
  out[1].size_bytes = 20;
  // Wrong output dtype.
  out[0].dtype = KILN_DTYPE_INT32;
  EXPECT_EQ(kiln_run(m, &in, 1, out, 2), KILN_ERROR_BAD_INPUT);
  EXPECT_NE(std::string(kiln_last_error()).find("dtype"), std::string::npos) << kiln_last_error();
  out[0].dtype = KILN_DTYPE_FLOAT32;
  // Input: wrong shape, too few bytes, wrong dtype, NULL data; wrong counts.
  in.dims[2] = 9;
  EXPECT_EQ(kiln_run(m, &in, 1, out, 2), KILN_ERROR_BAD_INPUT);
  EXPECT_NE(std::string(kiln_last_error()).find("shape"), std::string::npos) << kiln_last_error();
  in.dims[2] = 8;
  in.size_bytes = 100;
  EXPECT_EQ(kiln_run(m, &in, 1, out, 2), KILN_ERROR_BAD_INPUT);
  in.size_bytes = x.size() * 4;
  in.dtype = KILN_DTYPE_FLOAT64;
  EXPECT_EQ(kiln_run(m, &in, 1, out, 2), KILN_ERROR_BAD_INPUT);
  in.dtype = KILN_DTYPE_FLOAT32;
  in.data = nullptr;
  EXPECT_EQ(kiln_run(m, &in, 1, out, 2), KILN_ERROR_INVALID_ARGUMENT);
  in.data = x.data();
  EXPECT_EQ(kiln_run(m, &in, 0, out, 2), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_run(m, &in, 1, out, 1), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_run(m, nullptr, 1, out, 2), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_run(nullptr, &in, 1, out, 2), KILN_ERROR_INVALID_ARGUMENT);
  // And then a good run.
  EXPECT_EQ(kiln_run(m, &in, 1, out, 2), KILN_OK) << kiln_last_error();
  EXPECT_EQ(out[1].rank, 2);
  EXPECT_EQ(out[1].dims[1], 5);
}

TEST_F(CApi, CompiledLibraryMatchesJitBitForBit) {
  kiln_model* m = nullptr;
  kiln_options o = KILN_OPTIONS_INIT;
  o.pack_weights_at_load = 1;  // the memory load below packs lazily (the default)
  o.threads = 2;
  ASSERT_EQ(kiln_model_load_file(path("small.so").c_str(), &o, &m), KILN_OK) << kiln_last_error();
  check_metadata(m);
  EXPECT_EQ(kiln_model_num_signatures(m), 1u);
  check_run_errors(m);
  std::vector<float> x = input_values(), y, z;
  ASSERT_EQ(run_small(m, x, y, z), KILN_OK) << kiln_last_error();
  std::vector<Tensor> want = jit_outputs(x);
  ASSERT_EQ(want.size(), 2u);
  EXPECT_EQ(std::memcmp(want[0].raw(), y.data(), y.size() * 4), 0);
  EXPECT_EQ(std::memcmp(want[1].raw(), z.data(), z.size() * 4), 0);

  // Several threads on one model: same bits.
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 5; ++rep) {
        std::vector<float> xi = input_values(), yi, zi;
        ok[static_cast<size_t>(t)] += run_small(m, xi, yi, zi) == KILN_OK && yi == y && zi == z;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok, (std::vector<int>{5, 5, 5, 5}));
  kiln_model_free(m);

  // From memory (memfd), and through CompiledLibrary.
  std::string so = read_file(path("small.so"), ErrorKind::kUsage);
  ASSERT_EQ(kiln_model_load_memory(so.data(), so.size(), nullptr, &m), KILN_OK) << kiln_last_error();
  std::vector<float> y2, z2;
  ASSERT_EQ(run_small(m, x, y2, z2), KILN_OK) << kiln_last_error();
  EXPECT_EQ(y2, y);
  EXPECT_EQ(z2, z);
  kiln_model_free(m);
  auto lib = CompiledLibrary::open(path("small.so"));
  Tensor xt(DType::kFloat32, {1, 3, 8, 8});
  std::memcpy(xt.raw(), x.data(), xt.nbytes());
  auto outs = lib->run({xt});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(std::memcmp(outs[1].raw(), z.data(), z.size() * 4), 0);
}

TEST_F(CApi, OnnxModel) {
  kiln_model* m = nullptr;
  ASSERT_EQ(kiln_model_load_file(path("small.onnx").c_str(), nullptr, &m), KILN_OK) << kiln_last_error();
  check_metadata(m);
  check_run_errors(m);
  EXPECT_EQ(kiln_model_num_signatures(m), 0u);  // any shapes the graph allows
  std::vector<float> x = input_values(), y, z;
  ASSERT_EQ(run_small(m, x, y, z), KILN_OK) << kiln_last_error();
  std::vector<Tensor> want = jit_outputs(x);
  EXPECT_EQ(std::memcmp(want[0].raw(), y.data(), y.size() * 4), 0);
  EXPECT_EQ(std::memcmp(want[1].raw(), z.data(), z.size() * 4), 0);
  kiln_model_free(m);
  std::string bytes = read_file(path("small.onnx"), ErrorKind::kUsage);
  ASSERT_EQ(kiln_model_load_memory(bytes.data(), bytes.size(), nullptr, &m), KILN_OK) << kiln_last_error();
  ASSERT_EQ(run_small(m, x, y, z), KILN_OK) << kiln_last_error();
  EXPECT_EQ(std::memcmp(want[1].raw(), z.data(), z.size() * 4), 0);
  kiln_model_free(m);
}

// kiln_options.records: tuning records apply to an ONNX model (its conv on the pixel-rows GEMM,
// the same sums in another order: close to the JIT's default kernel); a bad path fails the load.
TEST_F(CApi, OnnxModelWithTuningRecords) {
  const tune::TargetKey here = tune::host_target(1);
  tune::Record dflt, tuned;
  dflt.key = tuned.key = "Conv f32 x1x3x8x8 w4x3x3x3 s1x1 d1x1 p1x1x1x1 g1";
  dflt.target = tuned.target = here;
  dflt.time_us = 10;
  tuned.time_us = 5;
  ASSERT_TRUE(gemm_ops::parse_kernel_choice("algo=gemm-pixel-rows split=1x1", &tuned.choice));
  const std::string records = path("records.jsonl");
  std::remove(records.c_str());
  tune::append_records(records, {dflt, tuned});
  kiln_options o = KILN_OPTIONS_INIT;
  o.records = records.c_str();
  kiln_model* m = nullptr;
  ASSERT_EQ(kiln_model_load_file(path("small.onnx").c_str(), &o, &m), KILN_OK) << kiln_last_error();
  std::vector<float> x = input_values(), y, z;
  ASSERT_EQ(run_small(m, x, y, z), KILN_OK) << kiln_last_error();
  std::vector<Tensor> want = jit_outputs(x);
  for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], want[0].data<float>()[i], 1e-5) << i;
  kiln_model_free(m);
  const std::string missing = path("missing.jsonl");
  o.records = missing.c_str();
  EXPECT_EQ(kiln_model_load_file(path("small.onnx").c_str(), &o, &m), KILN_ERROR_BAD_INPUT);
  EXPECT_NE(std::string(kiln_last_error()).find("cannot open the tuning records"), std::string::npos) << kiln_last_error();
  // Compiled libraries keep their own choices: records are not read.
  ASSERT_EQ(kiln_model_load_file(path("small.so").c_str(), &o, &m), KILN_OK) << kiln_last_error();
  kiln_model_free(m);
}

// kiln_options.offload: the model's conv runs on oneDNN with the JIT's results; an unknown
// backend fails the load naming the available ones.
TEST_F(CApi, OnnxModelWithOffload) {
  register_builtin_backends();
  if (!ext::find_backend("dnnl")) GTEST_SKIP() << "built without oneDNN";
  kiln_options o = KILN_OPTIONS_INIT;
  o.threads = 2;
  o.offload = "dnnl";
  kiln_model* m = nullptr;
  ASSERT_EQ(kiln_model_load_file(path("small.onnx").c_str(), &o, &m), KILN_OK) << kiln_last_error();
  std::vector<float> x = input_values(), y, z;
  ASSERT_EQ(run_small(m, x, y, z), KILN_OK) << kiln_last_error();
  std::vector<Tensor> want = jit_outputs(x);
  for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], want[0].data<float>()[i], 1e-4) << i;
  for (size_t i = 0; i < z.size(); ++i) ASSERT_NEAR(z[i], want[1].data<float>()[i], 1e-4) << i;
  kiln_model_free(m);
  o.offload = "dnnl, nope";
  EXPECT_EQ(kiln_model_load_file(path("small.onnx").c_str(), &o, &m), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("no backend named 'nope'"), std::string::npos) << kiln_last_error();
  // Ahead of time: the library keeps the region and links oneDNN.
  AotOptions ao;
  ao.offload = {"dnnl"};
  const AotResult r = compile_shared_library(path("small.onnx"), path("small_dnnl.so"), ao);
  EXPECT_GT(r.stats.external_nodes, 0);
  kiln_options lo = KILN_OPTIONS_INIT;
  lo.threads = 2;
  ASSERT_EQ(kiln_model_load_file(path("small_dnnl.so").c_str(), &lo, &m), KILN_OK) << kiln_last_error();
  ASSERT_EQ(run_small(m, x, y, z), KILN_OK) << kiln_last_error();
  for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], want[0].data<float>()[i], 1e-4) << i;
  for (size_t i = 0; i < z.size(); ++i) ASSERT_NEAR(z[i], want[1].data<float>()[i], 1e-4) << i;
  kiln_model_free(m);
}

TEST_F(CApi, CompiledExecutorWritesCallerOutputs) {
  Model m = load_onnx_model(path("small.onnx"));
  PassContext ctx;
  run_passes(m, default_pipeline(), ctx);
  CompiledExecutor ex(m);
  std::vector<float> x = input_values(), y(256), z(5);
  Tensor t(DType::kFloat32, {1, 3, 8, 8});
  std::memcpy(t.raw(), x.data(), t.nbytes());
  auto got = ex.run({RtValue(t)}, {OutputBuffer{y.data(), y.size() * 4}, OutputBuffer{z.data(), z.size() * 4}});
  EXPECT_EQ(got[0].tensor.raw(), y.data());
  EXPECT_EQ(got[1].tensor.raw(), z.data());
  auto want = ex.run({RtValue(t)});
  EXPECT_EQ(std::memcmp(want[0].tensor.raw(), y.data(), y.size() * 4), 0);
  EXPECT_EQ(std::memcmp(want[1].tensor.raw(), z.data(), z.size() * 4), 0);
  try {
    ex.run({RtValue(t)}, {OutputBuffer{y.data(), 8}, OutputBuffer{}});
    ADD_FAILURE() << "no error for a small output buffer";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
  }
}

TEST_F(CApi, RuntimeOnlyLibraryRefusesOnnx) {
  void* dl = dlopen(KILN_RUNTIME_SHARED, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(dl, nullptr) << dlerror();
  auto load = reinterpret_cast<decltype(&kiln_model_load_file)>(dlsym(dl, "kiln_model_load_file"));
  auto last_error = reinterpret_cast<decltype(&kiln_last_error)>(dlsym(dl, "kiln_last_error"));
  auto run = reinterpret_cast<decltype(&kiln_run)>(dlsym(dl, "kiln_run"));
  auto free_model = reinterpret_cast<decltype(&kiln_model_free)>(dlsym(dl, "kiln_model_free"));
  ASSERT_TRUE(load && last_error && run && free_model);
  EXPECT_EQ(dlsym(dl, "kiln_parallel_for"), nullptr);  // only the C API is exported
  kiln_model* m = nullptr;
  EXPECT_EQ(load(path("small.onnx").c_str(), nullptr, &m), KILN_ERROR_UNSUPPORTED);
  EXPECT_NE(std::string(last_error()).find("runtime-only library"), std::string::npos) << last_error();
  ASSERT_EQ(load(path("small.so").c_str(), nullptr, &m), KILN_OK) << last_error();
  std::vector<float> x = input_values(), y(256), z(5);
  kiln_tensor in = tensor(KILN_DTYPE_FLOAT32, {1, 3, 8, 8}, x.data(), x.size() * 4);
  kiln_tensor out[2] = {tensor(KILN_DTYPE_FLOAT32, {}, y.data(), y.size() * 4),
                        tensor(KILN_DTYPE_FLOAT32, {}, z.data(), z.size() * 4)};
  EXPECT_EQ(run(m, &in, 1, out, 2), KILN_OK) << last_error();
  std::vector<Tensor> want = jit_outputs(x);
  EXPECT_EQ(std::memcmp(want[1].raw(), z.data(), z.size() * 4), 0);
  free_model(m);
}

// A temporary directory for one test's models and libraries, removed when the test ends (also
// when an assertion returns early).
struct ScratchDir {
  explicit ScratchDir(const std::string& name)
      : path(fs::temp_directory_path() / (name + "_" + std::to_string(::getpid()))) {
    fs::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  // Writes the text-IR model `text` as the ONNX file `file` here; returns its path.
  std::string onnx(const std::string& file, const std::string& text) const {
    const std::string out = (path / file).string();
    std::ofstream(out, std::ios::binary) << serialize_onnx_model(parse_model(text));
    return out;
  }
  std::string operator/(const std::string& file) const { return (path / file).string(); }
  fs::path path;
};

// compile_shared_library(onnx, so, o) must fail with `kind` and a message holding every one of
// `needles`.
void expect_export_error(const std::string& onnx, const std::string& so, const AotOptions& o, ErrorKind kind,
                         const std::vector<std::string>& needles) {
  try {
    compile_shared_library(onnx, so, o);
    ADD_FAILURE() << "exported " << onnx;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

TEST(Aot, FallbackNodesCannotBeExported) {
  ScratchDir dir("kiln_aot_fallback");
  // TopK runs on its reference kernel.
  const std::string topk = dir.onnx("topk.onnx", R"(graph @g(%x: f32[1,10]) -> (%v: f32[1,3], %i: i64[1,3]) {
    %k = const i64[1] [3]
    %v, %i = TopK(%x, %k) : f32[1,3], i64[1,3]
    return %v, %i
  })");
  expect_export_error(topk, dir / "topk.so", AotOptions(), ErrorKind::kUnsupported,
                      {"ahead-of-time export of TopK (node", "reference kernel"});
  EXPECT_FALSE(fs::exists(dir / "topk.so"));
}

// A model with symbolic batch and sequence dims: MatMul + bias + Relu (a GEMM, or a GEMV when
// B*S = 1, and a kernel taking the dims as params) and a mean over the sequence.
std::string symbolic_model_text() {
  std::mt19937_64 rng(5);
  return "graph @g(%x: f32[B,S,256]) -> (%y: f32[B,S,256], %p: f32[B,256]) {\n"
         "  %w = " + rand_const({256, 256}, rng) + "\n"
         "  %b = " + rand_const({256}, rng) + "\n"
         "  %m = MatMul(%x, %w) : f32[B,S,256]\n"
         "  %a = Add(%m, %b) : f32[B,S,256]\n"
         "  %y = Relu(%a) : f32[B,S,256]\n"
         "  %ax = const i64[1] [1]\n"
         "  %p = ReduceMean(%y, %ax) {keepdims=0} : f32[B,256]\n"
         "  return %y, %p\n"
         "}";
}

TEST(Aot, SeveralSignaturesShareWeightsAndMatchTheJit) {
  ScratchDir dir("kiln_aot_signatures");
  const std::string onnx = dir.onnx("sym.onnx", symbolic_model_text()), so = dir / "sym.so";
  AotOptions one;
  one.dims = {{"B", {2}}, {"S", {16}}};
  const AotResult single = compile_shared_library(onnx, dir / "one.so", one);
  AotOptions o;
  o.dims = {{"B", {1, 2}}, {"S", {1, 5, 16}}};
  const AotResult r = compile_shared_library(onnx, so, o);
  EXPECT_EQ(r.signatures, 6);
  // The 256 KB weight is in the blob once.
  EXPECT_LT(r.blob_bytes, single.blob_bytes + 64 * 1024) << single.blob_bytes;

  kiln_model* m = nullptr;
  ASSERT_EQ(kiln_model_load_file(so.c_str(), nullptr, &m), KILN_OK) << kiln_last_error();
  ASSERT_EQ(kiln_model_num_signatures(m), 6u);
  kiln_tensor_info ti;
  ASSERT_EQ(kiln_model_input_info(m, 0, &ti), KILN_OK);
  EXPECT_EQ(std::vector<int64_t>(ti.dims, ti.dims + ti.rank), (std::vector<int64_t>{-1, -1, 256}));
  ASSERT_EQ(kiln_model_output_info(m, 1, &ti), KILN_OK);
  EXPECT_EQ(std::vector<int64_t>(ti.dims, ti.dims + ti.rank), (std::vector<int64_t>{-1, 256}));
  ASSERT_EQ(kiln_model_signature_input(m, 5, 0, &ti), KILN_OK);
  EXPECT_EQ(std::vector<int64_t>(ti.dims, ti.dims + ti.rank), (std::vector<int64_t>{2, 16, 256}));
  EXPECT_EQ(kiln_model_signature_input(m, 6, 0, &ti), KILN_ERROR_INVALID_ARGUMENT);

  Model jm = load_onnx_model(onnx);
  PassContext ctx;
  run_passes(jm, default_pipeline(), ctx);
  CompiledExecutor jit(jm);
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  for (int64_t b : {1, 2})
    for (int64_t s : {1, 5, 16}) {
      SCOPED_TRACE("B=" + std::to_string(b) + " S=" + std::to_string(s));
      Tensor x(DType::kFloat32, {b, s, 256});
      for (int64_t k = 0; k < x.numel(); ++k) x.data<float>()[k] = uni(rng);
      std::vector<float> y(static_cast<size_t>(b * s * 256)), p(static_cast<size_t>(b * 256));
      kiln_tensor in = tensor(KILN_DTYPE_FLOAT32, {b, s, 256}, x.raw(), x.nbytes());
      kiln_tensor out[2] = {tensor(KILN_DTYPE_FLOAT32, {}, y.data(), y.size() * 4),
                            tensor(KILN_DTYPE_FLOAT32, {}, p.data(), p.size() * 4)};
      ASSERT_EQ(kiln_run(m, &in, 1, out, 2), KILN_OK) << kiln_last_error();
      EXPECT_EQ(std::vector<int64_t>(out[0].dims, out[0].dims + out[0].rank), (std::vector<int64_t>{b, s, 256}));
      std::vector<RtValue> want = jit.run({RtValue(x)});
      EXPECT_EQ(std::memcmp(want[0].tensor.raw(), y.data(), y.size() * 4), 0);
      EXPECT_EQ(std::memcmp(want[1].tensor.raw(), p.data(), p.size() * 4), 0);
    }

  // A shape the library was not compiled for, and asking for an output's shape.
  std::vector<float> x7(2 * 7 * 256, 0.5f), y(2 * 16 * 256), p(2 * 256);
  kiln_tensor in = tensor(KILN_DTYPE_FLOAT32, {2, 7, 256}, x7.data(), x7.size() * 4);
  kiln_tensor out[2] = {tensor(KILN_DTYPE_FLOAT32, {}, y.data(), y.size() * 4),
                        tensor(KILN_DTYPE_FLOAT32, {}, p.data(), p.size() * 4)};
  EXPECT_EQ(kiln_run(m, &in, 1, out, 2), KILN_ERROR_BAD_INPUT);
  EXPECT_NE(std::string(kiln_last_error()).find("not among the signatures"), std::string::npos) << kiln_last_error();
  EXPECT_NE(std::string(kiln_last_error()).find("[2,16,256]"), std::string::npos) << kiln_last_error();
  std::vector<float> x16(2 * 16 * 256, 0.5f);
  in = tensor(KILN_DTYPE_FLOAT32, {2, 16, 256}, x16.data(), x16.size() * 4);
  out[0].size_bytes = 0;
  EXPECT_EQ(kiln_run(m, &in, 1, out, 2), KILN_ERROR_BAD_INPUT);
  EXPECT_EQ(std::vector<int64_t>(out[0].dims, out[0].dims + out[0].rank), (std::vector<int64_t>{2, 16, 256}));
  kiln_model_free(m);

  // CompiledLibrary sizes the symbolic outputs itself.
  auto lib = CompiledLibrary::open(so);
  ASSERT_EQ(lib->signatures().size(), 6u);
  Tensor x(DType::kFloat32, {2, 5, 256});
  for (int64_t k = 0; k < x.numel(); ++k) x.data<float>()[k] = uni(rng);
  std::vector<Tensor> got = lib->run({x});
  std::vector<RtValue> want = jit.run({RtValue(x)});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].dims(), (std::vector<int64_t>{2, 5, 256}));
  EXPECT_EQ(std::memcmp(want[0].tensor.raw(), got[0].raw(), got[0].nbytes()), 0);

  // A whole input shape (--shape; what binds dims without names), and one that breaks the rank.
  AotOptions whole;
  whole.shapes = {{"x", {2, 5, 256}}};
  compile_shared_library(onnx, dir / "whole.so", whole);
  EXPECT_EQ(CompiledLibrary::open(dir / "whole.so")->signatures().at(0).at(0).dims, (std::vector<int64_t>{2, 5, 256}));
  whole.shapes = {{"x", {2, 5}}};
  expect_export_error(onnx, dir / "bad_shape.so", whole, ErrorKind::kUsage, {"--shape x=[2,5]"});

  // A --dim name the model does not have.
  AotOptions bad;
  bad.dims = {{"T", {1, 2}}};
  expect_export_error(onnx, dir / "bad.so", bad, ErrorKind::kUsage, {"they have: B, S"});
}

// An If (condition %c) whose then-branch holds another If (%d); the branches read values of the
// enclosing graphs (a GEMM's Relu'd output, a generated kernel's output, a value of the outer
// branch).
std::string if_model_text() {
  std::mt19937_64 rng(7);
  return "graph @main(%x: f32[N,8], %c: bool[], %d: bool[]) -> (%y: f32[N,8]) {\n"
         "  %w = " + rand_const({8, 8}, rng) + "\n"
         "  %m = MatMul(%x, %w) : f32[N,8]\n"
         "  %r = Relu(%m) : f32[N,8]\n"
         "  %e = Exp(%x) : f32[N,8]\n"
         "  %y = If(%c) {else_branch=graph @e() -> (%o2: f32[N,8]) {\n"
         "    %o2 = Neg(%e) : f32[N,8]\n"
         "    return %o2\n"
         "  }, then_branch=graph @t() -> (%o1: f32[N,8]) {\n"
         "    %s = Add(%r, %e) : f32[N,8]\n"
         "    %o1 = If(%d) {else_branch=graph @te() -> (%q2: f32[N,8]) {\n"
         "      %q2 = Sigmoid(%s) : f32[N,8]\n"
         "      return %q2\n"
         "    }, then_branch=graph @tt() -> (%q1: f32[N,8]) {\n"
         "      %q1 = Tanh(%s) : f32[N,8]\n"
         "      return %q1\n"
         "    }} : f32[N,8]\n"
         "    return %o1\n"
         "  }} : f32[N,8]\n"
         "  return %y\n"
         "}";
}

TEST(Aot, IfBranchesAreLibraryPlans) {
  ScratchDir dir("kiln_aot_if");
  const std::string onnx = dir.onnx("if.onnx", if_model_text()), so = dir / "if.so";
  AotOptions o;
  o.dims = {{"N", {1, 3}}};
  const AotResult r = compile_shared_library(onnx, so, o);
  EXPECT_EQ(r.signatures, 2);
  EXPECT_EQ(r.branch_plans, 8);  // per signature: both branches of both Ifs, whichever ran

  Model jm = load_onnx_model(onnx);
  PassContext ctx;
  run_passes(jm, default_pipeline(), ctx);
  CompiledExecutor jit(jm);
  auto lib = CompiledLibrary::open(so);
  for (int64_t n : {1, 3})
    for (int c = 0; c < 2; ++c)
      for (int d = 0; d < 2; ++d) {
        SCOPED_TRACE("N=" + std::to_string(n) + " c=" + std::to_string(c) + " d=" + std::to_string(d));
        Tensor x(DType::kFloat32, {n, 8});
        for (int64_t k = 0; k < x.numel(); ++k) x.set_double(k, std::sin(0.3 * static_cast<double>(k + 5 * c + d)));
        Tensor tc(DType::kBool, {}), td(DType::kBool, {});
        tc.set_double(0, c);
        td.set_double(0, d);
        std::vector<Tensor> got = lib->run({x, tc, td});
        std::vector<RtValue> want = jit.run({RtValue(x), RtValue(tc), RtValue(td)});
        ASSERT_EQ(got.size(), 1u);
        ASSERT_EQ(got[0].dims(), want[0].tensor.dims());
        EXPECT_EQ(std::memcmp(got[0].raw(), want[0].tensor.raw(), got[0].nbytes()), 0);
      }

  // Loop is not a library step (its body runs on nested JIT plans): refused, named.
  const std::string loop = dir.onnx("loop.onnx", R"(graph @g(%n: i64[], %x: f32[2,3]) -> (%y: f32[2,3]) {
    %t = const bool[] [true]
    %y = Loop(%n, %t, %x) {body=graph @body(%i: i64[], %cond: bool[], %v: f32[2,3]) -> (%cond_out: bool[], %v_out: f32[2,3]) {
      %cond_out = Identity(%cond) : bool[]
      %v_out = Add(%v, %v) : f32[2,3]
      return %cond_out, %v_out
    }} : f32[2,3]
    return %y
  })");
  expect_export_error(loop, dir / "loop.so", AotOptions(), ErrorKind::kUnsupported,
                      {"ahead-of-time export of Loop (node"});
}

}  // namespace
}  // namespace kiln
