// IR verifier: SSA, ordering, captures, op schemas and types.
#include <gtest/gtest.h>

#include "core/error.h"
#include "ir/text.h"
#include "ops/verifier.h"
#include "ops/registry.h"

namespace kiln {
namespace {

// A private registry so that the tests do not depend on which op families are implemented.
const OpRegistry& test_registry() {
  static const OpRegistry r = [] {
    OpRegistry reg;
    reg.add("Relu").inputs(1).outputs(1);
    reg.add("Add").inputs(2).outputs(1);
    reg.add("Sum").inputs(1, -1).outputs(1);
    reg.add("Neg").inputs(1).outputs(1);
    reg.add("Clip").inputs(1, 3).outputs(1);
    reg.add("Split").inputs(1, 2).outputs(1, -1);
    reg.add("Dropout").inputs(1, 3).outputs(1, 2);
    reg.add("If").inputs(1).outputs(1, -1);
    reg.add("Gelu").since(20).inputs(1).outputs(1);
    reg.add("LabelEncoder", "ai.onnx.ml").since(2).inputs(1).outputs(1);
    return reg;
  }();
  return r;
}

VerifyOptions opts(bool require_known = true) {
  VerifyOptions o;
  o.require_known_ops = require_known;
  o.registry = &test_registry();
  return o;
}

// Runs the verifier and returns the error (kind checked), or "" when it passed.
std::string verify_error(const Model& m, const VerifyOptions& o, ErrorLocation* where = nullptr) {
  try {
    verify_model(m, o);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidModel);
    if (where) *where = e.where();
    return e.message();
  }
  return "";
}

bool contains(const std::string& s, const std::string& piece) { return s.find(piece) != std::string::npos; }

const char* kValid = R"(model ir=8 opsets={"": 17, "ai.onnx.ml": 3}
graph @main(%c: bool[], %x: f32[2], %w: f32[2] = default) -> (%o: f32[2], %s: f32[...]) {
  %w = const f32[2] [1, 2]
  %k = const f32[2] [3, 4]
  %r = Relu(%x) #relu : f32[2]
  %a, _ = Split(%r) {axis=0} : f32[...]
  %d = Clip(%a, _, %k) : f32[2]
  %s = Sum(%d, %w, %k, %r) : f32[...]
  %l = ai.onnx.ml::LabelEncoder(%s) : f32[...]
  %o = If(%c) {else_branch=graph @e() -> (%e: f32[2]) {
    %e = Add(%x, %k) : f32[2]
    return %e
  }, then_branch=graph @t() -> (%t: f32[2]) {
    %t = If(%c) {else_branch=graph @e2() -> (%r: f32[2]) {
      return %r
    }, then_branch=graph @t2() -> (%n: f32[2]) {
      %n = Neg(%d) : f32[2]
      return %n
    }} : f32[2]
    return %t
  }} : f32[2]
  return %o, %s
}
)";

TEST(Verifier, AcceptsValidModelWithCaptures) {
  Model m = parse_model(kValid);
  EXPECT_EQ(verify_error(m, opts()), "");
  EXPECT_EQ(verify_error(m, opts(false)), "");
}

TEST(Verifier, UnknownOpNamesNodeAndOp) {
  Model m = parse_model(R"(model ir=8 opsets={"": 17}
graph @main(%x: f32[2]) -> (%y: f32[2]) {
  %y = Frobnicate(%x) #frob : f32[2]
  return %y
})");
  ErrorLocation where;
  std::string msg = verify_error(m, opts(), &where);
  EXPECT_TRUE(contains(msg, "unknown op Frobnicate (opset 17)")) << msg;
  EXPECT_EQ(where.node, "frob");
  EXPECT_EQ(where.op, "Frobnicate");
  EXPECT_EQ(where.file, "<text>");
  EXPECT_EQ(verify_error(m, opts(false)), "");  // allowed when unknown ops are tolerated
}

TEST(Verifier, UnknownOpInsideSubgraph) {
  Model m = parse_model(R"(model ir=8 opsets={"": 17}
graph @main(%c: bool[], %x: f32[2]) -> (%y: f32[2]) {
  %y = If(%c) {else_branch=graph @e() -> (%x: f32[2]) { return %x },
                then_branch=graph @t() -> (%z: f32[2]) { %z = my.dom::Zap(%x) : f32[2] return %z }} : f32[2]
  return %y
})");
  ErrorLocation where;
  std::string msg = verify_error(m, opts(), &where);
  EXPECT_TRUE(contains(msg, "the model imports no opset for domain 'my.dom'")) << msg;
  EXPECT_TRUE(contains(msg, "@main/then_branch@t")) << msg;
  EXPECT_EQ(where.op, "my.dom::Zap");
  EXPECT_EQ(where.node, "<producing z>");
}

TEST(Verifier, OpsetTooOld) {
  Model m = parse_model(R"(model ir=8 opsets={"": 17}
graph @main(%x: f32[2]) -> (%y: f32[2]) {
  %y = Gelu(%x) : f32[2]
  return %y
})");
  std::string msg = verify_error(m, opts());
  EXPECT_TRUE(contains(msg, "op Gelu is not available in opset 17 (first version 20)")) << msg;
  m.opsets[""] = 20;
  EXPECT_EQ(verify_error(m, opts()), "");
}

TEST(Verifier, WrongArity) {
  auto model = [](const std::string& node) {
    return parse_model("model ir=8 opsets={\"\": 17}\ngraph @main(%x: f32[2]) -> () {\n  " + node + "\n  return\n}");
  };
  std::string msg = verify_error(model("%y = Relu(%x, %x) #r"), opts());
  EXPECT_TRUE(contains(msg, "op Relu takes 1 inputs, got 2")) << msg;
  msg = verify_error(model("%y = Add(%x)"), opts());
  EXPECT_TRUE(contains(msg, "op Add takes 2 inputs, got 1")) << msg;
  msg = verify_error(model("%y = Clip(%x, _, _, %x)"), opts());
  EXPECT_TRUE(contains(msg, "op Clip takes 1 to 3 inputs, got 4")) << msg;
  msg = verify_error(model("%y = Sum()"), opts());
  EXPECT_TRUE(contains(msg, "op Sum takes at least 1 inputs, got 0")) << msg;
  msg = verify_error(model("Split(%x)"), opts());
  EXPECT_TRUE(contains(msg, "op Split has at least 1 outputs, got 0")) << msg;
  msg = verify_error(model("%a, %b, %c = Dropout(%x)"), opts());
  EXPECT_TRUE(contains(msg, "op Dropout has 1 to 2 outputs, got 3")) << msg;
  EXPECT_EQ(verify_error(model("_, %b = Dropout(%x)"), opts()), "");  // positions, not presence
  // Arity is checked for known ops even when unknown ops are tolerated.
  msg = verify_error(model("%y = Relu(%x, %x)"), opts(false));
  EXPECT_TRUE(contains(msg, "op Relu takes 1 inputs, got 2")) << msg;
  // Trailing omitted inputs do not count.
  EXPECT_EQ(verify_error(model("%y = Relu(%x, _)"), opts()), "");
  EXPECT_EQ(verify_error(model("%y = Clip(%x, _, _)"), opts()), "");
  EXPECT_EQ(verify_error(model("%a, %b, %c, %d = Split(%x)"), opts()), "");
}

TEST(Verifier, UseBeforeDefinition) {
  Model m = parse_model(R"(model ir=8 opsets={"": 17}
graph @main(%x: f32[2]) -> (%y: f32[2]) {
  %y = Relu(%x) : f32[2]
  return %y
})");
  Graph& g = *m.graph;
  Value* ghost = g.add_value("ghost", Type::tensor(DType::kFloat32));  // never defined
  g.nodes[0]->inputs[0] = ghost;
  ErrorLocation where;
  std::string msg = verify_error(m, opts(), &where);
  EXPECT_TRUE(contains(msg, "input #0 %ghost is used but not defined in this graph or an enclosing one")) << msg;
  EXPECT_EQ(where.op, "Relu");

  // A value of an unrelated graph.
  Model other = parse_model("graph @o(%z: f32[2]) -> () { return }");
  g.nodes[0]->inputs[0] = other.graph->inputs[0];
  msg = verify_error(m, opts());
  EXPECT_TRUE(contains(msg, "is used but not defined")) << msg;

  // Graph output that is never defined.
  g.nodes[0]->inputs[0] = g.inputs[0];
  g.outputs.push_back(ghost);
  msg = verify_error(m, opts());
  EXPECT_TRUE(contains(msg, "graph output %ghost is not defined")) << msg;
}

TEST(Verifier, CycleOrOutOfOrderNodes) {
  Model m = parse_model(R"(model ir=8 opsets={"": 17}
graph @main(%x: f32[2]) -> (%b: f32[2]) {
  %a = Relu(%x) #first : f32[2]
  %b = Neg(%a) #second : f32[2]
  return %b
})");
  Graph& g = *m.graph;
  std::swap(g.nodes[0], g.nodes[1]);
  ErrorLocation where;
  std::string msg = verify_error(m, opts(), &where);
  EXPECT_TRUE(contains(msg, "input #0 %a is produced by a later node (first): cycle or nodes not in topological order")) << msg;
  EXPECT_EQ(where.node, "second");
  EXPECT_EQ(where.op, "Neg");
  std::swap(g.nodes[0], g.nodes[1]);
  EXPECT_EQ(verify_error(m, opts()), "");
  // A real cycle: first consumes second's output.
  g.nodes[0]->inputs[0] = g.nodes[1]->outputs[0];
  msg = verify_error(m, opts());
  EXPECT_TRUE(contains(msg, "%b is produced by a later node (second)")) << msg;
  // Self loop.
  g.nodes[0]->inputs[0] = g.nodes[0]->outputs[0];
  msg = verify_error(m, opts());
  EXPECT_TRUE(contains(msg, "is the node's own output (cycle)")) << msg;
}

TEST(Verifier, CaptureOfLaterOuterValue) {
  Model m = parse_model(R"(model ir=8 opsets={"": 17}
graph @main(%c: bool[], %x: f32[2]) -> (%y: f32[2]) {
  %y = If(%c) {else_branch=graph @e() -> (%x: f32[2]) { return %x },
                then_branch=graph @t() -> (%t: f32[2]) { %t = Neg(%x) : f32[2] return %t }} : f32[2]
  %late = Relu(%x) : f32[2]
  return %y
})");
  Graph& then_g = *m.graph->nodes[0]->attrs.at("then_branch").g;
  then_g.nodes[0]->inputs[0] = m.graph->nodes[1]->outputs[0];
  std::string msg = verify_error(m, opts());
  EXPECT_TRUE(contains(msg, "input #0 %late is used before its definition in an enclosing graph")) << msg;
  // The node's own output captured by its subgraph.
  then_g.nodes[0]->inputs[0] = m.graph->nodes[0]->outputs[0];
  msg = verify_error(m, opts());
  EXPECT_TRUE(contains(msg, "%y is used before its definition in an enclosing graph")) << msg;
}

TEST(Verifier, DuplicateDefinitions) {
  const char* text = R"(model ir=8 opsets={"": 17}
graph @main(%x: f32[2]) -> (%b: f32[2]) {
  %a = Relu(%x) : f32[2]
  %b = Neg(%a) : f32[2]
  return %b
})";
  {
    // Two values with the same name.
    Model m = parse_model(text);
    m.graph->nodes[1]->outputs[0]->name = "a";
    std::string msg = verify_error(m, opts());
    EXPECT_TRUE(contains(msg, "duplicate definition of value %a")) << msg;
  }
  {
    // The same Value produced by two nodes.
    Model m = parse_model(text);
    Graph& g = *m.graph;
    Value* a = g.nodes[0]->outputs[0];
    g.add_node("Relu", {g.inputs[0]}, {a});  // re-points a->producer to the new node
    std::string msg = verify_error(m, opts());
    EXPECT_TRUE(contains(msg, "does not record this node as its producer")) << msg;
    a->producer = g.nodes[0].get();
    msg = verify_error(m, opts());
    EXPECT_TRUE(contains(msg, "%a does not record this node as its producer") ||
                contains(msg, "value %a is defined more than once")) << msg;
  }
  {
    // A graph input that is also a node output.
    Model m = parse_model(text);
    Graph& g = *m.graph;
    g.inputs.push_back(g.nodes[0]->outputs[0]);
    std::string msg = verify_error(m, opts());
    EXPECT_TRUE(contains(msg, "graph input %a is also produced by a node")) << msg;
  }
  {
    // The same input listed twice.
    Model m = parse_model(text);
    m.graph->inputs.push_back(m.graph->inputs[0]);
    std::string msg = verify_error(m, opts());
    EXPECT_TRUE(contains(msg, "value %x is defined more than once")) << msg;
  }
}

TEST(Verifier, TypesAndInitializers) {
  Model m = parse_model(R"(model ir=8 opsets={"": 17}
graph @main(%x: f32[2], %w: f32[N] = default) -> () {
  %w = const f32[3] [1, 2, 3]
  %k = const f32[2] [3, 4] : f32[...]
  return
})");
  EXPECT_EQ(verify_error(m, opts()), "");
  m.graph->constants[0]->type = Type::tensor(DType::kInt64, Shape::of({2}));
  std::string msg = verify_error(m, opts());
  EXPECT_TRUE(contains(msg, "type i64[2] of %k does not match its initializer f32[2]")) << msg;
  m.graph->constants[0]->type = Type::tensor(DType::kFloat32, Shape::of({3}));
  msg = verify_error(m, opts());
  EXPECT_TRUE(contains(msg, "type f32[3] of %k does not match its initializer f32[2]")) << msg;
  m.graph->constants[0]->type = Type::wrap(Type::Kind::kSequence, Type::tensor(DType::kFloat32));
  msg = verify_error(m, opts());
  EXPECT_TRUE(contains(msg, "non-tensor type seq<f32[...]>")) << msg;
  m.graph->constants[0]->type = Type::tensor(DType::kFloat32);
  m.graph->inputs[1]->type = Type::tensor(DType::kFloat32, Shape::of({2, 2}));
  msg = verify_error(m, opts());
  EXPECT_TRUE(contains(msg, "type f32[2,2] of %w does not match its initializer f32[3]")) << msg;
  m.graph->inputs[1]->type = Type::tensor(static_cast<DType>(99));
  msg = verify_error(m, opts());
  EXPECT_TRUE(contains(msg, "invalid element type code 99")) << msg;
}

TEST(Verifier, StructuralLinks) {
  Model m = parse_model(kValid);
  Graph& then_g = *m.graph->nodes[5]->attrs.at("then_branch").g;
  then_g.parent = nullptr;
  std::string msg = verify_error(m, opts());
  EXPECT_TRUE(contains(msg, "subgraph 'then_branch' does not have its enclosing graph as parent")) << msg;
  then_g.parent = m.graph.get();
  EXPECT_EQ(verify_error(m, opts()), "");
  m.graph->nodes[0]->owner = &then_g;
  msg = verify_error(m, opts());
  EXPECT_TRUE(contains(msg, "node belongs to another graph")) << msg;
  m.graph->nodes[0]->owner = m.graph.get();
  Model empty;
  msg = verify_error(empty, opts());
  EXPECT_TRUE(contains(msg, "model has no graph")) << msg;
}

TEST(Verifier, ParsedModelsVerify) {
  // Everything the parser accepts is structurally valid.
  for (const char* text : {kValid,
                           "graph @g(%x: f32[2]) -> (%x: f32[2]) { return %x }",
                           "graph @g() -> (%k: f32[1]) { %k = const f32[1] [1] return %k }"}) {
    Model m = parse_model(text);
    EXPECT_EQ(verify_error(m, opts(false)), "") << text;
  }
}

}  // namespace
}  // namespace kiln
