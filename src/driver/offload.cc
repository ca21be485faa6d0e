// Built-in backend registration and --offload name lookup (see offload.h).
#include "driver/offload.h"

#include <mutex>

#include "core/error.h"

#ifdef KILN_HAVE_DNNL
#include "external/dnnl/dnnl_backend.h"
#endif

namespace kiln {

void register_builtin_backends() {
  static std::once_flag once;
  std::call_once(once, [] {
#ifdef KILN_HAVE_DNNL
    ext::register_backend(external::make_dnnl_backend());
#endif
  });
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

}  // namespace kiln
