// S2 for kiln::External regions (plan_builder.h): the region's body typed with this plan's input
// dims, handed with its artifact to the backend's load (Backend::load), which makes a module for
// these shapes; the step writes the region's outputs into the arena like any kernel step. A
// region the backend no longer supports at these types runs natively (a fallback step).
#include "driver/compile/plan_builder.h"
#include "driver/offload.h"
#include "ops/external.h"
#include "pass/external_view.h"
#include "runtime/thread_pool.h"

namespace kiln::compile {
namespace {

// " Conv( x:1[1,3,8,8,] w:1[...]) ..." (KILN_LOG_COMPILED): the region's ops and bound inputs.
std::string describe(const ext::Region& region) {
  std::string text;
  for (const ext::Node& node : region.nodes) {
    text += " " + node.op + "(";
    for (int v : node.inputs) {
      if (v < 0) continue;
      const ext::ValueInfo& info = region.values[static_cast<size_t>(v)];
      text += " " + info.name + ":" + std::to_string(static_cast<int>(info.type)) + "[";
      for (int64_t d : info.dims) text += std::to_string(d) + ",";
      text += "]";
    }
    text += ")";
  }
  return text;
}

}  // namespace

void PlanBuilder::add_external_step(int i) {
  const Node& n = *g.nodes[static_cast<size_t>(i)];
  AttrReader attrs(n);
  const std::string backend = attrs.attr_string("backend", "");
  register_builtin_backends();
  std::shared_ptr<const ext::Backend> b = ext::find_backend(backend);
  if (!b) attrs.fail(ErrorKind::kUnsupported, "region '" + n.name + "' needs backend '" + backend + "', which this build does not have (available: " + available_backends() + ")");
  if (!n.attr("artifact")) attrs.fail(ErrorKind::kInvalidModel, "region '" + n.name + "' has no artifact (the external-codegen pass did not run)");
  std::vector<Type> input_types;
  std::vector<const Tensor*> input_values;  // the ones the shapes decide (a Reshape's target)
  for (const Value* v : n.inputs) {
    const PlanSlot& s = ex.slots[static_cast<size_t>(slot_of.at(v))];
    std::vector<Dim> dims(s.dims.begin(), s.dims.end());
    input_types.push_back(Type::tensor(s.dtype, Shape(dims)));
    input_values.push_back(constant_of(v));
  }
  const std::unordered_map<const Value*, Type> types = infer_external_body(n, input_types, input_values);
  const ext::Region region = body_region(*attrs.attr_graph("body"), n.name, &types);
  for (const ext::ValueInfo& v : region.values) {
    bool bound = v.known_rank;
    for (int64_t d : v.dims) bound &= d >= 0;
    if (!bound) attrs.fail(ErrorKind::kUnsupported, "region '" + n.name + "': the shape of '" + v.name + "' is not known for these inputs");
  }
  if (log_enabled()) log("region " + n.name + " (" + backend + "):" + describe(region));
  // Types known only now (a dtype inference could not tell at partitioning) can put a node out
  // of the backend's reach: the region then runs on kiln's own kernels (its body compiled as a
  // nested plan, like a control-flow body).
  for (const ext::Node& node : region.nodes) {
    bool ok = false;
    try {
      ok = b->supports(region, node);
    } catch (...) {
    }
    if (ok) continue;
    log("region " + n.name + " runs on kiln: " + backend + " does not support node '" + node.name + "' at these shapes and types");
    add_fallback(i);
    return;
  }
  PlanStep st = node_step(i, PlanStep::Kind::kExternal);
  for (const Value* v : n.outputs)
    if (v) st.args.push_back(make_out_arg(v));
  st.external = static_cast<int32_t>(ex.externals.size());
  // The region's constants join the plan's (a compiled library stores them with the others).
  PlanExternal x{backend, attrs.attr_string("artifact", ""), region, std::vector<int32_t>(region.values.size(), -1), nullptr};
  std::unordered_map<const void*, const Tensor*> weight_at;
  for (const Value* c : attrs.attr_graph("body")->constants) weight_at[c->initializer.raw()] = &c->initializer;
  for (size_t v = 0; v < region.values.size(); ++v)
    if (auto w = weight_at.find(region.values[v].data); region.values[v].data && w != weight_at.end()) {
      x.constants[v] = static_cast<int32_t>(ex.constants.size());
      ex.constants.push_back(*w->second);
    }
  ex.externals.push_back(std::move(x));
  // The backend makes its module for these shapes now (as a compiled library's loader does).
  try {
    ex.load_externals(opts_.threads > 0 ? opts_.threads : ThreadPool::default_threads());
  } catch (const Error& e) {
    throw e.with_context(attrs.location());
  }
  ex.steps.push_back(std::move(st));
  plan->stats.external_regions++;
  plan->stats.external_nodes += static_cast<int>(attrs.attr_graph("body")->nodes.size());
}

}  // namespace kiln::compile
