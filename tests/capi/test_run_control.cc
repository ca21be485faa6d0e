// Run control through the C API and the engines: cancellation from another thread (kiln_cancel)
// stops a running model and leaves it usable, timeouts (kiln_options.run_timeout_ms), the memory
// budget (max_memory_bytes) at load and per input shape, on ONNX models, compiled libraries and
// the interpreter; and the seal that compiled libraries carry (runtime/library_seal.h).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include <unistd.h>

#include "core/run_control.h"
#include "driver/aot.h"
#include "driver/session.h"
#include "frontend/onnx/onnx_io.h"
#include "frontend/onnx/proto_util.h"
#include "ir/text.h"
#include "kiln/c_api.h"
#include "runtime/library_seal.h"
#include "../common/matmul_chain.h"
#include "../common/random_const.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
constexpr int64_t kN = 384;  // MatMul size of the slow model
constexpr int kChain = 48;   // MatMuls in a row: a run of some 100-500 ms

std::string chain_text() { return test::matmul_chain_text(kN, kChain); }

fs::path scratch(const char* name) {
  fs::path d = fs::temp_directory_path() / ("kiln_run_control_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d / name;
}

std::string write_model(const std::string& text, const char* name) {
  const fs::path p = scratch(name);
  std::ofstream(p, std::ios::binary) << serialize_onnx_model(parse_model(text));
  return p.string();
}

struct ChainIo {
  std::vector<float> x = std::vector<float>(kN * kN), w = std::vector<float>(kN * kN), y = std::vector<float>(kN * kN);
  kiln_tensor in[2]{}, out{};
  ChainIo() {
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = static_cast<float>((i * 7919) % 97) / 97.0f;
      w[i] = static_cast<float>((i * 104729) % 89) / (89.0f * kN);
    }
    for (int k = 0; k < 2; ++k) {
      in[k].dtype = KILN_DTYPE_FLOAT32;
      in[k].rank = 2;
      in[k].dims[0] = in[k].dims[1] = kN;
      in[k].data = k == 0 ? x.data() : w.data();
      in[k].size_bytes = x.size() * 4;
    }
    out.dtype = KILN_DTYPE_FLOAT32;
    out.data = y.data();
    out.size_bytes = y.size() * 4;
  }
  kiln_status run(kiln_model* m) { return kiln_run(m, in, 2, &out, 1); }
};

TEST(RunControl, CancelStopsARunAndTheModelStaysUsable) {
  kiln_model* m = nullptr;
  ASSERT_EQ(kiln_model_load_file(write_model(chain_text(), "chain.onnx").c_str(), nullptr, &m), KILN_OK)
      << kiln_last_error();
  ChainIo io;
  ASSERT_EQ(io.run(m), KILN_OK) << kiln_last_error();  // compiles the plan
  const std::vector<float> expected = io.y;
  // A cancel with no run in progress does not affect later runs.
  kiln_cancel(m);
  ASSERT_EQ(io.run(m), KILN_OK) << kiln_last_error();
  // Cancel a run in progress (a few tries: on a very busy machine the cancel may come before
  // the run thread starts, which leaves that run alone).
  bool cancelled = false;
  for (int attempt = 0; attempt < 5 && !cancelled; ++attempt) {
    std::atomic<kiln_status> status{KILN_OK};
    std::string message;
    std::thread runner([&] {
      status = io.run(m);
      message = kiln_last_error();
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(15));
    kiln_cancel(m);
    runner.join();
    if (status == KILN_ERROR_CANCELLED) {
      cancelled = true;
      EXPECT_NE(message.find("cancelled"), std::string::npos) << message;
    } else {
      EXPECT_EQ(status, KILN_OK) << message;
    }
  }
  EXPECT_TRUE(cancelled);
  ASSERT_EQ(io.run(m), KILN_OK) << kiln_last_error();
  EXPECT_EQ(std::memcmp(io.y.data(), expected.data(), expected.size() * 4), 0);
  EXPECT_STREQ(kiln_status_name(KILN_ERROR_CANCELLED), "cancelled");
  kiln_cancel(nullptr);
  kiln_model_free(m);
}

TEST(RunControl, TimeoutStopsARun) {
  kiln_options o = KILN_OPTIONS_INIT;
  o.run_timeout_ms = 1;  // each of the 48 MatMuls alone takes about that
  kiln_model* m = nullptr;
  ASSERT_EQ(kiln_model_load_file(write_model(chain_text(), "chain_timeout.onnx").c_str(), &o, &m), KILN_OK);
  ChainIo io;
  for (int i = 0; i < 2; ++i) {  // the first run compiles, the second runs the cached plan
    EXPECT_EQ(io.run(m), KILN_ERROR_TIMEOUT) << kiln_last_error();
    EXPECT_NE(std::string(kiln_last_error()).find("timeout of 0.001 s"), std::string::npos) << kiln_last_error();
  }
  kiln_model_free(m);
  o.run_timeout_ms = -1;
  EXPECT_EQ(kiln_model_load_file(write_model(chain_text(), "chain_timeout.onnx").c_str(), &o, &m),
            KILN_ERROR_INVALID_ARGUMENT);
}

TEST(RunControl, RunScopeChecks) {
  EXPECT_NO_THROW(check_run());  // no scope: nothing to check
  Canceller c;
  RunScope outer(&c, 0);
  EXPECT_NO_THROW(check_run());
  {
    RunScope inner(nullptr, 1e-9);
    std::this_thread::sleep_for(std::chrono::microseconds(10));
    try {
      check_run();
      FAIL() << "no timeout";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kTimeout);
      EXPECT_EQ(exit_code(e.kind()), 5);
    }
  }
  EXPECT_NO_THROW(check_run());  // the outer scope again
  c.cancel();
  try {
    check_run();
    FAIL() << "not cancelled";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kCancelled);
  }
  RunScope later(&c, 0);  // opened after the cancel: not cancelled
  EXPECT_NO_THROW(check_run());
}

// Conv weights (4x3x3x3) and a 1x4x64x64 activation: weights 432 bytes, activations 64 KB.
std::string conv_text() {
  std::mt19937_64 rng(5);
  return "graph @g(%x: f32[1,3,64,64]) -> (%y: f32[1,4,64,64]) {\n"
         "  %w = " + test::rand_const({4, 3, 3, 3}, rng) + "\n"
         "  %c = Conv(%x, %w) {pads=[1, 1, 1, 1]} : f32[1,4,64,64]\n"
         "  %y = Relu(%c) : f32[1,4,64,64]\n"
         "  return %y\n"
         "}";
}

TEST(RunControl, MemoryBudget) {
  const std::string onnx = write_model(conv_text(), "conv.onnx");
  kiln_options o = KILN_OPTIONS_INIT;
  kiln_model* m = nullptr;
  o.max_memory_bytes = 100;  // less than the weights
  EXPECT_EQ(kiln_model_load_file(onnx.c_str(), &o, &m), KILN_ERROR_RESOURCE_LIMIT);
  EXPECT_NE(std::string(kiln_last_error()).find("weights need 432 bytes"), std::string::npos) << kiln_last_error();
  o.max_memory_bytes = 8192;  // the weights fit, the output (64 KB) does not
  ASSERT_EQ(kiln_model_load_file(onnx.c_str(), &o, &m), KILN_OK) << kiln_last_error();
  std::vector<float> x(3 * 64 * 64, 1.0f), y(4 * 64 * 64);
  kiln_tensor in{KILN_DTYPE_FLOAT32, 4, {1, 3, 64, 64}, x.data(), x.size() * 4};
  kiln_tensor out{KILN_DTYPE_FLOAT32, 0, {0}, y.data(), y.size() * 4};
  EXPECT_EQ(kiln_run(m, &in, 1, &out, 1), KILN_ERROR_RESOURCE_LIMIT);
  EXPECT_NE(std::string(kiln_last_error()).find("these input shapes need"), std::string::npos) << kiln_last_error();
  kiln_model_free(m);
  o.max_memory_bytes = 1 << 20;
  ASSERT_EQ(kiln_model_load_file(onnx.c_str(), &o, &m), KILN_OK) << kiln_last_error();
  EXPECT_EQ(kiln_run(m, &in, 1, &out, 1), KILN_OK) << kiln_last_error();
  kiln_model_free(m);

  // A compiled library: the whole budget is known at load.
  const std::string so = scratch("conv.so").string();
  compile_shared_library(onnx, so, AotOptions{});
  o.max_memory_bytes = 8192;
  EXPECT_EQ(kiln_model_load_file(so.c_str(), &o, &m), KILN_ERROR_RESOURCE_LIMIT);
  EXPECT_NE(std::string(kiln_last_error()).find("the compiled model needs"), std::string::npos) << kiln_last_error();
  o.max_memory_bytes = 0;
  ASSERT_EQ(kiln_model_load_file(so.c_str(), &o, &m), KILN_OK) << kiln_last_error();
  kiln_model_free(m);

  // The interpreter counts the values a run holds, node by node.
  SessionOptions so_opts;
  so_opts.max_memory_bytes = 8192;
  Session interp(parse_model(conv_text()), so_opts);
  try {
    interp.run({RtValue(Tensor(DType::kFloat32, {1, 3, 64, 64}))});
    FAIL() << "no resource limit";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kResourceLimit);
    EXPECT_EQ(e.where().op, "Conv") << e.what();
  }
  EXPECT_EQ(parse_byte_size("512M", "--max-memory"), int64_t{512} << 20);
  EXPECT_EQ(parse_byte_size("1.5GiB", "--max-memory"), int64_t{3} << 29);
  EXPECT_EQ(parse_byte_size("4096", "--max-memory"), 4096);
  EXPECT_THROW(parse_byte_size("lots", "--max-memory"), Error);
  EXPECT_THROW(parse_byte_size("5X", "--max-memory"), Error);
}

TEST(LibrarySeal, DamagedLibrariesAreRefusedBeforeDlopen) {
  const std::string so = scratch("seal.so").string();
  compile_shared_library(write_model(conv_text(), "seal.onnx"), so, AotOptions{});
  const std::string bytes = read_file(so, ErrorKind::kUsage);
  EXPECT_EQ(check_library_image(bytes.data(), bytes.size()), "");
  kiln_model* m = nullptr;
  auto refused = [&](const std::string& image, const char* why) {
    EXPECT_NE(check_library_image(image.data(), image.size()).find(why), std::string::npos)
        << check_library_image(image.data(), image.size());
    EXPECT_EQ(kiln_model_load_memory(image.data(), image.size(), nullptr, &m), KILN_ERROR_INVALID_MODEL);
    EXPECT_NE(std::string(kiln_last_error()).find(why), std::string::npos) << kiln_last_error();
  };
  // One flipped bit anywhere: in the headers, the code, the plan, the seal itself.
  for (size_t at : {size_t{200}, bytes.size() / 3, bytes.size() / 2, bytes.size() - 40, bytes.size() - 1}) {
    std::string damaged = bytes;
    damaged[at] = static_cast<char>(damaged[at] ^ 0x10);
    const std::string what = check_library_image(damaged.data(), damaged.size());
    EXPECT_NE(what, "") << "a flipped bit at " << at << " went unnoticed";
    EXPECT_EQ(kiln_model_load_memory(damaged.data(), damaged.size(), nullptr, &m), KILN_ERROR_INVALID_MODEL) << at;
  }
  refused(bytes.substr(0, bytes.size() - 1), "no kiln seal");
  refused(bytes + "x", "no kiln seal");
  std::string extended = bytes.substr(0, bytes.size() - kLibrarySealBytes) + std::string(64, '\0') +
                         bytes.substr(bytes.size() - kLibrarySealBytes);
  refused(extended, "truncated or extended");
  refused(bytes.substr(0, bytes.size() - kLibrarySealBytes), "no kiln seal");
  // The file path and the CLI's loader check the same.
  std::ofstream(scratch("stripped.so"), std::ios::binary) << bytes.substr(0, bytes.size() - kLibrarySealBytes);
  EXPECT_EQ(kiln_model_load_file(scratch("stripped.so").c_str(), nullptr, &m), KILN_ERROR_INVALID_MODEL);
  try {
    CompiledLibrary::open(scratch("stripped.so").string());
    FAIL() << "an unsealed library loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidModel);
    EXPECT_NE(std::string(e.what()).find("no kiln seal"), std::string::npos) << e.what();
  }
  ASSERT_EQ(kiln_model_load_memory(bytes.data(), bytes.size(), nullptr, &m), KILN_OK) << kiln_last_error();
  kiln_model_free(m);
  EXPECT_NE(seal_hash("abc", 3), seal_hash("abd", 3));
  EXPECT_NE(seal_hash(bytes.data(), 64), seal_hash(bytes.data(), 65));
}

}  // namespace
}  // namespace kiln
