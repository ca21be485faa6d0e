// Backend-test case runner: loads the model, binds the data set's inputs positionally, runs
// the interpreter and compares every output.
#include "driver/conformance.h"

#include <algorithm>
#include <filesystem>

#include "driver/compare.h"
#include "driver/session.h"
#include "frontend/onnx/onnx_io.h"

namespace kiln {
namespace fs = std::filesystem;

bool is_backend_case(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(dir) / "model.onnx", ec);
}

std::vector<std::string> collect_backend_cases(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (const auto& a : args) {
    if (is_backend_case(a)) {
      out.push_back(a);
      continue;
    }
    std::error_code ec;
    if (!fs::is_directory(a, ec)) throw Error(ErrorKind::kUsage, "'" + a + "' is not a folder");
    std::vector<std::string> sub;
    for (const auto& e : fs::directory_iterator(a, ec))
      if (e.is_directory() && is_backend_case(e.path().string())) sub.push_back(e.path().string());
    if (sub.empty()) throw Error(ErrorKind::kUsage, "'" + a + "' holds no test cases (folders with a model.onnx)");
    std::sort(sub.begin(), sub.end());
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

namespace {

// input_0.pb, input_1.pb, ... in numeric order.
std::vector<std::string> numbered_files(const fs::path& dir, const std::string& prefix) {
  std::vector<std::string> out;
  for (int i = 0;; ++i) {
    fs::path p = dir / (prefix + std::to_string(i) + ".pb");
    std::error_code ec;
    if (!fs::exists(p, ec)) break;
    out.push_back(p.string());
  }
  return out;
}

}  // namespace

CaseResult run_backend_case(const std::string& dir) {
  CaseResult result;
  try {
    std::vector<fs::path> sets;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
    std::sort(sets.begin(), sets.end());
    if (sets.empty()) {
      result.status = CaseResult::Status::kSkipped;
      result.reason = "no test_data_set_N folder";
      return result;
    }
    SessionOptions opts;
    Session session(load_onnx_model((fs::path(dir) / "model.onnx").string()), opts);
    const Graph& g = *session.model().graph;
    auto feed_inputs = session.feed_inputs();
    for (const auto& set : sets) {
      std::vector<NamedValue> ins;
      auto in_files = numbered_files(set, "input_");
      for (size_t i = 0; i < in_files.size(); ++i) {
        NamedValue nv = read_value_file(in_files[i], i < feed_inputs.size() ? &feed_inputs[i]->type : nullptr);
        nv.name.clear();  // backend tests bind positionally
        ins.push_back(std::move(nv));
      }
      auto outs = session.run(session.bind(ins));
      auto out_files = numbered_files(set, "output_");
      if (out_files.size() != outs.size())
        throw Error(ErrorKind::kInternal, "model has " + std::to_string(outs.size()) + " outputs, data set has " +
                                              std::to_string(out_files.size()));
      for (size_t i = 0; i < out_files.size(); ++i) {
        NamedValue want = read_value_file(out_files[i], &g.outputs[i]->type);
        std::string why = compare_values(outs[i], want.value);
        if (!why.empty()) {
          result.status = CaseResult::Status::kFailed;
          result.reason = set.filename().string() + " output '" + g.outputs[i]->name + "': " + why;
          return result;
        }
      }
    }
  } catch (const std::exception& e) {
    result.status = CaseResult::Status::kFailed;
    result.reason = e.what();
  }
  return result;
}

}  // namespace kiln
