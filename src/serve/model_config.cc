// config.json of a served model: parsing with per-field checks, and the Triton-style echo.
#include "serve/model_config.h"

#include "core/error.h"
#include "serve/kserve_json.h"

namespace kiln::serve {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& file, const std::string& what) {
  throw Error(ErrorKind::kUsage, file + ": " + what);
}

int64_t integer_field(const json& j, const char* key, int64_t lo, int64_t hi, int64_t fallback,
                      const std::string& file, const std::string& path) {
  if (!j.contains(key)) return fallback;
  const json& v = j.at(key);
  // Triton's JSON form writes 64-bit integers as strings; accept both.
  int64_t x = 0;
  if (v.is_number_integer()) {
    x = v.get<int64_t>();
  } else if (v.is_string()) {
    try {
      size_t used = 0;
      x = std::stoll(v.get<std::string>(), &used);
      if (used != v.get<std::string>().size()) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      bad(file, path + key + ": expected an integer, got \"" + v.get<std::string>() + "\"");
    }
  } else {
    bad(file, path + key + ": expected an integer, got " + v.dump());
  }
  if (x < lo || x > hi)
    bad(file, path + key + " = " + std::to_string(x) + ": expected " + std::to_string(lo) + ".." + std::to_string(hi));
  return x;
}

void check_keys(const json& j, std::initializer_list<const char*> known, const std::string& file,
                const std::string& path) {
  for (const auto& [k, v] : j.items()) {
    bool ok = false;
    for (const char* name : known) ok |= k == name;
    std::string names;
    for (const char* name : known) names += (names.empty() ? "" : ", ") + std::string(name);
    if (!ok) bad(file, "unknown field '" + path + k + "' (known: " + names + ")");
  }
}

DynamicBatching parse_dynamic_batching(const json& d, const ModelConfig& c, const std::string& file) {
  if (!d.is_object()) bad(file, "dynamic_batching: expected an object");
  check_keys(d, {"preferred_batch_size", "max_queue_delay_microseconds"}, file, "dynamic_batching.");
  DynamicBatching b;
  b.enabled = true;
  b.max_queue_delay_us = integer_field(d, "max_queue_delay_microseconds", 0, 10'000'000, 0, file, "dynamic_batching.");
  if (d.contains("preferred_batch_size")) {
    const json& p = d.at("preferred_batch_size");
    if (!p.is_array()) bad(file, "dynamic_batching.preferred_batch_size: expected a list of integers");
    for (const json& x : p) {
      if (!x.is_number_integer() || x.get<int64_t>() < 1 || x.get<int64_t>() > c.max_batch_size)
        bad(file, "dynamic_batching.preferred_batch_size: " + x.dump() + " is not in 1..max_batch_size (" +
                      std::to_string(c.max_batch_size) + ")");
      b.preferred_batch_size.push_back(x.get<int64_t>());
    }
  }
  return b;
}

std::vector<int64_t> dims_field(const json& d, const std::string& file, const std::string& path) {
  if (!d.is_array()) bad(file, path + ": expected a list of sizes");
  std::vector<int64_t> dims;
  for (const json& x : d) {
    if (!x.is_number_integer() || x.get<int64_t>() < -1 || x.get<int64_t>() > (int64_t{1} << 31))
      bad(file, path + ": " + x.dump() + " is not a size (or -1: any)");
    dims.push_back(x.get<int64_t>());
  }
  if (dims.size() > 8) bad(file, path + ": more than 8 dims");
  return dims;
}

std::vector<TensorConfig> parse_tensors(const json& list, const std::string& file, const std::string& key) {
  if (!list.is_array()) bad(file, key + ": expected a list of {\"name\", \"data_type\", \"dims\"}");
  std::vector<TensorConfig> out;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string path = key + "[" + std::to_string(i) + "]";
    const json& t = list[i];
    if (!t.is_object() || !t.contains("name") || !t.at("name").is_string()) bad(file, path + ": needs a \"name\"");
    check_keys(t, {"name", "data_type", "dims"}, file, path + ".");
    TensorConfig c{t.at("name").get<std::string>(), std::nullopt, std::nullopt};
    if (t.contains("data_type")) {
      const std::string type = t.at("data_type").is_string() ? t.at("data_type").get<std::string>() : "";
      std::optional<DType> dt = type.rfind("TYPE_", 0) == 0 ? dtype_of_kserve(type.substr(5)) : std::nullopt;
      if (!dt) bad(file, path + ".data_type: " + t.at("data_type").dump() + " is not a type such as \"TYPE_FP32\"");
      c.dtype = dt;
    }
    if (t.contains("dims")) c.dims = dims_field(t.at("dims"), file, path + ".dims");
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<WarmupCase> parse_warmup(const json& list, const std::string& file) {
  if (!list.is_array()) bad(file, "model_warmup: expected a list of {\"batch_size\", \"inputs\"}");
  std::vector<WarmupCase> out;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string path = "model_warmup[" + std::to_string(i) + "]";
    const json& w = list[i];
    if (!w.is_object()) bad(file, path + ": expected an object");
    check_keys(w, {"name", "batch_size", "inputs"}, file, path + ".");
    WarmupCase c;
    c.batch_size = integer_field(w, "batch_size", 1, 1 << 20, 1, file, path + ".");
    if (w.contains("inputs")) {
      if (!w.at("inputs").is_object()) bad(file, path + ".inputs: expected {\"<input>\": {\"dims\": [...]}}");
      for (const auto& [name, spec] : w.at("inputs").items()) {
        const std::string ipath = path + ".inputs." + name;
        if (!spec.is_object() || !spec.contains("dims")) bad(file, ipath + ": needs \"dims\"");
        check_keys(spec, {"dims", "data_type", "zero_data"}, file, ipath + ".");
        c.dims[name] = dims_field(spec.at("dims"), file, ipath + ".dims");
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

ModelConfig parse_model_config(const std::string& text, const std::string& file) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    bad(file, std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object()) bad(file, "expected a JSON object");
  check_keys(j, {"name", "platform", "backend", "max_batch_size", "dynamic_batching", "instance_group", "parameters",
                 "max_queue_size", "default_timeout_microseconds", "input", "output", "model_warmup"},
             file, "");
  ModelConfig c;
  c.max_batch_size = integer_field(j, "max_batch_size", 0, 1 << 20, 0, file, "");
  if (j.contains("dynamic_batching")) {
    if (c.max_batch_size == 0) bad(file, "dynamic_batching needs max_batch_size > 0 (the model's batch dim)");
    c.dynamic_batching = parse_dynamic_batching(j.at("dynamic_batching"), c, file);
  }
  if (j.contains("instance_group")) {
    const json& g = j.at("instance_group");
    if (!g.is_array() || g.size() != 1 || !g[0].is_object())
      bad(file, "instance_group: expected a list with one object, e.g. [{\"count\": 2}]");
    check_keys(g[0], {"count", "kind"}, file, "instance_group[0].");
    if (g[0].contains("kind") && g[0].at("kind") != "KIND_CPU")
      bad(file, "instance_group[0].kind: only KIND_CPU is supported");
    c.instances = static_cast<int>(integer_field(g[0], "count", 1, 64, 1, file, "instance_group[0]."));
  }
  if (j.contains("parameters")) {
    const json& p = j.at("parameters");
    if (!p.is_object()) bad(file, "parameters: expected an object");
    check_keys(p, {"threads"}, file, "parameters.");
    c.threads = static_cast<int>(integer_field(p, "threads", 0, 1024, 0, file, "parameters."));
  }
  c.max_queue_size = integer_field(j, "max_queue_size", 1, 1 << 20, c.max_queue_size, file, "");
  c.default_timeout_us = integer_field(j, "default_timeout_microseconds", 0, int64_t{1} << 40, 0, file, "");
  if (j.contains("input")) c.inputs = parse_tensors(j.at("input"), file, "input");
  if (j.contains("output")) c.outputs = parse_tensors(j.at("output"), file, "output");
  if (j.contains("model_warmup")) c.warmup = parse_warmup(j.at("model_warmup"), file);
  for (const WarmupCase& w : c.warmup)
    if (c.max_batch_size > 0 && w.batch_size > c.max_batch_size)
      bad(file, "model_warmup: batch_size " + std::to_string(w.batch_size) + " is over max_batch_size");
  return c;
}

nlohmann::json model_config_to_json(const ModelConfig& c) {
  json j;
  j["platform"] = "onnx";
  j["backend"] = "kiln";
  j["max_batch_size"] = c.max_batch_size;
  if (c.dynamic_batching.enabled)
    j["dynamic_batching"] = {{"preferred_batch_size", c.dynamic_batching.preferred_batch_size},
                             {"max_queue_delay_microseconds", c.dynamic_batching.max_queue_delay_us}};
  j["instance_group"] = json::array({{{"count", c.instances}, {"kind", "KIND_CPU"}}});
  j["parameters"] = {{"threads", c.threads}};
  j["max_queue_size"] = c.max_queue_size;
  j["default_timeout_microseconds"] = c.default_timeout_us;
  return j;
}

}  // namespace kiln::serve
