// Markdown conformance report (docs/conformance.md): per-op pass counts over the cases whose
// model uses the op, and every failing or skipped case with its reason.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "driver/conformance.h"

namespace kiln {

class ConformanceReport {
 public:
  // Records a case; reads its model.onnx to attribute the result to the ops it uses.
  void add(const std::string& dir, const std::string& name, const CaseResult& r);
  void write(const std::string& path, const std::vector<std::string>& sources, bool optimized) const;

 private:
  struct OpCount {
    int passed = 0, total = 0;
  };
  std::map<std::string, OpCount> per_op_;
  std::vector<std::pair<std::string, CaseResult>> not_passed_;
  int passed_ = 0, failed_ = 0, skipped_ = 0;
};

}  // namespace kiln
