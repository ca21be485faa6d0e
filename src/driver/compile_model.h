// Compiling a model for its input shapes, as `kiln compile` and `kiln inspect --engine compiled`
// do: the default pass pipeline, a compiled-engine Session, and one run on seeded random inputs
// (symbolic input dims bound by `dims`, 1 when unbound) so that the plan gets built.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "driver/session.h"

namespace kiln {

struct CompileModelOptions {
  int threads = 1;
  uint64_t seed = 0;
  std::map<std::string, int64_t> dims;  // symbolic dim -> value (others: 1)
  std::map<std::string, std::vector<int64_t>> shapes;  // input -> its whole shape (before dims)
  std::shared_ptr<const gemm_ops::TuningTable> tuning;  // tune::load_tuning
  std::vector<std::string> offload;  // --offload backends
  double offload_min_cost = -1;
  std::shared_ptr<const OffloadTable> tuned_offload;  // tune::load_offload_choices (when `offload` is empty)
};

struct CompileModelResult {
  CompileStats stats;
  std::string kernels_text;  // TIR of every generated kernel
  double passes_ms = 0;      // the pass pipeline (Session construction)
  double first_run_ms = 0;   // the first run, plan building excluded
};

// Parses NAME=VALUE (kUsage otherwise).
std::pair<std::string, int64_t> parse_dim_binding(const std::string& arg);
// Parses NAME=V1,V2,... (kUsage otherwise).
std::pair<std::string, std::vector<int64_t>> parse_dim_list(const std::string& arg);
// Parses INPUT=D0xD1x... (kUsage otherwise).
std::pair<std::string, std::vector<int64_t>> parse_shape_binding(const std::string& arg);
// Seeded random feeds parallel to the graph inputs (None for defaulted ones); kUsage for an
// input without a tensor type and shape. `shapes` gives inputs their whole shape (what binds
// symbolic dims that have no name); it must keep the rank and the known dims (kUsage naming
// the input otherwise, and for a name that is no input).
std::vector<RtValue> random_feeds(const Model& model, const std::map<std::string, int64_t>& dims, uint64_t seed,
                                  const std::map<std::string, std::vector<int64_t>>& shapes = {});
// Takes the model (already loaded), compiles and runs it once.
CompileModelResult compile_model(Model model, const CompileModelOptions& opts);

}  // namespace kiln
