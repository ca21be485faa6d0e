// Backend-test case runner: loads the model, binds the data set's inputs positionally, runs
// the interpreter and compares every output.
#include "driver/conformance.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>

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

// Legacy test data (ONNX before bfloat16 got its own TensorProto handling, e.g. the
// test_cast_*BFLOAT16* cases shipped in libonnx-testdata) stores bfloat16 tensors as UINT16
// holding the raw bits. When the model declares the value bf16 and the file holds u16 of the
// declared shape, the bits are reinterpreted as bf16. Only test data files are read this way;
// `kiln run` and the importer never reinterpret.
void reinterpret_legacy_bf16(NamedValue& nv, const Type* declared) {
  if (!declared || declared->kind != Type::Kind::kTensor || declared->dtype != DType::kBFloat16) return;
  if (!nv.value.is_tensor() || nv.value.tensor.dtype() != DType::kUInt16) return;
  const Tensor& u16 = nv.value.tensor;
  if (declared->shape) {
    const auto& dims = declared->shape->dims;
    if (dims.size() != u16.dims().size()) return;
    for (size_t i = 0; i < dims.size(); ++i)
      if (dims[i].known() && dims[i].value != u16.dims()[i]) return;
  }
  Tensor bf16(DType::kBFloat16, u16.dims());
  if (u16.nbytes()) std::memcpy(bf16.raw(), u16.raw(), u16.nbytes());
  nv.value.tensor = std::move(bf16);
}

// Random ops: their outputs come from a generator that no engine shares with the reference
// (the expected values of test_bernoulli* are numpy's global RNG).
bool is_random_op(const Node& n) {
  static const std::set<std::string> kRandom = {"Bernoulli",  "RandomUniform",     "RandomUniformLike",
                                                "RandomNormal", "RandomNormalLike", "Multinomial"};
  return n.domain.empty() && kRandom.count(n.op_type) > 0;
}

// True when a node of `g` (or of its subgraphs) is random or reads a value in `tainted`.
bool subgraph_touches(const Graph& g, const std::set<const Value*>& tainted) {
  for (const auto& n : g.nodes) {
    if (is_random_op(*n)) return true;
    for (const Value* in : n->inputs)
      if (in && tainted.count(in)) return true;
    for (const auto& [key, a] : n->attrs) {
      if (a.g && subgraph_touches(*a.g, tainted)) return true;
      for (const auto& sg : a.graphs)
        if (sg && subgraph_touches(*sg, tainted)) return true;
    }
  }
  for (const Value* out : g.outputs)
    if (out && tainted.count(out)) return true;
  return false;
}

// The values of `g` that depend on the result of a random op (through any chain of nodes,
// including control-flow bodies that contain one or capture such a value).
std::set<const Value*> random_dependent_values(const Graph& g) {
  std::set<const Value*> tainted;
  for (const auto& n : g.nodes) {
    bool t = is_random_op(*n);
    for (const Value* in : n->inputs) t = t || (in && tainted.count(in));
    for (const auto& [key, a] : n->attrs) {
      t = t || (a.g && subgraph_touches(*a.g, tainted));
      for (const auto& sg : a.graphs) t = t || (sg && subgraph_touches(*sg, tainted));
    }
    if (t)
      for (const Value* out : n->outputs)
        if (out) tainted.insert(out);
  }
  return tainted;
}

// Deliberate deviation (docs/conformance-notes.md): outputs that depend on a random op are
// checked for dtype and shape only (sequence lengths and optional presence included).
std::string compare_dtype_and_shape(const RtValue& got, const RtValue& want) {
  if (want.is_none() || got.is_none())
    return want.is_none() == got.is_none() ? "" : "optional presence differs";
  if (want.is_sequence() != got.is_sequence()) return "expected a " + std::string(want.is_sequence() ? "sequence" : "tensor");
  auto check = [](const Tensor& g, const Tensor& w) -> std::string {
    if (g.dtype() != w.dtype())
      return "dtype " + std::string(dtype_name(g.dtype())) + ", expected " + std::string(dtype_name(w.dtype()));
    if (g.dims() != w.dims()) return "shape " + dims_to_string(g.dims()) + ", expected " + dims_to_string(w.dims());
    return "";
  };
  if (!want.is_sequence()) return check(got.tensor, want.tensor);
  if (got.sequence.size() != want.sequence.size()) return "sequence length differs";
  for (size_t i = 0; i < want.sequence.size(); ++i) {
    std::string r = check(got.sequence[i], want.sequence[i]);
    if (!r.empty()) return "sequence item " + std::to_string(i) + ": " + r;
  }
  return "";
}

}  // namespace

CaseResult run_backend_case(const std::string& dir, const CaseOptions& case_opts) {
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
    opts.optimize = case_opts.optimize;
    opts.engine = case_opts.engine;
    opts.offload = case_opts.offload;
    opts.offload_min_cost = case_opts.offload_min_cost;
    Session session(load_onnx_model((fs::path(dir) / "model.onnx").string()), opts);
    const Graph& g = *session.model().graph;
    auto feed_inputs = session.feed_inputs();
    const std::set<const Value*> random_values = random_dependent_values(g);
    for (const auto& set : sets) {
      std::vector<NamedValue> ins;
      auto in_files = numbered_files(set, "input_");
      for (size_t i = 0; i < in_files.size(); ++i) {
        const Type* declared = i < feed_inputs.size() ? &feed_inputs[i]->type : nullptr;
        NamedValue nv = read_value_file(in_files[i], declared);
        reinterpret_legacy_bf16(nv, declared);
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
        reinterpret_legacy_bf16(want, &g.outputs[i]->type);
        std::string why = random_values.count(g.outputs[i]) ? compare_dtype_and_shape(outs[i], want.value)
                                                            : compare_values(outs[i], want.value);
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
