// One version of a model, loaded for serving: its inputs and outputs as the protocol describes
// them, and per instance one compiled Session (an .onnx model) or one opened `kiln compile`
// library (an .so: fixed shapes), each with its own threads and memory.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "serve/model_config.h"

namespace kiln {
class Session;
class CompiledLibrary;
}

namespace kiln::serve {

struct TensorMetadata {
  std::string name;
  DType dtype = DType::kUndefined;
  std::vector<int64_t> shape;  // -1: any size (symbolic in the model)
};

class ServedModel {
 public:
  // Loads `path` (an .onnx file or a compiled .so) once per instance of `config`; `threads` per instance when
  // the config names none. Throws kiln::Error for a model the server cannot serve.
  ServedModel(std::string name, std::string version, const std::string& path, ModelConfig config, int threads);
  ~ServedModel();

  const std::string& name() const { return name_; }
  const std::string& version() const { return version_; }
  const ModelConfig& config() const { return config_; }
  const std::vector<TensorMetadata>& inputs() const { return inputs_; }
  const std::vector<TensorMetadata>& outputs() const { return outputs_; }
  int instances() const { return static_cast<int>(sessions_.size() + libraries_.size()); }

  // Checks tensors (in inputs() order) against the metadata and the batch limit; returns the
  // batch size (dim 0; 0 when the model does not batch). Throws ServeError(kBadRequest).
  int64_t check_inputs(const std::vector<Tensor>& feeds) const;
  // Runs on instance `instance` (one caller per instance at a time); outputs own their memory.
  std::vector<Tensor> run(int instance, const std::vector<Tensor>& feeds);

 private:
  void load_onnx(const std::string& path, int threads);
  void load_library(const std::string& path, int threads);
  void apply_tensor_configs(const std::vector<TensorConfig>& list, std::vector<TensorMetadata>& tensors,
                            const std::string& role);
  void warm_up();

  std::string name_, version_;
  ModelConfig config_;
  std::vector<TensorMetadata> inputs_, outputs_;
  std::vector<size_t> feed_slots_;  // graph input index of each of inputs_
  size_t graph_inputs_ = 0;
  std::vector<std::unique_ptr<Session>> sessions_;
  std::vector<std::unique_ptr<CompiledLibrary>> libraries_;
};

}  // namespace kiln::serve
