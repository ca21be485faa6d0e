// The compile steps of the compiled executor: a Model (after the pass pipeline, nodes carrying
// `kiln.group`) and one input-shape signature become an ExecPlan plus its kernels. One member
// function per step, in the order build() runs them, each step in its own file:
//   S0 slots: one per value of the main graph, constants bound              plan_builder.cc
//   S1 shapes: inference with the input dims bound (pass/bind_shapes.h), a
//      reference run only where it stops; shape-only values become constants plan_shapes.cc
//   S2 steps, per node in group order:
//      GEMM-like nodes on the microkernels, with fused epilogues, input
//      scales and the stem's MaxPool                                          gemm_steps.cc
//      runs of lowerable nodes composed into one TE kernel each, scheduled
//      by the default rules (default_schedule.cc) and lowered to TIR          lower_kernels.cc
//      kiln::External regions: their backend's module, loaded for these shapes  external_steps.cc
//      everything else a reference-kernel (fallback) step
//   S3 codegen: the kernels no earlier plan compiled, in one LLVM module     plan_builder.cc
//   S4 arena: lifetimes, concats in place, offsets in one arena             arena.cc
// Tests: tests/runtime/test_compiled_executor.cc and the suites that run the compiled engine.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "codegen/llvm/codegen.h"
#include "driver/compiled_executor.h"
#include "ops/registry.h"
#include "runtime/exec_plan.h"
#include "runtime/gemm_ops.h"
#include "pass/bind_shapes.h"
#include "runtime/interpreter.h"
#include "te/te.h"
#include "tir/ir.h"

namespace kiln::compile {

// What build() makes: the plan, its kernels and how it was made.
struct BuiltPlan {
  ExecPlan exec;
  std::vector<const OpSchema*> schemas;  // node index -> schema (fallback steps)
  std::vector<tir::PrimFunc> funcs;      // the plan's distinct kernels
  std::vector<std::shared_ptr<codegen::JitModule>> modules;  // where their code lives
  CompileStats stats;
};

// Compiled kernels by TIR identity (kernel_identity), shared by the plans of one executor and
// its bodies' executors: a plan for a new input-shape signature whose kernels an earlier plan
// compiled (symbolic-shape kernels) runs no LLVM. Entries live as long as a plan holds their
// module or it is among the kKeptModules most recently used ones (so a schedule variant that
// the plan cache's LRU dropped is not compiled again), so memory stays bounded.
class KernelLibrary {
 public:
  struct Kernel {
    codegen::KernelFn fn = nullptr;
    std::shared_ptr<codegen::JitModule> module;
  };
  std::optional<Kernel> find(const std::string& identity);
  void add(const std::string& identity, codegen::KernelFn fn, const std::shared_ptr<codegen::JitModule>& module);

 private:
  struct Entry {
    codegen::KernelFn fn = nullptr;
    std::weak_ptr<codegen::JitModule> module;
  };
  void keep(const std::shared_ptr<codegen::JitModule>& module);  // (with mu_ held)
  static constexpr size_t kKeptModules = 32;
  std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;
  std::vector<std::shared_ptr<codegen::JitModule>> kept_;  // most recently used last
};

// The values an If/Loop/Scan step takes after the node's own inputs: what its bodies read from
// enclosing graphs, constants excepted (read in place), in first-use order. PlanBuilder lays the
// step out so and CompiledExecutor::run_control_flow reads it back.
std::vector<Value*> step_captures(const Node& n);
// The same for one body: a nested executor's inputs after the body's own.
std::vector<Value*> body_captures(const Graph& body);

// KILN_LOG_COMPILED=1: why nodes fall back (lowering declined or failed, kernel build errors).
void log(const std::string& msg);
bool log_enabled();  // (for messages that cost something to build)

// The code generator's options for `o`: a "native" CPU is limited to the ISA the microkernels
// use (target::Target::host(): KILN_ISA=avx2 on an AVX-512 CPU makes generated code AVX2 too);
// a named CPU is left as given.
codegen::TargetOptions codegen_target(const codegen::TargetOptions& o);
// A kernel's TIR with its own name and the node numbers in its identifiers ("n123_out")
// replaced by their order of appearance: equal for the kernels of repeated layers.
std::string kernel_identity(const tir::PrimFunc& f);
// Plans whose shapes needed a reference run (process-wide; tests assert on it).
int64_t reference_runs();

// Runs the model (or body) on the reference interpreter, showing every value it computes: the
// shape step where inference stops.
using ShapeRun = std::function<void(const std::vector<RtValue>& feeds, const Interpreter::ValueObserver& observe)>;

class PlanBuilder {
 public:
  // `captures`: for a control-flow body, the values it reads from enclosing graphs, planned as
  // inputs after the graph's own (feeds follow the same order).
  PlanBuilder(const Model& model, const CompiledOptions& opts, const std::vector<Value*>& captures,
              ShapeRun shape_run, KernelLibrary& library, BuiltPlan& plan);
  void build(const std::vector<RtValue>& feeds);

 private:
  // A run of consecutive lowerable nodes being composed into one kernel.
  struct Segment {
    std::vector<int> nodes;
    std::vector<std::vector<int>> constants_read;  // per node: the inputs its lowering read as constants
    std::unordered_map<const Value*, te::Tensor> tensors;  // values computed in the segment
    std::vector<std::pair<const Value*, te::Tensor>> placeholders;
    int next_placeholder = 0;
    // Dim variables of the segment's kernel (symbolic-shape kernels): one per distinct size
    // among the dims that vary with the input sizes, named in creation order ("dim0", ...), so
    // that another signature's segment of the same structure lowers to the same TIR.
    std::vector<std::pair<int64_t, tir::Expr>> dim_vars;
  };
  // A kernel lowered earlier in this plan: a segment with the same structure (segment_key) whose
  // nodes' lowerings saw the same constants reuses its TIR instead of lowering again.
  struct LoweredKernel {
    size_t func = 0;  // index into plan->funcs
    struct Read {
      size_t node;  // index in the segment
      size_t input;
      const Tensor* value;  // the constant seen, or nullptr
    };
    std::vector<Read> reads;
  };
  // A Mul deferred to the conv after it as its input scale (gemm_steps.cc).
  struct ScaledInput {
    gemm_ops::GemmDesc desc;               // the conv's, reading x and the scale
    std::vector<int32_t> inputs;           // the step's input slots, parallel to desc.operands
    std::shared_ptr<gemm_ops::GemmOp> op;  // made from desc (without an epilogue)
  };

  // S0 (plan_builder.cc)
  void plan_slots();
  void add_slot(const Value* v);
  std::vector<int32_t> slot_list(const std::vector<Value*>& vs);
  // S1 (plan_shapes.cc)
  void plan_shapes(const std::vector<RtValue>& feeds);
  void fold_shape_values();
  const Tensor* constant_of(const Value* v);
  void find_variable_dims(const std::vector<RtValue>& feeds, const BoundShapes& bound);
  // A value's dims for lowering (rank 0 as [1]): dims that vary with the input sizes as the
  // segment's dim variables, the others as constants.
  std::vector<tir::Expr> lowering_dims(const Value* v);
  // The values of a kernel's scalar params (its dim variables) in this segment.
  std::vector<int64_t> kernel_scalars(tir::PrimFunc& f);
  // Consumers, producers, execution order (plan_builder.cc).
  void index_graph();
  void anchors_first();
  int64_t group_of(int i);
  // S2 (plan_builder.cc: the walk; gemm_steps.cc; lower_kernels.cc)
  void plan_steps();
  PlanStep node_step(int i, PlanStep::Kind kind);
  PlanArg make_out_arg(const Value* v);
  void add_fallback(int i);
  void find_input_scales();
  bool add_gemm_step(int i);
  void add_external_step(int i);  // external_steps.cc
  gemm_ops::Operand operand_of(const Value* v, bool& known);
  int32_t add_operand(gemm_ops::GemmDesc& d, std::vector<int32_t>& inputs, const Value* v);
  const Value* absorb_epilogue(int i, gemm_ops::GemmDesc& d, std::vector<int32_t>& inputs, std::vector<int>& chain);
  const Value* absorb_requantize(int i, gemm_ops::GemmDesc& d, std::vector<int32_t>& inputs, std::vector<int>& chain);
  struct ScaleProduct {
    int mul = -1;
    const Value *factor = nullptr, *constant = nullptr;
  };
  ScaleProduct scale_product(const Value* v, int i);
  std::string epilogue_role(int c, const std::string& into);
  int max_pool_after(const Value* v, int i);
  // The outputs of node n that are used (graph outputs or consumed; a single output always).
  std::vector<int> step_outputs(const Node& n);
  std::optional<gemm_ops::GemmDesc> desc_of(const Node& n);
  bool tensor_ok(const Value* v);
  void lower_node(int i);
  void flush();
  std::string segment_key(const std::vector<std::pair<const Value*, te::Tensor>>& outputs);
  std::optional<size_t> reusable_kernel(const std::string& key);
  void remember_kernel(const std::string& key, size_t func);
  // S3, S4
  void plan_codegen();
  void share_identical_kernels();
  void plan_arena();  // arena.cc

  const Model& model_;
  const Graph& g;
  const CompiledOptions& opts_;
  const std::vector<Value*>& captures_;
  ShapeRun shape_run_;
  KernelLibrary& library_;
  BuiltPlan* plan;
  ExecPlan& ex;

  std::vector<const Value*> values;               // slot -> value
  std::unordered_map<const Value*, int> slot_of;  // value -> slot
  std::unordered_map<const Value*, Tensor> small_values;  // S1: values the shapes decide
  std::unordered_map<const Value*, const Tensor*> folded;  // of those, the plan constants
  std::unordered_set<int> folded_nodes;
  // S1: per slot, which dims vary with the input sizes (found by binding shapes a second time
  // with the symbolic input dims changed); lowered as dim variables, so one kernel serves them all.
  std::vector<std::vector<bool>> variable_dims;
  int nnodes = 0;
  std::unordered_map<const Value*, std::vector<int>> consumers;  // value -> consuming nodes
  std::unordered_map<const Value*, int> producer;
  std::unordered_set<const Value*> graph_outputs;
  std::vector<int> order;  // execution order: groups in id order, nodes of a group in node order
  std::vector<size_t> pos_in_order;
  bool grouped = false;
  // S2 state
  Segment seg;
  int64_t seg_group = -2;
  int kernel_count = 0;
  std::vector<std::string> func_identities;  // parallel to plan->funcs (kernel_identity)
  std::unordered_map<std::string, std::vector<LoweredKernel>> lowered;  // segment_key -> kernels
  std::unordered_set<int> absorbed;                   // nodes run in a GEMM step's epilogue
  std::unordered_map<int, ScaledInput> scaled_input;  // conv node -> its deferred Mul
  std::unordered_set<int> deferred_muls;
};

// The sizes of this plan's dim variables (symbolic-shape kernels): the schedule rules decide on
// them (how much work, whether a loop is long enough to vectorize), so two sizes whose
// decisions differ get two kernels, and two whose decisions agree share one.
using DimHints = std::unordered_map<const tir::ExprNode*, int64_t>;

// The kernel of one segment: inlines the intermediates, applies the default schedule rules
// (when `schedule`; vector loops of `lanes` elements) and lowers to TIR (default_schedule.cc).
// Throws when lowering fails.
tir::PrimFunc lower_with_default_schedule(const std::vector<te::Tensor>& out_tensors,
                                          const std::vector<te::Tensor>& computes, const std::vector<te::Tensor>& args,
                                          const std::string& name, bool schedule, int lanes,
                                          const DimHints& hints = {});
// The default rules' vector loop length for the host target (schedule_lanes in default_schedule.cc).
int schedule_lanes();

}  // namespace kiln::compile
