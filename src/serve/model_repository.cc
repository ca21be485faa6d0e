// Repository scanning, model loading/unloading and version swaps.
#include "serve/model_repository.h"

#include <chrono>
#include <cstdio>

#include "core/error.h"
#include "frontend/onnx/proto_util.h"
#include "serve/serve_error.h"

namespace kiln::serve {
namespace fs = std::filesystem;
namespace {

bool valid_name(const std::string& s) {
  if (s.empty() || s.size() > 200 || s == "." || s == "..") return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') return false;
  return true;
}

bool all_digits(const std::string& s) {
  if (s.empty() || s.size() > 15) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

std::string stamp(const fs::path& p) {
  std::error_code ec;
  auto size = fs::file_size(p, ec);
  auto time = fs::last_write_time(p, ec);
  return p.filename().string() + ":" + std::to_string(size) + ":" + std::to_string(time.time_since_epoch().count());
}

void log_line(const std::string& s) { std::fprintf(stderr, "kiln serve: %s\n", s.c_str()); }

}  // namespace

std::optional<ModelFolder> scan_model_folder(const fs::path& repository, const std::string& name) {
  if (!valid_name(name))
    throw ServeError(ServeStatus::kBadRequest, "model name '" + name + "' is not made of letters, digits, '_', '-', '.'");
  const fs::path dir = repository / name;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return std::nullopt;
  ModelFolder f;
  f.name = name;
  if (fs::is_regular_file(dir / "config.json", ec)) f.config_file = dir / "config.json";
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string v = e.path().filename().string();
    if (!e.is_directory() || !all_digits(v) || std::stoll(v) < 1 || std::stoll(v) <= f.version) continue;
    // An ONNX model, else a `kiln compile` library.
    for (const char* file : {"model.onnx", "model.so"}) {
      if (!fs::is_regular_file(e.path() / file, ec)) continue;
      f.version = std::stoll(v);
      f.model_file = e.path() / file;
      break;
    }
  }
  f.fingerprint = std::to_string(f.version) + "|" + (f.model_file.empty() ? "" : stamp(f.model_file)) + "|" +
                  (f.config_file.empty() ? "" : stamp(f.config_file));
  return f;
}

LoadedModel::~LoadedModel() { scheduler.reset(); }

ModelManager::ModelManager(fs::path repository, int default_threads, Metrics& metrics)
    : repository_(std::move(repository)), default_threads_(default_threads), metrics_(metrics) {
  std::error_code ec;
  if (!fs::is_directory(repository_, ec))
    throw Error(ErrorKind::kUsage, "--model-repository " + repository_.string() + ": not a folder");
}

ModelManager::~ModelManager() { shutdown(); }

std::shared_ptr<LoadedModel> ModelManager::load_folder(const ModelFolder& folder) {
  const fs::path dir = repository_ / folder.name;
  if (folder.version == 0)
    throw Error(ErrorKind::kUsage, dir.string() + ": no version folder with a model.onnx or model.so (expected " +
                                       (dir / "1" / "model.onnx").string() + ")");
  ModelConfig config;
  if (!folder.config_file.empty()) {
    const std::string file = folder.config_file.string();
    config = parse_model_config(read_file(file, ErrorKind::kUsage), file);
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto loaded = std::make_shared<LoadedModel>();
  const std::string version = std::to_string(folder.version);
  loaded->model = std::make_shared<ServedModel>(folder.name, version, folder.model_file.string(), config, default_threads_);
  loaded->metrics = metrics_.model(folder.name, version);
  loaded->scheduler = std::make_unique<ModelScheduler>(loaded->model, loaded->metrics);
  loaded->fingerprint = folder.fingerprint;
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.0f ms", ms);
  log_line("loaded model '" + folder.name + "' version " + version + " (" + std::to_string(config.instances) +
           " instance(s), max_batch_size " + std::to_string(config.max_batch_size) + ", " + buf + ")");
  return loaded;
}

void ModelManager::load(const std::string& name) {
  std::lock_guard<std::mutex> one_load(load_mu_);
  std::optional<ModelFolder> folder = scan_model_folder(repository_, name);
  if (!folder) throw ServeError(ServeStatus::kNotFound, "no model folder " + (repository_ / name).string());
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = loaded_.find(name);
    if (it != loaded_.end() && it->second->fingerprint == folder->fingerprint) return;  // unchanged
  }
  std::shared_ptr<LoadedModel> fresh;
  try {
    fresh = load_folder(*folder);
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(mu_);
    failed_[name] = e.what();
    failed_fingerprint_[name] = folder->fingerprint;
    log_line("model '" + name + "' failed to load: " + e.what());
    throw;
  }
  std::shared_ptr<LoadedModel> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    old = std::move(loaded_[name]);
    loaded_[name] = fresh;
    failed_.erase(name);
  }
  // `old` finishes the requests it has queued when the last of them lets go of it.
}

void ModelManager::unload(const std::string& name) {
  std::shared_ptr<LoadedModel> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = loaded_.find(name);
    if (it == loaded_.end()) {
      if (failed_.erase(name)) return;
      throw ServeError(ServeStatus::kNotFound, "model '" + name + "' is not loaded");
    }
    old = std::move(it->second);
    loaded_.erase(it);
  }
  log_line("unloaded model '" + name + "'");
}

int ModelManager::load_all() {
  int failures = 0;
  std::error_code ec;
  std::vector<std::string> names;
  for (const fs::directory_entry& e : fs::directory_iterator(repository_, ec))
    if (e.is_directory() && valid_name(e.path().filename().string())) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) {
    try {
      load(n);
    } catch (const std::exception&) {
      ++failures;
    }
  }
  return failures;
}

void ModelManager::poll() {
  std::error_code ec;
  std::vector<std::string> present;
  for (const fs::directory_entry& e : fs::directory_iterator(repository_, ec))
    if (e.is_directory() && valid_name(e.path().filename().string())) present.push_back(e.path().filename().string());
  for (const std::string& n : present) {
    {
      // A model that failed is retried when its folder changes, not on every poll.
      std::optional<ModelFolder> f = scan_model_folder(repository_, n);
      std::lock_guard<std::mutex> lock(mu_);
      auto it = failed_fingerprint_.find(n);
      if (f && failed_.count(n) && it != failed_fingerprint_.end() && it->second == f->fingerprint) continue;
    }
    try {
      load(n);  // no-op when unchanged
    } catch (const std::exception&) {
    }
  }
  std::vector<std::string> gone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [n, m] : loaded_)
      if (std::find(present.begin(), present.end(), n) == present.end()) gone.push_back(n);
  }
  for (const std::string& n : gone) unload(n);
}

std::shared_ptr<LoadedModel> ModelManager::find(const std::string& name, const std::string& version) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = loaded_.find(name);
  if (it == loaded_.end()) {
    auto f = failed_.find(name);
    if (f != failed_.end())
      throw ServeError(ServeStatus::kUnavailable, "model '" + name + "' is not ready: " + f->second);
    throw ServeError(ServeStatus::kNotFound, "unknown model '" + name + "'");
  }
  if (!version.empty() && version != it->second->model->version())
    throw ServeError(ServeStatus::kNotFound, "model '" + name + "' has no version " + version + " loaded (serving " +
                                                 it->second->model->version() + ")");
  return it->second;
}

std::vector<ModelState> ModelManager::index() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ModelState> out;
  for (const auto& [n, m] : loaded_) out.push_back({n, m->model->version(), "READY", ""});
  for (const auto& [n, why] : failed_)
    if (!loaded_.count(n)) out.push_back({n, "", "UNAVAILABLE", why});
  std::sort(out.begin(), out.end(), [](const ModelState& a, const ModelState& b) { return a.name < b.name; });
  return out;
}

bool ModelManager::all_ready() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_.empty();
}

void ModelManager::shutdown() {
  std::map<std::string, std::shared_ptr<LoadedModel>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    all.swap(loaded_);
  }
  all.clear();  // each scheduler drains its queue
}

}  // namespace kiln::serve
