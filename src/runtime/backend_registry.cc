// The process-wide table of external backends (include/kiln/extension.h). In the runtime layer
// because compiled model libraries look their regions' backends up here too: built-in ones are
// registered by the driver (driver/offload.cc) or, in a model library, by the backend's archive
// (external/dnnl/dnnl_autoregister.cc); plugins through their init function.
#include <algorithm>
#include <mutex>
#include <stdexcept>

#include "kiln/extension.h"

namespace kiln::ext {
namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<const Backend>> backends;
};

Registry& registry() {
  static Registry r;
  return r;
}

bool valid_name(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

}  // namespace

void register_backend(std::shared_ptr<const Backend> backend) {
  if (!backend) throw std::invalid_argument("register_backend: null backend");
  const std::string name = backend->name();
  if (!valid_name(name))
    throw std::invalid_argument("register_backend: '" + name + "' is not a backend name (lower-case letters, digits, '_')");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!r.backends.emplace(name, std::move(backend)).second)
    throw std::invalid_argument("register_backend: a backend named '" + name + "' is already registered");
}

std::shared_ptr<const Backend> find_backend(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.backends.find(name);
  return it == r.backends.end() ? nullptr : it->second;
}

std::vector<std::string> backend_names() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> names;
  for (const auto& [name, b] : r.backends) names.push_back(name);
  return names;
}

}  // namespace kiln::ext
