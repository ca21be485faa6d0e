// The facts `kiln inspect --json` prints, as a JSON document built in the driver so that the CLI
// and the Python package (kiln.inspect) report the same thing.
#pragma once

#include <map>
#include <string>

namespace kiln {

struct InspectReportOptions {
  std::map<std::string, int64_t> dims;  // NAME -> value for named input dims (others: 1)
  bool compile = false;                 // also compile at the bound shapes (as --engine compiled)
  bool passes = false;                  // add the per-pass statistics of the default pipeline
};

// Loads `path` and returns the JSON text (indented by `indent`, or compact when negative) of
// `kiln inspect --json` for it: IR version, opsets, signature, op histogram, parameters,
// unsupported nodes, node counts before/after the default pipeline and its memory plan.
std::string inspect_report_json(const std::string& path, const InspectReportOptions& opts, int indent = 2);

}  // namespace kiln
