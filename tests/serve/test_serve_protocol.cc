// kiln serve's request decoding and config parsing: KServe v2 REST bodies (JSON and binary
// tensors) within the limits, config.json fields; what tests/serve/test_serve.py does end to end
// runs here without a server, under the sanitizer builds too.
#include <gtest/gtest.h>

#include <cstring>

#include "core/error.h"
#include "serve/kserve_json.h"
#include "serve/model_config.h"
#include "serve/serve_error.h"

namespace kiln::serve {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(ServeConfig, DefaultsAndFields) {
  ModelConfig c = parse_model_config("{}", "c.json");
  EXPECT_EQ(c.max_batch_size, 0);
  EXPECT_FALSE(c.dynamic_batching.enabled);
  EXPECT_EQ(c.instances, 1);
  c = parse_model_config(R"({"max_batch_size": "8", "dynamic_batching": {"preferred_batch_size": [4, 8],
      "max_queue_delay_microseconds": 100}, "instance_group": [{"count": 2, "kind": "KIND_CPU"}],
      "parameters": {"threads": 3}, "max_queue_size": 5})",
                         "c.json");
  EXPECT_EQ(c.max_batch_size, 8);
  EXPECT_TRUE(c.dynamic_batching.enabled);
  EXPECT_EQ(c.dynamic_batching.preferred_batch_size, (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(c.dynamic_batching.max_queue_delay_us, 100);
  EXPECT_EQ(c.instances, 2);
  EXPECT_EQ(c.threads, 3);
  EXPECT_EQ(c.max_queue_size, 5);
}

TEST(ServeConfig, InputsOutputsAndWarmup) {
  ModelConfig c = parse_model_config(R"({"max_batch_size": 4, "input": [{"name": "x", "data_type": "TYPE_FP16",
      "dims": [3, -1]}], "output": [{"name": "y"}], "model_warmup": [{"batch_size": 2, "inputs": {"x": {"dims": [3, 8]}}}]})",
                                     "c.json");
  ASSERT_EQ(c.inputs.size(), 1u);
  EXPECT_EQ(c.inputs[0].dtype, DType::kFloat16);
  EXPECT_EQ(*c.inputs[0].dims, (std::vector<int64_t>{3, -1}));
  EXPECT_FALSE(c.outputs[0].dims.has_value());
  ASSERT_EQ(c.warmup.size(), 1u);
  EXPECT_EQ(c.warmup[0].batch_size, 2);
  EXPECT_EQ(c.warmup[0].dims.at("x"), (std::vector<int64_t>{3, 8}));
  auto err = [](const char* text) { return error_of([&] { parse_model_config(text, "c.json"); }); };
  EXPECT_NE(err(R"({"input": [{"name": "x", "data_type": "FP32"}]})").find("input[0].data_type"), std::string::npos);
  EXPECT_NE(err(R"({"input": [{"name": "x", "dims": [-2]}]})").find("input[0].dims"), std::string::npos);
  EXPECT_NE(err(R"({"max_batch_size": 2, "model_warmup": [{"batch_size": 3}]})").find("over max_batch_size"),
            std::string::npos);
}

TEST(ServeConfig, ErrorsNameTheFileAndField) {
  auto err = [](const char* text) { return error_of([&] { parse_model_config(text, "m/config.json"); }); };
  EXPECT_NE(err("{").find("m/config.json: not valid JSON"), std::string::npos);
  EXPECT_NE(err(R"({"max_batch_sise": 4})").find("unknown field 'max_batch_sise'"), std::string::npos);
  EXPECT_NE(err(R"({"max_batch_size": -1})").find("max_batch_size = -1"), std::string::npos);
  EXPECT_NE(err(R"({"max_batch_size": "x"})").find("expected an integer"), std::string::npos);
  EXPECT_NE(err(R"({"dynamic_batching": {}})").find("needs max_batch_size > 0"), std::string::npos);
  EXPECT_NE(err(R"({"max_batch_size": 4, "dynamic_batching": {"preferred_batch_size": [8]}})").find("preferred_batch_size"),
            std::string::npos);
  EXPECT_NE(err(R"({"instance_group": [{"kind": "KIND_GPU"}]})").find("only KIND_CPU"), std::string::npos);
  EXPECT_NE(err(R"({"parameters": {"thread": 2}})").find("unknown field 'parameters.thread'"), std::string::npos);
}

TEST(ServeRequest, JsonTensorsNestedAndTyped) {
  InferRequest r = parse_infer_request(
      R"({"id": "a", "inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 2], "data": [[1, 2], [3, 4.5]]},
          {"name": "m", "datatype": "BOOL", "shape": [2], "data": [true, false]},
          {"name": "i", "datatype": "INT64", "shape": [1], "data": [-9007199254740993]}],
          "outputs": [{"name": "y", "parameters": {"binary_data": true}}], "parameters": {"timeout": 50}})",
      std::nullopt, {});
  ASSERT_EQ(r.inputs.size(), 3u);
  EXPECT_EQ(r.id, "a");
  EXPECT_EQ(r.timeout_us, 50);
  EXPECT_EQ(r.inputs[0].second.dims(), (std::vector<int64_t>{2, 2}));
  EXPECT_FLOAT_EQ(r.inputs[0].second.data<float>()[3], 4.5f);
  EXPECT_TRUE(r.inputs[1].second.data<bool>()[0]);
  EXPECT_EQ(r.inputs[2].second.data<int64_t>()[0], -9007199254740993);
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_TRUE(r.outputs[0].binary);
}

TEST(ServeRequest, BinaryTensorsFollowTheHeader) {
  const std::string header =
      R"({"inputs": [{"name": "x", "datatype": "INT32", "shape": [3], "parameters": {"binary_data_size": 12}}]})";
  const int32_t values[3] = {7, -8, 9};
  std::string body = header + std::string(reinterpret_cast<const char*>(values), sizeof values);
  InferRequest r = parse_infer_request(body, header.size(), {});
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_EQ(std::memcmp(r.inputs[0].second.raw(), values, sizeof values), 0);
  EXPECT_NE(error_of([&] { parse_infer_request(body.substr(0, body.size() - 1), header.size(), {}); }).find("more binary bytes"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse_infer_request(body + "z", header.size(), {}); }).find("no input claims"), std::string::npos);
  EXPECT_NE(error_of([&] { parse_infer_request(body, body.size() + 1, {}); }).find("past the end"), std::string::npos);
}

TEST(ServeRequest, LimitsBeforeAllocation) {
  auto err = [](const std::string& input) {
    return error_of([&] { parse_infer_request(R"({"inputs": [)" + input + "]}", std::nullopt, {}); });
  };
  EXPECT_NE(err(R"({"name": "x", "datatype": "FP32", "shape": [1099511627776, 1099511627776], "data": []})").find("elements"),
            std::string::npos);
  EXPECT_NE(err(R"({"name": "x", "datatype": "FP64", "shape": [100000000], "data": [1]})").find("more than the request could carry"),
            std::string::npos);
  EXPECT_NE(err(R"({"name": "x", "datatype": "FP32", "shape": [1,1,1,1,1,1,1,1,1], "data": [1]})").find("rank 9"),
            std::string::npos);
  EXPECT_NE(err(R"({"name": "x", "datatype": "UINT8", "shape": [1], "data": [300]})").find("does not fit"), std::string::npos);
  EXPECT_NE(err(R"({"name": "x", "datatype": "FP32", "shape": [1], "data": [[[[[[[[[[1]]]]]]]]]]})").find("nested deeper"),
            std::string::npos);
  EXPECT_NE(err(R"({"name": "x", "datatype": "BYTES", "shape": [1], "data": ["a"]})").find("BYTES is not"), std::string::npos);
  EXPECT_NE(err(R"({"name": "x", "datatype": "FP32", "shape": [2], "data": [1, 2, 3]})").find("more values"), std::string::npos);
}

TEST(ServeResponse, BinaryAndJsonOutputs) {
  std::vector<TensorMetadata> meta = {{"y", DType::kFloat32, {-1}}, {"k", DType::kInt64, {-1}}};
  Tensor y(DType::kFloat32, {2});
  y.data<float>()[0] = 1.5f;
  y.data<float>()[1] = -2.f;
  Tensor k(DType::kInt64, {1});
  k.data<int64_t>()[0] = 42;
  InferRequest req;
  req.outputs = {{"y", true}, {"k", false}};
  EncodedResponse out = encode_infer_response("m", "3", req, meta, {y, k});
  ASSERT_TRUE(out.json_length.has_value());
  nlohmann::json j = nlohmann::json::parse(out.body.substr(0, *out.json_length));
  EXPECT_EQ(j["model_version"], "3");
  EXPECT_EQ(j["outputs"][0]["parameters"]["binary_data_size"], 8);
  EXPECT_EQ(j["outputs"][1]["data"][0], 42);
  ASSERT_EQ(out.body.size(), *out.json_length + 8);
  EXPECT_EQ(std::memcmp(out.body.data() + *out.json_length, y.raw(), 8), 0);
  req.outputs = {};  // every output, JSON
  out = encode_infer_response("m", "3", req, meta, {y, k});
  EXPECT_FALSE(out.json_length.has_value());
  EXPECT_EQ(nlohmann::json::parse(out.body)["outputs"][0]["data"][1], -2.0);
}

TEST(ServeErrors, ClassesMapToHttp) {
  EXPECT_EQ(http_status_of(status_of(Error(ErrorKind::kBadInput, "x"))), 400);
  EXPECT_EQ(http_status_of(status_of(ServeError(ServeStatus::kNotFound, "x"))), 404);
  EXPECT_EQ(http_status_of(status_of(Error(ErrorKind::kTimeout, "x"))), 504);
  EXPECT_EQ(http_status_of(status_of(std::runtime_error("x"))), 500);
}

}  // namespace
}  // namespace kiln::serve
