// The request queue of one served model version: bounded (a full queue refuses at once),
// drained by one thread per instance, with dynamic batching along dim 0 for models that batch.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "serve/metrics.h"
#include "serve/served_model.h"

namespace kiln::serve {

using Clock = std::chrono::steady_clock;

inline int64_t micros_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::microseconds>(b - a).count();
}

struct InferResult {
  std::vector<Tensor> outputs;  // in the model's output order
  int64_t queue_us = 0, compute_us = 0;
  int64_t batch_rows = 0;  // rows of the execution this request was part of
};

class ModelScheduler {
 public:
  ModelScheduler(std::shared_ptr<ServedModel> model, std::shared_ptr<ModelMetrics> metrics);
  // Stops taking requests and finishes every queued one before the instances stop.
  ~ModelScheduler();
  ModelScheduler(const ModelScheduler&) = delete;
  ModelScheduler& operator=(const ModelScheduler&) = delete;

  // Queues a request (feeds in the model's input order, checked here); timeout_us <= 0 takes
  // the config's default. Throws ServeError(kUnavailable) when the queue is full or draining,
  // kBadRequest for feeds that do not fit. The future throws the run's error.
  std::future<InferResult> submit(std::vector<Tensor> feeds, int64_t timeout_us);
  const ServedModel& model() const { return *model_; }

 private:
  struct Job {
    std::vector<Tensor> feeds;
    int64_t rows = 0;  // batch rows (0: the model does not batch)
    Clock::time_point enqueued, deadline;
    std::promise<InferResult> done;
  };
  using JobPtr = std::unique_ptr<Job>;

  void instance_loop(int instance);
  std::vector<JobPtr> next_batch(std::unique_lock<std::mutex>& lock);
  std::vector<JobPtr> take_compatible(int64_t& rows);
  int64_t compatible_rows() const;
  bool batch_is_full(int64_t rows) const;
  void fail_expired(Clock::time_point now);
  void execute(int instance, std::vector<JobPtr>& batch);

  std::shared_ptr<ServedModel> model_;
  std::shared_ptr<ModelMetrics> metrics_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<JobPtr> queue_;
  bool draining_ = false;
  std::vector<std::thread> instances_;
};

}  // namespace kiln::serve
