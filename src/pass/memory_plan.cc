// Memory planning: lifetimes, in-place reuse, then greedy-by-size offsets with best fit.
#include "pass/memory_plan.h"

#include <algorithm>
#include <climits>
#include <numeric>

#include "ir/rewrite.h"
#include "ops/registry.h"

namespace kiln {
namespace {

int64_t align_up(int64_t n) {
  return (n + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

// A buffer holds one value, or a chain of values where each reuses its predecessor in place.
struct Buffer {
  int64_t size = 0;
  int first = 0, last = 0;
  std::vector<size_t> members;  // positions in MemoryPlan::values
};

bool same_static_shape(const Value* a, const Value* b) {
  auto ok = [](const Type& t) {
    if (t.kind != Type::Kind::kTensor || !t.shape) return false;
    for (const Dim& d : t.shape->dims)
      if (!d.known() && d.symbol.empty()) return false;
    return true;
  };
  return ok(a->type) && ok(b->type) && *a->type.shape == *b->type.shape;
}

// The pattern kind of the newest registered version of the node's op.
PatternKind pattern_of(const Node& n) {
  const OpSchema* s = OpRegistry::global().find(n.domain, n.op_type, INT_MAX);
  for (const auto& [k, a] : n.attrs)
    if (a.g || !a.graphs.empty()) return PatternKind::kOpaque;
  return s ? s->pattern : PatternKind::kOpaque;
}

}  // namespace

int64_t static_bytes(const Value* v, int64_t symbol_value) {
  const Type& t = v->type;
  if (t.kind != Type::Kind::kTensor || !t.shape || t.dtype == DType::kUndefined ||
      t.dtype == DType::kString)
    return -1;
  int64_t n = 1;
  for (const Dim& d : t.shape->dims) {
    int64_t s = d.known() ? d.value : (d.symbol.empty() ? -1 : symbol_value);
    if (s < 0) return -1;
    if (s != 0 && n > (int64_t{1} << 50) / s) return -1;
    n *= s;
  }
  return n * static_cast<int64_t>(dtype_size(t.dtype));
}

int64_t place_blocks(std::vector<ArenaBlock>& blocks) {
  std::vector<size_t> order(blocks.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (blocks[a].size != blocks[b].size) return blocks[a].size > blocks[b].size;
    return blocks[a].first < blocks[b].first;
  });
  std::vector<size_t> placed;
  int64_t arena = 0;
  for (size_t bi : order) {
    ArenaBlock& b = blocks[bi];
    std::vector<const ArenaBlock*> overlapping;
    for (size_t pi : placed) {
      const ArenaBlock& o = blocks[pi];
      if (o.first <= b.last && b.first <= o.last && o.size > 0) overlapping.push_back(&o);
    }
    std::sort(overlapping.begin(), overlapping.end(),
              [](const ArenaBlock* x, const ArenaBlock* y) { return x->offset < y->offset; });
    const int64_t need = align_up(b.size);
    int64_t end = 0, best = -1, best_gap = INT64_MAX;
    for (const ArenaBlock* o : overlapping) {
      const int64_t gap = o->offset - end;
      if (gap >= need && gap < best_gap) {
        best = end;
        best_gap = gap;
      }
      end = std::max(end, o->offset + align_up(o->size));
    }
    b.offset = best >= 0 ? best : end;
    placed.push_back(bi);
    arena = std::max(arena, b.offset + need);
  }
  return arena;
}

MemoryPlan plan_memory(const Graph& g, const std::function<int64_t(const Value*)>& bytes_of) {
  MemoryPlan plan;
  // S1: planned values and their lifetimes [producer step, last use step].
  std::unordered_map<const Node*, int> step;
  for (size_t i = 0; i < g.nodes.size(); ++i) step[g.nodes[i].get()] = static_cast<int>(i);
  UseMap uses = compute_uses(g);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const Value* v : g.nodes[i]->outputs) {
      if (!v || is_graph_output(g, v)) continue;
      int64_t size = bytes_of(v);
      if (size < 0) {
        plan.unplanned.push_back(v);
        continue;
      }
      PlannedValue p;
      p.value = v;
      p.size = size;
      p.first_step = p.last_step = static_cast<int>(i);
      for (const Node* u : uses.of(v)) {
        auto it = step.find(u);
        if (it != step.end()) p.last_step = std::max(p.last_step, it->second);
      }
      plan.index[v] = plan.values.size();
      plan.values.push_back(p);
      plan.intermediate_bytes += size;
    }

  // S2: one buffer per value, except that an elementwise node's output may take over the buffer
  // of an input that dies at this node and has the same size.
  std::vector<Buffer> buffers;
  std::vector<size_t> buffer_of(plan.values.size());
  for (size_t k = 0; k < plan.values.size(); ++k) {
    PlannedValue& p = plan.values[k];
    const Node& n = *g.nodes[p.first_step];
    size_t reuse = SIZE_MAX;
    PatternKind pk = n.outputs.size() == 1 ? pattern_of(n) : PatternKind::kOpaque;
    if (pk == PatternKind::kElementwise || pk == PatternKind::kBroadcast) {
      for (const Value* in : n.inputs) {
        const PlannedValue* q = plan.find(in);
        if (!q || q->last_step != p.first_step || q->size != p.size) continue;
        if (pk == PatternKind::kBroadcast && !same_static_shape(in, p.value)) continue;
        Buffer& b = buffers[buffer_of[plan.index[in]]];
        if (b.last != p.first_step || b.members.back() != plan.index[in]) continue;
        reuse = buffer_of[plan.index[in]];
        p.in_place_of = in;
        break;
      }
    }
    if (reuse == SIZE_MAX) {
      reuse = buffers.size();
      buffers.push_back({p.size, p.first_step, p.last_step, {}});
    } else {
      ++plan.in_place_count;
    }
    Buffer& b = buffers[reuse];
    b.last = std::max(b.last, p.last_step);
    b.members.push_back(k);
    buffer_of[k] = reuse;
  }

  // S3: offsets in one arena (place_blocks).
  std::vector<ArenaBlock> blocks;
  for (const Buffer& b : buffers) blocks.push_back({b.size, b.first, b.last, -1});
  plan.arena_bytes = place_blocks(blocks);
  for (size_t i = 0; i < buffers.size(); ++i)
    for (size_t k : buffers[i].members) plan.values[k].offset = blocks[i].offset;

  // S4: the lower bound any arena needs for these buffers: the most bytes live at one step.
  std::vector<int64_t> live(g.nodes.size() + 1, 0);
  for (const Buffer& b : buffers) {
    live[b.first] += b.size;
    live[b.last + 1] -= b.size;
  }
  int64_t running = 0;
  for (int64_t d : live) {
    running += d;
    plan.live_bytes_lower_bound = std::max(plan.live_bytes_lower_bound, running);
  }
  return plan;
}

}  // namespace kiln
