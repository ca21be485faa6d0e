// The measurement worker and its parent's handle on it. `kiln tune` runs the measurements in a
// child process (`kiln tune-worker`, the same binary): a candidate that crashes or hangs kills
// only the child, which the parent records as invalid and restarts. Protocol, JSON lines:
// the worker first prints {"tasks": [...]} (key, count, op, name, candidates), then
// answers each round {"round": n, "choices": [one per task], "runs": r, "min_ms": t, "warmup": w} with
// {"results": [{"status", "time_us", "detail"} per task]}: every task's choice checked against
// its default kernel's output (once per choice), the ok ones applied to the model together
// (CompiledExecutor::retune), and each task's steps timed inside r runs (and t ms) of the whole model
// (median, per step: a task's steps' time over their count), so a kernel meets the caches as the
// model leaves them. {"time_model": true, "runs": r, "min_ms": t} answers {"model_ms": median}: the
// whole model's run time as this worker compiled it (with or without --offload).
// Tests: tests/tune/test_worker.cc.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "core/value.h"
#include "driver/compiled_executor.h"
#include "tune/tasks.h"

namespace kiln::tune {

// Worker side: runs `executor` (made with profiling on) once on `feeds` to plan it, prints its
// tasks and serves rounds from `in` until it ends; checks use a pool of `threads` threads.
// Test hook: KILN_TUNE_TEST_FAULT="crash=CHOICE;hang=CHOICE" makes a round that tries kernel
// choice CHOICE (gemm_ops::to_string's text, e.g. "algo=gemm mr=8 split=2x1") abort or hang.
int run_worker(CompiledExecutor& executor, const std::vector<RtValue>& feeds, int threads, std::istream& in,
               std::ostream& out);

// Parent side: one worker process (argv[0] the executable), its stdin and stdout piped.
class WorkerProcess {
 public:
  explicit WorkerProcess(std::vector<std::string> argv) : argv_(std::move(argv)) {}
  ~WorkerProcess();
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  // Starts the process if it is not running.
  void start();
  // Sends `line` (when not empty) and waits up to `timeout_s` for one line of answer. nullopt
  // when the worker died (`failure`: "crashed (signal 6)", "exited with status 1") or did not
  // answer in time ("timeout after 10 s", the worker then killed); either way it is stopped and
  // the next call starts a fresh one.
  std::optional<std::string> request(const std::string& line, double timeout_s, std::string* failure);
  void stop();
  bool running() const { return pid_ > 0; }
  // The last lines the worker wrote to its stderr (kept for error messages).
  const std::string& stderr_tail() const { return err_tail_; }

 private:
  void drain_stderr();
  std::vector<std::string> argv_;
  int pid_ = -1;
  int to_child_ = -1, from_child_ = -1, err_child_ = -1;
  std::string buffer_, err_tail_;
};

}  // namespace kiln::tune
