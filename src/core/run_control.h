// Cancellation and deadlines of one run: an API edge (C API, Python, CLI) opens a RunScope on
// the thread that runs; the executors call check_run() between steps and nodes, which throws
// kCancelled or kTimeout. A thread-local, so the engines need no extra parameter through their
// nested executors, interpreters and control-flow bodies.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace kiln {

// What a caller cancels: cancel() stops every run that opened its scope before the call
// (running, or waiting for the session's lock); later runs are not affected.
class Canceller {
 public:
  void cancel() { generation_.fetch_add(1, std::memory_order_acq_rel); }
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

 private:
  std::atomic<uint64_t> generation_{0};
};

// Installs the calling thread's run control until destroyed (scopes nest; the inner one wins).
// timeout_s <= 0: no deadline. The deadline counts from the scope's construction.
class RunScope {
 public:
  RunScope(const Canceller* canceller, double timeout_s);
  ~RunScope();
  RunScope(const RunScope&) = delete;
  RunScope& operator=(const RunScope&) = delete;

 private:
  const Canceller* canceller_;
  uint64_t generation_;
  double timeout_s_;
  std::chrono::steady_clock::time_point deadline_;
  RunScope* outer_;
  friend void check_run();
};

// Throws Error(kCancelled) when this thread's run was cancelled, Error(kTimeout) when its
// deadline passed; nothing without a scope. Cheap: a thread-local read and an atomic load.
void check_run();

}  // namespace kiln
