// The model repository on disk, laid out as Triton's: DIR/<model>/config.json (optional) and
// DIR/<model>/<version>/model.onnx (or a `kiln compile` model.so), versions being positive
// integers. The manager keeps the latest version of each model loaded, reloads on request or
// when polling sees a change, and swaps versions without stopping the other models' traffic.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "serve/metrics.h"
#include "serve/scheduler.h"

namespace kiln::serve {

// What the folder of one model holds now.
struct ModelFolder {
  std::string name;
  int64_t version = 0;  // latest version with a model file; 0: none
  std::filesystem::path model_file, config_file;  // config_file empty when absent
  std::string fingerprint;  // changes when the version, model file or config changes
};

// Scans DIR/<name>; nullopt when the folder does not exist. Throws Error(kUsage) for a name
// that is not [A-Za-z0-9_.-]+.
std::optional<ModelFolder> scan_model_folder(const std::filesystem::path& repository, const std::string& name);

struct LoadedModel {
  std::shared_ptr<ServedModel> model;
  std::shared_ptr<ModelMetrics> metrics;
  std::unique_ptr<ModelScheduler> scheduler;  // destroyed first: drains its queue
  std::string fingerprint;
  ~LoadedModel();
};

struct ModelState {
  std::string name, version, state, reason;  // state: READY | UNAVAILABLE | LOADING
};

class ModelManager {
 public:
  ModelManager(std::filesystem::path repository, int default_threads, Metrics& metrics);
  ~ModelManager();

  // Loads every model folder; a model that fails is logged and listed UNAVAILABLE with its
  // error. Returns the number that failed.
  int load_all();
  // Loads or reloads one model from its folder (new version or config); throws on failure, and
  // keeps serving the previous version then.
  void load(const std::string& name);
  void unload(const std::string& name);
  // Reloads models whose folder changed, loads new ones, unloads removed ones.
  void poll();
  // The loaded model for a request; version empty: the loaded one. Throws ServeError
  // (kNotFound / kUnavailable).
  std::shared_ptr<LoadedModel> find(const std::string& name, const std::string& version) const;
  std::vector<ModelState> index() const;
  bool all_ready() const;
  // Unloads everything, draining each model's queue.
  void shutdown();

 private:
  std::shared_ptr<LoadedModel> load_folder(const ModelFolder& folder);

  std::filesystem::path repository_;
  int default_threads_;
  Metrics& metrics_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<LoadedModel>> loaded_;
  std::map<std::string, std::string> failed_;  // name -> error of its last load
  std::map<std::string, std::string> failed_fingerprint_;  // name -> folder fingerprint that failed
  std::mutex load_mu_;                          // one load at a time (compiling uses all cores)
};

}  // namespace kiln::serve
