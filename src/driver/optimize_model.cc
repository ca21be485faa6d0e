// optimize_model_file: the pass-running core of `kiln optimize` (same checks and messages).
#include "driver/optimize_model.h"

#include "core/error.h"
#include "frontend/onnx/onnx_io.h"

namespace kiln {
namespace {

std::string known_passes() {
  std::string s;
  for (const auto& p : all_passes()) s += (s.empty() ? "" : ", ") + p.name;
  return s;
}

}  // namespace

OptimizeModelResult optimize_model_file(const std::string& in_path, const std::string& out_path,
                                        const OptimizeModelOptions& opts) {
  std::vector<std::string> names = opts.passes.empty() ? default_pipeline() : opts.passes;
  PassContext ctx;
  for (const auto& d : opts.disable) {
    if (!find_pass(d)) throw Error(ErrorKind::kUsage, "--disable: unknown pass '" + d + "' (passes: " + known_passes() + ")");
    ctx.disabled.insert(d);
  }
  for (const auto& n : names)
    if (!find_pass(n)) throw Error(ErrorKind::kUsage, "--passes: unknown pass '" + n + "' (passes: " + known_passes() + ")");
  ctx.verify = opts.verify;
  ctx.log = opts.log;
  Model m = load_onnx_model(in_path);
  OptimizeModelResult r;
  r.nodes_before = m.graph->node_count_recursive();
  run_passes(m, names, ctx);
  save_onnx_model(m, out_path);
  r.nodes_after = m.graph->node_count_recursive();
  r.passes = std::move(ctx.stats);
  return r;
}

}  // namespace kiln
