// The C API entry points of a kiln compiled model library (`kiln compile -o`), bound with dlsym:
// shared by the C API (which forwards a loaded .so's models) and CompiledLibrary (driver/aot.h).
#pragma once

#include <dlfcn.h>

#include <string>
#include <type_traits>

#include "kiln/c_api.h"

namespace kiln {

struct ModelLibraryApi {
  int (*api_version)() = nullptr;
  const char* (*last_error)() = nullptr;
  kiln_status (*load_embedded)(const kiln_options*, kiln_model**) = nullptr;
  void (*free)(kiln_model*) = nullptr;
  size_t (*num_inputs)(const kiln_model*) = nullptr;
  size_t (*num_outputs)(const kiln_model*) = nullptr;
  kiln_status (*input_info)(const kiln_model*, size_t, kiln_tensor_info*) = nullptr;
  kiln_status (*output_info)(const kiln_model*, size_t, kiln_tensor_info*) = nullptr;
  // Optional: libraries compiled before several signatures lack them (their shapes are fixed).
  size_t (*num_signatures)(const kiln_model*) = nullptr;
  kiln_status (*signature_input)(const kiln_model*, size_t, size_t, kiln_tensor_info*) = nullptr;
  kiln_status (*run)(kiln_model*, const kiln_tensor*, size_t, kiln_tensor*, size_t) = nullptr;
  void (*cancel)(kiln_model*) = nullptr;  // optional: libraries compiled before kiln_cancel lack it
};

// Binds every entry point of the dlopened library `dl` into `api`; returns the name of the first
// missing symbol (the library is not a kiln compiled model), or nullptr.
inline const char* bind_model_library(void* dl, ModelLibraryApi* api) {
  const char* missing = nullptr;
  auto bind = [&](auto*& fn, const char* name) {
    void* p = dlsym(dl, name);
    if (!p && !missing) missing = name;
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
  };
  bind(api->api_version, "kiln_api_version");
  bind(api->last_error, "kiln_last_error");
  bind(api->load_embedded, "kiln_model_load_embedded");
  bind(api->free, "kiln_model_free");
  bind(api->num_inputs, "kiln_model_num_inputs");
  bind(api->num_outputs, "kiln_model_num_outputs");
  bind(api->input_info, "kiln_model_input_info");
  bind(api->output_info, "kiln_model_output_info");
  bind(api->run, "kiln_run");
  api->cancel = reinterpret_cast<void (*)(kiln_model*)>(dlsym(dl, "kiln_cancel"));
  api->num_signatures = reinterpret_cast<decltype(api->num_signatures)>(dlsym(dl, "kiln_model_num_signatures"));
  api->signature_input = reinterpret_cast<decltype(api->signature_input)>(dlsym(dl, "kiln_model_signature_input"));
  return missing;
}

}  // namespace kiln
