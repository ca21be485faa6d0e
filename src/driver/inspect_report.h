// What `kiln inspect` reports about a model, computed in the driver so that the CLI (text, JSON,
// HTML, dot) and the Python package (kiln.inspect) describe a model the same way.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "driver/compile_model.h"
#include "driver/model_info.h"
#include "pass/pass.h"

namespace kiln {

struct InspectReportOptions {
  std::map<std::string, int64_t> dims;  // NAME -> value for named input dims (others: 1)
  bool optimize = true;                 // run the default pipeline and the memory plan
  bool compile = false;                 // also compile at the bound shapes (as --engine compiled)
  bool passes = false;                  // JSON: add the per-pass statistics of the default pipeline
  std::vector<std::string> offload;     // --offload backends (the pipeline partitions for them)
  double offload_min_cost = -1;
};

struct InspectReport {
  std::string path;
  Model model;      // as stored
  ModelInfo info;   // of `model`
  Model optimized;  // after the default pipeline (options.optimize)
  std::vector<PassStat> pass_stats;
  // options.offload: the kiln::External regions of `optimized`, and why the other nodes stayed native.
  struct OffloadRegion {
    std::string name, backend;
    size_t nodes = 0, inputs = 0, outputs = 0, constants = 0;
    std::map<std::string, int64_t> ops;
  };
  std::vector<OffloadRegion> offload_regions;
  std::vector<OffloadNote> offload_notes;
  size_t nodes_after = 0;
  MemoryInfo memory;  // of a copy with the named dims bound, re-optimized while folding progresses
  bool compiled = false;
  CompileModelResult compile;  // options.compile, when it succeeded
  std::string compile_error;   // options.compile, when it failed (the model is still described)
};

// Values for the named dims of the model's inputs: 1 unless `given` says otherwise (kUsage for a
// negative value or an empty name).
std::map<std::string, int64_t> bind_input_dims(const Graph& g, const std::map<std::string, int64_t>& given);

InspectReport inspect_model(const std::string& path, const InspectReportOptions& opts);

// The JSON of `kiln inspect --json` (indented by `indent`, compact when negative): IR version,
// opsets, signature, op histogram, parameters, unsupported nodes, node counts before/after the
// default pipeline, its memory plan, and the compiled engine's counts when it compiled.
std::string inspect_report_json(const InspectReport& report, bool passes, int indent = 2);
std::string inspect_report_json(const std::string& path, const InspectReportOptions& opts, int indent = 2);

}  // namespace kiln
