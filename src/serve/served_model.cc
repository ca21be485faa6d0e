// Loading a model version for serving and running one batch on one of its instances.
#include "serve/served_model.h"

#include <algorithm>
#include <set>

#include "core/error.h"
#include "driver/aot.h"
#include "driver/session.h"
#include "serve/serve_error.h"

namespace kiln::serve {
namespace {

TensorMetadata metadata_of(const Value& v, const std::string& role) {
  if (v.type.kind != Type::Kind::kTensor)
    throw Error(ErrorKind::kUnsupported, role + " '" + v.name + "' is a " + to_string(v.type) +
                                             ": the server exchanges tensors only");
  if (!v.type.shape)
    throw Error(ErrorKind::kUnsupported, role + " '" + v.name + "' has an unknown rank: the server needs ranks");
  if (v.type.dtype == DType::kString)
    throw Error(ErrorKind::kUnsupported, role + " '" + v.name + "' holds strings: the server does not carry BYTES tensors");
  TensorMetadata m{v.name, v.type.dtype, {}};
  for (const Dim& d : v.type.shape->dims) m.shape.push_back(d.known() ? d.value : -1);
  return m;
}

// A model with max_batch_size > 0 must have dim 0 of every input and output free to vary.
void check_batch_dims(const std::vector<TensorMetadata>& tensors, const std::string& role) {
  for (const TensorMetadata& t : tensors)
    if (t.shape.empty() || t.shape[0] != -1)
      throw Error(ErrorKind::kUsage, "max_batch_size > 0 needs a symbolic dim 0 (the batch) on every input and "
                                     "output, but " + role + " '" + t.name + "' has shape " + dims_to_string(t.shape));
}

// A library compiled for several batch sizes runs only those: dynamic batching may merge requests
// into any batch of 1..max_batch_size rows, so each of those sizes must be one it has.
void check_library_batch_sizes(const CompiledLibrary& lib, int64_t max_batch_size) {
  std::set<int64_t> sizes;
  for (const auto& sig : lib.signatures())
    if (!sig.empty() && !sig[0].dims.empty()) sizes.insert(sig[0].dims[0]);
  std::string have;
  for (int64_t s : sizes) have += (have.empty() ? "" : ",") + std::to_string(s);
  for (int64_t b = 1; b <= max_batch_size; ++b)
    if (!sizes.count(b))
      throw Error(ErrorKind::kUsage, "max_batch_size " + std::to_string(max_batch_size) +
                                         " needs every batch size 1.." + std::to_string(max_batch_size) +
                                         ", but the library was compiled for " + have +
                                         " only (kiln compile --dim BATCH=1,2,...)");
}

}  // namespace

ServedModel::ServedModel(std::string name, std::string version, const std::string& path, ModelConfig config,
                         int threads)
    : name_(std::move(name)), version_(std::move(version)), config_(config) {
  threads = config.threads > 0 ? config.threads : threads;
  if (is_shared_library_file(path)) {
    load_library(path, threads);
  } else {
    load_onnx(path, threads);
  }
  if (config_.max_batch_size > 0) {
    check_batch_dims(inputs_, "input");
    check_batch_dims(outputs_, "output");
    if (!libraries_.empty()) check_library_batch_sizes(*libraries_.front(), config_.max_batch_size);
  }
  apply_tensor_configs(config_.inputs, inputs_, "input");
  apply_tensor_configs(config_.outputs, outputs_, "output");
  warm_up();
}

// config.json's "input"/"output" entries: names and types must match the model; dims may fix
// what the model leaves symbolic (requests are then checked against them).
void ServedModel::apply_tensor_configs(const std::vector<TensorConfig>& list, std::vector<TensorMetadata>& tensors,
                                       const std::string& role) {
  for (size_t i = 0; i < list.size(); ++i) {
    const TensorConfig& c = list[i];
    const std::string where = "config.json " + role + "[" + std::to_string(i) + "] '" + c.name + "'";
    auto it = std::find_if(tensors.begin(), tensors.end(), [&](const TensorMetadata& t) { return t.name == c.name; });
    if (it == tensors.end()) {
      std::string names;
      for (const TensorMetadata& t : tensors) names += (names.empty() ? "" : ", ") + t.name;
      throw Error(ErrorKind::kUsage, where + ": the model has no " + role + " of that name (" + role + "s: " + names + ")");
    }
    if (c.dtype && *c.dtype != it->dtype)
      throw Error(ErrorKind::kUsage, where + ": data_type is " + std::string(dtype_name(*c.dtype)) + ", the model's is " +
                                         std::string(dtype_name(it->dtype)));
    if (!c.dims) continue;
    std::vector<int64_t> want = *c.dims;
    if (config_.max_batch_size > 0) want.insert(want.begin(), -1);
    bool fits = want.size() == it->shape.size();
    for (size_t d = 0; fits && d < want.size(); ++d) fits = it->shape[d] < 0 || want[d] < 0 || it->shape[d] == want[d];
    if (!fits)
      throw Error(ErrorKind::kUsage, where + ": dims " + dims_to_string(*c.dims) + (config_.max_batch_size > 0 ? " (after the batch dim)" : "") +
                                         " do not fit the model's shape " + dims_to_string(it->shape));
    for (size_t d = 0; d < want.size(); ++d)
      if (it->shape[d] < 0) it->shape[d] = want[d];
  }
}

// config.json's "model_warmup": one zero-filled run per case on every instance.
void ServedModel::warm_up() {
  const bool batched = config_.max_batch_size > 0;
  for (size_t w = 0; w < config_.warmup.size(); ++w) {
    const WarmupCase& c = config_.warmup[w];
    const std::string where = "config.json model_warmup[" + std::to_string(w) + "]";
    for (const auto& entry : c.dims) {
      const std::string& name = entry.first;
      if (std::none_of(inputs_.begin(), inputs_.end(), [&](const TensorMetadata& m) { return m.name == name; }))
        throw Error(ErrorKind::kUsage, where + ": the model has no input named '" + name + "'");
    }
    std::vector<Tensor> feeds;
    for (const TensorMetadata& m : inputs_) {
      auto it = c.dims.find(m.name);
      std::vector<int64_t> dims = it != c.dims.end() ? it->second : m.shape;
      if (it == c.dims.end() && batched) dims.erase(dims.begin());
      if (batched) dims.insert(dims.begin(), c.batch_size);
      if (std::any_of(dims.begin(), dims.end(), [](int64_t d) { return d < 0; }))
        throw Error(ErrorKind::kUsage, where + ": input '" + m.name + "' has symbolic dims " + dims_to_string(m.shape) +
                                           ": give its \"dims\"");
      feeds.emplace_back(m.dtype, dims);
    }
    try {
      check_inputs(feeds);
      for (int i = 0; i < instances(); ++i) run(i, feeds);
    } catch (const std::exception& e) {
      throw Error(ErrorKind::kUsage, where + ": " + e.what());
    }
  }
}

void ServedModel::load_library(const std::string& path, int threads) {
  for (int i = 0; i < config_.instances; ++i) libraries_.push_back(CompiledLibrary::open(path, threads));
  for (const CompiledLibrary::Info& in : libraries_.front()->inputs()) inputs_.push_back({in.name, in.dtype, in.dims});
  for (const CompiledLibrary::Info& out : libraries_.front()->outputs())
    outputs_.push_back({out.name, out.dtype, out.dims});
}

void ServedModel::load_onnx(const std::string& path, int threads) {
  SessionOptions opts;
  opts.engine = Engine::kCompiled;
  opts.threads = threads;
  // Each instance loads its own copy: sessions hold per-run state, and the weights stay local
  // to the instance's threads.
  for (int i = 0; i < config_.instances; ++i) sessions_.push_back(Session::load(path, opts));
  const Session& s = *sessions_.front();
  const auto& graph_inputs = s.model().graph->inputs;
  graph_inputs_ = graph_inputs.size();
  for (const Value* v : s.feed_inputs()) {
    inputs_.push_back(metadata_of(*v, "input"));
    for (size_t i = 0; i < graph_inputs.size(); ++i)
      if (graph_inputs[i] == v) feed_slots_.push_back(i);
  }
  for (const Value* v : s.model().graph->outputs) outputs_.push_back(metadata_of(*v, "output"));
}

ServedModel::~ServedModel() = default;

int64_t ServedModel::check_inputs(const std::vector<Tensor>& feeds) const {
  auto fail = [](const std::string& m) { throw ServeError(ServeStatus::kBadRequest, m); };
  if (feeds.size() != inputs_.size())
    fail("expected " + std::to_string(inputs_.size()) + " inputs, got " + std::to_string(feeds.size()));
  int64_t batch = -1;
  for (size_t i = 0; i < feeds.size(); ++i) {
    const TensorMetadata& m = inputs_[i];
    const Tensor& t = feeds[i];
    if (t.dtype() != m.dtype)
      fail("input '" + m.name + "': expected datatype " + std::string(dtype_name(m.dtype)) + ", got " +
           std::string(dtype_name(t.dtype())));
    bool fits = t.rank() == static_cast<int>(m.shape.size());
    for (size_t d = 0; fits && d < m.shape.size(); ++d) fits = m.shape[d] < 0 || m.shape[d] == t.dims()[d];
    if (!fits)
      fail("input '" + m.name + "': expected shape " + dims_to_string(m.shape) + " (-1: any), got " +
           dims_to_string(t.dims()));
    if (config_.max_batch_size == 0) continue;
    if (batch >= 0 && t.dims()[0] != batch)
      fail("input '" + m.name + "': batch (dim 0) " + std::to_string(t.dims()[0]) + " differs from the other inputs' " +
           std::to_string(batch));
    batch = t.dims()[0];
  }
  if (config_.max_batch_size == 0) return 0;
  if (batch < 1 || batch > config_.max_batch_size)
    fail("batch size " + std::to_string(batch) + " is not in 1..max_batch_size (" +
         std::to_string(config_.max_batch_size) + ")");
  return batch;
}

std::vector<Tensor> ServedModel::run(int instance, const std::vector<Tensor>& feeds) {
  if (!libraries_.empty()) return libraries_.at(static_cast<size_t>(instance))->run(feeds);  // fresh outputs
  std::vector<RtValue> values(graph_inputs_);
  for (size_t i = 0; i < feeds.size(); ++i) values[feed_slots_[i]] = feeds[i];
  std::vector<RtValue> results = sessions_.at(static_cast<size_t>(instance))->run(values);
  std::vector<Tensor> out;
  for (size_t i = 0; i < outputs_.size(); ++i) {
    if (i >= results.size() || !results[i].is_tensor())
      throw Error(ErrorKind::kInternal, "output '" + outputs_[i].name + "' did not come back as a tensor");
    out.push_back(results[i].tensor.clone());  // results may view the instance's arena
  }
  return out;
}

}  // namespace kiln::serve
