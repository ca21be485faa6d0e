// The compiled executor: runs a Model (after the pass pipeline with `fusion`, so nodes carry
// `kiln.group`) with generated kernels. Per concrete input-shape signature it builds a Plan with
// the compile steps of driver/compile/plan_builder.h (shapes by inference, microkernel steps with
// fused epilogues, generated kernels, reference-kernel fallbacks, one LLVM module, the arena).
// The result is an ExecPlan (runtime/exec_plan.h: plain data, no IR) run by execute_plan, the
// same executor that ahead-of-time compiled models use (driver/aot.h exports the last plan).
// Plans are cached in memory per shape signature (bounded LRU); they share one arena and one
// library of compiled kernels, so a signature whose kernels exist (dims that vary with the input
// sizes are kernel params) is planned without LLVM. An If/Loop/Scan node is a step
// that runs its op's kernel with each body run by a nested CompiledExecutor (the body compiled
// like a model: its inputs, then the values it captures from enclosing graphs, as inputs).
// Tests: tests/runtime/test_compiled_executor.cc
#pragma once

#include <chrono>
#include <cstdlib>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "codegen/llvm/codegen.h"
#include "core/value.h"
#include "ir/graph.h"
#include "runtime/exec_plan.h"
#include "runtime/interpreter.h"
#include "runtime/thread_pool.h"

namespace kiln {
namespace compile {
class KernelLibrary;
}

struct CompiledOptions {
  int threads = 1;            // threads of the executor's pool (0: hardware threads)
  uint64_t seed = 0;          // random ops (reference kernels)
  bool profile = false;       // per-step wall time in timings()
  size_t cache_entries = 8;   // plans kept per executor (LRU)
  bool schedule = true;       // apply the default schedule rules (off: plain loop nests)
  int64_t max_memory_bytes = 0;  // memory budget (see admit); 0: none
  // Ahead-of-time export: an If also plans the branch it does not take (on the same values; a
  // branch that fails on them stays unplanned), so that a library can hold both.
  bool plan_untaken_branches = false;
  codegen::TargetOptions target;
  // Tuned kernel choices by task key (gemm_ops::tuning_key), from `kiln tune` records already
  // narrowed to this CPU and thread count (tune/records.h); null or missing keys: the default rules.
  std::shared_ptr<const gemm_ops::TuningTable> tuning;
};

// What building a plan did and how long each phase took.
struct CompileStats {
  int generated_nodes = 0;  // nodes computed by generated kernels
  int fallback_nodes = 0;   // nodes run through their reference kernels
  int gemm_nodes = 0;       // MatMul/Gemm/Conv nodes run through sgemm (runtime/gemm_ops.h)
  int folded_nodes = 0;     // nodes whose outputs the input shapes decide: plan constants
  int control_flow_nodes = 0;  // If/Loop/Scan steps (their bodies' nodes are counted above)
  int kernels = 0;           // kernel steps
  int compiled_kernels = 0;  // distinct kernels (identical ones share code)
  int library_kernels = 0;   // of those, compiled by an earlier plan (symbolic dims): no LLVM ran for them
  int symbolic_kernels = 0;  // of those, taking dims that vary with the input sizes as params
  int reused_lowerings = 0;  // kernels whose TIR an earlier segment of the same structure gave (not lowered again)
  int tuned_gemms = 0;       // GEMM-like steps built with a tuned kernel choice (CompiledOptions::tuning)
  int external_nodes = 0;    // nodes run by external backends (kiln::External regions' bodies)
  int external_regions = 0;  // kiln::External steps
  std::map<std::string, int> fallback_ops;  // op -> nodes run through the reference kernel
  int64_t arena_bytes = 0;
  std::string shapes;       // S1: where shapes came from: "inference" or "reference run (why)"
  double shapes_ms = 0;     // S1: shape inference with the input dims bound (or the run)
  double lowering_ms = 0;   // S2: TE composition, schedules, lowering and the TIR passes
  double llvm_ms = 0;       // S3: LLVM optimization and JIT
  std::string llvm_cache;   // S3's disk cache: "hit (DIR)", "miss (DIR)", "off", or "" (no kernels)
  double total_ms = 0;
};

class CompiledExecutor {
 public:
  CompiledExecutor(const Model& model, CompiledOptions opts = {});
  ~CompiledExecutor();

  // Like Interpreter::run: `feeds` parallel to the graph inputs (None uses the default).
  std::vector<RtValue> run(const std::vector<RtValue>& feeds);
  // Same, writing the outputs into caller memory: `outputs` parallel to the graph outputs (a
  // null data pointer: a fresh tensor); the returned values view that memory. kBadInput when a
  // buffer is smaller than its output.
  std::vector<RtValue> run(const std::vector<RtValue>& feeds, const std::vector<OutputBuffer>& outputs);
  // Stats of the plan used by the last run (or built by the last compile).
  const CompileStats& stats() const { return stats_; }
  // Whether the last run planned its input-shape signature (false: a cached plan ran).
  bool last_run_planned() const { return last_run_planned_; }
  const std::vector<NodeTiming>& timings() const { return timings_; }
  // The loop nests of the last plan's kernels (TIR text), for inspection.
  std::string kernels_text() const;
  size_t cached_plans() const { return cache_.size(); }
  // Applies `tuning` (CompiledOptions::tuning) to the GEMM-like steps of the cached plans, their
  // ops re-made where the kernel choice changes, and to the plans built from now on: no
  // recompile. Returns the steps whose op was re-made. (`kiln tune`'s worker times choices in
  // the model this way; a control-flow body's plans keep theirs.)
  int retune(std::shared_ptr<const gemm_ops::TuningTable> tuning);
  // Plans (of any executor in this process) whose shapes needed a reference run (tests).
  static int64_t reference_runs_while_compiling();
  // The plan used by the last run and its kernels' TIR (for ahead-of-time export); null before
  // the first run and for models that run through the interpreter.
  const ExecPlan* last_exec_plan() const;
  const std::vector<tir::PrimFunc>* last_kernels() const;
  const Model& model() const { return model_; }
  const Graph& graph() const { return *model_.graph; }

  // Ahead-of-time export (driver/aot.cc) of an If step of the last plan (`node` indexes this
  // executor's graph): the plan the executor of branch `branch` (0 then, 1 else) ran last, its
  // kernels, that executor (for the If steps inside), and which of the step's inputs feed the
  // branch. `plan` is null when the branch never ran or its shapes depended on input values.
  struct BranchPlan {
    const CompiledExecutor* executor = nullptr;
    const ExecPlan* plan = nullptr;
    const std::vector<tir::PrimFunc>* kernels = nullptr;
    std::vector<int32_t> feeds;
  };
  BranchPlan branch_plan(int32_t node, int branch) const;

  struct Plan;

 private:
  // A control-flow body: `body` of `parent`'s model, its captured values fed after its inputs.
  CompiledExecutor(CompiledExecutor& parent, const Graph& body);
  // Cached plan, execution, and the interpreter when the plan cannot hold; feeds are checked.
  std::vector<RtValue> run_checked(std::vector<RtValue> feeds, const std::vector<OutputBuffer>& outputs);
  std::unique_ptr<Plan> build_plan(const std::vector<RtValue>& feeds);
  // Checks `plan` against the memory budget (weights, packed weights, the shared arena at the
  // larger of its size and the plan's, outputs), shrinking the arena to the plan's when that
  // makes it fit; kResourceLimit with the numbers when it cannot.
  void admit(const Plan& plan);
  std::vector<RtValue> execute(Plan& plan, const std::vector<RtValue>& feeds,
                               const std::vector<OutputBuffer>& outputs);
  // An If/Loop/Scan step: the op's kernel, its bodies run by nested executors.
  std::vector<RtValue> run_control_flow(const Node& n, const OpSchema& schema, const std::vector<const RtValue*>& ins);
  CompiledExecutor& body_executor(const Graph& body);
  // The run on the reference interpreter (value-dependent shapes; for a body, the root's).
  std::vector<RtValue> run_reference(const std::vector<RtValue>& feeds, const std::vector<OutputBuffer>& outputs,
                                     const Interpreter::ValueObserver* observe = nullptr);
  Interpreter& root_interpreter();

  std::unique_ptr<Model> body_model_;  // a body: its graph as a model (declared before model_)
  const Model& model_;
  CompiledOptions opts_;
  CompiledExecutor* parent_ = nullptr;  // a body's executor: the enclosing graph's
  std::vector<Value*> captures_;        // a body's values from enclosing graphs (fed after its inputs)
  std::unique_ptr<ThreadPool> own_pool_;
  ThreadPool* pool_ = nullptr;          // the root's pool, shared by bodies
  std::unique_ptr<Interpreter> reference_;  // root only: runs whose plan cannot hold (see run)
  std::map<const Graph*, std::unique_ptr<CompiledExecutor>> bodies_;
  std::map<const Node*, std::vector<Value*>> step_captures_;  // per If/Loop/Scan node (run_control_flow)
  std::mt19937_64 rng_;                 // random ops in bodies
  std::list<std::pair<std::string, std::unique_ptr<Plan>>> cache_;  // most recent first
  const Plan* last_plan_ = nullptr;
  // Kernels by TIR identity, shared with the bodies' executors: a new signature compiles only
  // the kernels no cached plan has (driver/compile/plan_builder.h).
  std::shared_ptr<compile::KernelLibrary> library_;
  // One arena for every plan of this executor (runs are serialized by mu_), grown to the
  // largest signature's: a new signature faults in no fresh pages, and memory stays flat as
  // signatures come and go.
  ArenaMemory arena_{nullptr, &std::free};
  int64_t arena_capacity_ = 0;
  void bind_arena(Plan& plan);
  int64_t weight_bytes_ = 0;  // the model's initializers (memory budget)
  CompileStats stats_;
  bool last_run_planned_ = false;
  std::vector<NodeTiming> timings_;
  std::mutex mu_;
};

}  // namespace kiln
