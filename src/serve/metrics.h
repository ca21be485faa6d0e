// Prometheus metrics of the server: per model and version, request outcomes, queue and compute
// time, and the batch sizes the scheduler ran; rendered in the text exposition format.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "serve/serve_error.h"

namespace kiln::serve {

struct ModelMetrics {
  static constexpr std::array<int64_t, 8> kBatchBuckets = {1, 2, 4, 8, 16, 32, 64, 128};
  std::atomic<int64_t> success{0};
  std::array<std::atomic<int64_t>, 5> failure{};  // by ServeStatus
  std::atomic<int64_t> inferences{0};              // rows (samples) computed
  std::atomic<int64_t> executions{0};              // model runs (batches)
  std::atomic<int64_t> queue_us{0}, compute_us{0}, request_us{0};
  std::atomic<int64_t> queued{0};                   // gauge: waiting now
  std::atomic<int64_t> executing{0};                // gauge: in an execution now
  std::array<std::atomic<int64_t>, kBatchBuckets.size() + 1> batch_hist{};  // last: +Inf
  std::atomic<int64_t> batch_sum{0};

  void record_failure(ServeStatus s) { failure[static_cast<size_t>(s)].fetch_add(1, std::memory_order_relaxed); }
  void record_batch(int64_t rows);
};

class Metrics {
 public:
  // The counters of one model version (created on first use; stable address).
  std::shared_ptr<ModelMetrics> model(const std::string& name, const std::string& version);
  // Failures of requests that named no loaded model.
  void record_unknown_model_failure() { unknown_model_failures_.fetch_add(1, std::memory_order_relaxed); }
  std::string prometheus_text() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<ModelMetrics>> models_;
  std::atomic<int64_t> unknown_model_failures_{0};
};

}  // namespace kiln::serve
