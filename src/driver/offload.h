// --offload: the external backends a user names (include/kiln/extension.h), with kiln's built-in
// ones (oneDNN as "dnnl", when built with it) registered on first use.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "kiln/extension.h"

namespace kiln {

// Registers the built-in backends once (idempotent, thread-safe), then loads the plugins that
// KILN_BACKEND_PLUGINS names (colon-separated; once per process).
void register_builtin_backends();
// Loads a backend plugin (include/kiln/extension.h: KILN_EXTENSION_INIT) once per path; kUsage
// naming the file when it cannot be loaded, has no init function or refuses kiln's API version.
void load_backend_plugin(const std::string& path);
// The backends named, in order (kUsage naming the unknown one and listing those available).
std::vector<std::shared_ptr<const ext::Backend>> offload_backends(const std::vector<std::string>& names);
// Backend names, built-in and registered ones: "dnnl, ..." (for help texts and errors).
std::string available_backends();

// What `kiln tune` measured fastest per model: model_fingerprint -> the backend to offload to
// (models it holds no entry for run on kiln's own kernels). Sessions given one and no explicit
// --offload apply it.
using OffloadTable = std::map<std::string, std::string>;
// A hash of the model as imported (opsets, inputs, outputs, nodes with their ops, arities and
// attribute names, initializers' types and dims): the same file gives the same text.
std::string model_fingerprint(const Model& m);
// The backend `table` holds for `m` when it is registered here (else skipped with a note on
// stderr); empty when it holds none.
std::vector<std::string> tuned_backends(const Model& m, const OffloadTable& table);

}  // namespace kiln
