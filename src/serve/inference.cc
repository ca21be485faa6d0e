// The protocol-independent path of an inference request.
#include "serve/inference.h"

#include "serve/serve_error.h"

namespace kiln::serve {
namespace {

// The request's named tensors in the model's input order; checks the requested outputs.
std::vector<Tensor> feeds_in_model_order(const ServedModel& m, InferRequest& req) {
  std::vector<Tensor> feeds(m.inputs().size());
  std::vector<bool> given(m.inputs().size(), false);
  for (auto& [name, t] : req.inputs) {
    size_t k = 0;
    while (k < m.inputs().size() && m.inputs()[k].name != name) ++k;
    if (k == m.inputs().size()) {
      std::string names;
      for (const TensorMetadata& i : m.inputs()) names += (names.empty() ? "" : ", ") + i.name;
      throw ServeError(ServeStatus::kBadRequest,
                       "model '" + m.name() + "' has no input named '" + name + "' (inputs: " + names + ")");
    }
    if (given[k]) throw ServeError(ServeStatus::kBadRequest, "input '" + name + "' is given twice");
    given[k] = true;
    feeds[k] = std::move(t);
  }
  for (size_t k = 0; k < given.size(); ++k)
    if (!given[k]) throw ServeError(ServeStatus::kBadRequest, "input '" + m.inputs()[k].name + "' is missing");
  for (const RequestedOutput& o : req.outputs) {
    bool known = false;
    for (const TensorMetadata& t : m.outputs()) known |= t.name == o.name;
    if (!known)
      throw ServeError(ServeStatus::kBadRequest, "model '" + m.name() + "' has no output named '" + o.name + "'");
  }
  return feeds;
}

}  // namespace

std::shared_ptr<LoadedModel> find_model(ModelManager& models, Metrics& metrics, const std::string& name,
                                        const std::string& version) {
  try {
    return models.find(name, version);
  } catch (const std::exception&) {
    metrics.record_unknown_model_failure();
    throw;
  }
}

void record_rejected(LoadedModel& model, const std::exception& e) { model.metrics->record_failure(status_of(e)); }

InferResult run_inference(LoadedModel& model, InferRequest& request) {
  const Clock::time_point t0 = Clock::now();
  ModelMetrics& m = *model.metrics;
  InferResult result;
  try {
    std::vector<Tensor> feeds = feeds_in_model_order(*model.model, request);
    std::future<InferResult> answer = model.scheduler->submit(std::move(feeds), request.timeout_us);
    // The client hears back by its deadline at the latest; the scheduler drops the request if it
    // has not started by then, or discards its result.
    const int64_t timeout_us = request.timeout_us > 0 ? request.timeout_us : model.model->config().default_timeout_us;
    if (timeout_us > 0 && answer.wait_for(std::chrono::microseconds(timeout_us)) == std::future_status::timeout)
      throw ServeError(ServeStatus::kTimeout, "no answer within the request's timeout of " + std::to_string(timeout_us) +
                                                  " us (model '" + model.model->name() + "' is busy)");
    result = answer.get();
  } catch (const std::exception& e) {
    m.record_failure(status_of(e));
    m.request_us.fetch_add(micros_between(t0, Clock::now()), std::memory_order_relaxed);
    throw;
  }
  m.success.fetch_add(1, std::memory_order_relaxed);
  m.queue_us.fetch_add(result.queue_us, std::memory_order_relaxed);
  m.compute_us.fetch_add(result.compute_us, std::memory_order_relaxed);
  m.request_us.fetch_add(micros_between(t0, Clock::now()), std::memory_order_relaxed);
  return result;
}

}  // namespace kiln::serve
