// S4 of the compile steps (plan_builder.h): the arena. Each value that is neither a graph input,
// output nor constant is freed after its last use; kernel and GEMM outputs get offsets in one
// arena (intervals over steps, greedy best fit, largest first), so compiled steps allocate
// nothing per inference. Concats whose inputs are contiguous pieces of their output made only
// for them are computed in place.
#include <algorithm>
#include <functional>

#include "driver/compile/plan_builder.h"
#include "ops/lowering.h"
#include "pass/memory_plan.h"

namespace kiln::compile {
namespace {

constexpr int64_t kArenaAlign = kArenaAlignment;

}  // namespace

void PlanBuilder::plan_arena() {
  const int nsteps = static_cast<int>(ex.steps.size());
  const size_t nslots = values.size();
  std::vector<int> first(nslots, -1), last(nslots, -1);
  auto step_inputs = [&](const PlanStep& st, const std::function<void(int)>& f) {
    if (st.kind == PlanStep::Kind::kKernel) {
      for (const auto& a : st.args)
        if (!a.output && a.slot >= 0) f(a.slot);
    } else if (st.kind == PlanStep::Kind::kFallback || st.kind == PlanStep::Kind::kGemm ||
               st.kind == PlanStep::Kind::kExternal) {
      for (int32_t s : st.inputs)
        if (s >= 0) f(s);
    }
  };
  for (int k = 0; k < nsteps; ++k) {
    const auto& st = ex.steps[static_cast<size_t>(k)];
    step_inputs(st, [&](int s) { last[static_cast<size_t>(s)] = k; });
    for (const auto& a : st.args)
      if (a.output) first[static_cast<size_t>(a.slot)] = k;
    for (int32_t s : st.outputs)
      if (s >= 0) first[static_cast<size_t>(s)] = k;
  }
  for (size_t s = 0; s < nslots; ++s) {
    const Value* v = values[s];
    if (graph_outputs.count(v) || v->is_graph_input || constant_of(v)) continue;
    int at = last[s] >= 0 ? last[s] : first[s];
    if (at >= 0) ex.steps[static_cast<size_t>(at)].free_after.push_back(static_cast<int>(s));
  }
  // Concats in place: a Concat step whose inputs are contiguous pieces of its output (all dims
  // before the axis are 1) and are each made only for it, by an earlier step, at 64-byte-aligned
  // offsets, becomes an empty step; its producers write straight into its output's block.
  std::unordered_map<PlanArg*, std::pair<const PlanArg*, int64_t>> inside;  // piece -> (concat output, bytes in)
  std::unordered_map<const PlanArg*, int> piece_begin;  // concat output -> its first producer's step
  {
    std::unordered_map<int32_t, std::pair<int, PlanArg*>> made_by;  // slot -> (step, output arg)
    for (int k = 0; k < nsteps; ++k)
      for (auto& a : ex.steps[static_cast<size_t>(k)].args)
        if (a.output && !a.graph_output) made_by[a.slot] = {k, &a};
    for (int k = 0; k < nsteps; ++k) {
      PlanStep& st = ex.steps[static_cast<size_t>(k)];
      if (st.kind != PlanStep::Kind::kKernel || st.op != "Concat") continue;
      PlanArg* out = nullptr;
      for (auto& a : st.args)
        if (a.output) out = out ? nullptr : &a;
      if (!out || out->graph_output) continue;
      auto pit = producer.find(values[static_cast<size_t>(out->slot)]);
      if (pit == producer.end()) continue;
      const Node& cn = *g.nodes[static_cast<size_t>(pit->second)];
      const Attribute* ax = cn.attr("axis");
      const int64_t axis = lower::norm_axis(ax && ax->kind == Attribute::Kind::kInt ? ax->i : 0,
                                            static_cast<int64_t>(out->dims.size()));
      if (axis < 0) continue;
      bool ok = true;
      for (int64_t d = 0; d < axis; ++d) ok &= out->dims[static_cast<size_t>(d)] == 1;
      std::vector<std::pair<PlanArg*, int64_t>> pieces;
      std::unordered_set<const Value*> seen;
      int64_t bytes = 0, first_step = k;
      for (const Value* v : cn.inputs) {
        if (!ok) break;
        auto mit = v ? made_by.find(slot_of[v]) : made_by.end();
        auto cit = v ? consumers.find(v) : consumers.end();
        ok = v && !constant_of(v) && seen.insert(v).second && cit != consumers.end() && cit->second.size() == 1 &&
             mit != made_by.end() &&
             mit->second.first < k && !inside.count(mit->second.second) && !piece_begin.count(mit->second.second) &&
             bytes % kArenaAlign == 0 &&
             mit->second.second->dtype == out->dtype;
        if (!ok) break;
        pieces.emplace_back(mit->second.second, bytes);
        first_step = std::min<int64_t>(first_step, mit->second.first);
        bytes += lower::numel_of(mit->second.second->dims) * static_cast<int64_t>(dtype_size(out->dtype));
      }
      if (!ok || pieces.empty() || bytes != lower::numel_of(out->dims) * static_cast<int64_t>(dtype_size(out->dtype)))
        continue;
      for (auto& [a, off] : pieces) inside[a] = {out, off};
      piece_begin[out] = static_cast<int>(first_step);
      st.kind = PlanStep::Kind::kEmpty;  // the pieces are already in place
    }
  }
  // Kernel and GEMM outputs (not graph outputs, not concat pieces) in one arena (place_blocks,
  // shared with inspect's planner).
  std::vector<PlanArg*> args;
  std::vector<ArenaBlock> blocks;
  for (int k = 0; k < nsteps; ++k)
    for (auto& a : ex.steps[static_cast<size_t>(k)].args)
      if (a.output && !a.graph_output && !inside.count(&a)) {
        const int64_t bytes = lower::numel_of(a.dims) * static_cast<int64_t>(dtype_size(a.dtype));
        auto pb = piece_begin.find(&a);
        const int begin = pb == piece_begin.end() ? k : pb->second;
        args.push_back(&a);
        blocks.push_back({std::max<int64_t>(bytes, kArenaAlign), begin, std::max(k, last[static_cast<size_t>(a.slot)]), -1});
      }
  const int64_t arena = place_blocks(blocks);
  ex.arena_bytes = arena;
  for (size_t b = 0; b < blocks.size(); ++b) args[b]->arena_offset = blocks[b].offset;
  for (auto& [piece, where] : inside) piece->arena_offset = where.first->arena_offset + where.second;
  // The executor allocates it once the plan fits the memory budget (CompiledExecutor::admit).
  plan->stats.arena_bytes = arena;
}

}  // namespace kiln::compile
