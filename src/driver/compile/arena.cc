// S4 of the compile steps (plan_builder.h): the arena. Each value that is neither a graph input,
// output nor constant is freed after its last use; kernel and GEMM outputs get offsets in one
// arena (intervals over steps, greedy best fit, largest first), so compiled steps allocate
// nothing per inference. Concats whose inputs are contiguous pieces of their output made only
// for them are computed in place.
#include <algorithm>
#include <climits>
#include <functional>

#include "driver/compile/plan_builder.h"
#include "ops/lowering.h"

namespace kiln::compile {
namespace {

constexpr int64_t kArenaAlign = 64;

}  // namespace

void PlanBuilder::plan_arena() {
  const int nsteps = static_cast<int>(ex.steps.size());
  const size_t nslots = values.size();
  std::vector<int> first(nslots, -1), last(nslots, -1);
  auto step_inputs = [&](const PlanStep& st, const std::function<void(int)>& f) {
    if (st.kind == PlanStep::Kind::kKernel) {
      for (const auto& a : st.args)
        if (!a.output && a.slot >= 0) f(a.slot);
    } else if (st.kind == PlanStep::Kind::kFallback || st.kind == PlanStep::Kind::kGemm) {
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
  struct Block {
    PlanArg* arg;
    int64_t size, begin, end, offset;
  };
  std::vector<Block> blocks;
  for (int k = 0; k < nsteps; ++k)
    for (auto& a : ex.steps[static_cast<size_t>(k)].args)
      if (a.output && !a.graph_output && !inside.count(&a)) {
        int64_t bytes = lower::numel_of(a.dims) * static_cast<int64_t>(dtype_size(a.dtype));
        bytes = (bytes + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
        int s = a.slot;
        auto pb = piece_begin.find(&a);
        const int begin = pb == piece_begin.end() ? k : pb->second;
        blocks.push_back({&a, std::max<int64_t>(bytes, kArenaAlign), begin, std::max(k, last[static_cast<size_t>(s)]), 0});
      }
  std::vector<size_t> by_size(blocks.size());
  for (size_t i = 0; i < blocks.size(); ++i) by_size[i] = i;
  std::stable_sort(by_size.begin(), by_size.end(), [&](size_t a, size_t b) { return blocks[a].size > blocks[b].size; });
  std::vector<size_t> placed;
  int64_t arena = 0;
  for (size_t bi : by_size) {
    Block& b = blocks[bi];
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (size_t pi : placed) {
      const Block& p = blocks[pi];
      if (p.begin <= b.end && b.begin <= p.end) busy.emplace_back(p.offset, p.offset + p.size);
    }
    std::sort(busy.begin(), busy.end());
    int64_t off = 0, best = -1, best_gap = INT64_MAX;
    for (auto [lo, hi] : busy) {
      if (lo - off >= b.size && lo - off < best_gap) {
        best = off;
        best_gap = lo - off;
      }
      off = std::max(off, hi);
    }
    b.offset = best >= 0 ? best : off;
    arena = std::max(arena, b.offset + b.size);
    placed.push_back(bi);
  }
  ex.arena_bytes = arena;
  for (auto& b : blocks) b.arg->arena_offset = b.offset;
  for (auto& [piece, where] : inside) piece->arena_offset = where.first->arena_offset + where.second;
  ex.allocate_arena();
  plan->stats.arena_bytes = arena;
}

}  // namespace kiln::compile
