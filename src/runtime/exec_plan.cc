// The plan executor shared by the JIT compiled executor and AOT compiled models (exec_plan.h).
#include "runtime/exec_plan.h"
#include "runtime/thread_pool.h"

#include <chrono>
#include <cstring>
#include <new>

#include "core/error.h"
#include "core/run_control.h"
#include "core/shape.h"

namespace kiln {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kArenaAlign = 64;

ErrorLocation step_location(const PlanStep& st) {
  ErrorLocation loc;
  loc.node = st.name;
  loc.op = st.op;
  return loc;
}

// A sequence that a fallback step (SequenceInsert, SequenceConstruct, ...) built from arena
// values: its items are copied out, since the arena is reused by later steps and plans.
void detach_sequence(RtValue& r, const char* lo, const char* hi) {
  if (!r.is_sequence()) return;
  for (Tensor& t : r.sequence) {
    const char* p = static_cast<const char*>(t.raw());
    if (p && p >= lo && p < hi) t = t.clone();
  }
}

}  // namespace

ArenaMemory allocate_arena_memory(int64_t bytes) {
  ArenaMemory memory(nullptr, &std::free);
  if (bytes <= 0) return memory;
  memory.reset(static_cast<char*>(std::aligned_alloc(kArenaAlign, static_cast<size_t>((bytes + kArenaAlign - 1) / kArenaAlign * kArenaAlign))));
  if (!memory) throw Error(ErrorKind::kBadInput, "out of memory allocating the " + format_bytes(bytes) + " arena");
  return memory;
}

void ExecPlan::allocate_arena() {
  arena.reset();
  arena = allocate_arena_memory(arena_bytes);
  bind_arena(arena.get());
}

void ExecPlan::bind_arena(char* base) {
  arena_data = base;
  for (auto& st : steps)
    for (auto& a : st.args)
      if (a.output && !a.graph_output) {
        if (a.arena_offset < 0 || a.arena_offset > arena_bytes)
          throw Error(ErrorKind::kInvalidModel, "plan: kernel output outside the arena");
        a.view = Tensor::view(a.dtype, a.dims, base + a.arena_offset);
        if (st.kind == PlanStep::Kind::kGemm && st.gemm_op) st.gemm_op->set_output(a.view);
      }
}

void ExecPlan::make_gemm_ops() {
  for (auto& st : steps)
    if (st.kind == PlanStep::Kind::kGemm && !st.gemm_op) make_gemm_op(st);
}

gemm_ops::GemmDesc ExecPlan::bound_desc(const PlanStep& st) const {
  gemm_ops::GemmDesc d = st.gemm;
  for (size_t i = 0; i < d.operands.size() && i < st.inputs.size(); ++i) {
    const int32_t s = st.inputs[i];
    d.operands[i].constant = nullptr;
    if (s < 0 || slots.at(static_cast<size_t>(s)).constant < 0) continue;
    const Tensor& c = constants.at(static_cast<size_t>(slots[static_cast<size_t>(s)].constant));
    if (c.dims() != d.operands[i].dims || c.dtype() != d.operands[i].dtype)
      throw Error(ErrorKind::kInvalidModel, "plan: a GEMM weight does not match its descriptor", step_location(st));
    d.operands[i].constant = &c;
  }
  return d;
}

void ExecPlan::make_gemm_op(PlanStep& st) {
  st.gemm_op = gemm_ops::make_gemm_op(bound_desc(st));
  if (!st.gemm_op)
    throw Error(ErrorKind::kInvalidModel, "plan: the sgemm path does not cover this step", step_location(st));
  // Its output's place in the arena, when allocate_arena bound it already.
  for (const auto& a : st.args)
    if (a.output && a.view.defined()) st.gemm_op->set_output(a.view);
}

int64_t ExecPlan::output_bytes() const {
  int64_t total = 0;
  for (int32_t s : outputs) {
    const PlanSlot& slot = slots[static_cast<size_t>(s)];
    if (slot.tensor && slot.constant < 0) total += checked_numel(slot.dims) * static_cast<int64_t>(dtype_size(slot.dtype));
  }
  return total;
}

int64_t ExecPlan::packed_weight_bytes() const {
  std::vector<bool> seen(constants.size(), false);
  int64_t total = 0;
  for (const PlanStep& st : steps) {
    if (st.kind != PlanStep::Kind::kGemm) continue;
    for (int32_t s : st.inputs) {
      const int32_t c = s < 0 ? -1 : slots[static_cast<size_t>(s)].constant;
      if (c < 0 || seen[static_cast<size_t>(c)]) continue;
      seen[static_cast<size_t>(c)] = true;
      total += static_cast<int64_t>(constants[static_cast<size_t>(c)].nbytes());
    }
  }
  return total;
}

void ExecPlan::load_externals(int threads) {
  for (PlanExternal& x : externals) {
    if (x.module) continue;
    std::shared_ptr<const ext::Backend> b = ext::find_backend(x.backend);
    if (!b)
      throw Error(ErrorKind::kUnsupported, "region '" + x.region.name + "' needs the external backend '" + x.backend +
                                               "', which is not registered here");
    for (size_t v = 0; v < x.region.values.size() && v < x.constants.size(); ++v)
      if (x.constants[v] >= 0) x.region.values[v].data = constants.at(static_cast<size_t>(x.constants[v])).raw();
    ext::ModuleOptions o;
    o.threads = threads;
    try {
      x.module = b->load(x.artifact, x.region, o);
    } catch (const std::exception& e) {
      throw Error(ErrorKind::kUnsupported, "backend '" + x.backend + "' failed to load region '" + x.region.name + "': " + e.what());
    }
    if (!x.module) throw Error(ErrorKind::kInternal, "backend '" + x.backend + "' returned no module for region '" + x.region.name + "'");
  }
}

void use_backend_thread_teams(const ExecPlan& plan, ThreadPool& pool) {
  for (const PlanExternal& x : plan.externals) {
    std::shared_ptr<const ext::Backend> b = ext::find_backend(x.backend);
    if (b && b->thread_team()) pool.use_team(b->thread_team());
  }
}

bool ExecPlan::has_fallback() const {
  for (const auto& st : steps)
    if (st.kind == PlanStep::Kind::kFallback) return true;
  return false;
}

namespace {

// A kIf step: the plan of the branch its condition picks, on the inputs that branch reads.
std::vector<RtValue> run_branch(ExecPlan& plan, const PlanStep& st, const std::vector<const RtValue*>& ins) {
  const RtValue* cond = ins.empty() ? nullptr : ins[0];
  if (!cond || !cond->is_tensor() || cond->tensor.numel() != 1)
    throw Error(ErrorKind::kBadInput, "If: the condition is not a tensor of one element");
  const size_t b = cond->tensor.get_double(0) != 0.0 ? 0 : 1;
  const int32_t index = b < st.branches.size() ? st.branches[b] : -1;
  if (index < 0)
    throw Error(ErrorKind::kUnsupported, std::string("this library holds no plan for the ") +
                                             (b == 0 ? "then" : "else") +
                                             " branch of this If (it was not taken, or could not be planned, while "
                                             "compiling for these input shapes)");
  ExecPlan& body = *plan.linked.at(static_cast<size_t>(index));
  std::vector<RtValue> feeds;
  for (int32_t k : st.branch_feeds.at(b)) {
    const RtValue* v = ins.at(static_cast<size_t>(k));
    if (!v) throw Error(ErrorKind::kBadInput, "If: a value the branch reads is absent");
    feeds.push_back(*v);
  }
  return execute_plan(body, feeds, {}, nullptr);
}

ext::TensorRef tensor_ref(const Tensor& t) {
  ext::TensorRef r;
  r.type = static_cast<ext::ElementType>(t.dtype());
  r.dims = t.dims();
  r.data = const_cast<void*>(t.raw());
  return r;
}

// A kExternal step: its outputs are already in env (arena views or fresh tensors); the backend's
// module fills them. A backend's exception names the backend and the region.
void run_external(ExecPlan& plan, const PlanStep& st, const std::vector<RtValue>& env) {
  PlanExternal& x = plan.externals.at(static_cast<size_t>(st.external));
  if (!x.module) {
    try {
      plan.load_externals(current_thread_pool().num_threads());
    } catch (const Error& e) {
      throw e.with_context(step_location(st));
    }
  }
  std::vector<ext::TensorRef> ins, outs;
  for (int32_t s : st.inputs) {
    const RtValue& v = env.at(static_cast<size_t>(s));
    if (!v.is_tensor()) throw Error(ErrorKind::kBadInput, "an input of region '" + x.region.name + "' is not a tensor", step_location(st));
    ins.push_back(tensor_ref(v.tensor));
  }
  for (const PlanArg& a : st.args) outs.push_back(tensor_ref(env.at(static_cast<size_t>(a.slot)).tensor));
  current_thread_pool().park();  // the backend brings its own threads
  try {
    x.module->run(ins, outs);
  } catch (const Error& e) {
    throw e.with_context(step_location(st));
  } catch (const std::exception& e) {
    throw Error(ErrorKind::kInternal, "backend '" + x.backend + "' failed running region '" + x.region.name + "': " + e.what(),
                step_location(st));
  }
}

}  // namespace

std::vector<RtValue> execute_plan(ExecPlan& plan, const std::vector<RtValue>& feeds,
                                  const std::vector<OutputBuffer>& out_buffers, const FallbackFn& fallback,
                                  std::vector<double>* step_ms) {
  const size_t nslots = plan.slots.size();
  KILN_CHECK(feeds.size() == plan.inputs.size());
  KILN_CHECK(out_buffers.empty() || out_buffers.size() == plan.outputs.size());
  std::vector<RtValue> env(nslots);
  for (size_t i = 0; i < plan.inputs.size(); ++i) env[static_cast<size_t>(plan.inputs[i])] = feeds[i];
  for (size_t s = 0; s < nslots; ++s)
    if (plan.slots[s].constant >= 0) env[s] = RtValue(plan.constants[static_cast<size_t>(plan.slots[s].constant)]);

  // Caller memory for graph outputs that kernels write directly (sizes checked before any work).
  std::vector<Tensor> dest(nslots);
  for (size_t i = 0; i < out_buffers.size(); ++i) {
    const OutputBuffer& b = out_buffers[i];
    if (!b.data) continue;
    const PlanSlot& ps = plan.slots[static_cast<size_t>(plan.outputs[i])];
    const std::string name = i < plan.output_names.size() ? "'" + plan.output_names[i] + "'" : std::to_string(i);
    if (!ps.tensor) throw Error(ErrorKind::kBadInput, "output " + name + " is not a tensor");
    Tensor t = Tensor::view(ps.dtype, ps.dims, b.data);
    if (b.bytes < t.nbytes())
      throw Error(ErrorKind::kBadInput, "output " + name + " needs " + std::to_string(t.nbytes()) +
                                            " bytes (" + dims_to_string(ps.dims) + "), the buffer has " +
                                            std::to_string(b.bytes));
    // Kernels need 64-byte aligned buffers (codegen.h); other memory gets a copy at the end.
    if (reinterpret_cast<uintptr_t>(b.data) % 64 != 0) continue;
    Tensor& d = dest[static_cast<size_t>(plan.outputs[i])];
    if (!d.defined()) d = t;
  }

  const char* arena_lo = plan.arena_data;
  const char* arena_hi = arena_lo + plan.arena_bytes;
  std::vector<void*> buffers;
  std::vector<const RtValue*> ins;
  const int64_t no_scalars[1] = {0};
  if (step_ms) step_ms->clear();
  for (auto& st : plan.steps) {
    check_run();  // cancellation and deadlines (core/run_control.h)
    auto start = step_ms ? Clock::now() : Clock::time_point();
    if (st.kind == PlanStep::Kind::kGemm || st.kind == PlanStep::Kind::kFallback || st.kind == PlanStep::Kind::kIf) {
      ins.clear();
      for (int32_t s : st.inputs) ins.push_back(s >= 0 ? &env[static_cast<size_t>(s)] : nullptr);
      std::vector<RtValue> outs;
      try {
        if (st.kind == PlanStep::Kind::kGemm) {
          if (!st.gemm_op) plan.make_gemm_op(st);  // deferred from the load (weights packed here)
          outs.emplace_back(st.gemm_op->run(ins));
          for (Tensor& t : st.gemm_op->extra_outputs()) outs.emplace_back(std::move(t));
        } else if (st.kind == PlanStep::Kind::kIf) {
          outs = run_branch(plan, st, ins);
        } else {
          if (!fallback) throw Error(ErrorKind::kUnsupported, "this plan has no reference kernels");
          outs = fallback(st, ins);
        }
      } catch (const Error& e) {
        throw e.with_context(step_location(st));
      } catch (const std::bad_alloc&) {
        throw Error(ErrorKind::kBadInput, "out of memory while computing the outputs", step_location(st));
      } catch (const std::exception& e) {
        throw Error(ErrorKind::kInternal, e.what(), step_location(st));
      }
      for (size_t i = 0; i < st.outputs.size() && i < outs.size(); ++i) {
        int32_t so = st.outputs[i];
        if (so < 0) continue;
        size_t s = static_cast<size_t>(so);
        RtValue& r = outs[i];
        detach_sequence(r, arena_lo, arena_hi);
        if (r.is_tensor()) {
          // A kernel may return a view of its input; arena memory is reused, so copy it out
          // (unless it is the step's own place in the arena).
          const char* p = static_cast<const char*>(r.tensor.raw());
          const bool own = !st.args.empty() && st.args[0].output && st.args[0].view.defined() &&
                           st.args[0].view.raw() == r.tensor.raw();
          if (p && p >= arena_lo && p < arena_hi && !own) r.tensor = r.tensor.clone();
          if (plan.slots[s].tensor && r.tensor.dims() != plan.slots[s].dims)
            throw PlanShapeMismatch(ErrorKind::kUnsupported,
                                    "output shape depends on input values (" + dims_to_string(r.tensor.dims()) +
                                        " vs planned " + dims_to_string(plan.slots[s].dims) + ")",
                                    step_location(st));
        }
        env[s] = std::move(r);
      }
    } else {
      buffers.resize(st.args.size());
      for (size_t k = 0; k < st.args.size(); ++k) {
        PlanArg& a = st.args[k];
        if (a.output) {
          Tensor t;
          if (!a.graph_output) t = a.view;
          else if (dest[static_cast<size_t>(a.slot)].defined()) t = dest[static_cast<size_t>(a.slot)];
          else t = Tensor::uninitialized(a.dtype, a.dims);  // the kernel writes every element
          buffers[k] = t.raw();
          env[static_cast<size_t>(a.slot)] = RtValue(std::move(t));
        } else if (a.constant >= 0) {
          buffers[k] = plan.constants[static_cast<size_t>(a.constant)].raw();
        } else {
          const RtValue& v = env[static_cast<size_t>(a.slot)];
          KILN_CHECK(v.is_tensor());
          buffers[k] = v.tensor.raw();
        }
      }
      if (st.kind == PlanStep::Kind::kKernel)
        plan.kernels[static_cast<size_t>(st.kernel)](buffers.data(), st.scalars.empty() ? no_scalars : st.scalars.data());
      else if (st.kind == PlanStep::Kind::kExternal)
        run_external(plan, st, env);
    }
    if (step_ms) step_ms->push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    for (int32_t s : st.free_after) env[static_cast<size_t>(s)] = RtValue();
  }
  std::vector<RtValue> out;
  for (size_t i = 0; i < plan.outputs.size(); ++i) {
    RtValue r = env[static_cast<size_t>(plan.outputs[i])];
    const OutputBuffer* b = i < out_buffers.size() && out_buffers[i].data ? &out_buffers[i] : nullptr;
    if (r.is_tensor()) {
      const char* p = static_cast<const char*>(r.tensor.raw());
      if (b) {
        // Outputs not written in place (sgemm, fallbacks, inputs passed through) are copied.
        if (p != b->data) {
          Tensor t = Tensor::view(r.tensor.dtype(), r.tensor.dims(), b->data);
          if (r.tensor.nbytes() > b->bytes) throw Error(ErrorKind::kBadInput, "output buffer too small");
          if (r.tensor.nbytes() > 0) std::memcpy(b->data, p, r.tensor.nbytes());
          r.tensor = t;
        }
      } else if (p && p >= arena_lo && p < arena_hi) {
        r.tensor = r.tensor.clone();
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace kiln
