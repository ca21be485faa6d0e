// Large initializer payloads are located in the model bytes and copied once into their tensors
// (frontend/onnx/initializer_payloads.h): the stripped parse gives the same model as protobuf's,
// small payloads and subgraph initializers stay in the proto, and malformed bytes fall back to
// protobuf's own parse (and its errors).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstring>

#include "core/error.h"
#include "frontend/onnx/initializer_payloads.h"
#include "frontend/onnx/onnx_io.h"
#include "runtime/interpreter.h"

namespace kiln {
namespace {

// y = (x + a) + b with a large (`n` floats, raw_data) and b small (float_data) initializer.
onnx::ModelProto add_model(int64_t n) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  m.set_producer_name("test");
  auto* g = m.mutable_graph();
  g->set_name("g");
  for (const char* io : {"x", "y"}) {
    auto* v = std::string(io) == "x" ? g->add_input() : g->add_output();
    v->set_name(io);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_value(n);
  }
  auto* a = g->add_initializer();
  a->set_name("a");
  a->set_data_type(onnx::TensorProto::FLOAT);
  a->add_dims(n);
  std::string raw(static_cast<size_t>(n) * 4, '\0');
  for (int64_t i = 0; i < n; ++i) {
    const float v = static_cast<float>(i % 97) * 0.5f;
    std::memcpy(raw.data() + i * 4, &v, 4);
  }
  a->set_raw_data(raw);
  auto* b = g->add_initializer();
  b->set_name("b");
  b->set_data_type(onnx::TensorProto::FLOAT);
  b->add_dims(1);
  b->add_float_data(3.0f);
  auto* n1 = g->add_node();
  n1->set_op_type("Add");
  n1->add_input("x");
  n1->add_input("a");
  n1->add_output("t");
  auto* n2 = g->add_node();
  n2->set_op_type("Add");
  n2->add_input("t");
  n2->add_input("b");
  n2->add_output("y");
  return m;
}

TEST(InitializerPayloads, StripsLargeRawDataOnly) {
  const std::string bytes = add_model(1 << 15).SerializeAsString();  // a: 128 KiB
  auto s = strip_initializer_payloads(bytes.data(), bytes.size());
  ASSERT_TRUE(s.has_value());
  ASSERT_EQ(s->payloads.size(), 2u);
  EXPECT_EQ(s->payloads[0].size(), size_t{1} << 17);
  EXPECT_GE(s->payloads[0].data(), bytes.data());
  EXPECT_EQ(s->payloads[1].data(), nullptr);  // b has no raw_data
  EXPECT_LT(s->bytes.size(), 1000u);
  onnx::ModelProto back;
  ASSERT_TRUE(back.ParseFromString(s->bytes));
  EXPECT_EQ(back.producer_name(), "test");
  EXPECT_EQ(back.graph().initializer(0).name(), "a");
  EXPECT_FALSE(back.graph().initializer(0).has_raw_data());
  EXPECT_EQ(back.graph().node_size(), 2);
  // Small models have nothing worth stripping.
  const std::string small = add_model(16).SerializeAsString();
  EXPECT_FALSE(strip_initializer_payloads(small.data(), small.size()).has_value());
}

TEST(InitializerPayloads, LoadedModelRunsAsBefore) {
  const int64_t n = 1 << 15;
  const std::string bytes = add_model(n).SerializeAsString();
  Model m = load_onnx_model_from_bytes(bytes.data(), bytes.size(), "big.onnx");
  Tensor x(DType::kFloat32, {n});
  for (int64_t i = 0; i < n; ++i) x.data<float>()[i] = static_cast<float>(i);
  Tensor y = Interpreter(m).run({RtValue(x)})[0].tensor;
  for (int64_t i = 0; i < n; i += 1001) EXPECT_EQ(y.data<float>()[i], static_cast<float>(i) + static_cast<float>(i % 97) * 0.5f + 3.0f);
}

TEST(InitializerPayloads, MalformedBytesFallBack) {
  const std::string bytes = add_model(1 << 15).SerializeAsString();
  // Cut inside the large payload, and a length prefix pointing past the end: no strip (protobuf
  // then reports the file as invalid), never a read out of bounds.
  for (size_t cut : {bytes.size() / 2, bytes.size() - 1, size_t{3}}) {
    EXPECT_FALSE(strip_initializer_payloads(bytes.data(), cut).has_value()) << cut;
    EXPECT_THROW(load_onnx_model_from_bytes(bytes.data(), cut, "cut.onnx"), Error) << cut;
  }
  const std::string garbage = "\x3a\xff\xff\xff\xff\x0f";
  EXPECT_FALSE(strip_initializer_payloads(garbage.data(), garbage.size()).has_value());
}

}  // namespace
}  // namespace kiln
