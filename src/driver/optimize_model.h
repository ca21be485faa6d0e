// Running graph passes over an ONNX file and writing the result as ONNX: what `kiln optimize`
// does, callable from the Python package (kiln.optimize) without the CLI's printing.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "pass/pass.h"

namespace kiln {

struct OptimizeModelOptions {
  std::vector<std::string> passes;   // in order; empty: the default pipeline
  std::vector<std::string> disable;  // passes to skip
  bool verify = false;               // run the IR verifier after every pass
  bool time = false;                 // log one line per pass: name, ms, nodes after
  std::string print_ir_after;        // log the IR after this pass, or after "all"
  std::string dump_dir;              // write NN-<pass>.kir after every pass into this folder
  std::ostream* log = nullptr;       // pass timing / printed IR (PassContext::log)
};

struct OptimizeModelResult {
  size_t nodes_before = 0;
  size_t nodes_after = 0;
  std::vector<PassStat> passes;  // one entry per pass that ran
  double load_ms = 0, passes_ms = 0, save_ms = 0;
};

// Checks the pass names (kUsage naming the unknown one and listing the known passes), loads
// `in_path`, runs the passes and saves the model to `out_path`.
OptimizeModelResult optimize_model_file(const std::string& in_path, const std::string& out_path,
                                        const OptimizeModelOptions& opts = {});

}  // namespace kiln
