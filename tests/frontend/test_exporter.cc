// ONNX export: import -> export -> import gives the same text IR (every backend-test model that
// imports), kiln.* annotations are dropped, kiln composite ops become standard ONNX ops or their
// primitive expansions (numerically checked with the interpreter), external data for big weights.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "core/error.h"
#include "frontend/onnx/onnx_io.h"
#include "frontend/onnx/proto_util.h"
#include "ir/text.h"
#include "runtime/interpreter.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

const char* kTestData = "/usr/share/libonnx-testdata/data";

// The text IR with the producer cleared (export always writes producer "kiln").
std::string normalized_text(Model m) {
  m.producer_name.clear();
  m.producer_version.clear();
  return print_model(m);
}

Model reimport(const Model& m) {
  std::string bytes = serialize_onnx_model(m);
  return load_onnx_model_from_bytes(bytes.data(), bytes.size(), "exported.onnx");
}

onnx::ModelProto parse_proto_bytes(const std::string& bytes) {
  onnx::ModelProto p;
  EXPECT_TRUE(p.ParseFromString(bytes));
  return p;
}

TEST(Exporter, RoundTripsEveryBackendTestModel) {
  if (!fs::exists(kTestData)) GTEST_SKIP() << "libonnx-testdata is not installed";
  int imported = 0, round_tripped = 0;
  std::vector<std::string> not_importable, failed;
  for (const char* suite : {"node", "simple", "pytorch-converted", "pytorch-operator"}) {
    fs::path dir = fs::path(kTestData) / suite;
    if (!fs::exists(dir)) continue;
    std::vector<fs::path> cases;
    for (const auto& e : fs::directory_iterator(dir))
      if (fs::exists(e.path() / "model.onnx")) cases.push_back(e.path());
    std::sort(cases.begin(), cases.end());
    for (const auto& c : cases) {
      const std::string name = std::string(suite) + "/" + c.filename().string();
      Model m;
      try {
        m = load_onnx_model((c / "model.onnx").string());
      } catch (const Error& e) {
        not_importable.push_back(name + ": " + e.message());
        continue;
      }
      ++imported;
      try {
        Model back = reimport(m);
        if (normalized_text(back) == normalized_text(m)) {
          ++round_tripped;
          continue;
        }
        failed.push_back(name + ": text IR differs after export");
      } catch (const Error& e) {
        failed.push_back(name + ": " + e.what());
      }
    }
  }
  std::cout << "[exporter] " << round_tripped << " of " << imported << " imported backend-test models round-trip; "
            << not_importable.size() << " do not import (not counted):\n";
  for (const auto& s : not_importable) std::cout << "  not importable: " << s << "\n";
  for (const auto& s : failed) ADD_FAILURE() << s;
  EXPECT_GT(imported, 900);
  EXPECT_EQ(round_tripped, imported);
}

TEST(Exporter, KeepsTypesMetadataAndSubgraphs) {
  const char* text = R"(model ir=9 opsets={"": 18} producer="x" "1"
metadata {"author": "me", "k": "v"}
graph @main(%x: f32[N,seq,4], %c: bool[], %s: seq<f32[?]>, %o: opt<i64[2]>, %d: f32[4] = default) -> (%y: f32[N,seq,4], %z: f32[...], %e: seq<f32[?]>) {
  %d = const f32[4] [1, 2, 3, 4]
  %k = const f32[] [0.5]
  %a = Add(%x, %d) {kiln.group=3} : f32[N,seq,4]
  %y = Mul(%a, %k) : f32[N,seq,4]
  %z = If(%c) {else_branch=graph @else_body() -> (%eo: f32[4]) {
    %two = const f32[4] [2, 2, 2, 2]
    %eo = Mul(%d, %two) : f32[4]
    return %eo
  }, then_branch=graph @then_body() -> (%to: f32[4]) {
    %to = Neg(%d) : f32[4]
    return %to
  }} : f32[...]
  %t = Optional() {type=type<f32[3]>} : opt<f32[3]>
  %e = SequenceInsert(%s, %d) : seq<f32[?]>
  return %y, %z, %e
}
)";
  Model m = parse_model(text);
  Model back = reimport(m);
  // The kiln.* annotation is the only difference.
  m.graph->nodes[0]->attrs.erase("kiln.group");
  EXPECT_EQ(normalized_text(back), normalized_text(m));
  onnx::ModelProto p = parse_proto_bytes(serialize_onnx_model(m));
  EXPECT_EQ(p.producer_name(), "kiln");
  EXPECT_EQ(p.ir_version(), 9);
  EXPECT_EQ(p.graph().input(0).type().tensor_type().shape().dim(0).dim_param(), "N");
  EXPECT_EQ(p.graph().input(0).type().tensor_type().shape().dim(1).dim_param(), "seq");
  EXPECT_TRUE(p.graph().input(2).type().has_sequence_type());
  EXPECT_TRUE(p.graph().input(3).type().has_optional_type());
  EXPECT_EQ(p.metadata_props_size(), 2);
  // Typed intermediates get value_info.
  bool found = false;
  for (const auto& vi : p.graph().value_info()) found |= vi.name() == "a";
  EXPECT_TRUE(found);
}

TEST(Exporter, RenamesEmptyAndClashingValueNames) {
  Model m = parse_model(R"(graph @main(%x: f32[2]) -> (%y: f32[2]) {
  %y = Neg(%x) : f32[2]
  return %y
})");
  Graph& g = *m.graph;
  // An unnamed intermediate inserted by a (hypothetical) pass.
  Value* tmp = g.add_value("", Type::tensor(DType::kFloat32, Shape::of({2})));
  Node* relu = g.add_node("Relu", {g.inputs[0]}, {tmp});
  g.nodes.back().swap(g.nodes.front());  // Relu first
  g.nodes.back()->inputs[0] = tmp;
  (void)relu;
  Model back = reimport(m);
  ASSERT_EQ(back.graph->nodes.size(), 2u);
  EXPECT_FALSE(back.graph->nodes[0]->outputs[0]->name.empty());
  EXPECT_EQ(back.graph->nodes[1]->inputs[0], back.graph->nodes[0]->outputs[0]);
}

TEST(Exporter, OldIrVersionWritesConstantsAsNodes) {
  Model m = parse_model(R"(model ir=3 opsets={"": 8}
graph @main(%x: f32[2]) -> (%y: f32[2]) {
  %k = const f32[2] [1, 2]
  %y = Add(%x, %k) : f32[2]
  return %y
})");
  onnx::ModelProto p = parse_proto_bytes(serialize_onnx_model(m));
  EXPECT_EQ(p.graph().initializer_size(), 0);
  ASSERT_EQ(p.graph().node_size(), 2);
  EXPECT_EQ(p.graph().node(0).op_type(), "Constant");
  EXPECT_EQ(normalized_text(reimport(m)), normalized_text(m));
}

TEST(Exporter, ExternalDataForLargeInitializers) {
  // Build the big constant by hand (600 floats = 2400 bytes, above the 1 KiB inline limit).
  Model m = parse_model(R"(model ir=8 opsets={"": 17}
graph @main(%x: f32[600]) -> (%y: f32[600]) {
  %small = const f32[1] [3]
  %y = Mul(%x, %small) : f32[600]
  return %y
})");
  Value* big = m.graph->add_value("big", Type::tensor(DType::kFloat32, Shape::of({600})));
  big->initializer = Tensor(DType::kFloat32, {600});
  for (int i = 0; i < 600; ++i) big->initializer.data<float>()[i] = static_cast<float>(i) * 0.25f;
  m.graph->constants.insert(m.graph->constants.begin(), big);
  Value* a = m.graph->add_value("a", Type::tensor(DType::kFloat32, Shape::of({600})));
  m.graph->add_node("Add", {m.graph->inputs[0], big}, {a});
  std::rotate(m.graph->nodes.begin(), m.graph->nodes.end() - 1, m.graph->nodes.end());
  m.graph->nodes[1]->inputs[0] = a;

  fs::path dir = fs::temp_directory_path() / ("kiln_export_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "m.onnx").string();
  ExportOptions opts;
  opts.external_data_threshold = 1000;
  save_onnx_model(m, path, opts);
  ASSERT_TRUE(fs::exists(path + ".data"));
  EXPECT_GE(fs::file_size(path + ".data"), 2400u);
  std::string bytes = read_file(path, ErrorKind::kUsage);
  onnx::ModelProto p = parse_proto_bytes(bytes);
  int external = 0;
  for (const auto& t : p.graph().initializer())
    if (t.data_location() == onnx::TensorProto::EXTERNAL) {
      ++external;
      EXPECT_EQ(t.name(), "big");
      EXPECT_EQ(t.external_data(0).value(), "m.onnx.data");
    }
  EXPECT_EQ(external, 1);  // the 4-byte constant stays inline
  Model back = load_onnx_model(path);
  EXPECT_EQ(normalized_text(back), normalized_text(m));
  fs::remove_all(dir);
}

// Runs a one-input f32 model through the interpreter.
std::vector<float> run_f32(const Model& m, const std::vector<int64_t>& dims, const std::vector<float>& x) {
  Interpreter interp(m);
  Tensor t(DType::kFloat32, dims);
  std::copy(x.begin(), x.end(), t.data<float>());
  Tensor y = interp.run({RtValue(t)})[0].tensor;
  return std::vector<float>(y.data<float>(), y.data<float>() + y.numel());
}

std::vector<std::string> ops_of(const Model& m) {
  std::vector<std::string> ops;
  for (const auto& n : m.graph->nodes) ops.push_back(n->qualified_op());
  return ops;
}

struct CompositeCase {
  std::string body;    // the kiln:: node line(s)
  int64_t std_opset;   // opset with the standard op (0: none)
  std::string std_op;
  std::function<float(float, int)> ref;  // element i of the reference output
};

TEST(Exporter, CompositesBecomeStandardOpsOrExpansions) {
  const std::vector<float> x = {-3.f, -1.5f, -0.2f, 0.f, 0.7f, 1.f, 2.5f, 4.f};
  std::vector<CompositeCase> cases = {
      {"%y = kiln::Gelu(%x) : f32[2,4]", 20, "Gelu",
       [](float v, int) { return 0.5f * v * (1.f + std::erf(v / std::sqrt(2.f))); }},
      {"%y = kiln::Gelu(%x) {approximate=\"tanh\"} : f32[2,4]", 20, "Gelu",
       [](float v, int) {
         return 0.5f * v * (1.f + std::tanh(std::sqrt(2.f / 3.14159265f) * (v + 0.044715f * v * v * v)));
       }},
      {"%y = kiln::Silu(%x) : f32[2,4]", 0, "", [](float v, int) { return v / (1.f + std::exp(-v)); }},
      {"%y = kiln::HardSwish(%x) : f32[2,4]", 14, "HardSwish",
       [](float v, int) { return v * std::max(0.f, std::min(1.f, v / 6.f + 0.5f)); }},
  };
  // LayerNormalization over the last axis of [2,4] with scale and bias.
  auto ln_ref = [&](float, int i) {
    int row = i / 4;
    float mean = 0, var = 0;
    for (int k = 0; k < 4; ++k) mean += x[row * 4 + k] / 4;
    for (int k = 0; k < 4; ++k) var += (x[row * 4 + k] - mean) * (x[row * 4 + k] - mean) / 4;
    const float scale[4] = {1.f, 2.f, 0.5f, -1.f}, bias[4] = {0.f, 1.f, -1.f, 0.25f};
    return (x[i] - mean) / std::sqrt(var + 1e-5f) * scale[i % 4] + bias[i % 4];
  };
  cases.push_back({"%y = kiln::LayerNorm(%x, %sc, %b) {axis=-1, epsilon=1e-05} : f32[2,4]", 17,
                   "LayerNormalization", ln_ref});
  auto ln_plain = [&](float, int i) {
    int row = i / 4;
    float mean = 0, var = 0;
    for (int k = 0; k < 4; ++k) mean += x[row * 4 + k] / 4;
    for (int k = 0; k < 4; ++k) var += (x[row * 4 + k] - mean) * (x[row * 4 + k] - mean) / 4;
    return (x[i] - mean) / std::sqrt(var + 1e-5f);
  };
  cases.push_back({"%y = kiln::LayerNorm(%x) {axis=1} : f32[2,4]", 0, "", ln_plain});
  for (const auto& c : cases) {
    for (int64_t opset : {13L, 18L, 20L}) {
      SCOPED_TRACE(c.body + " at opset " + std::to_string(opset));
      std::string text = "model ir=8 opsets={\"\": " + std::to_string(opset) + ", \"kiln\": 1}\n" +
                         "graph @main(%x: f32[2,4]) -> (%y: f32[2,4]) {\n" +
                         "  %sc = const f32[4] [1, 2, 0.5, -1]\n  %b = const f32[4] [0, 1, -1, 0.25]\n  " + c.body +
                         "\n  return %y\n}\n";
      Model m = parse_model(text);
      std::string bytes = serialize_onnx_model(m);
      onnx::ModelProto p = parse_proto_bytes(bytes);
      for (const auto& os : p.opset_import()) EXPECT_NE(os.domain(), "kiln");
      Model back = load_onnx_model_from_bytes(bytes.data(), bytes.size(), "exported.onnx");
      std::vector<std::string> ops = ops_of(back);
      if (c.std_opset && opset >= c.std_opset) {
        ASSERT_EQ(ops.size(), 1u);
        EXPECT_EQ(ops[0], c.std_op);
      } else {
        EXPECT_GT(ops.size(), 1u);
      }
      for (const auto& op : ops) EXPECT_EQ(op.find("kiln::"), std::string::npos);
      std::vector<float> y = run_f32(back, {2, 4}, x);
      ASSERT_EQ(y.size(), x.size());
      for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(y[i], c.ref(x[i], static_cast<int>(i)), 1e-4f) << "at " << i;
    }
  }
}

TEST(Exporter, AttentionExpansion) {
  // Q,K,V [1,2,3] (batch, seq, head 3): softmax(Q K^T / sqrt(3)) V.
  Model m = parse_model(R"(model ir=8 opsets={"": 17, "kiln": 1}
graph @main(%q: f32[1,2,3]) -> (%y: f32[1,2,3]) {
  %k = const f32[1,2,3] [1, 0, 0, 0, 1, 0]
  %v = const f32[1,2,3] [1, 2, 3, 4, 5, 6]
  %y = kiln::Attention(%q, %k, %v) {scale=0.57735026} : f32[1,2,3]
  return %y
})");
  Model back = reimport(m);
  for (const auto& op : ops_of(back)) EXPECT_EQ(op.find("kiln::"), std::string::npos);
  std::vector<float> q = {1, 2, 0, -1, 0.5f, 3};
  std::vector<float> y = run_f32(back, {1, 2, 3}, q);
  const float kk[2][3] = {{1, 0, 0}, {0, 1, 0}}, vv[2][3] = {{1, 2, 3}, {4, 5, 6}};
  for (int i = 0; i < 2; ++i) {
    float s[2];
    for (int j = 0; j < 2; ++j) {
      s[j] = 0;
      for (int d = 0; d < 3; ++d) s[j] += q[i * 3 + d] * kk[j][d];
      s[j] /= std::sqrt(3.f);
    }
    float mx = std::max(s[0], s[1]), e0 = std::exp(s[0] - mx), e1 = std::exp(s[1] - mx);
    for (int d = 0; d < 3; ++d)
      EXPECT_NEAR(y[i * 3 + d], (e0 * vv[0][d] + e1 * vv[1][d]) / (e0 + e1), 1e-5f);
  }
}

TEST(Exporter, UnknownKilnOpIsAnError) {
  Model m = parse_model(R"(model ir=8 opsets={"": 17, "kiln": 1}
graph @main(%x: f32[2]) -> (%y: f32[2]) {
  %y = kiln::NoSuchThing(%x) : f32[2]
  return %y
})");
  try {
    serialize_onnx_model(m);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_NE(e.message().find("kiln::NoSuchThing"), std::string::npos);
  }
}

}  // namespace
}  // namespace kiln
