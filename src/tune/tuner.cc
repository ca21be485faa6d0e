// The tuning loop: worker start, rounds of trials, candidate order, records (see tuner.h).
#include "tune/tuner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>

#include "core/error.h"
#include "tune/worker.h"

namespace kiln::tune {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using gemm_ops::KernelChoice;

bool neighbours(const KernelChoice& a, const KernelChoice& b) {
  const int differ = (a.algo != b.algo) + (a.mr != b.mr) + (a.chunks != b.chunks || a.groups != b.groups);
  return differ == 1;
}

std::string mmss(double s) {
  const int t = static_cast<int>(s + 0.5);
  char buf[16];
  std::snprintf(buf, sizeof buf, "%d:%02d", t / 60, t % 60);
  return buf;
}

struct TaskState {
  TaskResult result;
  std::vector<KernelChoice> space;
  std::map<std::string, std::vector<double>> times;  // choice text -> ok times (us), this run and the records'
  std::set<std::string> invalid;                     // choices that were not ok
  std::deque<size_t> queue;                          // candidates to try (indices into space)
  std::optional<KernelChoice> confirm;               // a new best measured once: measure it again
  int since_gain = 0;
  bool done = false;

  bool known(const KernelChoice& c) const {
    const std::string t = gemm_ops::to_string(c);
    return times.count(t) || invalid.count(t);
  }
  // The choice with the lowest median time (ties: the default, then the smaller text).
  void update_best() {
    double best = 0;
    std::string best_text;
    for (const auto& [text, v] : times) {
      const double m = median(v);
      if (best == 0 || m < best || (m == best && text == "default")) {
        best = m;
        best_text = text;
      }
    }
    if (best_text.empty()) return;
    const double before = result.best_us;
    KernelChoice c;
    gemm_ops::parse_kernel_choice(best_text, &c);
    const bool changed = !(c == result.best) || before == 0;
    result.best = c;
    result.best_us = best;
    if (times.count("default")) result.default_us = median(times.at("default"));
    if (!changed) return;
    if (before == 0 || best < 0.99 * before) since_gain = 0;
    if (times.at(best_text).size() == 1) confirm = c;
    std::vector<size_t> front;
    for (size_t i = 0; i < space.size(); ++i)
      if (neighbours(space[i], c) && !known(space[i])) front.push_back(i);
    for (auto it = front.rbegin(); it != front.rend(); ++it) queue.push_front(*it);
  }
};

class Tuner {
 public:
  explicit Tuner(const TuneOptions& o) : o_(o), worker_(o.worker_argv), rng_(o.seed), start_(Clock::now()) {}

  TuneSummary run() {
    target_ = host_target(o_.threads);
    ensure_worker();
    reuse_records();
    if (tasks_.empty()) {  // nothing to search (no tunable step, or the model runs on the interpreter)
      worker_.stop();
      return summary();
    }
    bool first = true;
    while (elapsed() + round_s_ <= o_.budget_s) {
      std::vector<bool> trial(tasks_.size(), false);
      const bool confirming = std::any_of(tasks_.begin(), tasks_.end(), [](const TaskState& t) { return t.confirm.has_value(); });
      std::vector<KernelChoice> round = plan_round(first, trial);
      if (!first && !confirming && std::none_of(trial.begin(), trial.end(), [](bool b) { return b; })) break;
      run_round(round, trial);
      first = false;
    }
    // The defaults were timed in the first rounds, right after start-up: time the defaults and
    // the bests again, alternating, so that both have late samples from the same conditions.
    for (int v = 0; v < o_.verify_rounds && !first && elapsed() + round_s_ <= o_.budget_s; ++v) {
      std::vector<KernelChoice> round(tasks_.size());
      if (v % 2 == 1)
        for (size_t i = 0; i < tasks_.size(); ++i) round[i] = tasks_[i].result.best;
      run_round(round, std::vector<bool>(tasks_.size(), false));
    }
    worker_.stop();
    if (o_.progress) o_.progress(status_line(), true);
    return summary();
  }

 private:
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

  void ensure_worker() {
    if (worker_.running()) return;
    std::string failure;
    std::optional<std::string> line = worker_.request("", std::max(300.0, o_.timeout_s), &failure);
    if (!line)
      throw Error(ErrorKind::kInternal, "tune: the measurement worker failed to start (" + failure + "): " +
                                            worker_.stderr_tail());
    json j = json::parse(*line, nullptr, false);
    if (j.is_discarded() || !j.contains("tasks"))
      throw Error(ErrorKind::kInternal, "tune: the worker's first line is not its task list: " + line->substr(0, 200));
    if (started_) return;  // a restart: the same tasks
    started_ = true;
    for (const json& jt : j["tasks"]) {
      TaskState t;
      t.result.key = jt.at("key");
      t.result.op = jt.at("op");
      t.result.name = jt.at("name");
      t.result.count = jt.at("count");
      for (const json& c : jt.at("candidates")) {
        KernelChoice k;
        if (gemm_ops::parse_kernel_choice(c.get<std::string>(), &k)) t.space.push_back(k);
      }
      t.result.space = static_cast<int>(t.space.size());
      std::vector<size_t> order;
      for (size_t i = 1; i < t.space.size(); ++i) order.push_back(i);
      std::shuffle(order.begin(), order.end(), rng_);
      t.queue.assign(order.begin(), order.end());
      t.done = t.space.size() <= 1;
      tasks_.push_back(std::move(t));
    }
  }

  void reuse_records() {
    std::map<std::string, TaskState*> by_key;
    for (auto& t : tasks_) by_key[t.result.key] = &t;
    for (const Record& r : read_records(o_.reuse.empty() ? o_.records : o_.reuse, true)) {
      auto it = by_key.find(r.key);
      if (!(r.target == target_) || it == by_key.end()) continue;
      TaskState& t = *it->second;
      const std::string c = gemm_ops::to_string(r.choice);
      if (!t.known(r.choice)) ++t.result.reused;
      if (r.status == Status::kOk) t.times[c].push_back(r.time_us);
      else t.invalid.insert(c);
    }
    for (auto& t : tasks_) {
      t.update_best();
      t.confirm.reset();
    }
  }

  // Each task's choice for the next round; trial[i]: task i tries a choice it has not measured.
  std::vector<KernelChoice> plan_round(bool first, std::vector<bool>& trial) {
    std::vector<KernelChoice> round(tasks_.size());
    for (size_t i = 0; i < tasks_.size(); ++i) {
      TaskState& t = tasks_[i];
      if (first) continue;  // the first round times the defaults
      if (!suspects_.empty()) {  // after a failed round: one suspect at a time, the rest at their best
        round[i] = t.result.best;
        continue;
      }
      if (t.confirm) {
        round[i] = *t.confirm;
        t.confirm.reset();
        continue;
      }
      while (!t.queue.empty() && t.known(t.space[t.queue.front()])) t.queue.pop_front();
      if (t.queue.empty() || t.since_gain >= o_.patience) t.done = true;
      if (t.done) {  // the default and the best in turn: fresh samples of both
        round[i] = rounds_ % 2 == 0 ? t.result.best : KernelChoice{};
        continue;
      }
      round[i] = t.space[t.queue.front()];
      t.queue.pop_front();
      trial[i] = true;
    }
    if (!first && !suspects_.empty()) {
      const auto [i, c] = suspects_.front();
      suspects_.pop_front();
      round[i] = c;
      trial[i] = true;
    }
    return round;
  }

  void run_round(const std::vector<KernelChoice>& round, const std::vector<bool>& trial) {
    const Clock::time_point t0 = Clock::now();
    ensure_worker();
    json choices = json::array();
    for (const auto& c : round) choices.push_back(gemm_ops::to_string(c));
    ++rounds_;
    json req = {{"round", rounds_}, {"choices", choices}, {"runs", o_.runs}, {"min_ms", o_.min_round_ms},
                {"warmup", o_.warmup}};
    std::string failure;
    std::optional<std::string> answer = worker_.request(req.dump(), o_.timeout_s, &failure);
    json j = answer ? json::parse(*answer, nullptr, false) : json();
    if (!answer || j.is_discarded() || !j.contains("results") || j["results"].size() != tasks_.size()) {
      round_failed(round, trial, answer ? "worker error: " + (j.is_discarded() ? *answer : j.value("error", *answer))
                                        : failure,
                   !answer && failure.rfind("timeout", 0) == 0);
    } else {
      std::vector<Record> records;
      for (size_t i = 0; i < tasks_.size(); ++i) {
        const json& r = j["results"][i];
        const std::string s = r.value("status", "error");
        Record rec = record(i, round[i]);
        rec.status = s == "ok" ? Status::kOk : s == "wrong" ? Status::kWrong : Status::kError;
        rec.time_us = r.value("time_us", 0.0);
        rec.detail = r.value("detail", "");
        if (rec.status == Status::kOk && !(rec.time_us > 0)) continue;  // a task with no step timed
        take(i, rec, trial[i]);
        records.push_back(rec);
      }
      append_records(o_.records, records);
    }
    const double took = std::chrono::duration<double>(Clock::now() - t0).count();
    round_s_ = rounds_ == 1 ? took : 0.7 * round_s_ + 0.3 * took;
    if (o_.progress) o_.progress(status_line(), false);
  }

  Record record(size_t i, const KernelChoice& c) const {
    Record r;
    r.key = tasks_[i].result.key;
    r.choice = c;
    r.target = target_;
    r.model = o_.model;
    return r;
  }

  void take(size_t i, const Record& r, bool is_trial) {
    TaskState& t = tasks_[i];
    const std::string text = gemm_ops::to_string(r.choice);
    if (is_trial) {
      ++t.result.trials;
      ++trials_;
      ++t.since_gain;
    }
    if (r.status == Status::kOk) {
      t.times[text].push_back(r.time_us);
    } else {
      t.invalid.insert(text);
      if (is_trial) {
        ++t.result.invalid;
        ++invalid_;
      }
    }
    t.update_best();
  }

  // A round that crashed, hung or answered nonsense: with one new choice in it, that choice is
  // recorded as invalid; with several, each is tried alone in the next rounds.
  void round_failed(const std::vector<KernelChoice>& round, const std::vector<bool>& trial, const std::string& why,
                    bool timeout) {
    ++failed_rounds_;
    std::vector<size_t> tried;
    for (size_t i = 0; i < tasks_.size(); ++i)
      if (trial[i]) tried.push_back(i);
    if (tried.size() == 1) {
      Record r = record(tried[0], round[tried[0]]);
      r.status = timeout ? Status::kTimeout : Status::kCrashed;
      r.detail = why;
      take(tried[0], r, true);
      append_records(o_.records, {r});
      return;
    }
    if (tried.empty()) throw Error(ErrorKind::kInternal, "tune: a round of known-good choices failed: " + why);
    for (size_t i : tried) suspects_.push_back({i, round[i]});
  }

  std::string status_line() const {
    int finished = 0;
    for (const auto& t : tasks_) finished += t.done;
    const TuneSummary s = summary();
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "[%s / %s] round %d | tasks %d/%zu done | trials %d (%d invalid) | tasks' time %.2f -> %.2f ms (%.2fx)",
                  mmss(elapsed()).c_str(), mmss(o_.budget_s).c_str(), rounds_, finished, tasks_.size(), trials_,
                  invalid_, s.default_total_us / 1000, s.tuned_total_us / 1000,
                  s.tuned_total_us > 0 ? s.default_total_us / s.tuned_total_us : 1.0);
    return buf;
  }

  TuneSummary summary() const {
    TuneSummary s;
    for (const auto& t : tasks_) {
      s.tasks.push_back(t.result);
      if (t.result.default_us <= 0) continue;
      s.default_total_us += t.result.count * t.result.default_us;
      s.tuned_total_us += t.result.count * (t.result.best_us > 0 ? t.result.best_us : t.result.default_us);
    }
    s.trials = trials_;
    s.invalid = invalid_;
    s.rounds = rounds_;
    s.failed_rounds = failed_rounds_;
    s.elapsed_s = elapsed();
    return s;
  }

  const TuneOptions& o_;
  WorkerProcess worker_;
  std::mt19937_64 rng_;
  Clock::time_point start_;
  TargetKey target_;
  bool started_ = false;
  std::vector<TaskState> tasks_;
  std::deque<std::pair<size_t, KernelChoice>> suspects_;
  int trials_ = 0, invalid_ = 0, rounds_ = 0, failed_rounds_ = 0;
  double round_s_ = 0;
};

}  // namespace

TuneSummary tune_model(const TuneOptions& options) { return Tuner(options).run(); }

}  // namespace kiln::tune
