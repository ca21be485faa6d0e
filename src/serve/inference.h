// One inference request through the server, shared by the protocol frontends: find the model,
// order the request's tensors as the model's inputs, queue it, wait, and count the outcome in
// the metrics. Encoding the answer stays with each protocol.
#pragma once

#include <memory>
#include <string>

#include "serve/kserve_json.h"
#include "serve/metrics.h"
#include "serve/model_repository.h"

namespace kiln::serve {

// What both protocol frontends are told: where to listen, how much to take at once, limits.
struct FrontendOptions {
  std::string host = "127.0.0.1";
  int port = 0;                               // 0: any free port (the frontend returns the bound one)
  int threads = 64;                           // HTTP connections / gRPC calls served at once
  size_t max_request_bytes = size_t{256} << 20;
  bool log_requests = false;                  // one JSON line per request on stderr
  RequestLimits limits;
};

// The loaded model a request names; counts an unknown model in the metrics.
std::shared_ptr<LoadedModel> find_model(ModelManager& models, Metrics& metrics, const std::string& name,
                                        const std::string& version);
// Queues the request on `model` and waits; counts success or failure either way (throws the
// failure: ServeError or kiln::Error).
InferResult run_inference(LoadedModel& model, InferRequest& request);
// Counts a request that failed before it reached the queue (e.g. it did not parse).
void record_rejected(LoadedModel& model, const std::exception& e);

}  // namespace kiln::serve
