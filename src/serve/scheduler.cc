// Queue, dynamic batcher and instance threads of one served model version.
#include "serve/scheduler.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "serve/serve_error.h"

namespace kiln::serve {
namespace {

// Two requests can share an execution when every input has the same dtype and the same dims
// after dim 0 (no padding: a padded row would change what the model computes for the others).
bool same_signature(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].dtype() != b[i].dtype() || a[i].rank() != b[i].rank()) return false;
    if (!std::equal(a[i].dims().begin() + 1, a[i].dims().end(), b[i].dims().begin() + 1)) return false;
  }
  return true;
}

Tensor concat_rows(const std::vector<const Tensor*>& parts, int64_t rows) {
  std::vector<int64_t> dims = parts.front()->dims();
  dims[0] = rows;
  Tensor out = Tensor::uninitialized(parts.front()->dtype(), dims);
  auto* dst = static_cast<char*>(out.raw());
  for (const Tensor* p : parts) {
    std::memcpy(dst, p->raw(), p->nbytes());
    dst += p->nbytes();
  }
  return out;
}

}  // namespace

ModelScheduler::ModelScheduler(std::shared_ptr<ServedModel> model, std::shared_ptr<ModelMetrics> metrics)
    : model_(std::move(model)), metrics_(std::move(metrics)) {
  for (int i = 0; i < model_->instances(); ++i) instances_.emplace_back([this, i] { instance_loop(i); });
}

ModelScheduler::~ModelScheduler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    draining_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : instances_) t.join();
}

std::future<InferResult> ModelScheduler::submit(std::vector<Tensor> feeds, int64_t timeout_us) {
  auto job = std::make_unique<Job>();
  job->rows = model_->check_inputs(feeds);
  job->feeds = std::move(feeds);
  job->enqueued = Clock::now();
  if (timeout_us <= 0) timeout_us = model_->config().default_timeout_us;
  job->deadline = timeout_us > 0 ? job->enqueued + std::chrono::microseconds(timeout_us) : Clock::time_point::max();
  std::future<InferResult> result = job->done.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (draining_)
      throw ServeError(ServeStatus::kUnavailable, "model '" + model_->name() + "' version " + model_->version() +
                                                       " is unloading");
    if (static_cast<int64_t>(queue_.size()) >= model_->config().max_queue_size)
      throw ServeError(ServeStatus::kUnavailable,
                       "model '" + model_->name() + "' is at capacity: " + std::to_string(queue_.size()) +
                           " requests already waiting (max_queue_size); retry later");
    queue_.push_back(std::move(job));
    metrics_->queued.fetch_add(1, std::memory_order_relaxed);
  }
  cv_.notify_all();
  return result;
}

void ModelScheduler::instance_loop(int instance) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    std::vector<JobPtr> batch = next_batch(lock);
    if (batch.empty()) return;
    lock.unlock();
    execute(instance, batch);
    lock.lock();
  }
}

bool ModelScheduler::batch_is_full(int64_t rows) const {
  const ModelConfig& c = model_->config();
  const auto& preferred = c.dynamic_batching.preferred_batch_size;
  if (!preferred.empty() && rows >= *std::max_element(preferred.begin(), preferred.end())) return true;
  return rows >= c.max_batch_size;
}

// Rows of the jobs that would join the front job's execution now.
int64_t ModelScheduler::compatible_rows() const {
  int64_t rows = 0;
  for (const JobPtr& j : queue_)
    if (same_signature(j->feeds, queue_.front()->feeds) && rows + j->rows <= model_->config().max_batch_size)
      rows += j->rows;
  return rows;
}

std::vector<ModelScheduler::JobPtr> ModelScheduler::take_compatible(int64_t& rows) {
  std::vector<JobPtr> batch;
  rows = 0;
  const std::vector<Tensor>& first = queue_.front()->feeds;
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (rows + (*it)->rows <= model_->config().max_batch_size && (batch.empty() || same_signature((*it)->feeds, first))) {
      rows += (*it)->rows;
      batch.push_back(std::move(*it));
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  return batch;
}

void ModelScheduler::fail_expired(Clock::time_point now) {
  for (auto it = queue_.begin(); it != queue_.end();) {
    if ((*it)->deadline > now) {
      ++it;
      continue;
    }
    (*it)->done.set_exception(std::make_exception_ptr(ServeError(
        ServeStatus::kTimeout, "the request waited " + std::to_string(micros_between((*it)->enqueued, now)) +
                                   " us in the queue of model '" + model_->name() + "', past its timeout")));
    metrics_->queued.fetch_sub(1, std::memory_order_relaxed);
    it = queue_.erase(it);
  }
}

// Blocks until there is work: one job, or with dynamic batching the front job and every
// compatible one that arrives before the batch is full or the front job's delay has passed.
// Empty when draining and the queue is empty.
std::vector<ModelScheduler::JobPtr> ModelScheduler::next_batch(std::unique_lock<std::mutex>& lock) {
  const ModelConfig& c = model_->config();
  const auto delay = std::chrono::microseconds(c.dynamic_batching.max_queue_delay_us);
  for (;;) {
    cv_.wait(lock, [&] { return !queue_.empty() || draining_; });
    if (queue_.empty()) return {};
    fail_expired(Clock::now());
    if (queue_.empty()) continue;
    std::vector<JobPtr> batch;
    if (!c.dynamic_batching.enabled) {
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
    } else {
      while (!draining_ && !batch_is_full(compatible_rows()) && Clock::now() < queue_.front()->enqueued + delay) {
        cv_.wait_until(lock, queue_.front()->enqueued + delay);
        if (queue_.empty()) break;
      }
      if (queue_.empty()) continue;
      int64_t rows = 0;
      batch = take_compatible(rows);
    }
    metrics_->queued.fetch_sub(static_cast<int64_t>(batch.size()), std::memory_order_relaxed);
    return batch;
  }
}

void ModelScheduler::execute(int instance, std::vector<JobPtr>& batch) {
  const Clock::time_point start = Clock::now();
  const auto jobs = static_cast<int64_t>(batch.size());
  metrics_->executing.fetch_add(jobs, std::memory_order_relaxed);
  struct Done {
    ModelMetrics& m;
    int64_t n;
    ~Done() { m.executing.fetch_sub(n, std::memory_order_relaxed); }
  } done{*metrics_, jobs};
  int64_t rows = 0;
  for (const JobPtr& j : batch) rows += j->rows;
  try {
    std::vector<Tensor> feeds;
    if (batch.size() == 1) {
      feeds = batch.front()->feeds;
    } else {
      for (size_t i = 0; i < batch.front()->feeds.size(); ++i) {
        std::vector<const Tensor*> parts;
        for (const JobPtr& j : batch) parts.push_back(&j->feeds[i]);
        feeds.push_back(concat_rows(parts, rows));
      }
    }
    std::vector<Tensor> outputs = model_->run(instance, feeds);
    const Clock::time_point end = Clock::now();
    metrics_->record_batch(std::max<int64_t>(rows, 1));
    std::vector<InferResult> results(batch.size());
    for (size_t k = 0; k < batch.size(); ++k) {
      results[k].queue_us = micros_between(batch[k]->enqueued, start);
      results[k].compute_us = micros_between(start, end);
      results[k].batch_rows = rows;
    }
    if (batch.size() == 1) {
      results[0].outputs = std::move(outputs);
    } else {
      for (size_t o = 0; o < outputs.size(); ++o) {
        const Tensor& t = outputs[o];
        if (t.rank() < 1 || t.dims()[0] != rows)
          throw Error(ErrorKind::kInvalidModel,
                      "output '" + model_->outputs()[o].name + "' has shape " + dims_to_string(t.dims()) +
                          " for a batch of " + std::to_string(rows) + " rows: its dim 0 is not the batch; "
                          "set max_batch_size to 0 for this model");
        const size_t row_bytes = t.nbytes() / static_cast<size_t>(rows);
        const auto* src = static_cast<const char*>(t.raw());
        for (size_t k = 0; k < batch.size(); ++k) {
          std::vector<int64_t> dims = t.dims();
          dims[0] = batch[k]->rows;
          Tensor part = Tensor::uninitialized(t.dtype(), dims);
          std::memcpy(part.raw(), src, part.nbytes());
          src += row_bytes * static_cast<size_t>(batch[k]->rows);
          results[k].outputs.push_back(std::move(part));
        }
      }
    }
    for (size_t k = 0; k < batch.size(); ++k) batch[k]->done.set_value(std::move(results[k]));
  } catch (...) {
    for (JobPtr& j : batch) j->done.set_exception(std::current_exception());
  }
}

}  // namespace kiln::serve
