// optimize_model_file: the pass-running core of `kiln optimize` (same checks and messages).
#include "driver/optimize_model.h"

#include <algorithm>
#include <chrono>

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
  // The written model is for any runtime: kiln's channels-last conv chains (Transposes around
  // kiln::NhwcConv, exported as Conv between Transposes) would only slow others down. Named in
  // --passes, the pass runs.
  if (opts.passes.empty()) std::erase(names, "assign-layouts");
  // A quantized model keeps its QDQ form and int8 weights for other runtimes' int8 kernels.
  if (opts.passes.empty()) {
    std::erase(names, "qdq-to-integer");
    std::erase(names, "fold-dequantize");
  }
  PassContext ctx;
  for (const auto& d : opts.disable) {
    if (!find_pass(d)) throw Error(ErrorKind::kUsage, "--disable: unknown pass '" + d + "' (passes: " + known_passes() + ")");
    ctx.disabled.insert(d);
  }
  for (const auto& n : names)
    if (!find_pass(n)) throw Error(ErrorKind::kUsage, "--passes: unknown pass '" + n + "' (passes: " + known_passes() + ")");
  if (!opts.print_ir_after.empty() && opts.print_ir_after != "all" && !find_pass(opts.print_ir_after))
    throw Error(ErrorKind::kUsage,
                "--print-ir-after: unknown pass '" + opts.print_ir_after + "' (passes: " + known_passes() + ")");
  ctx.verify = opts.verify;
  ctx.time = opts.time;
  ctx.print_ir_after = opts.print_ir_after;
  ctx.dump_dir = opts.dump_dir;
  ctx.log = opts.log;
  using Clock = std::chrono::steady_clock;
  auto ms = [](Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
  auto t0 = Clock::now();
  Model m = load_onnx_model(in_path);
  OptimizeModelResult r;
  r.nodes_before = m.graph->node_count_recursive();
  auto t1 = Clock::now();
  run_passes(m, names, ctx);
  auto t2 = Clock::now();
  save_onnx_model(m, out_path);
  r.nodes_after = m.graph->node_count_recursive();
  r.passes = std::move(ctx.stats);
  r.load_ms = ms(t1 - t0);
  r.passes_ms = ms(t2 - t1);
  r.save_ms = ms(Clock::now() - t2);
  return r;
}

}  // namespace kiln
