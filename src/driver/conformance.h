// Running one ONNX backend-test case folder (model.onnx + test_data_set_N/{input,output}_K.pb).
#pragma once

#include <string>
#include <vector>

#include "driver/session.h"

namespace kiln {

struct CaseResult {
  enum class Status { kPassed, kFailed, kSkipped };
  Status status = Status::kPassed;
  std::string reason;  // for failed/skipped cases
};

// True when `dir` holds a model.onnx.
bool is_backend_case(const std::string& dir);
// Expands each argument: a case folder itself, or a folder whose subfolders are cases.
std::vector<std::string> collect_backend_cases(const std::vector<std::string>& args);
struct CaseOptions {
  bool optimize = false;  // run the default pass pipeline before interpreting
  Engine engine = Engine::kInterp;
  std::vector<std::string> offload;  // external backends (compiled engine)
  double offload_min_cost = -1;
};

// Runs every data set of the case with the chosen engine. Never throws.
CaseResult run_backend_case(const std::string& dir, const CaseOptions& opts = {});

}  // namespace kiln
