// Tuning tasks of a compiled plan and the timing of one kernel choice (see tasks.h).
#include "tune/tasks.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "core/error.h"
#include "runtime/tuning_space.h"

namespace kiln::tune {

std::vector<Task> extract_tasks(const ExecPlan& plan, int threads) {
  std::vector<Task> tasks;
  std::map<std::string, size_t> index;
  for (const PlanStep& st : plan.steps) {
    if (st.kind != PlanStep::Kind::kGemm) continue;
    gemm_ops::GemmDesc d = plan.bound_desc(st);
    if (!tune_space::tunable(d)) continue;
    const std::string key = gemm_ops::tuning_key(d);
    if (key.empty()) continue;
    auto it = index.find(key);
    if (it != index.end()) {
      ++tasks[it->second].count;
      continue;
    }
    Task t;
    t.key = key;
    t.count = 1;
    t.op = st.op;
    t.name = st.name;
    d.choice = {};
    t.candidates = tune_space::candidates(d, threads);
    t.desc = std::move(d);
    index[key] = tasks.size();
    tasks.push_back(std::move(t));
  }
  return tasks;
}

std::vector<Task> model_tasks(CompiledExecutor& executor, const std::vector<RtValue>& feeds, int threads) {
  executor.run(feeds);
  const ExecPlan* plan = executor.last_exec_plan();
  return plan ? extract_tasks(*plan, threads) : std::vector<Task>{};
}

ChoiceCheck::ChoiceCheck(const Task& task, uint64_t seed) : task_(task) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const auto& ops = task.desc.operands;
  values_.resize(ops.size());
  ins_.assign(ops.size(), nullptr);
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!ops[i].present) continue;
    if (ops[i].constant) {
      values_[i] = RtValue(*ops[i].constant);
    } else {
      if (ops[i].dtype != DType::kFloat32)
        throw Error(ErrorKind::kUnsupported, "tune: task '" + task.key + "' has a run-time operand that is not float32");
      Tensor x = Tensor::uninitialized(DType::kFloat32, ops[i].dims);
      float* p = x.data<float>();
      for (int64_t k = 0; k < x.numel(); ++k) p[k] = uni(rng);
      values_[i] = RtValue(std::move(x));
    }
    ins_[i] = &values_[i];
  }
  gemm_ops::GemmDesc d = task.desc;
  d.choice = {};
  std::unique_ptr<gemm_ops::GemmOp> op = gemm_ops::make_gemm_op(d);
  if (!op) throw Error(ErrorKind::kUnsupported, "tune: no kernel covers task '" + task.key + "'");
  reference_ = op->run(ins_).clone();
}

Check ChoiceCheck::check(const gemm_ops::KernelChoice& choice) const {
  Check c;
  try {
    gemm_ops::GemmDesc d = task_.desc;
    d.choice = choice;
    std::unique_ptr<gemm_ops::GemmOp> op = gemm_ops::make_gemm_op(d);
    if (!op) {
      c.status = Status::kError;
      c.detail = "no kernel for this choice";
      return c;
    }
    const Tensor y = op->run(ins_);
    if (y.dims() != reference_.dims()) {
      c.status = Status::kWrong;
      c.detail = "output dims differ from the default kernel's";
      return c;
    }
    const float *a = y.data<float>(), *b = reference_.data<float>();
    double scale = 0, err = 0;
    for (int64_t k = 0; k < y.numel(); ++k) {
      scale = std::max(scale, double(std::fabs(b[k])));
      const double e = std::fabs(double(a[k]) - double(b[k]));
      err = std::isnan(e) ? INFINITY : std::max(err, e);
    }
    c.max_rel_err = err / std::max(scale, 1e-30);
    if (!(c.max_rel_err <= 2e-3)) {
      c.status = Status::kWrong;
      c.detail = "max relative error " + std::to_string(c.max_rel_err) + " against the default kernel";
    }
  } catch (const std::exception& e) {
    c.status = Status::kError;
    c.detail = e.what();
  }
  return c;
}

}  // namespace kiln::tune
