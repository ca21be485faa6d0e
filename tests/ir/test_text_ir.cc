// Text IR: printer/parser round trips, literal forms and parse errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "core/error.h"
#include "ir/text.h"
#include "ops/verifier.h"
#include "ops/registry.h"

namespace kiln {
namespace {

// print -> parse -> print must be identical; returns the first print.
std::string expect_round_trip(const Model& m) {
  std::string first = print_model(m);
  Model back;
  try {
    back = parse_model(first, "<round-trip>");
  } catch (const Error& e) {
    ADD_FAILURE() << "reparse failed: " << e.what() << "\n" << first;
    return first;
  }
  EXPECT_EQ(print_model(back), first);
  static const OpRegistry no_ops;  // structure only: the random ops need not fit real schemas
  VerifyOptions vo;
  vo.require_known_ops = false;
  vo.registry = &no_ops;
  EXPECT_NO_THROW(verify_model(back, vo)) << first;
  return first;
}

// parse -> print -> parse -> print; the two prints must be identical.
std::string expect_text_round_trip(const std::string& text) {
  Model m;
  try {
    m = parse_model(text);
  } catch (const Error& e) {
    ADD_FAILURE() << "parse failed: " << e.what() << "\n" << text;
    return {};
  }
  return expect_round_trip(m);
}

std::string parse_error(const std::string& text) {
  try {
    parse_model(text, "t.kir");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidModel);
    EXPECT_EQ(e.where().file, "t.kir");
    return e.message();
  }
  ADD_FAILURE() << "expected a parse error for:\n" << text;
  return {};
}

Type f32(std::vector<Dim> dims) { return Type::tensor(DType::kFloat32, Shape(std::move(dims))); }

Tensor f32_tensor(std::vector<int64_t> dims, std::vector<float> vals) {
  Tensor t(DType::kFloat32, std::move(dims));
  std::memcpy(t.raw(), vals.data(), vals.size() * sizeof(float));
  return t;
}

Model base_model() {
  Model m;
  m.opsets[""] = 13;
  m.graph = std::make_shared<Graph>();
  return m;
}

TEST(TextIr, ConvModelFromDesignRoundTrips) {
  Model m = base_model();
  m.opsets["ai.onnx.ml"] = 3;
  m.producer_name = "pytorch";
  m.producer_version = "2.1";
  m.metadata["key"] = "value";
  m.metadata["quote\"d"] = "multi\nline";
  Graph& g = *m.graph;
  Value* x = g.add_value("x", f32({Dim::named("N"), 3, 224, 224}));
  x->is_graph_input = true;
  g.inputs.push_back(x);
  Value* w = g.add_value("w", f32({64, 3, 7, 7}));
  w->initializer = Tensor(DType::kFloat32, {64, 3, 7, 7});
  for (int64_t i = 0; i < w->initializer.numel(); ++i) w->initializer.data<float>()[i] = 0.25f * static_cast<float>(i % 13) - 1.f;
  g.constants.push_back(w);
  Value* c = g.add_value("c", f32({Dim::named("N"), 64, 112, 112}));
  Node* conv = g.add_node("Conv", {x, w}, {c});
  conv->attrs["strides"] = Attribute::make_ints({2, 2});
  conv->attrs["pads"] = Attribute::make_ints({3, 3, 3, 3});
  conv->name = "conv1";
  Value* y = g.add_value("y", f32({Dim::named("N"), 64, 112, 112}));
  g.add_node("Relu", {c}, {y})->name = "/model/relu 1";
  g.outputs.push_back(y);

  std::string text = expect_round_trip(m);
  EXPECT_NE(text.find("model ir=8 opsets={\"\": 13, \"ai.onnx.ml\": 3} producer=\"pytorch\" \"2.1\"\n"), std::string::npos) << text;
  EXPECT_NE(text.find("metadata {\"key\": \"value\", \"quote\\\"d\": \"multi\\nline\"}\n"), std::string::npos) << text;
  EXPECT_NE(text.find("graph @main(%x: f32[N,3,224,224]) -> (%y: f32[N,64,112,112]) {\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  %w = const f32[64,3,7,7] hex\"000080bf"), std::string::npos) << text;
  EXPECT_NE(text.find("  %c = Conv(%x, %w) {pads=[3, 3, 3, 3], strides=[2, 2]} #conv1 : f32[N,64,112,112]\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find("  %y = Relu(%c) #\"/model/relu 1\" : f32[N,64,112,112]\n  return %y\n}\n"),
            std::string::npos) << text;

  Model back = parse_model(text);
  ASSERT_EQ(back.graph->constants.size(), 1u);
  EXPECT_TRUE(back.graph->constants[0]->initializer.same_as(w->initializer));
  EXPECT_EQ(back.producer_name, "pytorch");
  EXPECT_EQ(back.metadata, m.metadata);
  EXPECT_EQ(back.opsets, m.opsets);
  EXPECT_EQ(back.graph->nodes[0]->attrs.at("pads").ints, (std::vector<int64_t>{3, 3, 3, 3}));

  PrintOptions elide;
  elide.elide_large_constants = true;
  std::string short_text = print_model(m, elide);
  EXPECT_NE(short_text.find("%w = const f32[64,3,7,7] <9408 elements elided>"), std::string::npos) << short_text;
  EXPECT_THROW(parse_model(short_text), Error);
}

TEST(TextIr, AllAttributeKindsRoundTrip) {
  Model m = base_model();
  Graph& g = *m.graph;
  Value* x = g.add_value("x", f32({2}));
  x->is_graph_input = true;
  g.inputs.push_back(x);
  Value* y = g.add_value("y", f32({2}));
  Node* n = g.add_node("Custom", {x}, {y}, "my.domain");
  n->attrs["i"] = Attribute::make_int(-7);
  n->attrs["i_big"] = Attribute::make_int(std::numeric_limits<int64_t>::min());
  n->attrs["f_half"] = Attribute::make_float(0.5f);
  n->attrs["f_one"] = Attribute::make_float(1.f);
  n->attrs["f_neg0"] = Attribute::make_float(-0.f);
  n->attrs["f_inf"] = Attribute::make_float(-std::numeric_limits<float>::infinity());
  n->attrs["f_nan"] = Attribute::make_float(std::numeric_limits<float>::quiet_NaN());
  n->attrs["f_tiny"] = Attribute::make_float(std::numeric_limits<float>::denorm_min());
  n->attrs["f_max"] = Attribute::make_float(std::numeric_limits<float>::max());
  n->attrs["f_tenth"] = Attribute::make_float(0.1f);
  n->attrs["f_1e20"] = Attribute::make_float(1e20f);
  n->attrs["s"] = Attribute::make_string("tab\there \"q\" back\\slash \x01 ctl, utf8 \xc3\xa9");
  n->attrs["s_empty"] = Attribute::make_string("");
  n->attrs["t"] = Attribute::make_tensor(f32_tensor({2}, {1.f, 2.f}));
  n->attrs["ints"] = Attribute::make_ints({1, -2, 3});
  n->attrs["floats"] = Attribute::make_floats({0.5f, 1.f, -2.25f});
  Attribute strs;
  strs.kind = Attribute::Kind::kStrings;
  strs.strings = {"a", "b c", ""};
  n->attrs["strings"] = strs;
  Attribute tens;
  tens.kind = Attribute::Kind::kTensors;
  tens.tensors = {f32_tensor({1}, {3.f}), Tensor(DType::kInt64, {2, 0})};
  n->attrs["tensors"] = tens;
  for (auto kind : {Attribute::Kind::kInts, Attribute::Kind::kFloats, Attribute::Kind::kStrings,
                    Attribute::Kind::kTensors, Attribute::Kind::kGraphs}) {
    Attribute e;
    e.kind = kind;
    n->attrs["empty_" + std::string(attribute_kind_name(kind))] = e;
  }
  // A graph attribute and a list of graphs.
  auto sub = std::make_shared<Graph>();
  sub->name = "body";
  sub->parent = &g;
  Value* si = sub->add_value("si", f32({2}));
  si->is_graph_input = true;
  sub->inputs.push_back(si);
  Value* so = sub->add_value("so", f32({2}));
  sub->add_node("Add", {si, x}, {so});  // captures %x
  sub->outputs.push_back(so);
  n->attrs["g"] = Attribute::make_graph(sub);
  auto sub2 = std::make_shared<Graph>();
  sub2->name = "other";
  sub2->parent = &g;
  sub2->outputs.push_back(x);  // returns a captured value directly
  Attribute gl;
  gl.kind = Attribute::Kind::kGraphs;
  gl.graphs = {sub2, sub2};
  n->attrs["graphs"] = gl;
  Attribute key;
  key.kind = Attribute::Kind::kInt;
  key.i = 1;
  n->attrs["odd key-name"] = key;
  g.outputs.push_back(y);

  std::string text = expect_round_trip(m);
  for (const char* piece :
       {"empty_floats=floats[]", "empty_graphs=graphs[]", "empty_ints=ints[]", "empty_strings=strings[]",
        "empty_tensors=tensors[]", "f_half=0.5", "f_inf=-inf", "f_nan=nan", "f_neg0=-0.0", "f_one=1.0",
        "f_tenth=0.1", "f_1e20=1e+20", "floats=[0.5, 1.0, -2.25]", "i=-7", "ints=[1, -2, 3]",
        "i_big=-9223372036854775808", R"(s="tab\there \"q\" back\\slash \x01 ctl, utf8 )",
        R"(strings=["a", "b c", ""])", "t=tensor<f32[2] [1, 2]>",
        "tensors=[tensor<f32[1] [3]>, tensor<i64[2,0] []>]", "\"odd key-name\"=1",
        "%y = my.domain::Custom(%x) {", "g=graph @body(%si: f32[2]) -> (%so: f32[2]) {\n    %so = Add(%si, %x) : f32[2]\n    return %so\n  }"}) {
    EXPECT_NE(text.find(piece), std::string::npos) << piece << "\n" << text;
  }
  Model back = parse_model(text);
  const Node& bn = *back.graph->nodes[0];
  EXPECT_EQ(bn.attrs.at("f_tiny").f, std::numeric_limits<float>::denorm_min());
  EXPECT_EQ(bn.attrs.at("f_max").f, std::numeric_limits<float>::max());
  EXPECT_TRUE(std::isnan(bn.attrs.at("f_nan").f));
  EXPECT_TRUE(std::signbit(bn.attrs.at("f_neg0").f));
  EXPECT_EQ(bn.attrs.at("s").s, n->attrs["s"].s);
  EXPECT_EQ(bn.attrs.at("strings").strings, strs.strings);
  EXPECT_EQ(bn.attrs.at("empty_graphs").kind, Attribute::Kind::kGraphs);
  const Graph& bsub = *bn.attrs.at("g").g;
  EXPECT_EQ(bsub.parent, back.graph.get());
  EXPECT_EQ(bsub.nodes[0]->inputs[1], back.graph->inputs[0]);  // the capture resolved outward
  EXPECT_EQ(bn.attrs.at("graphs").graphs[1]->outputs[0], back.graph->inputs[0]);
}

// TYPE_PROTO attributes (Optional's `type`) print as type<...> and round-trip.
TEST(TextIr, TypeAttributes) {
  const std::string text = R"(model ir=8 opsets={"": 18}
graph @main() -> (%a: opt<seq<f32[...]>>, %b: opt<i64[2,N]>) {
  %a = Optional() {type=type<opt<seq<f32[...]>>>} : opt<seq<f32[...]>>
  %b = Optional() {type=type<i64[2,N]>, u=type<?[...]>, w=type<seq<?>>} : opt<i64[2,N]>
  return %a, %b
}
)";
  std::string printed = expect_text_round_trip(text);
  EXPECT_NE(printed.find("type=type<opt<seq<f32[...]>>>"), std::string::npos) << printed;
  EXPECT_NE(printed.find("type=type<i64[2,N]>"), std::string::npos) << printed;
  Model m = parse_model(text);
  const Attribute& a = m.graph->nodes[0]->attrs.at("type");
  ASSERT_EQ(a.kind, Attribute::Kind::kType);
  EXPECT_EQ(to_string(a.tp), "opt<seq<f32[...]>>");
  const Attribute& w = m.graph->nodes[1]->attrs.at("w");
  ASSERT_EQ(w.kind, Attribute::Kind::kType);
  EXPECT_EQ(w.tp.kind, Type::Kind::kSequence);
  EXPECT_EQ(w.tp.elem, nullptr);
  EXPECT_EQ(attribute_kind_name(Attribute::Kind::kType), "type");
  EXPECT_NE(parse_error("graph @main() -> () {\n  %a = Optional() {type=type<f32[2]} : opt<f32[2]>\n  return\n}\n").size(), 0u);
}

TEST(TextIr, SubgraphsWithCapturesAndNesting) {
  const std::string text = R"(model ir=8 opsets={"": 17}
graph @main(%cond: bool[], %x: f32[2], %n: i64[]) -> (%o: f32[2]) {
  %k = const f32[2] [10, 20]
  %o = If(%cond) {else_branch=graph @else() -> (%e: f32[2]) {
    %e = Sub(%x, %k) : f32[2]
    return %e
  }, then_branch=graph @then() -> (%t: f32[2]) {
    %t = Loop(%n, _, %x) {body=graph @body(%i: i64[], %c: bool[], %acc: f32[2]) -> (%c2: bool[], %acc2: f32[2]) {
      %c2 = Identity(%c) : bool[]
      %s = Add(%acc, %k) : f32[2]
      %acc2 = Mul(%s, %x) : f32[2]
      return %c2, %acc2
    }} : f32[2]
    return %t
  }} : f32[2]
  return %o
}
)";
  EXPECT_EQ(expect_text_round_trip(text), text);
  Model m = parse_model(text);
  const Graph& then_g = *m.graph->nodes[0]->attrs.at("then_branch").g;
  const Graph& body = *then_g.nodes[0]->attrs.at("body").g;
  EXPECT_EQ(body.parent, &then_g);
  EXPECT_EQ(then_g.parent, m.graph.get());
  EXPECT_EQ(body.nodes[1]->inputs[1], m.graph->constants[0]);  // %k two levels up
  EXPECT_EQ(then_g.nodes[0]->inputs[1], nullptr);              // omitted input
}

TEST(TextIr, ShadowingInSubgraphResolvesLocallyFirst) {
  const std::string text = R"(model ir=8 opsets={"": 17}
graph @main(%c: bool[], %x: f32[2]) -> (%o: f32[2]) {
  %o = If(%c) {else_branch=graph @e() -> (%x: f32[2]) {
    %x = Neg(%x) : f32[2]
    return %x
  }, then_branch=graph @t() -> (%x: f32[2]) {
    return %x
  }} : f32[2]
  return %o
}
)";
  EXPECT_EQ(expect_text_round_trip(text), text);
  Model m = parse_model(text);
  const Graph& e = *m.graph->nodes[0]->attrs.at("else_branch").g;
  EXPECT_EQ(e.nodes[0]->inputs[0], m.graph->inputs[1]);  // input read before the local definition
  EXPECT_EQ(e.outputs[0], e.nodes[0]->outputs[0]);
  const Graph& t = *m.graph->nodes[0]->attrs.at("then_branch").g;
  EXPECT_EQ(t.outputs[0], m.graph->inputs[1]);
}

TEST(TextIr, OmittedInputsAndOutputs) {
  const std::string text = R"(model ir=8 opsets={"": 18}
graph @main(%c: f32[4,6]) -> (%a: f32[...], %b: ?[...]) {
  %a, %b = Split(%c, _) {axis=1} : f32[...], ?[...]
  %y, _, %z = Dropout3(_, %a, _) : f32[4,3], i64[]
  Print(%y, %z)
  "return"()
  "const"(%z)
  "_"(%z) #n
  return %a, %b
}
)";
  EXPECT_EQ(expect_text_round_trip(text), text);
  Model m = parse_model(text);
  const Node& d = *m.graph->nodes[1];
  ASSERT_EQ(d.outputs.size(), 3u);
  EXPECT_EQ(d.outputs[1], nullptr);
  EXPECT_EQ(d.outputs[2]->producer_index, 2);
  EXPECT_EQ(d.inputs[0], nullptr);
  EXPECT_EQ(d.inputs[2], nullptr);
  EXPECT_TRUE(m.graph->nodes[2]->outputs.empty());
  EXPECT_EQ(m.graph->nodes[3]->op_type, "return");
}

TEST(TextIr, QuotedNamesEverywhere) {
  Model m = base_model();
  m.opsets["com weird"] = 1;
  Graph& g = *m.graph;
  g.name = "main graph";
  const std::vector<std::string> names = {"a b", "x:0", "%pct", "quote\"", "back\\", "nl\n", "",
                                          "\x7f\x01", "caf\xc3\xa9", "_", "/ok/path-1.2", "123"};
  std::vector<Value*> vals;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i].empty()) continue;  // empty names are not valid value names
    Value* v = g.add_value(names[i], Type::tensor(DType::kFloat32, Shape({Dim::named("batch size"), Dim::named("2n"),
                                                                           Dim::named("_"), Dim::named("a.b"), Dim()})));
    v->is_graph_input = true;
    g.inputs.push_back(v);
    vals.push_back(v);
  }
  Value* y = g.add_value("out put", f32({}));
  Node* n = g.add_node("My Op", vals, {y}, "com weird");
  n->name = "node \"1\"";
  Value* z = g.add_value("z", f32({}));
  g.add_node("graph", {y}, {z}, "return")->name = "#";
  g.outputs.push_back(z);
  std::string text = expect_round_trip(m);
  for (const char* piece : {"graph @\"main graph\"(", "%\"a b\": f32[\"batch size\",\"2n\",_,a.b,?]",
                            "%\"nl\\n\"", "%\"\\x7f\\x01\"", "%_:", "%/ok/path-1.2:", "%123:",
                            "%\"out put\" = \"com weird\"::\"My Op\"(%\"a b\", ", "#\"node \\\"1\\\"\"",
                            "%z = \"return\"::\"graph\"(%\"out put\") #\"#\" : f32[]"}) {
    EXPECT_NE(text.find(piece), std::string::npos) << piece << "\n" << text;
  }
  Model back = parse_model(text);
  EXPECT_EQ(back.graph->inputs[5]->name, "nl\n");
  EXPECT_EQ(back.graph->name, "main graph");
  EXPECT_EQ(back.graph->nodes[0]->domain, "com weird");
}

TEST(TextIr, SequencesOptionalsAndUnknownTypes) {
  const std::string text = R"(model ir=8 opsets={"": 18}
graph @main(%s: seq<f32[...]>, %o: opt<seq<i64[?,3]>>, %u: ?[...], %r: f32[], %q: seq<?>, %p: opt<?[2]>) -> (%l: i64[]) {
  %l = SequenceLength(%s) : i64[]
  %e = SequenceEmpty() {dtype=1} : seq<f32[N,"M+1"]>
  %h = OptionalHasElement(%o) : bool[]
  return %l
}
)";
  EXPECT_EQ(expect_text_round_trip(text), text);
  Model m = parse_model(text);
  const Type& o = m.graph->inputs[1]->type;
  ASSERT_EQ(o.kind, Type::Kind::kOptional);
  ASSERT_EQ(o.elem->kind, Type::Kind::kSequence);
  EXPECT_EQ(o.elem->elem->dtype, DType::kInt64);
  EXPECT_FALSE(m.graph->inputs[2]->type.shape.has_value());
  EXPECT_EQ(m.graph->inputs[2]->type.dtype, DType::kUndefined);
  EXPECT_EQ(m.graph->inputs[3]->type.shape->rank(), 0u);
  EXPECT_EQ(m.graph->inputs[4]->type.elem, nullptr);
  EXPECT_EQ(m.graph->nodes[1]->outputs[0]->type.elem->shape->dims[1].symbol, "M+1");
}

TEST(TextIr, InitializerDefaultsAndConstants) {
  Model m = base_model();
  Graph& g = *m.graph;
  Value* x = g.add_value("x", f32({3}));
  x->is_graph_input = true;
  g.inputs.push_back(x);
  Value* w2 = g.add_value("w2", f32({3}));
  w2->is_graph_input = true;
  w2->initializer = f32_tensor({3}, {1.f, 2.f, 3.f});
  g.inputs.push_back(w2);
  Value* c = g.add_value("c", Type{});  // type differs from the tensor: printed explicitly
  c->initializer = f32_tensor({1}, {4.f});
  g.constants.push_back(c);
  Value* d = g.add_value("d", Type::tensor(DType::kFloat32, Shape({Dim::named("K")})));
  d->initializer = f32_tensor({2}, {5.f, 6.f});
  g.constants.push_back(d);
  g.constants.push_back(w2);  // an input default that also sits in constants prints once
  Value* y = g.add_value("y", f32({3}));
  g.add_node("Sum", {x, w2, c, d}, {y});
  g.outputs.push_back(y);
  std::string text = expect_round_trip(m);
  EXPECT_NE(text.find("graph @main(%x: f32[3], %w2: f32[3] = default) -> (%y: f32[3]) {\n"
                      "  %w2 = const f32[3] [1, 2, 3]\n"
                      "  %c = const f32[1] [4] : ?[...]\n"
                      "  %d = const f32[2] [5, 6] : f32[K]\n"
                      "  %y = Sum(%x, %w2, %c, %d) : f32[3]\n"),
            std::string::npos) << text;
  Model back = parse_model(text);
  EXPECT_TRUE(back.graph->inputs[1]->initializer.same_as(w2->initializer));
  EXPECT_TRUE(back.graph->inputs[1]->is_graph_input);
  EXPECT_EQ(back.graph->constants.size(), 2u);
  EXPECT_FALSE(back.graph->constants[0]->type.shape.has_value());
}

Tensor filled(DType dt, std::vector<int64_t> dims, std::mt19937& rng) {
  Tensor t(dt, std::move(dims));
  if (dt == DType::kString) {
    for (int64_t i = 0; i < t.numel(); ++i) t.data<std::string>()[i] = "s" + std::to_string(rng() % 100) + "\t\"";
    return t;
  }
  auto* b = static_cast<unsigned char*>(t.raw());
  for (size_t i = 0; i < t.nbytes(); ++i) b[i] = static_cast<unsigned char>(rng());
  if (dt == DType::kBool)
    for (size_t i = 0; i < t.nbytes(); ++i) b[i] &= 1;
  if (dt == DType::kUInt4 || dt == DType::kInt4)
    for (size_t i = 0; i < t.nbytes(); ++i) b[i] &= 15;
  return t;
}

bool has_nan(const Tensor& t) {
  if (!is_float(t.dtype()) || dtype_size(t.dtype()) == 1) return false;
  for (int64_t i = 0; i < t.numel(); ++i)
    if (std::isnan(t.get_double(i))) return true;
  return false;
}

TEST(TextIr, AllDtypesInLiteralsAndHex) {
  std::mt19937 rng(42);
  Model m = base_model();
  Graph& g = *m.graph;
  std::vector<Value*> consts;
  int k = 0;
  for (int code = 1; code <= 22; ++code) {
    auto dt = static_cast<DType>(code);
    for (std::vector<int64_t> dims : {std::vector<int64_t>{}, {2, 3}, {0}, {5, 7}}) {
      Value* v = g.add_value("c" + std::to_string(k++));
      v->initializer = filled(dt, dims, rng);
      v->type = Type::tensor(dt, Shape::of(dims));
      g.constants.push_back(v);
      consts.push_back(v);
    }
  }
  std::string text = expect_round_trip(m);
  EXPECT_NE(text.find("= const bool[2,3] ["), std::string::npos);
  EXPECT_NE(text.find("= const f8e4m3fn[] hex\""), std::string::npos);
  EXPECT_NE(text.find("= const i64[5,7] hex\""), std::string::npos);
  EXPECT_NE(text.find("= const str[5,7] [\""), std::string::npos);
  EXPECT_NE(text.find("= const f32[0] []"), std::string::npos);
  EXPECT_NE(text.find("= const c128[2,3] hex\""), std::string::npos);
  Model back = parse_model(text);
  ASSERT_EQ(back.graph->constants.size(), consts.size());
  for (size_t i = 0; i < consts.size(); ++i) {
    const Tensor& a = consts[i]->initializer;
    const Tensor& b = back.graph->constants[i]->initializer;
    // Literal NaNs come back as canonical NaNs; everything else is bit-exact.
    if (a.numel() <= 16 && has_nan(a)) {
      EXPECT_EQ(a.dims(), b.dims());
      for (int64_t j = 0; j < a.numel(); ++j)
        EXPECT_TRUE(std::isnan(a.get_double(j)) ? std::isnan(b.get_double(j)) : a.get_double(j) == b.get_double(j));
    } else {
      EXPECT_TRUE(a.same_as(b)) << consts[i]->name << " " << tensor_summary(a);
    }
  }
}

TEST(TextIr, FloatLiteralsAreExact) {
  const std::string text = R"(graph @main() -> (%a: f32[9], %b: f64[4], %h: f16[5], %z: bf16[3]) {
  %a = const f32[9] [1, 2, 3.5, -0, inf, -inf, 1e-45, 3.4028235e+38, 0.1]
  %b = const f64[4] [0.1, 5e-324, -1.7976931348623157e+308, 123456789012345680]
  %h = const f16[5] [65504, 5.9604645e-08, -0, 0.33325195, nan]
  %z = const bf16[3] [1, 3.3895314e+38, -0.0009918213]
  return %a, %b, %h, %z
}
)";
  std::string printed = expect_text_round_trip(text);
  EXPECT_NE(printed.find("%a = const f32[9] [1, 2, 3.5, -0, inf, -inf, 1e-45, 3.4028235e+38, 0.1]"), std::string::npos) << printed;
  EXPECT_NE(printed.find("%h = const f16[5] [65504, 5.9604645e-08, -0, 0.33325195, nan]"), std::string::npos) << printed;
  EXPECT_NE(printed.find("%z = const bf16[3] [1, 3.3895314e+38, -0.0009918213]"), std::string::npos) << printed;
  Model m = parse_model(text);
  EXPECT_EQ(m.opsets.at(""), kDefaultTextOpset);  // no header: defaults
  const Tensor& a = m.graph->constants[0]->initializer;
  EXPECT_EQ(a.data<float>()[6], std::numeric_limits<float>::denorm_min());
  EXPECT_EQ(a.data<float>()[7], std::numeric_limits<float>::max());
  EXPECT_EQ(a.data<float>()[8], 0.1f);
  const Tensor& b = m.graph->constants[1]->initializer;
  EXPECT_EQ(b.data<double>()[1], std::numeric_limits<double>::denorm_min());
  EXPECT_EQ(b.data<double>()[2], std::numeric_limits<double>::lowest());
  const Tensor& h = m.graph->constants[2]->initializer;
  EXPECT_EQ(h.data<Float16>()[0].bits, 0x7bffu);
  EXPECT_EQ(h.data<Float16>()[1].bits, 0x0001u);
  EXPECT_EQ(h.data<Float16>()[2].bits, 0x8000u);
}

TEST(TextIr, IntegerLiteralRanges) {
  const std::string text = R"(graph @main() -> () {
  %a = const i8[2] [-128, 127]
  %b = const u8[2] [0, 255]
  %c = const i16[2] [-32768, 32767]
  %d = const u16[1] [65535]
  %e = const i32[2] [-2147483648, 2147483647]
  %f = const u32[1] [4294967295]
  %g = const i64[2] [-9223372036854775808, 9223372036854775807]
  %h = const u64[1] [18446744073709551615]
  %i = const bool[2] [true, false]
  %s = const str[2] ["x", "\x00y"]
  return
}
)";
  std::string printed = expect_text_round_trip(text);
  EXPECT_NE(printed.find(text.substr(text.find("%a"), text.find("return") - text.find("%a"))), std::string::npos) << printed;
  Model m = parse_model(text);
  EXPECT_EQ(m.graph->constants[7]->initializer.data<uint64_t>()[0], std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(m.graph->constants[9]->initializer.data<std::string>()[1], std::string("\0y", 2));
  EXPECT_NE(parse_error("graph @m() -> () {\n %a = const i8[1] [128]\n return\n}"), "");
  EXPECT_NE(parse_error("graph @m() -> () {\n %a = const u8[1] [-1]\n return\n}"), "");
  EXPECT_NE(parse_error("graph @m() -> () {\n %a = const u64[1] [18446744073709551616]\n return\n}"), "");
  EXPECT_NE(parse_error("graph @m() -> () {\n %a = const i32[1] [1.5]\n return\n}"), "");
  EXPECT_NE(parse_error("graph @m() -> () {\n %a = const bool[1] [1]\n return\n}"), "");
  EXPECT_NE(parse_error("graph @m() -> () {\n %a = const f32[1] [1e39]\n return\n}"), "");
}

TEST(TextIr, EmptyGraphAndComments) {
  const std::string text = "// leading comment\nmodel ir=7 opsets={}  // none\ngraph @\"\"() -> () {\n  return\n}\n";
  Model m = parse_model(text);
  EXPECT_EQ(m.ir_version, 7);
  EXPECT_TRUE(m.opsets.empty());
  EXPECT_EQ(m.graph->name, "");
  EXPECT_EQ(print_model(m), "model ir=7 opsets={}\ngraph @\"\"() -> () {\n  return\n}\n");
  expect_round_trip(m);
}

TEST(TextIr, PrintGraphAndType) {
  Model m = parse_model("graph @g(%x: f32[2]) -> (%x: f32[2]) { return %x }");
  EXPECT_EQ(print_graph(*m.graph), "graph @g(%x: f32[2]) -> (%x: f32[2]) {\n  return %x\n}\n");
  EXPECT_EQ(print_type(Type::wrap(Type::Kind::kSequence, Type::tensor(DType::kInt64, Shape({Dim::named("a b"), Dim()})))),
            "seq<i64[\"a b\",?]>");
  EXPECT_EQ(print_type(Type{}), "?[...]");
}

// ---- randomized round trips ------------------------------------------------------------------

class RandomModel {
 public:
  explicit RandomModel(uint32_t seed) : rng_(seed) {}

  Model make() {
    Model m;
    m.opsets[""] = 13 + pick(8);
    if (pick(2)) m.opsets["ai.onnx.ml"] = 3;
    m.producer_name = pick(2) ? "p" : "";
    m.graph = graph(nullptr, 0);
    return m;
  }

 private:
  int pick(int n) { return static_cast<int>(rng_() % static_cast<uint32_t>(n)); }
  std::string name() {
    static const char* kParts[] = {"a", "b", "x.y", "/m/n", "q q", "\"", "t-1", "é", "z_9"};
    return std::string(kParts[pick(9)]) + std::to_string(counter_++);
  }
  Type type(int depth = 0) {
    int k = pick(10);
    if (k == 0 && depth < 3) return Type::wrap(Type::Kind::kSequence, type(depth + 1));
    if (k == 1 && depth < 3) return Type::wrap(Type::Kind::kOptional, type(depth + 1));
    DType dt = pick(5) == 0 ? DType::kUndefined : static_cast<DType>(1 + pick(22));
    if (pick(4) == 0) return Type::tensor(dt);
    Shape s;
    for (int i = pick(4); i > 0; --i) {
      int d = pick(3);
      s.dims.push_back(d == 0 ? Dim(pick(100)) : d == 1 ? Dim::named(pick(2) ? "N" : "s q") : Dim());
    }
    return Type::tensor(dt, s);
  }
  Tensor tensor() {
    DType dt = static_cast<DType>(1 + pick(22));
    std::vector<int64_t> dims;
    for (int i = pick(3); i > 0; --i) dims.push_back(pick(2) ? pick(4) : pick(12));
    return filled(dt, dims, rng_gen_);
  }
  Attribute attr(Graph& g, int depth) {
    Attribute a;
    switch (pick(depth < 2 ? 10 : 8)) {
      case 0: return Attribute::make_int(static_cast<int64_t>(rng_()) - (1ll << 31));
      case 1: {
        uint32_t bits = static_cast<uint32_t>(rng_());
        float f;
        std::memcpy(&f, &bits, 4);
        if (std::isnan(f)) f = std::numeric_limits<float>::quiet_NaN();
        return Attribute::make_float(f);
      }
      case 2: return Attribute::make_string(name());
      case 3: return Attribute::make_tensor(tensor());
      case 4: {
        a.kind = Attribute::Kind::kInts;
        for (int i = pick(4); i > 0; --i) a.ints.push_back(pick(1000) - 500);
        return a;
      }
      case 5: {
        a.kind = Attribute::Kind::kFloats;
        for (int i = pick(4); i > 0; --i) a.floats.push_back(static_cast<float>(pick(1000)) / 7.f);
        return a;
      }
      case 6: {
        a.kind = Attribute::Kind::kStrings;
        for (int i = pick(3); i > 0; --i) a.strings.push_back(name());
        return a;
      }
      case 7: {
        a.kind = Attribute::Kind::kTensors;
        for (int i = pick(3); i > 0; --i) a.tensors.push_back(tensor());
        return a;
      }
      case 8: return Attribute::make_graph(graph(&g, depth + 1));
      default: {
        a.kind = Attribute::Kind::kGraphs;
        for (int i = pick(3); i > 0; --i) a.graphs.push_back(graph(&g, depth + 1));
        return a;
      }
    }
  }
  std::shared_ptr<Graph> graph(Graph* parent, int depth) {
    auto g = std::make_shared<Graph>();
    g->name = name();
    g->parent = parent;
    std::vector<Value*> avail;
    for (Graph* p = parent; p; p = p->parent)
      for (const auto& v : p->values()) avail.push_back(v.get());  // outer values may be captured
    for (int i = pick(4); i > 0; --i) {
      Value* v = g->add_value(name(), type());
      v->is_graph_input = true;
      if (pick(4) == 0) {
        v->initializer = tensor();
        v->type = Type::tensor(v->initializer.dtype(), pick(2) ? std::optional<Shape>() : Shape::of(v->initializer.dims()));
      }
      g->inputs.push_back(v);
      avail.push_back(v);
    }
    for (int i = pick(3); i > 0; --i) {
      Value* v = g->add_value(name());
      v->initializer = tensor();
      int kind = pick(3);
      v->type = kind == 0 ? Type::tensor(v->initializer.dtype(), Shape::of(v->initializer.dims()))
                : kind == 1 ? Type::tensor(v->initializer.dtype())
                            : Type{};
      g->constants.push_back(v);
      avail.push_back(v);
    }
    for (int i = pick(6); i > 0; --i) {
      std::vector<Value*> ins;
      for (int k = pick(4); k > 0; --k) ins.push_back(avail.empty() || pick(5) == 0 ? nullptr : avail[pick(static_cast<int>(avail.size()))]);
      std::map<std::string, Attribute> attrs;
      for (int k = pick(3); k > 0; --k) attrs["a" + std::to_string(pick(5))] = attr(*g, depth);
      std::vector<Value*> outs;
      for (int k = pick(3); k > 0; --k) outs.push_back(pick(5) == 0 ? nullptr : g->add_value(name(), type()));
      static const char* kOps[] = {"Add", "If", "Loop", "const", "My Op", "x.y"};
      static const char* kDomains[] = {"", "", "ai.onnx.ml", "com.microsoft", "weird domain"};
      Node* n = g->add_node(kOps[pick(6)], ins, outs, kDomains[pick(5)]);
      n->attrs = std::move(attrs);
      if (pick(2)) n->name = name();
      for (Value* o : outs)
        if (o) avail.push_back(o);
    }
    for (int i = pick(3); i > 0 && !avail.empty(); --i) {
      Value* v = avail[pick(static_cast<int>(avail.size()))];
      if (v->owner == g.get()) g->outputs.push_back(v);
    }
    return g;
  }

  std::mt19937_64 rng_;
  std::mt19937 rng_gen_{7};
  int counter_ = 0;
};

TEST(TextIr, RandomModelsRoundTrip) {
  for (uint32_t seed = 0; seed < 300; ++seed) {
    Model m = RandomModel(seed).make();
    SCOPED_TRACE("seed " + std::to_string(seed));
    expect_round_trip(m);
    if (HasFailure()) break;
  }
}

// ---- parse errors ------------------------------------------------------------------------------

TEST(TextIr, ErrorsHavePositions) {
  EXPECT_EQ(parse_error("graph @g(%x: f32[2] -> () {\n  return\n}"),
            "expected ')' at 1:21 (found '->')");
  EXPECT_EQ(parse_error("graph @g() -> () {\n  %y = Relu(%x) : f32[2]\n  return\n}"),
            "use of undefined value %x at 2:13");
  EXPECT_EQ(parse_error("graph @g(%x: f32[2]) -> () {\n  %x = Relu(%x)\n  return\n}"),
            "redefinition of value %x (first defined at 1:10) at 2:3");
  EXPECT_EQ(parse_error("graph @g() -> () {\n  %a = const f32[2,3] [1, 2]\n  return\n}"),
            "tensor literal has 2 values but f32[2,3] needs 6 at 2:23");
  EXPECT_EQ(parse_error("graph @g() -> () {\n  %a = const f32[2] hex\"0000\"\n  return\n}"),
            "hex data of 4 digits does not fit f32[2] (2 elements of 4 bytes) at 2:24");
  EXPECT_EQ(parse_error("graph @g() -> () {\n  %a = const f32[1] hex\"0000zz00\"\n  return\n}"),
            "invalid hex digit in tensor data at 2:24");
  EXPECT_EQ(parse_error("graph @g(%x: f99[2]) -> () { return }"), "unknown element type 'f99' at 1:14");
  EXPECT_EQ(parse_error("graph @g() -> () {\n  %s = Foo() {a=\"abc\n}"), "unterminated string at 2:17");
  EXPECT_EQ(parse_error("graph @g() -> () {\n  $\n}"), "unexpected character '$' at 2:3");
  EXPECT_EQ(parse_error("graph @g() -> () {\n  %s = Foo() {a=1, a=2}\n  return\n}"),
            "duplicate attribute 'a' at 2:20");
  EXPECT_EQ(parse_error("graph @g(%w: f32[1] = default) -> () {\n  return\n}"),
            "input %w is declared '= default' but has no const line at 1:10");
  EXPECT_EQ(parse_error("graph @g(%x: f32[1]) -> (%x: f32[2]) {\n  return %x\n}"),
            "output %x is declared as f32[2] but defined as f32[1] at 1:26");
  EXPECT_EQ(parse_error("graph @g(%x: f32[1]) -> (%x: f32[1]) {\n  return\n}"),
            "return lists 0 values but the signature declares 1 at 2:3");
  EXPECT_EQ(parse_error("graph @g() -> () {\n  %a = Foo() {v=[]}\n  return\n}"),
            "an empty list needs its kind, e.g. ints[] or floats[] at 2:17");
  EXPECT_EQ(parse_error("graph @g() -> () {\n  %a = const f8e5m2[1] [1]\n  return\n}"),
            "f8e5m2 tensor data must be written as hex\"...\" at 2:24");
  EXPECT_EQ(parse_error("graph @g() -> () {\n  %a = const f32[4611686018427387904,4] []\n  return\n}"),
            "tensor shape [4611686018427387904,4] has too many elements at 2:14");
  EXPECT_EQ(parse_error("graph @g() -> () {\n  %a = Foo(%"), "expected a name after '%' at 2:12");
  EXPECT_EQ(parse_error("model ir=99999999999999999999 opsets={} graph @g() -> () { return }"),
            "integer 99999999999999999999 is out of range at 1:10");
  EXPECT_EQ(parse_error("graph @g() -> () { return } trailing"),
            "expected end of input at 1:29 (found 'trailing')");
  EXPECT_EQ(parse_error(""), "expected 'graph' at 1:1 (found end of input)");
  EXPECT_EQ(parse_error("graph @g() -> () {\n  %a, %a = Foo()\n  return\n}"),
            "redefinition of value %a (first defined at 2:3) at 2:7");
  EXPECT_EQ(parse_error("graph @g() -> () {\n  %a = const f32[] [1]\n  %a = const f32[] [1]\n  return\n}"),
            "redefinition of value %a (first defined at 2:3) at 3:3");
  EXPECT_EQ(parse_error("graph @g() -> () {\n  %a = Foo() : f32[1], f32[1]\n  return\n}"),
            "expected an op type or 'return' at 2:22 (found ',')");
  // A subgraph cannot capture a value defined after its node, nor the node's own outputs.
  EXPECT_EQ(parse_error("graph @g() -> () {\n  %a = If() {g=graph @b() -> () {\n    %z = Neg(%a)\n    return\n  }}\n  return\n}"),
            "use of undefined value %a at 3:14");
}

TEST(TextIr, NestingDepthIsBounded) {
  auto nested = [](int levels) {
    std::string s = "graph @g() -> () {\n";
    for (int i = 1; i < levels; ++i) s += "Foo() {g=graph @g() -> () {\n";
    s += "return\n";
    for (int i = 1; i < levels; ++i) s += "}}\nreturn\n";
    return s + "}\n";
  };
  EXPECT_NO_THROW(parse_model(nested(64)));
  std::string msg = parse_error(nested(65));
  EXPECT_NE(msg.find("graphs nested too deeply"), std::string::npos) << msg;
  std::string deep_type = "graph @g(%x: ";
  for (int i = 0; i < 1000; ++i) deep_type += "seq<";
  msg = parse_error(deep_type);
  EXPECT_NE(msg.find("types nested too deeply"), std::string::npos) << msg;
  // Unbounded depth in garbage must not overflow the stack either.
  std::string garbage;
  for (int i = 0; i < 100000; ++i) garbage += "Foo() {g=graph @g() -> () {";
  EXPECT_THROW(parse_model("graph @g() -> () {" + garbage), Error);
}

TEST(TextIr, MutatedInputsNeverCrash) {
  const std::string seeds[] = {
      R"(model ir=8 opsets={"": 17, "ai.onnx.ml": 3} producer="p" "1"
metadata {"k": "v"}
graph @main(%cond: bool[], %x: f32[N,2], %w: f32[2] = default) -> (%o: f32[N,2]) {
  %w = const f32[2] [1, 2]
  %k = const f32[20] hex"0000803f0000803f0000803f0000803f0000803f0000803f0000803f0000803f0000803f0000803f0000803f0000803f0000803f0000803f0000803f0000803f0000803f0000803f0000803f0000803f"
  %a, _ = Split(%x, _) {axis=1, f=0.5, s="x", t=tensor<i64[2] [1, 2]>, l=floats[]} #"n 1" : f32[...]
  %o = If(%cond) {else_branch=graph @e() -> (%e: f32[N,2]) {
    %e = Add(%x, %w) : f32[N,2]
    return %e
  }, then_branch=graph @t() -> (%x: f32[N,2]) {
    return %x
  }} : f32[N,2]
  return %o
}
)"};
  std::mt19937 rng(1234);
  const std::string alphabet = "%@#\"\\()[]{}<>,:=?_-.0123456789abcdefxyz \n\t\x01\xff";
  int parsed = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string s = seeds[0];
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t pos = rng() % (s.size() + 1);
      switch (rng() % 4) {
        case 0: if (pos < s.size()) s.erase(pos, 1 + rng() % 8); break;
        case 1: s.insert(pos, 1, alphabet[rng() % alphabet.size()]); break;
        case 2: if (pos < s.size()) s[pos] = alphabet[rng() % alphabet.size()]; break;
        default: s.resize(pos); break;
      }
    }
    try {
      Model m = parse_model(s);
      ++parsed;
      std::string p = print_model(m);
      EXPECT_EQ(print_model(parse_model(p)), p);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidModel) << e.what();
    }
  }
  EXPECT_GT(parsed, 0);
}

}  // namespace
}  // namespace kiln
