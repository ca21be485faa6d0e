// Linked only into compiled model libraries whose plans hold oneDNN regions (`kiln compile`,
// driver/aot.cc): registers the backend when the library loads, so that the runtime finds it by
// the name the plan keeps. (The kiln CLI, Python and libkiln register it in driver/offload.cc.)
#include "external/dnnl/dnnl_backend.h"

namespace {

const bool registered = [] {
  try {
    kiln::ext::register_backend(kiln::external::make_dnnl_backend());
  } catch (const std::exception&) {
    // already registered in this image
  }
  return true;
}();

}  // namespace
