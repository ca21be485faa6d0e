// external-codegen: hands each kiln::External region to its backend's codegen
// (Backend::codegen) and keeps the artifact in the node's `artifact` attribute, which the
// compiled engine loads (Backend::load) for each input-shape signature.
// Requires: partition-external. A region whose backend is not among --offload, or whose codegen
// throws, is an error naming the backend and the region (kUnsupported).
// Guarantees: only attributes change.
// Tests: tests/pass/golden/external-codegen/*.kir, tests/external/test_offload.cc
#include <exception>

#include "ops/external.h"
#include "ops/registry.h"
#include "pass/external_view.h"
#include "pass/passes.h"

namespace kiln {
namespace {

bool run(Model& m, PassContext& ctx) {
  bool changed = false;
  for (auto& n : m.graph->nodes) {
    if (!is_external(*n) || n->attr("artifact")) continue;
    AttrReader attrs(*n);
    const std::string backend = attrs.attr_string("backend", "");
    const ext::Backend* b = ctx.offload_backend(backend);
    if (!b) attrs.fail(ErrorKind::kUnsupported, "region '" + n->name + "' is for backend '" + backend + "', which is not among --offload");
    std::string artifact;
    try {
      artifact = b->codegen(body_region(*attrs.attr_graph("body"), n->name));
    } catch (const std::exception& e) {
      attrs.fail(ErrorKind::kUnsupported, "backend '" + backend + "' failed to generate code for region '" + n->name + "': " + e.what());
    }
    n->attrs["artifact"] = Attribute::make_string(std::move(artifact));
    changed = true;
  }
  return changed;
}

}  // namespace

PassInfo external_codegen_pass() {
  return {"external-codegen", "generate each kiln::External region's artifact with its backend's codegen", run};
}

}  // namespace kiln
