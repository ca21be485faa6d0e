// Prometheus text exposition of the server's counters.
#include "serve/metrics.h"

#include <sstream>

namespace kiln::serve {

void ModelMetrics::record_batch(int64_t rows) {
  executions.fetch_add(1, std::memory_order_relaxed);
  inferences.fetch_add(rows, std::memory_order_relaxed);
  batch_sum.fetch_add(rows, std::memory_order_relaxed);
  size_t b = 0;
  while (b < kBatchBuckets.size() && rows > kBatchBuckets[b]) ++b;
  batch_hist[b].fetch_add(1, std::memory_order_relaxed);
}

std::shared_ptr<ModelMetrics> Metrics::model(const std::string& name, const std::string& version) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& m = models_[{name, version}];
  if (!m) m = std::make_shared<ModelMetrics>();
  return m;
}

namespace {

// A metric family: its HELP/TYPE header, then one sample line per model version.
template <class F>
void family(std::ostringstream& os, const char* name, const char* type, const char* help,
            const std::map<std::pair<std::string, std::string>, std::shared_ptr<ModelMetrics>>& models, F&& sample) {
  os << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
  for (const auto& [key, m] : models) {
    std::string labels = "model=\"" + key.first + "\",version=\"" + key.second + "\"";
    sample(os, labels, *m);
  }
}

}  // namespace

std::string Metrics::prometheus_text() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::ostringstream os;
  auto counter = [&](const char* name, const char* help, auto get) {
    family(os, name, "counter", help, models_, [&](std::ostringstream& o, const std::string& l, const ModelMetrics& m) {
      o << name << "{" << l << "} " << get(m) << "\n";
    });
  };
  counter("kiln_inference_request_success_total", "Inference requests that succeeded",
          [](const ModelMetrics& m) { return m.success.load(); });
  family(os, "kiln_inference_request_failure_total", "counter", "Inference requests that failed, by reason", models_,
         [](std::ostringstream& o, const std::string& l, const ModelMetrics& m) {
           for (size_t s = 0; s < m.failure.size(); ++s)
             o << "kiln_inference_request_failure_total{" << l << ",reason=\""
               << reason_name(static_cast<ServeStatus>(s)) << "\"} " << m.failure[s].load() << "\n";
         });
  counter("kiln_inference_count_total", "Samples (batch rows) computed", [](const ModelMetrics& m) { return m.inferences.load(); });
  counter("kiln_inference_exec_count_total", "Model executions (batches)", [](const ModelMetrics& m) { return m.executions.load(); });
  counter("kiln_inference_queue_duration_us_total", "Microseconds requests waited in the queue",
          [](const ModelMetrics& m) { return m.queue_us.load(); });
  counter("kiln_inference_compute_duration_us_total", "Microseconds of model execution, per request",
          [](const ModelMetrics& m) { return m.compute_us.load(); });
  counter("kiln_inference_request_duration_us_total", "Microseconds from arrival to response, per request",
          [](const ModelMetrics& m) { return m.request_us.load(); });
  family(os, "kiln_inference_queue_size", "gauge", "Requests waiting now", models_,
         [](std::ostringstream& o, const std::string& l, const ModelMetrics& m) {
           o << "kiln_inference_queue_size{" << l << "} " << m.queued.load() << "\n";
         });
  family(os, "kiln_inference_executing", "gauge", "Requests in a model execution now", models_,
         [](std::ostringstream& o, const std::string& l, const ModelMetrics& m) {
           o << "kiln_inference_executing{" << l << "} " << m.executing.load() << "\n";
         });
  family(os, "kiln_inference_batch_size", "histogram", "Rows per model execution", models_,
         [](std::ostringstream& o, const std::string& l, const ModelMetrics& m) {
           int64_t cumulative = 0;
           for (size_t b = 0; b <= ModelMetrics::kBatchBuckets.size(); ++b) {
             cumulative += m.batch_hist[b].load();
             std::string le = b < ModelMetrics::kBatchBuckets.size() ? std::to_string(ModelMetrics::kBatchBuckets[b]) : "+Inf";
             o << "kiln_inference_batch_size_bucket{" << l << ",le=\"" << le << "\"} " << cumulative << "\n";
           }
           o << "kiln_inference_batch_size_sum{" << l << "} " << m.batch_sum.load() << "\n";
           o << "kiln_inference_batch_size_count{" << l << "} " << m.executions.load() << "\n";
         });
  os << "# HELP kiln_inference_unknown_model_failure_total Requests for models that are not loaded\n"
     << "# TYPE kiln_inference_unknown_model_failure_total counter\n"
     << "kiln_inference_unknown_model_failure_total " << unknown_model_failures_.load() << "\n";
  return os.str();
}

}  // namespace kiln::serve
