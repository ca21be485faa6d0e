// Tuning records: one JSON object per line (`kiln tune` appends them), and the table of best
// kernel choices they give for this CPU and thread count (what --records and
// kiln.load(records=...) apply through CompiledOptions::tuning). Format: docs/tuning.md.
// Tests: tests/tune/test_records.cc.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "driver/offload.h"
#include "runtime/gemm_ops.h"

namespace kiln::tune {

// The machine a measurement belongs to: records transfer only to the same CPU model, ISA and
// thread count.
struct TargetKey {
  std::string cpu;  // target::Target::cpu_name ("unknown" when empty)
  std::string isa;  // "avx512", "avx2", "generic"
  int threads = 1;
  bool operator==(const TargetKey& o) const { return cpu == o.cpu && isa == o.isa && threads == o.threads; }
  std::string describe() const;  // "AMD EPYC ... / avx512 / 2 threads"
};
// This process's target (Target::host(), KILN_ISA applied) at `threads` threads.
TargetKey host_target(int threads);

enum class Status { kOk, kWrong, kCrashed, kTimeout, kError };
const char* status_name(Status s);  // "ok", "wrong", "crashed", "timeout", "error"

struct Record {
  std::string key;                  // gemm_ops::tuning_key
  gemm_ops::KernelChoice choice;
  TargetKey target;
  Status status = Status::kOk;
  double time_us = 0;               // median of the timed runs (status ok)
  std::string detail;               // why it is not ok, or "" 
  std::string model;                // the model it was tuned on (informational)
  // Offload records (key offload_key(model_fingerprint)): the backend the whole model ran with
  // ("" = kiln's own kernels); time_us is the model's median run.
  std::string offload;
  std::string kiln_version;
};

std::string to_json_line(const Record& r);  // one line, no newline
// Every record of a JSON-lines file, or of every *.jsonl file of a directory in name order
// (kBadInput naming the file and line on a malformed one; a missing path is an empty list when
// `missing_ok`).
std::vector<Record> read_records(const std::string& path, bool missing_ok = false);
// Appends records to `path` (created when missing), flushed line by line.
void append_records(const std::string& path, const std::vector<Record>& records);

using gemm_ops::TuningTable;

// The median of `v` (of an even count, the upper one), as records, rounds and the best choice
// use it; 0 for none.
double median(std::vector<double> v);

// What the records say of one task on one target.
struct TaskRecords {
  double default_us = 0, best_us = 0;  // median ok time of the default choice, the lowest of any choice's (0: none)
  gemm_ops::KernelChoice best;         // the choice with best_us (ties: the first in file order)
  int measured = 0, invalid = 0;       // records, of which not ok
};
// The choice --records applies for a task with these records: the best when it is not the
// default and at least 2% faster than the default's median (when that was measured), else the
// default (measurement noise is ~1-2%).
gemm_ops::KernelChoice applied_choice(const TaskRecords& t);

// Per task key, the records for `target`; `other` counts the records for other targets.
std::map<std::string, TaskRecords> summarize(const std::vector<Record>& records, const TargetKey& target,
                                             int64_t* other = nullptr, std::string* other_target = nullptr);

// Per task key, applied_choice of its records for `target` where that is not the default;
// `note` says how many records were for another
// target and were ignored ("" when none).
TuningTable best_choices(const std::vector<Record>& records, const TargetKey& target, std::string* note = nullptr);

// read_records + best_choices for host_target(threads), null for an empty `path`; the note goes
// to stderr (CLI and Python: "kiln: records: ...").
std::shared_ptr<const TuningTable> load_tuning(const std::string& path, int threads);

// The key of a model's offload records.
std::string offload_key(const std::string& fingerprint);
// Per model fingerprint, the backend the records found fastest for `target`: its median at least
// 2% under kiln's own (measured too), else none (not in the table).
OffloadTable best_offload(const std::vector<Record>& records, const TargetKey& target);
// read_records + best_offload for host_target(threads); null for an empty `path`.
std::shared_ptr<const OffloadTable> load_offload_choices(const std::string& path, int threads);

}  // namespace kiln::tune
