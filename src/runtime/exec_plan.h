// The exportable execution plan and its executor: value slots, constants, steps (generated
// kernels, sgemm GemmOps, reference-kernel fallbacks) and the arena, as plain data without the
// IR. The compiled executor (JIT) and ahead-of-time compiled models (AOT, runtime/plan_io.h)
// run the same ExecPlan through the same execute_plan; they differ only in where the kernel
// function pointers come from (JitModule lookup vs the model library's table) and in whether
// fallback steps can exist (JIT only, through a callback). No dependency beyond core, kernels
// and the thread pool, so it is part of the runtime-only library (libkiln_runtime).
// Tests: tests/runtime/test_compiled_executor.cc, tests/capi/test_c_api.cc
#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/value.h"
#include "kiln/extension.h"
#include "runtime/gemm_ops.h"

namespace kiln {

// Generated kernel ABI (codegen/llvm/codegen.h).
using PlanKernelFn = void (*)(void* const* buffers, const int64_t* scalars);

// One argument of a kernel step.
struct PlanArg {
  int32_t slot = -1;      // value slot read (inputs) or written (outputs)
  int32_t constant = -1;  // index into ExecPlan::constants (constant inputs; slot is -1)
  bool output = false;
  bool graph_output = false;  // caller memory or a fresh tensor per run
  int64_t arena_offset = -1;  // outputs that are not graph outputs
  DType dtype = DType::kFloat32;
  std::vector<int64_t> dims;
  Tensor view;  // arena view (bound by ExecPlan::allocate_arena; not serialized)
};

struct PlanStep {
  // kIf: an If whose branches are plans of their own (ahead-of-time libraries; the JIT runs If
  // as a kFallback step with nested executors). kExternal: a region an external backend runs
  // (ExecPlan::externals).
  enum class Kind : int32_t { kKernel = 0, kGemm = 1, kFallback = 2, kEmpty = 3, kIf = 4, kExternal = 5 };
  Kind kind = Kind::kFallback;
  std::string name;  // kernel name or node name (profiles, error messages)
  std::string op;    // "Conv", "Add+Relu", ...
  int32_t kernel = -1;             // kKernel: index into ExecPlan::kernels
  // kKernel: the kernel's scalar params (its symbolic dims bound to this plan's sizes), in the
  // PrimFunc's order; empty for a kernel specialised to constant dims.
  std::vector<int64_t> scalars;
  std::vector<PlanArg> args;       // kKernel, kEmpty, kExternal (outputs only), kGemm (its output in the arena)
  std::vector<int32_t> inputs;     // kGemm, kFallback, kExternal: input slots (-1 for absent inputs)
  std::vector<int32_t> outputs;    // kGemm, kFallback: output slots (-1 for absent outputs)
  int32_t node = -1;               // kFallback: node index (the JIT's callback runs it)
  gemm_ops::GemmDesc gemm;         // kGemm (operand `constant` pointers valid only while making)
  std::shared_ptr<gemm_ops::GemmOp> gemm_op;  // kGemm, made from `gemm` (not serialized)
  std::vector<int32_t> free_after;  // slots whose last use is this step
  // kIf: inputs[0] is the condition; per branch (then, else) the index of its plan in
  // ExecPlan::linked (-1: no plan, the branch fails when taken) and which of `inputs` it is fed.
  std::vector<int32_t> branches;
  std::vector<std::vector<int32_t>> branch_feeds;
  int32_t external = -1;  // kExternal: index into ExecPlan::externals
};

// A region run by an external backend (include/kiln/extension.h): what Backend::load takes,
// kept so that compiled model libraries can load it again, and the module it made.
struct PlanExternal {
  std::string backend;
  std::string artifact;
  ext::Region region;  // every dim bound; constants' data point into ExecPlan::constants
  std::vector<int32_t> constants;  // per region value: its index in ExecPlan::constants, or -1
  std::shared_ptr<ext::RuntimeModule> module;  // made by the compile step, or on the first run
};

struct PlanSlot {
  bool tensor = false;  // false: a non-tensor value (sequences; fallback steps only)
  DType dtype = DType::kUndefined;
  std::vector<int64_t> dims;
  int32_t constant = -1;  // index into ExecPlan::constants when the value is a constant
};

// Arena memory of `bytes` (rounded up to 64-byte blocks; null for 0). kBadInput when out of
// memory. Plans own one, or several plans of one executor or library share the largest.
using ArenaMemory = std::unique_ptr<char, decltype(&std::free)>;
ArenaMemory allocate_arena_memory(int64_t bytes);

struct ExecPlan {
  std::vector<PlanSlot> slots;
  std::vector<int32_t> inputs;   // slots fed per run, in feed order
  std::vector<int32_t> outputs;  // slots returned, in output order
  std::vector<std::string> input_names, output_names;
  std::vector<Tensor> constants;  // JIT: the initializers; AOT: views into the model's blob
  std::vector<PlanStep> steps;
  std::vector<std::string> kernel_names;  // parallel to kernels
  std::vector<PlanKernelFn> kernels;
  int64_t arena_bytes = 0;
  ArenaMemory arena{nullptr, &std::free};  // when the plan owns it
  char* arena_data = nullptr;  // where the kernel outputs' views point (owned or bound)
  // The plans kIf steps run (every plan read from one blob, by index; set by the reader). A
  // branch's plan has its own arena: the enclosing plan's values are alive while it runs.
  std::vector<ExecPlan*> linked;
  std::vector<PlanExternal> externals;  // kExternal steps' regions (modules not serialized)
  // Loads the regions whose module is missing through their registered backends (kUnsupported
  // naming a backend this process or library does not have).
  void load_externals(int threads);

  // Allocates the plan's own arena and binds the kernel outputs' views into it.
  void allocate_arena();
  // Binds the views into `base` instead: at least arena_bytes, 64-byte aligned, owned by the
  // caller (the compiled executor shares one arena between the plans of its signatures).
  void bind_arena(char* base);
  // Makes every kGemm step's GemmOp from its descriptor and the constants (kInvalidModel when
  // a descriptor is not covered: a plan for a different build).
  // execute_plan makes the ones still missing on their first run.
  void make_gemm_ops();
  void make_gemm_op(PlanStep& step);
  // A kGemm step's descriptor with its constant operands pointing at this plan's constants
  // (kInvalidModel when one does not match its descriptor).
  gemm_ops::GemmDesc bound_desc(const PlanStep& step) const;
  bool has_fallback() const;
  // Memory budget accounting (kiln_options.max_memory_bytes): bytes of the graph outputs per
  // run, and of the distinct constant sgemm operands (their packed copies are about as large).
  int64_t output_bytes() const;
  int64_t packed_weight_bytes() const;
};

class ThreadPool;
// A backend of the plan's regions that lends its thread team (ext::Backend::thread_team) runs
// `pool`'s parallel loops from now on, so kiln's kernels and the backend's primitives never
// compete for cores (the compiled executor after building a plan, a library's loader).
void use_backend_thread_teams(const ExecPlan& plan, ThreadPool& pool);

// A fallback step produced a shape other than the planned one: the model's shapes depend on
// input values, so the plan (built for the shapes of one run) does not fit this run.
class PlanShapeMismatch : public Error {
 public:
  using Error::Error;
};

// Caller memory for one output (data null: a fresh tensor).
struct OutputBuffer {
  void* data = nullptr;
  size_t bytes = 0;
};

// Runs a kFallback step: `ins` parallel to step.inputs (null for absent ones); returns values
// parallel to step.outputs.
using FallbackFn = std::function<std::vector<RtValue>(const PlanStep& step, const std::vector<const RtValue*>& ins)>;

// Runs the plan on `feeds` (parallel to plan.inputs) on the calling thread's current pool; kIf
// steps run the chosen branch's plan the same way (with no fallback).
// `out_buffers` (empty, or parallel to plan.outputs) receive the outputs when given (kBadInput
// when one is smaller than the output): kernels write 64-byte aligned ones in place, others get
// a copy; returned values then view them. Feeds must be 64-byte aligned (kernel ABI). Per-step
// wall times go to `step_ms` when not null. Not reentrant for one plan (the arena is shared).
std::vector<RtValue> execute_plan(ExecPlan& plan, const std::vector<RtValue>& feeds,
                                  const std::vector<OutputBuffer>& out_buffers, const FallbackFn& fallback,
                                  std::vector<double>* step_ms = nullptr);

}  // namespace kiln
