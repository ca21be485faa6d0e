// The measurement worker process and the parent's handle on it (see worker.h).
#include "tune/worker.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/error.h"
#include "runtime/thread_pool.h"

extern char** environ;

namespace kiln::tune {

using nlohmann::json;

namespace {

// The kernel choices that KILN_TUNE_TEST_FAULT makes crash or hang, in any task that tries
// them ("crash=algo=gemm mr=8 split=2x1;hang=algo=gemm mr=10 split=1x1").
struct Faults {
  std::string crash, hang;
};
Faults test_faults() {
  Faults f;
  const char* e = std::getenv("KILN_TUNE_TEST_FAULT");
  if (!e) return f;
  std::string s = e;
  for (size_t pos = 0; pos < s.size();) {
    size_t end = s.find(';', pos);
    if (end == std::string::npos) end = s.size();
    const std::string item = s.substr(pos, end - pos);
    if (item.rfind("crash=", 0) == 0) f.crash = item.substr(6);
    if (item.rfind("hang=", 0) == 0) f.hang = item.substr(5);
    pos = end + 1;
  }
  return f;
}

json task_json(const Task& t) {
  json c = json::array();
  for (const auto& k : t.candidates) c.push_back(gemm_ops::to_string(k));
  return {{"key", t.key}, {"count", t.count}, {"op", t.op}, {"name", t.name}, {"candidates", c}};
}

}  // namespace

namespace {

// {"time_model": true, "runs": r, "min_ms": t}: the whole model's median run time over at least
// r runs and t ms (after two warm-up runs), as it is compiled in this worker (kiln tune compares
// offload backends with it).
json time_model(CompiledExecutor& executor, const std::vector<RtValue>& feeds, const json& req) {
  using Clock = std::chrono::steady_clock;
  const int runs = req.value("runs", 10);
  const double min_ms = req.value("min_ms", 200.0);
  for (int w = 0; w < 2; ++w) executor.run(feeds);
  std::vector<double> times;
  const Clock::time_point start = Clock::now();
  while (static_cast<int>(times.size()) < runs ||
         std::chrono::duration<double, std::milli>(Clock::now() - start).count() < min_ms) {
    const Clock::time_point t0 = Clock::now();
    executor.run(feeds);
    times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return {{"model_ms", times[times.size() / 2]}, {"runs", times.size()}};
}

// One round: checks each choice (the first time it is seen), applies the ok ones to the model,
// and times every task's steps in `runs` runs of the whole model.
json run_round(CompiledExecutor& executor, const std::vector<RtValue>& feeds, const std::vector<Task>& tasks,
               const std::vector<int>& step_task, std::vector<std::unique_ptr<ChoiceCheck>>& checkers,
               std::map<std::pair<size_t, std::string>, Check>& checked, const json& req, const Faults& faults) {
  const json& choices = req.at("choices");
  if (!choices.is_array() || choices.size() != tasks.size())
    throw std::invalid_argument("a round names one choice per task");
  auto table = std::make_shared<TuningTable>();
  std::vector<Check> checks(tasks.size());
  for (size_t i = 0; i < tasks.size(); ++i) {
    const std::string text = choices[i].get<std::string>();
    gemm_ops::KernelChoice c;
    if (!gemm_ops::parse_kernel_choice(text, &c)) throw std::invalid_argument("unknown choice '" + text + "'");
    if (c.is_default()) continue;
    if (text == faults.crash) std::abort();
    if (text == faults.hang)
      for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
    auto it = checked.find({i, text});
    if (it == checked.end()) {
      if (!checkers[i]) checkers[i] = std::make_unique<ChoiceCheck>(tasks[i], 1234 + i);
      it = checked.emplace(std::make_pair(i, text), checkers[i]->check(c)).first;
    }
    checks[i] = it->second;
    if (checks[i].status == Status::kOk) (*table)[tasks[i].key] = c;
  }
  executor.retune(table);
  // At least `runs` timed runs and `min_ms` of them (a small model's steps take microseconds:
  // more runs steady their medians), at most 2000.
  const int warmup = req.value("warmup", 2), runs = std::max(1, req.value("runs", 10));
  const double min_ms = req.value("min_ms", 0.0);
  std::vector<std::vector<double>> us(tasks.size());
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < warmup + 2000; ++r) {
    if (r >= warmup + runs &&
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() >= min_ms)
      break;
    executor.run(feeds);
    if (r < warmup) continue;
    std::vector<double> sum(tasks.size(), 0.0);
    const std::vector<NodeTiming>& t = executor.timings();
    for (size_t k = 0; k < t.size() && k < step_task.size(); ++k)
      if (step_task[k] >= 0) sum[static_cast<size_t>(step_task[k])] += t[k].ms * 1000;
    for (size_t i = 0; i < tasks.size(); ++i) us[i].push_back(sum[i]);
  }
  json results = json::array();
  for (size_t i = 0; i < tasks.size(); ++i) {
    json r = {{"status", status_name(checks[i].status)}, {"detail", checks[i].detail}};
    if (checks[i].status == Status::kOk) r["time_us"] = median(us[i]) / std::max(1, tasks[i].count);
    results.push_back(r);
  }
  return {{"results", results}};
}

}  // namespace

int run_worker(CompiledExecutor& executor, const std::vector<RtValue>& feeds, int threads, std::istream& in,
               std::ostream& out) {
  std::vector<Task> tasks = model_tasks(executor, feeds, threads);
  // Which task each step of the plan belongs to (-1: none), for the per-step timings.
  std::map<std::string, int> task_of;
  for (size_t i = 0; i < tasks.size(); ++i) task_of[tasks[i].key] = static_cast<int>(i);
  std::vector<int> step_task;
  if (const ExecPlan* plan = executor.last_exec_plan())
    for (const PlanStep& st : plan->steps) {
      auto it = st.kind == PlanStep::Kind::kGemm ? task_of.find(gemm_ops::tuning_key(st.gemm)) : task_of.end();
      step_task.push_back(it == task_of.end() ? -1 : it->second);
    }
  json list = json::array();
  for (const Task& t : tasks) list.push_back(task_json(t));
  out << json{{"tasks", list}}.dump() << "\n" << std::flush;
  // The checks run their ops on a pool of the same size as the model's.
  ThreadPool pool(threads);
  ScopedThreadPool scope(&pool);
  const Faults faults = test_faults();
  std::vector<std::unique_ptr<ChoiceCheck>> checkers(tasks.size());
  std::map<std::pair<size_t, std::string>, Check> checked;
  std::string line;
  while (std::getline(in, line)) {
    json answer;
    try {
      const json req = json::parse(line);
      answer = req.contains("time_model") ? time_model(executor, feeds, req)
                                          : run_round(executor, feeds, tasks, step_task, checkers, checked, req, faults);
    } catch (const std::exception& e) {
      answer = {{"error", std::string("worker: ") + e.what()}};
    }
    out << answer.dump() << "\n" << std::flush;
  }
  return 0;
}

WorkerProcess::~WorkerProcess() { stop(); }

void WorkerProcess::start() {
  if (pid_ > 0) return;
  int in_pipe[2], out_pipe[2], err_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0 || pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0)
    throw Error(ErrorKind::kInternal, std::string("tune: cannot create pipes for the worker: ") + std::strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
  std::vector<char*> args;
  for (auto& a : argv_) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv_[0].c_str(), &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(in_pipe[0]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (rc != 0) {
    close(in_pipe[1]);
    close(out_pipe[0]);
    close(err_pipe[0]);
    throw Error(ErrorKind::kInternal, "tune: cannot start the worker " + argv_[0] + ": " + std::strerror(rc));
  }
  pid_ = pid;
  to_child_ = in_pipe[1];
  from_child_ = out_pipe[0];
  err_child_ = err_pipe[0];
  buffer_.clear();
}

void WorkerProcess::drain_stderr() {
  char buf[4096];
  const ssize_t n = read(err_child_, buf, sizeof buf);
  if (n <= 0) return;
  err_tail_.append(buf, static_cast<size_t>(n));
  if (err_tail_.size() > 4096) err_tail_.erase(0, err_tail_.size() - 4096);
}

std::optional<std::string> WorkerProcess::request(const std::string& line, double timeout_s, std::string* failure) {
  start();
  if (!line.empty()) {
    const std::string msg = line + "\n";
    signal(SIGPIPE, SIG_IGN);  // a dead worker: write fails with EPIPE, reported below
    size_t off = 0;
    while (off < msg.size()) {
      const ssize_t n = write(to_child_, msg.data() + off, msg.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
  }
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  for (;;) {
    const size_t nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      std::string answer = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return answer;
    }
    const double left_ms = std::chrono::duration<double, std::milli>(deadline - Clock::now()).count();
    if (left_ms <= 0) {
      if (failure) *failure = "timeout after " + std::to_string(static_cast<int>(timeout_s + 0.5)) + " s";
      stop();
      return std::nullopt;
    }
    pollfd fds[2] = {{from_child_, POLLIN, 0}, {err_child_, POLLIN, 0}};
    const int rc = poll(fds, 2, static_cast<int>(std::min(left_ms, 1000.0)) + 1);
    if (rc < 0 && errno != EINTR) break;
    if (rc <= 0) continue;
    if (fds[1].revents & (POLLIN | POLLHUP)) drain_stderr();
    if (fds[0].revents & (POLLIN | POLLHUP)) {
      char buf[65536];
      const ssize_t n = read(from_child_, buf, sizeof buf);
      if (n > 0) {
        buffer_.append(buf, static_cast<size_t>(n));
        continue;
      }
      break;  // EOF: the worker ended
    }
  }
  // The worker died: collect how.
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  if (failure)
    *failure = WIFSIGNALED(status) ? "crashed (signal " + std::to_string(WTERMSIG(status)) + ")"
                                   : "exited with status " + std::to_string(WEXITSTATUS(status));
  stop();
  return std::nullopt;
}

void WorkerProcess::stop() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  for (int* fd : {&to_child_, &from_child_, &err_child_})
    if (*fd >= 0) {
      close(*fd);
      *fd = -1;
    }
}

}  // namespace kiln::tune
