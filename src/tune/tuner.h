// `kiln tune`'s search: measures kernel choices of a model's tasks in a worker process within a
// time budget, appending every measurement to the records file. A round gives every task still
// searching one trial at once (the worker times each task's steps inside whole-model runs);
// which choice next: a new best once more (to confirm it), then the neighbours of the task's
// best (one knob changed), then the rest of its space in a seeded random order; a task stops
// when its space is done or after `patience` trials without a 1% gain, and then runs its default
// and its best in turn (both keep getting samples as conditions drift); `verify_rounds` more
// such rounds end the search. See docs/tuning.md.
// Tests: tests/tune/test_tuner.cc.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tune/records.h"

namespace kiln::tune {

struct TuneOptions {
  std::vector<std::string> worker_argv;  // the worker's command line (kiln tune-worker ...)
  std::string records;                   // the JSON-lines file measurements are appended to
  std::string reuse;                     // records to reuse (a file or a directory); "": `records`
  std::string model;                     // the model's name for the records
  int threads = 1;
  double budget_s = 600;                 // wall time for measurements (worker start included)
  int runs = 10;                         // timed model runs per round (each task: the median), at least
  double min_round_ms = 200;             // and at least this long (small models: more runs)
  int warmup = 2;                        // untimed model runs first
  double timeout_s = 60;                 // a round taking longer has a hung candidate
  int patience = 16;                     // a task stops after this many trials without a 1% gain
  int verify_rounds = 6;                 // at the end: the defaults and the bests timed again, alternating
  uint64_t seed = 0;
  // Progress: called after every trial and at the end (done = true) with a one-line status.
  std::function<void(const std::string& line, bool done)> progress;
};

struct TaskResult {
  std::string key, op, name;
  int count = 0;
  double default_us = 0, best_us = 0;  // 0: not measured
  gemm_ops::KernelChoice best;
  int trials = 0, invalid = 0, reused = 0;  // choices measured now, of which invalid; known from the records
  int space = 0;                            // candidates in its search space
};

struct TuneSummary {
  std::string model;  // set by the caller (reports)
  std::vector<TaskResult> tasks;
  int trials = 0, invalid = 0, rounds = 0, failed_rounds = 0;
  double elapsed_s = 0;
  // The tasks' total time (count x time) with default choices and with the best ones.
  double default_total_us = 0, tuned_total_us = 0;
};

// Tunes within the budget. Records already in the file for this target (another model's, or an
// earlier run's) are reused: their choices are not measured again.
TuneSummary tune_model(const TuneOptions& options);

}  // namespace kiln::tune
