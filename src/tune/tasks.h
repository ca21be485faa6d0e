// Tuning tasks: the distinct tunable kernel workloads of a compiled model (one per
// gemm_ops::tuning_key, with how many steps share it), and the correctness check of a kernel
// choice of a
// task checked against the default choice's output on seeded random inputs. This runs inside the
// measurement worker (tune/worker.h), which times the choices in the model itself. Tests: tests/tune/test_tasks.cc.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "driver/compiled_executor.h"
#include "runtime/exec_plan.h"
#include "tune/records.h"

namespace kiln::tune {

struct Task {
  std::string key;            // gemm_ops::tuning_key
  gemm_ops::GemmDesc desc;    // the first step's descriptor, constants bound to the plan's
  int count = 0;              // steps of the model with this key
  std::string op, name;       // the first step's op ("Conv+Relu") and name
  std::vector<gemm_ops::KernelChoice> candidates;  // the search space, the default first
};

// Plans `executor` by running it once on `feeds`, then extract_tasks of that plan (empty for a
// model that runs on the interpreter). The tasks point into the executor's plan.
std::vector<Task> model_tasks(CompiledExecutor& executor, const std::vector<RtValue>& feeds, int threads);

// The tunable GEMM-like steps of `plan`, one task per key in first-step order; descriptors
// keep pointers into plan.constants (valid while the plan lives).
std::vector<Task> extract_tasks(const ExecPlan& plan, int threads);

struct Check {
  Status status = Status::kOk;  // kOk, kWrong (output differs), kError (no kernel, or it threw)
  double max_rel_err = 0;       // max |y - y_default| / max |y_default|
  std::string detail;
};

// One task's operands (seeded random inputs for the run-time operands) and its default
// choice's output, made once; check() compares another choice's output with it.
class ChoiceCheck {
 public:
  ChoiceCheck(const Task& task, uint64_t seed);
  // Builds the op for `choice` (packing its weights) and runs it once on the current pool: an
  // output more than 2e-3 relative off the default's is kWrong, an error thrown is kError.
  Check check(const gemm_ops::KernelChoice& choice) const;

 private:
  const Task& task_;
  std::vector<RtValue> values_;
  std::vector<const RtValue*> ins_;
  Tensor reference_;
};

}  // namespace kiln::tune
