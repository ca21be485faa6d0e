// Parsing and encoding of KServe v2 REST inference messages.
#include "serve/kserve_json.h"

#include <cstring>

#include "core/float16.h"
#include "core/shape.h"
#include "serve/serve_error.h"

namespace kiln::serve {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& m) { throw ServeError(ServeStatus::kBadRequest, m); }

const std::pair<DType, const char*> kDatatypes[] = {
    {DType::kBool, "BOOL"},     {DType::kUInt8, "UINT8"},   {DType::kUInt16, "UINT16"}, {DType::kUInt32, "UINT32"},
    {DType::kUInt64, "UINT64"}, {DType::kInt8, "INT8"},     {DType::kInt16, "INT16"},   {DType::kInt32, "INT32"},
    {DType::kInt64, "INT64"},   {DType::kFloat16, "FP16"},  {DType::kFloat32, "FP32"},  {DType::kFloat64, "FP64"},
    {DType::kBFloat16, "BF16"},
};

std::vector<int64_t> parse_shape(const json& j, const std::string& where, const RequestLimits& limits) {
  if (!j.is_array()) bad(where + ".shape: expected a list of integers");
  if (static_cast<int>(j.size()) > limits.max_rank)
    bad(where + ".shape: rank " + std::to_string(j.size()) + " is over the limit of " + std::to_string(limits.max_rank));
  std::vector<int64_t> dims;
  for (const json& d : j) {
    if (!d.is_number_integer()) bad(where + ".shape: " + d.dump() + " is not a size >= 0");
    dims.push_back(d.get<int64_t>());
  }
  check_shape(dims, where + ".shape", limits);
  return dims;
}

// Flattens nested JSON lists (row-major) into `out`, checking that every leaf fits the dtype.
template <class T>
void flatten(const json& j, std::vector<T>& out, int64_t limit, const std::string& where, int depth = 0) {
  if (j.is_array()) {
    // Nesting follows the shape's dims at most; deeper lists are malformed (and would cost stack).
    if (depth > RequestLimits{}.max_rank) bad(where + ".data: lists nested deeper than the rank limit");
    for (const json& x : j) flatten(x, out, limit, where, depth + 1);
    return;
  }
  if (static_cast<int64_t>(out.size()) >= limit) bad(where + ".data: more values than the shape holds");
  if constexpr (std::is_same_v<T, bool>) {
    if (!j.is_boolean()) bad(where + ".data: expected true/false for BOOL, got " + j.dump());
    out.push_back(j.get<bool>());
  } else if constexpr (std::is_integral_v<T>) {
    if (!j.is_number_integer()) bad(where + ".data: expected integers, got " + j.dump());
    if (j.is_number_unsigned() ? j.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<T>::max())
                               : (j.get<int64_t>() < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
                                  (j.get<int64_t>() > 0 &&
                                   static_cast<uint64_t>(j.get<int64_t>()) > static_cast<uint64_t>(std::numeric_limits<T>::max()))))
      bad(where + ".data: " + j.dump() + " does not fit the datatype");
    out.push_back(static_cast<T>(j.is_number_unsigned() ? static_cast<T>(j.get<uint64_t>()) : static_cast<T>(j.get<int64_t>())));
  } else {
    if (!j.is_number()) bad(where + ".data: expected numbers, got " + j.dump());
    out.push_back(static_cast<T>(static_cast<float>(j.get<double>())));
  }
}

template <class T>
void fill_from_json(Tensor& t, const json& data, const std::string& where) {
  std::vector<T> values;
  values.reserve(static_cast<size_t>(t.numel()));
  flatten(data, values, t.numel(), where);
  if (static_cast<int64_t>(values.size()) != t.numel())
    bad(where + ".data: " + std::to_string(values.size()) + " values for a shape of " + std::to_string(t.numel()) +
        " elements");
  T* dst = t.data<T>();
  for (size_t i = 0; i < values.size(); ++i) dst[i] = values[i];
}

void fill_json_data(Tensor& t, const json& data, const std::string& where) {
  visit_dtype(t.dtype(), [&](auto tag) { fill_from_json<typename decltype(tag)::type>(t, data, where); });
}

template <class T>
json values_of(const Tensor& t) {
  json out = json::array();
  const T* p = t.data<T>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) out.push_back(static_cast<float>(p[i]));
    else out.push_back(p[i]);
  }
  return out;
}

json json_data(const Tensor& t) {
  return visit_dtype(t.dtype(), [&](auto tag) { return values_of<typename decltype(tag)::type>(t); });
}

bool binary_parameter(const json& j, const char* key) {
  if (!j.contains("parameters")) return false;
  const json& p = j.at("parameters");
  if (!p.is_object() || !p.contains(key)) return false;
  if (!p.at(key).is_boolean()) bad(std::string("parameters.") + key + ": expected true/false");
  return p.at(key).get<bool>();
}

Tensor parse_input(const json& in, size_t index, std::string_view binary, size_t& binary_offset, size_t json_bytes,
                   const RequestLimits& limits) {
  std::string where = "inputs[" + std::to_string(index) + "]";
  if (!in.is_object()) bad(where + ": expected an object");
  if (!in.contains("name") || !in.at("name").is_string()) bad(where + ".name: missing");
  where += " ('" + in.at("name").get<std::string>() + "')";
  if (!in.contains("datatype") || !in.at("datatype").is_string()) bad(where + ".datatype: missing");
  std::optional<DType> dt = dtype_of_kserve(in.at("datatype").get<std::string>());
  if (!dt) bad(where + ".datatype: " + in.at("datatype").dump() + " is not supported (BYTES is not)");
  if (!in.contains("shape")) bad(where + ".shape: missing");
  const std::vector<int64_t> dims = parse_shape(in.at("shape"), where, limits);
  const int64_t numel = element_count(dims);
  const uint64_t nbytes = static_cast<uint64_t>(numel) * dtype_size(*dt);
  const json* params = in.contains("parameters") ? &in.at("parameters") : nullptr;
  // Sizes are checked against the bytes the body holds before anything is allocated.
  if (params && params->is_object() && params->contains("binary_data_size")) {
    const json& size = params->at("binary_data_size");
    if (!size.is_number_unsigned()) bad(where + ".parameters.binary_data_size: expected a size");
    const uint64_t n = size.get<uint64_t>();
    if (n != nbytes)
      bad(where + ": binary_data_size " + std::to_string(n) + " does not match the shape (" + std::to_string(nbytes) +
          " bytes)");
    if (n > binary.size() - binary_offset)
      bad(where + ": the body holds " + std::to_string(binary.size() - binary_offset) + " more binary bytes, not " +
          std::to_string(n));
    Tensor t = Tensor::uninitialized(*dt, dims);
    if (n) std::memcpy(t.raw(), binary.data() + binary_offset, n);
    binary_offset += n;
    return t;
  }
  if (!in.contains("data")) bad(where + ": no data and no parameters.binary_data_size");
  if (static_cast<uint64_t>(numel) > json_bytes)
    bad(where + ": the shape holds " + std::to_string(numel) + " values, more than the request could carry");
  Tensor t = Tensor::uninitialized(*dt, dims);
  fill_json_data(t, in.at("data"), where);
  return t;
}

}  // namespace

void check_shape(const std::vector<int64_t>& dims, const std::string& where, const RequestLimits& limits) {
  if (static_cast<int>(dims.size()) > limits.max_rank)
    bad(where + ": rank " + std::to_string(dims.size()) + " is over the limit of " + std::to_string(limits.max_rank));
  int64_t elements = 1;
  for (int64_t v : dims) {
    if (v < 0) bad(where + ": " + std::to_string(v) + " is not a size >= 0");
    if (v > limits.max_elements || (v > 0 && elements > limits.max_elements / v))
      bad(where + " " + dims_to_string(dims) + ": more than " + std::to_string(limits.max_elements) + " elements");
    elements *= v;
  }
}

int64_t element_count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::optional<std::string> kserve_datatype(DType t) {
  for (const auto& [d, n] : kDatatypes)
    if (d == t) return std::string(n);
  return std::nullopt;
}

std::optional<DType> dtype_of_kserve(const std::string& name) {
  for (const auto& [d, n] : kDatatypes)
    if (name == n) return d;
  return std::nullopt;
}

json tensor_metadata_json(const TensorMetadata& m) {
  return {{"name", m.name}, {"datatype", kserve_datatype(m.dtype).value_or("UNSUPPORTED")}, {"shape", m.shape}};
}

InferRequest parse_infer_request(const std::string& body, std::optional<size_t> json_length,
                                 const RequestLimits& limits) {
  if (json_length && *json_length > body.size())
    bad("Inference-Header-Content-Length " + std::to_string(*json_length) + " is past the end of the body (" +
        std::to_string(body.size()) + " bytes)");
  const size_t n = json_length.value_or(body.size());
  json j = json::parse(body.begin(), body.begin() + static_cast<std::ptrdiff_t>(n), nullptr, false);
  if (j.is_discarded()) bad("the request body is not valid JSON");
  if (!j.is_object()) bad("the request body must be a JSON object");
  InferRequest r;
  if (j.contains("id")) {
    if (!j.at("id").is_string()) bad("id: expected a string");
    r.id = j.at("id").get<std::string>();
  }
  r.binary_output = binary_parameter(j, "binary_data_output");
  if (j.contains("parameters") && j.at("parameters").is_object() && j.at("parameters").contains("timeout")) {
    const json& t = j.at("parameters").at("timeout");
    if (!t.is_number_unsigned()) bad("parameters.timeout: expected microseconds >= 0");
    r.timeout_us = static_cast<int64_t>(std::min<uint64_t>(t.get<uint64_t>(), uint64_t{1} << 40));
  }
  if (!j.contains("inputs") || !j.at("inputs").is_array()) bad("inputs: expected a list");
  const std::string_view binary = std::string_view(body).substr(n);
  size_t offset = 0;
  for (size_t i = 0; i < j.at("inputs").size(); ++i) {
    const json& in = j.at("inputs")[i];
    Tensor t = parse_input(in, i, binary, offset, n, limits);
    r.inputs.emplace_back(in.at("name").get<std::string>(), std::move(t));
  }
  if (offset != binary.size())
    bad("the body has " + std::to_string(binary.size() - offset) + " binary bytes that no input claims");
  if (j.contains("outputs")) {
    if (!j.at("outputs").is_array()) bad("outputs: expected a list");
    for (const json& o : j.at("outputs")) {
      if (!o.is_object() || !o.contains("name") || !o.at("name").is_string()) bad("outputs: each needs a name");
      r.outputs.push_back({o.at("name").get<std::string>(), binary_parameter(o, "binary_data") || r.binary_output});
    }
  }
  return r;
}

EncodedResponse encode_infer_response(const std::string& model, const std::string& version, const InferRequest& req,
                                      const std::vector<TensorMetadata>& meta, const std::vector<Tensor>& outputs) {
  std::vector<RequestedOutput> wanted = req.outputs;
  if (wanted.empty())
    for (const TensorMetadata& m : meta) wanted.push_back({m.name, req.binary_output});
  json j = {{"model_name", model}, {"model_version", version}, {"outputs", json::array()}};
  if (!req.id.empty()) j["id"] = req.id;
  std::string binary;
  for (const RequestedOutput& w : wanted) {
    size_t k = 0;
    while (k < meta.size() && meta[k].name != w.name) ++k;
    if (k == meta.size()) bad("outputs: the model has no output named '" + w.name + "'");
    const Tensor& t = outputs[k];
    json o = {{"name", w.name}, {"datatype", kserve_datatype(t.dtype()).value_or("UNSUPPORTED")}, {"shape", t.dims()}};
    if (w.binary) {
      o["parameters"] = {{"binary_data_size", t.nbytes()}};
      binary.append(static_cast<const char*>(t.raw()), t.nbytes());
    } else {
      o["data"] = json_data(t);
    }
    j["outputs"].push_back(std::move(o));
  }
  EncodedResponse r;
  r.body = j.dump();
  if (!binary.empty() || std::any_of(wanted.begin(), wanted.end(), [](const RequestedOutput& w) { return w.binary; })) {
    r.json_length = r.body.size();
    r.body += binary;
  }
  return r;
}

}  // namespace kiln::serve
