// The extension API end to end with test backends registered through ext::register_backend: a
// region runs through a backend's module, and a backend that throws at codegen, load or run
// yields an Error naming the backend and the region (never a crash); bad --offload names.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>

#include "driver/session.h"
#include "offload_test_util.h"

namespace kiln {
namespace {

// Supports Relu and Add; its module computes them itself (so a region's result shows the module
// ran: `Add` here is y = a + b + `bias`). `fail_at` makes codegen, load or run throw.
class TestBackend : public ext::Backend {
 public:
  TestBackend(std::string name, std::string fail_at, float bias = 0) : name_(std::move(name)), fail_at_(std::move(fail_at)), bias_(bias) {}
  std::string name() const override { return name_; }
  bool supports(const ext::Region& r, const ext::Node& n) const override {
    if (n.op != "Relu" && n.op != "Add") return false;
    for (int v : n.inputs)
      if (r.values[static_cast<size_t>(v)].type != ext::ElementType::kFloat32) return false;
    return true;
  }
  double min_region_cost() const override { return 1; }
  std::string codegen(const ext::Region& r) const override {
    if (fail_at_ == "codegen") throw std::runtime_error("codegen exploded");
    return std::to_string(r.nodes.size());
  }
  std::unique_ptr<ext::RuntimeModule> load(const std::string& artifact, const ext::Region& r,
                                           const ext::ModuleOptions&) const override;

 private:
  std::string name_, fail_at_;
  float bias_;
};

class TestModule : public ext::RuntimeModule {
 public:
  TestModule(ext::Region r, bool fail, float bias) : r_(std::move(r)), fail_(fail), bias_(bias) {}
  void run(const std::vector<ext::TensorRef>& ins, const std::vector<ext::TensorRef>& outs) override {
    if (fail_) throw std::runtime_error("the accelerator caught fire");
    std::map<int, std::vector<float>> vals;
    for (size_t k = 0; k < ins.size(); ++k) {
      const float* p = static_cast<const float*>(ins[k].data);
      vals[r_.inputs[k]].assign(p, p + r_.values[static_cast<size_t>(r_.inputs[k])].elements());
    }
    for (const ext::Node& n : r_.nodes) {
      std::vector<float> out = vals.at(n.inputs[0]);
      for (size_t i = 0; i < out.size(); ++i)
        out[i] = n.op == "Relu" ? std::max(out[i], 0.f) : out[i] + vals.at(n.inputs[1])[i] + bias_;
      vals[n.outputs[0]] = out;
    }
    for (size_t k = 0; k < outs.size(); ++k)
      std::memcpy(outs[k].data, vals.at(r_.outputs[k]).data(), vals.at(r_.outputs[k]).size() * sizeof(float));
  }

 private:
  ext::Region r_;
  bool fail_;
  float bias_;
};

std::unique_ptr<ext::RuntimeModule> TestBackend::load(const std::string& artifact, const ext::Region& r,
                                                      const ext::ModuleOptions&) const {
  if (fail_at_ == "load") throw std::runtime_error("no device");
  if (artifact != std::to_string(r.nodes.size())) throw std::runtime_error("artifact mismatch");
  return std::make_unique<TestModule>(r, fail_at_ == "run", bias_);
}

void register_once() {
  static bool done = [] {
    ext::register_backend(std::make_shared<TestBackend>("test_ok", ""));
    ext::register_backend(std::make_shared<TestBackend>("test_biased", "", 1.0f));
    ext::register_backend(std::make_shared<TestBackend>("test_codegen_fails", "codegen"));
    ext::register_backend(std::make_shared<TestBackend>("test_load_fails", "load"));
    ext::register_backend(std::make_shared<TestBackend>("test_run_fails", "run"));
    return true;
  }();
  (void)done;
}

const char* kModel = R"(graph @main(%x: f32[2,3], %y: f32[2,3]) -> (%z: ?[...]) {
  %r = Relu(%x)
  %s = Add(%r, %y)
  %z = Sigmoid(%s)
  return %z
})";

TEST(Offload, RegionRunsThroughTheBackendModule) {
  register_once();
  const CompileStats s = test::offload_agrees(kModel, {"test_ok"});
  EXPECT_EQ(s.external_regions, 1);
  EXPECT_EQ(s.external_nodes, 2);
}

TEST(Offload, ModuleResultIsWhatTheModelReturns) {
  register_once();
  // The biased backend adds 1 in its Add: the outputs differ from the reference, so the
  // comparison fails (proving the module's results are used).
  EXPECT_NONFATAL_FAILURE(test::offload_agrees(kModel, {"test_biased"}), "output 0");
}

void expect_error(const std::string& backend, ErrorKind kind, const std::string& words) {
  register_once();
  try {
    test::offload_agrees(kModel, {backend});
    ADD_FAILURE() << "no error from " << backend;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    const std::string what = e.what();
    EXPECT_NE(what.find("'" + backend + "'"), std::string::npos) << what;
    EXPECT_NE(what.find(backend + "_0"), std::string::npos) << what;  // the region
    EXPECT_NE(what.find(words), std::string::npos) << what;
  }
}

TEST(Offload, BackendFailuresAreErrorsNamingBackendAndRegion) {
  expect_error("test_codegen_fails", ErrorKind::kUnsupported, "codegen exploded");
  expect_error("test_load_fails", ErrorKind::kUnsupported, "no device");
  expect_error("test_run_fails", ErrorKind::kInternal, "caught fire");
}

// Symbolic dims: each input-shape signature gets its own module, loaded for its bound dims.
TEST(Offload, EachSignatureLoadsTheRegionForItsDims) {
  register_once();
  Model m = parse_model(R"(graph @main(%x: f32[N,3], %y: f32[N,3]) -> (%z: ?[...]) {
  %r = Relu(%x)
  %s = Add(%r, %y)
  %z = Sigmoid(%s)
  return %z
})");
  PassContext ctx;
  ctx.offload = offload_backends({"test_ok"});
  run_passes(m, default_pipeline(), ctx);
  CompiledExecutor exec(m);
  Interpreter interp(m);
  for (int64_t n : {2, 5, 2}) {
    std::vector<RtValue> feeds;
    for (int k = 0; k < 2; ++k) {
      Tensor t(DType::kFloat32, {n, 3});
      for (int64_t i = 0; i < t.numel(); ++i) t.set_double(i, 0.25 * static_cast<double>(i % 7) - 0.7 * k);
      feeds.emplace_back(std::move(t));
    }
    EXPECT_TRUE(test::outputs_agree(exec.run(feeds), interp.run(feeds), "N=" + std::to_string(n)));
    EXPECT_EQ(exec.stats().external_regions, 1);
  }
}

TEST(Offload, UnknownAndRepeatedBackendNamesAreUsageErrors) {
  register_once();
  try {
    offload_backends({"no_such_backend"});
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUsage);
    EXPECT_NE(std::string(e.what()).find("available:"), std::string::npos);
  }
  EXPECT_THROW(offload_backends({"test_ok", "test_ok"}), Error);
  EXPECT_THROW(ext::register_backend(std::make_shared<TestBackend>("test_ok", "")), std::invalid_argument);
  EXPECT_THROW(ext::register_backend(std::make_shared<TestBackend>("Bad-Name", "")), std::invalid_argument);
  SessionOptions so;
  so.offload = {"test_ok"};
  EXPECT_THROW(Session(parse_model(kModel), so), Error);  // the interpreter does not offload
}

}  // namespace
}  // namespace kiln
