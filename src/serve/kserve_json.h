// The KServe v2 REST encoding of inference requests and responses: JSON tensors and the binary
// tensor data extension (a JSON header of Inference-Header-Content-Length bytes, then the raw
// tensors in order), with the limits that keep a bad request from costing memory or a crash.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tensor.h"
#include "serve/served_model.h"

namespace kiln::serve {

struct RequestLimits {
  int max_rank = 8;
  int64_t max_elements = int64_t{1} << 28;  // per tensor
};

struct RequestedOutput {
  std::string name;
  bool binary = false;
};

struct InferRequest {
  std::string id;
  std::vector<std::pair<std::string, Tensor>> inputs;
  std::vector<RequestedOutput> outputs;  // empty: every output
  bool binary_output = false;            // parameters.binary_data_output
  int64_t timeout_us = 0;                // parameters.timeout (0: the model's default)
};

// Checks a request's tensor shape (rank, sizes >= 0, element count) against the limits;
// `where` names the tensor in the ServeError(kBadRequest) message.
void check_shape(const std::vector<int64_t>& dims, const std::string& where, const RequestLimits& limits);
// Element count of a checked shape.
int64_t element_count(const std::vector<int64_t>& dims);

// "FP32", "INT64", "BOOL", ...; nullopt for a dtype the protocol cannot carry.
std::optional<std::string> kserve_datatype(DType t);
std::optional<DType> dtype_of_kserve(const std::string& name);
nlohmann::json tensor_metadata_json(const TensorMetadata& m);

// Throws ServeError(kBadRequest) naming the field that is wrong.
InferRequest parse_infer_request(const std::string& body, std::optional<size_t> json_length, const RequestLimits& limits);

struct EncodedResponse {
  std::string body;
  std::optional<size_t> json_length;  // set when binary data follows the JSON
};
// `outputs` parallel to `meta` (the model's outputs); only the requested ones are encoded.
EncodedResponse encode_infer_response(const std::string& model, const std::string& version, const InferRequest& req,
                                      const std::vector<TensorMetadata>& meta, const std::vector<Tensor>& outputs);

}  // namespace kiln::serve
