// S2 for kiln::External regions (plan_builder.h): the region's body typed with this plan's input
// dims, handed with its artifact to the backend's load (Backend::load), which makes a module for
// these shapes; the step writes the region's outputs into the arena like any kernel step. A
// region the backend no longer supports at these types runs natively (a fallback step).
#include "driver/compile/plan_builder.h"
#include "driver/offload.h"
#include "ops/external.h"
#include "pass/external_view.h"

namespace kiln::compile {

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
  std::string described;
  for (const ext::Node& node : region.nodes) {
    described += " " + node.op + "(";
    for (int v : node.inputs) {
      if (v < 0) continue;
      const ext::ValueInfo& info = region.values[static_cast<size_t>(v)];
      described += " " + info.name + ":" + std::to_string(static_cast<int>(info.type)) + "[";
      for (int64_t d : info.dims) described += std::to_string(d) + ",";
      described += "]";
    }
    described += ")";
  }
  log("region " + n.name + " (" + backend + "):" + described);
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
  ext::ModuleOptions mo;
  mo.threads = opts_.threads;
  std::shared_ptr<ext::RuntimeModule> module;
  try {
    module = b->load(attrs.attr_string("artifact", ""), region, mo);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    attrs.fail(ErrorKind::kUnsupported, "backend '" + backend + "' failed to load region '" + n.name + "': " + e.what());
  }
  if (!module) attrs.fail(ErrorKind::kInternal, "backend '" + backend + "' returned no module for region '" + n.name + "'");
  PlanStep st = node_step(i, PlanStep::Kind::kExternal);
  for (const Value* v : n.outputs)
    if (v) st.args.push_back(make_out_arg(v));
  st.external = static_cast<int32_t>(ex.externals.size());
  PlanExternal x{backend, attrs.attr_string("artifact", ""), region, {}, std::move(module)};
  // The region's constants join the plan's (a compiled library stores them with the others).
  x.constants.assign(region.values.size(), -1);
  for (const Value* c : attrs.attr_graph("body")->constants)
    for (size_t v = 0; v < region.values.size(); ++v)
      if (region.values[v].data == c->initializer.raw()) {
        x.constants[v] = static_cast<int32_t>(ex.constants.size());
        ex.constants.push_back(c->initializer);
      }
  ex.externals.push_back(std::move(x));
  ex.steps.push_back(std::move(st));
  plan->stats.external_regions++;
  plan->stats.external_nodes += static_cast<int>(attrs.attr_graph("body")->nodes.size());
}

}  // namespace kiln::compile
