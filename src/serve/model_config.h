// A served model's settings: its repository folder's config.json (Triton's field names where
// Triton has the setting), with defaults and checks that name the file and the field.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"

namespace kiln::serve {

struct DynamicBatching {
  bool enabled = false;
  std::vector<int64_t> preferred_batch_size;  // a batch that reaches the largest one runs at once
  int64_t max_queue_delay_us = 0;            // how long the first request of a batch may wait
};

// An "input" or "output" entry: checked against the model at load; dims (without the batch dim
// when max_batch_size > 0) may fix sizes the model leaves symbolic, and requests must then fit.
struct TensorConfig {
  std::string name;
  std::optional<DType> dtype;                // "data_type": "TYPE_FP32"
  std::optional<std::vector<int64_t>> dims;  // -1: any size
};

// One "model_warmup" entry: a zero-filled run of every instance at load, so that the first
// requests of these shapes find their plans compiled.
struct WarmupCase {
  int64_t batch_size = 1;  // prepended as dim 0 when max_batch_size > 0
  std::map<std::string, std::vector<int64_t>> dims;  // per input (without the batch dim)
};

struct ModelConfig {
  // 0: the model has no batch dim the server may use (requests run one by one); > 0: dim 0 of
  // every input and output is the batch, and requests are batched up to this many rows.
  int64_t max_batch_size = 0;
  DynamicBatching dynamic_batching;
  int instances = 1;          // instance_group[0].count: parallel copies, each with its own threads
  int threads = 0;            // per instance; 0: the server's --threads
  int64_t max_queue_size = 64;  // requests waiting per model; more are refused at once (503)
  int64_t default_timeout_us = 0;  // per request when it names none; 0: none
  std::vector<TensorConfig> inputs, outputs;
  std::vector<WarmupCase> warmup;
};

// Parses config.json text (`file` names it in errors); throws Error(kUsage) naming the field.
ModelConfig parse_model_config(const std::string& text, const std::string& file);
// The config in Triton's model-config JSON form (GET /v2/models/<name>/config), without the
// model's name, inputs and outputs, which the caller adds.
nlohmann::json model_config_to_json(const ModelConfig& c);

}  // namespace kiln::serve
