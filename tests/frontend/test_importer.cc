// ONNX import: model-local functions are inlined, external data is read (and kept inside the
// model's folder), Constant nodes become constants, inputs with initializers get defaults,
// unsorted nodes are ordered and cycles rejected.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "frontend/onnx/onnx_io.h"
#include "runtime/interpreter.h"

namespace kiln {
namespace {

onnx::ModelProto base_model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* os = m.add_opset_import();
  os->set_version(17);
  m.mutable_graph()->set_name("g");
  return m;
}

void add_tensor_io(onnx::ValueInfoProto* v, const std::string& name, std::vector<int64_t> dims) {
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
}

onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& op, std::vector<std::string> in,
                          std::vector<std::string> out, const std::string& domain = "") {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_domain(domain);
  for (auto& s : in) n->add_input(s);
  for (auto& s : out) n->add_output(s);
  return n;
}

Model load(const onnx::ModelProto& m, const std::string& base_dir = "") {
  std::string bytes = m.SerializeAsString();
  ImportOptions opts;
  opts.base_dir = base_dir;
  return load_onnx_model_from_bytes(bytes.data(), bytes.size(), "test.onnx", opts);
}

Tensor run1(const Model& model, std::vector<float> x) {
  Interpreter interp(model);
  Tensor t(DType::kFloat32, {static_cast<int64_t>(x.size())});
  std::copy(x.begin(), x.end(), t.data<float>());
  return interp.run({RtValue(t)})[0].tensor;
}

TEST(Importer, InlinesModelLocalFunctions) {
  auto m = base_model();
  auto* dom = m.add_opset_import();
  dom->set_domain("custom");
  dom->set_version(1);
  auto* f = m.add_functions();
  f->set_name("AddTwice");
  f->set_domain("custom");
  f->add_input("a");
  f->add_output("b");
  auto* fo = f->add_opset_import();
  fo->set_version(17);
  auto* n1 = f->add_node();
  n1->set_op_type("Add");
  n1->add_input("a");
  n1->add_input("a");
  n1->add_output("t");
  auto* n2 = f->add_node();
  n2->set_op_type("Add");
  n2->add_input("t");
  n2->add_input("a");
  n2->add_output("b");
  auto* g = m.mutable_graph();
  add_tensor_io(g->add_input(), "x", {2});
  add_tensor_io(g->add_output(), "y", {2});
  add_node(g, "AddTwice", {"x"}, {"y"}, "custom");
  Model model = load(m);
  EXPECT_EQ(model.graph->nodes.size(), 2u);
  Tensor y = run1(model, {1.f, 2.f});
  EXPECT_EQ(y.data<float>()[0], 3.f);
  EXPECT_EQ(y.data<float>()[1], 6.f);
}

TEST(Importer, ReadsExternalDataInsideTheModelFolder) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(::testing::TempDir()) / "kiln_ext";
  fs::create_directories(dir);
  float w[2] = {10.f, 20.f};
  {
    std::ofstream out(dir / "weights.bin", std::ios::binary);
    out.write("pad!", 4);
    out.write(reinterpret_cast<const char*>(w), sizeof w);
  }
  auto m = base_model();
  auto* g = m.mutable_graph();
  auto* init = g->add_initializer();
  init->set_name("w");
  init->set_data_type(onnx::TensorProto::FLOAT);
  init->add_dims(2);
  init->set_data_location(onnx::TensorProto::EXTERNAL);
  auto add_kv = [&](const char* k, const char* v) {
    auto* e = init->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add_kv("location", "weights.bin");
  add_kv("offset", "4");
  add_kv("length", "8");
  add_tensor_io(g->add_input(), "x", {2});
  add_tensor_io(g->add_output(), "y", {2});
  add_node(g, "Add", {"x", "w"}, {"y"});
  Tensor y = run1(load(m, dir.string()), {1.f, 2.f});
  EXPECT_EQ(y.data<float>()[1], 22.f);

  init->mutable_external_data(0)->set_value("../weights.bin");
  try {
    load(m, dir.string());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidModel);
    EXPECT_NE(std::string(e.what()).find("escapes"), std::string::npos) << e.what();
  }
}

TEST(Importer, ConstantNodesAndInputDefaults) {
  auto m = base_model();
  m.set_ir_version(3);
  auto* g = m.mutable_graph();
  add_tensor_io(g->add_input(), "x", {2});
  add_tensor_io(g->add_input(), "bias", {2});
  auto* init = g->add_initializer();
  init->set_name("bias");
  init->set_data_type(onnx::TensorProto::FLOAT);
  init->add_dims(2);
  init->add_float_data(1.f);
  init->add_float_data(1.f);
  auto* c = add_node(g, "Constant", {}, {"k"});
  auto* a = c->add_attribute();
  a->set_name("value_float");
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(3.f);
  add_node(g, "Add", {"x", "bias"}, {"t"});
  add_node(g, "Mul", {"t", "k"}, {"y"});
  add_tensor_io(g->add_output(), "y", {2});
  Model model = load(m);
  ASSERT_EQ(model.graph->inputs.size(), 2u);
  EXPECT_TRUE(model.graph->inputs[1]->initializer.defined());
  EXPECT_EQ(model.graph->nodes.size(), 2u);  // the Constant became a constant value
  Interpreter interp(model);
  Tensor x(DType::kFloat32, {2});
  auto out = interp.run({RtValue(x), RtValue()});  // bias omitted: its default is used
  EXPECT_EQ(out[0].tensor.data<float>()[0], 3.f);
}

TEST(Importer, OrdersUnsortedNodesAndRejectsCycles) {
  auto m = base_model();
  auto* g = m.mutable_graph();
  add_tensor_io(g->add_input(), "x", {1});
  add_tensor_io(g->add_output(), "y", {1});
  add_node(g, "Relu", {"t"}, {"y"});
  add_node(g, "Neg", {"x"}, {"t"});
  Model model = load(m);
  EXPECT_EQ(model.graph->nodes[0]->op_type, "Neg");
  EXPECT_EQ(run1(model, {2.f}).data<float>()[0], 0.f);

  auto cyc = base_model();
  auto* cg = cyc.mutable_graph();
  add_tensor_io(cg->add_input(), "x", {1});
  add_tensor_io(cg->add_output(), "y", {1});
  add_node(cg, "Add", {"x", "b"}, {"a"});
  add_node(cg, "Relu", {"a"}, {"b"});
  add_node(cg, "Neg", {"b"}, {"y"});
  try {
    load(cyc);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidModel);
    EXPECT_NE(std::string(e.what()).find("cycle"), std::string::npos) << e.what();
  }
}

TEST(Importer, RejectsGarbageAndTruncation) {
  EXPECT_THROW(load_onnx_model_from_bytes("\xff\xff\xff", 3, "bad.onnx"), Error);
  auto m = base_model();
  add_tensor_io(m.mutable_graph()->add_input(), "x", {1});
  std::string bytes = m.SerializeAsString();
  EXPECT_THROW(load_onnx_model_from_bytes(bytes.data(), bytes.size() / 2, "cut.onnx"), Error);
}

TEST(ValueFiles, PbRoundTripKeepsNames) {
  std::string path = ::testing::TempDir() + "/kiln_value.pb";
  Tensor t(DType::kInt64, {2});
  t.data<int64_t>()[1] = 42;
  write_value_pb(path, "ids", RtValue(t));
  std::string name;
  RtValue back = read_value_pb(path, nullptr, &name);
  EXPECT_EQ(name, "ids");
  EXPECT_TRUE(back.tensor.same_as(t));
  RtValue seq = RtValue::make_sequence({t, t}, DType::kInt64);
  Type seq_type = Type::wrap(Type::Kind::kSequence, Type::tensor(DType::kInt64));
  write_value_pb(path, "s", seq);
  RtValue seq_back = read_value_pb(path, &seq_type, &name);
  ASSERT_TRUE(seq_back.is_sequence());
  EXPECT_EQ(seq_back.sequence.size(), 2u);
}

}  // namespace
}  // namespace kiln
