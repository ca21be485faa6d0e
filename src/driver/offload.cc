// Built-in backend registration and --offload name lookup (see offload.h).
#include "driver/offload.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <set>

#include "core/error.h"
#include "pass/pass.h"

#ifdef KILN_HAVE_DNNL
#include "external/dnnl/dnnl_backend.h"
#endif

namespace kiln {

void register_builtin_backends() {
  static std::once_flag builtin, plugins;  // (apart: a plugin that fails to load is retried, dnnl is not)
  std::call_once(builtin, [] {
#ifdef KILN_HAVE_DNNL
    ext::register_backend(external::make_dnnl_backend());
#endif
  });
  std::call_once(plugins, [] {
    const char* list = std::getenv("KILN_BACKEND_PLUGINS");
    for (const std::string& path : split_names(list ? list : "", ':')) load_backend_plugin(path);
  });
}

void load_backend_plugin(const std::string& path) {
  static std::mutex mu;
  static std::set<std::string> loaded;
  std::lock_guard<std::mutex> lock(mu);
  if (loaded.count(path)) return;
  // Kept loaded for the life of the process: its backends live in the registry.
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) throw Error(ErrorKind::kUsage, "backend plugin '" + path + "': " + dlerror());
  auto init = reinterpret_cast<ext::InitFn>(dlsym(lib, "kiln_extension_init"));
  if (!init) {
    dlclose(lib);
    throw Error(ErrorKind::kUsage, "backend plugin '" + path + "' defines no kiln_extension_init (KILN_EXTENSION_INIT)");
  }
  int status = 0;
  try {
    status = init(ext::kApiVersion, &ext::register_backend);
  } catch (const std::exception& e) {
    throw Error(ErrorKind::kUsage, "backend plugin '" + path + "': its init failed: " + e.what());
  }
  if (status != 0)
    throw Error(ErrorKind::kUsage, "backend plugin '" + path + "' refused kiln's extension API version " +
                                       std::to_string(ext::kApiVersion) + " (status " + std::to_string(status) + ")");
  loaded.insert(path);
}

std::string available_backends() {
  register_builtin_backends();
  std::string list;
  for (const std::string& name : ext::backend_names()) list += (list.empty() ? "" : ", ") + name;
  return list.empty() ? "none in this build" : list;
}

std::vector<std::shared_ptr<const ext::Backend>> offload_backends(const std::vector<std::string>& names) {
  register_builtin_backends();
  std::vector<std::shared_ptr<const ext::Backend>> backends;
  for (const std::string& name : names) {
    std::shared_ptr<const ext::Backend> b = ext::find_backend(name);
    if (!b) throw Error(ErrorKind::kUsage, "--offload: no backend named '" + name + "' (available: " + available_backends() + ")");
    for (const auto& seen : backends)
      if (seen == b) throw Error(ErrorKind::kUsage, "--offload: backend '" + name + "' given twice");
    backends.push_back(std::move(b));
  }
  return backends;
}

namespace {

// FNV-1a, 64 bits: stable across runs and builds (std::hash is not).
struct Fingerprint {
  uint64_t h = 1469598103934665603ull;
  void add(const std::string& s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;  // a separator: "ab","c" differs from "a","bc"
  }
};

void add_graph(Fingerprint& f, const Graph& g) {
  for (const Value* v : g.inputs) f.add("in " + v->name + " " + to_string(v->type));
  for (const Value* v : g.outputs) f.add("out " + v->name);
  for (const Value* c : g.constants)
    f.add("const " + std::string(dtype_name(c->initializer.dtype())) + dims_to_string(c->initializer.dims()));
  for (const auto& n : g.nodes) {
    f.add(n->qualified_op() + " " + std::to_string(n->inputs.size()) + " " + std::to_string(n->outputs.size()));
    for (const auto& [key, a] : n->attrs) {
      f.add(key);
      if (a.g) add_graph(f, *a.g);
    }
  }
}

}  // namespace

std::string model_fingerprint(const Model& m) {
  Fingerprint f;
  for (const auto& [domain, version] : m.opsets) f.add(domain + "=" + std::to_string(version));
  add_graph(f, *m.graph);
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(f.h));
  return text;
}

std::vector<std::string> tuned_backends(const Model& m, const OffloadTable& table) {
  auto it = table.find(model_fingerprint(m));
  if (it == table.end()) return {};
  register_builtin_backends();
  if (ext::find_backend(it->second)) return {it->second};
  std::cerr << "kiln: records: the backend '" << it->second << "' they choose for this model is not available here\n";
  return {};
}

}  // namespace kiln
