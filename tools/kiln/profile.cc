// `kiln profile MODEL [--top N] [--trace OUT.json] [--engine E] [--threads N] [--batch B]
//                [--dim name=V]... [--runs R] [--warmup W] [--by node|op|both]`
// Runs the model on seeded random inputs (as `kiln bench`) with per-node timing (the
// interpreter) or per-step timing (the compiled executor: one entry per generated kernel or
// reference-kernel fallback), averages over --runs runs after --warmup untimed ones and prints
// the top N entries: time per run, share of the total, calls per run and achieved GFLOP/s where
// the FLOPs are known (Conv, ConvTranspose, MatMul, Gemm: 2 x MACs from the shapes that
// shape inference gives for the concrete input shapes; fused kernels of the compiled engine
// are named kN and get no FLOP count). --trace writes a Chrome-trace JSON (Perfetto and
// chrome://tracing open it): one "X" event per node per run, name = node, cat = op, laid back
// to back from each run's start (the timings carry durations only, so gaps between nodes —
// the engine's own overhead — show at the end of each run's "run" event).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <unordered_map>

#include "bench_common.h"
#include "commands.h"
#include "tune/records.h"
#include "frontend/onnx/onnx_io.h"
#include "pass/pass.h"

namespace kiln::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct ProfileArgs {
  std::string model;
  std::string engine = "compiled";
  int threads = 1;
  std::string records;  // --records
  std::vector<std::string> offload;  // --offload
  double offload_min_cost = -1;  // --offload-min-cost
  int64_t batch = 1;
  std::vector<std::string> dims;
  int top = 20;
  int runs = 5;
  int warmup = 1;
  uint64_t seed = 0;
  bool optimize = false;
  std::string trace;
  std::string by = "both";
};

int64_t numel_of(const Value* v) {
  if (!v || v->type.kind != Type::Kind::kTensor || !v->type.shape || !v->type.shape->is_static()) return -1;
  int64_t n = 1;
  for (int64_t d : v->type.shape->sizes()) n *= d;
  return n;
}

const std::vector<Dim>* dims_of(const Value* v) {
  if (!v || v->type.kind != Type::Kind::kTensor || !v->type.shape) return nullptr;
  return &v->type.shape->dims;
}

// 2 x multiply-accumulates of one node from its static shapes, or -1.
double node_flops(const Node& n) {
  if (!n.domain.empty() || n.outputs.empty() || n.inputs.size() < 2) return -1;
  const std::string& op = n.op_type;
  int64_t out = numel_of(n.outputs[0]);
  if (op == "Conv") {
    // MACs = |Y| * (C/group) * prod(kernel) = |Y| * prod(W.dims[1:]).
    int64_t w = numel_of(n.inputs[1]);
    const auto* wd = dims_of(n.inputs[1]);
    if (out < 0 || w < 0 || !wd || wd->empty() || (*wd)[0].value <= 0) return -1;
    return 2.0 * static_cast<double>(out) * static_cast<double>(w / (*wd)[0].value);
  }
  if (op == "ConvTranspose") {
    // MACs = |X| * (M/group) * prod(kernel) = |X| * prod(W.dims[1:]).
    int64_t x = numel_of(n.inputs[0]), w = numel_of(n.inputs[1]);
    const auto* wd = dims_of(n.inputs[1]);
    if (x < 0 || w < 0 || !wd || wd->empty() || (*wd)[0].value <= 0) return -1;
    return 2.0 * static_cast<double>(x) * static_cast<double>(w / (*wd)[0].value);
  }
  if (op == "MatMul" || op == "Gemm") {
    const auto* ad = dims_of(n.inputs[0]);
    if (out < 0 || !ad || ad->empty()) return -1;
    size_t k_axis = ad->size() - 1;
    if (op == "Gemm") {
      const Attribute* ta = n.attr("transA");
      if (ad->size() != 2) return -1;
      k_axis = ta && ta->i ? 0 : 1;
    }
    int64_t k = (*ad)[k_axis].value;
    if (k < 0) return -1;
    return 2.0 * static_cast<double>(out) * static_cast<double>(k);
  }
  return -1;
}

// FLOPs per node display name, from a fresh copy of the model with the inputs' concrete shapes
// and shape inference (plus the default pipeline when the session ran it, so node names match).
std::unordered_map<std::string, double> flops_by_node(const ProfileArgs& a, const std::vector<RtValue>& feeds) {
  std::unordered_map<std::string, double> out;
  try {
    Model m = load_onnx_model(a.model);
    for (size_t i = 0; i < m.graph->inputs.size() && i < feeds.size(); ++i)
      if (feeds[i].is_tensor()) m.graph->inputs[i]->type.shape = Shape::of(feeds[i].tensor.dims());
    PassContext ctx;
    // Constant folding evaluates static Shape/Size chains, so that Reshapes fed by them (attention
    // heads) get concrete shapes and the MatMuls after them FLOP counts.
    std::vector<std::string> passes =
        a.optimize ? default_pipeline() : std::vector<std::string>{"shape-inference", "constant-folding", "shape-inference"};
    if (a.optimize) passes.insert(passes.begin(), "shape-inference");
    run_passes(m, passes, ctx);
    for (const auto& n : m.graph->nodes) {
      double f = node_flops(*n);
      if (f >= 0) out[n->display_name()] = f;
    }
  } catch (const Error& e) {
    std::cerr << "kiln profile: no FLOP counts (" << e.what() << ")\n";
  }
  return out;
}

struct Entry {
  std::string name, op;
  double ms = 0;     // summed over runs
  int64_t calls = 0; // summed over runs
  double flops = 0;  // summed over calls where known
  bool flops_known = true;
  size_t first_seen = 0;
};

std::string fixed(double v, int prec) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(prec) << v;
  return os.str();
}

void print_table(const std::string& title, std::vector<Entry> entries, double total_ms, int runs, int top) {
  std::sort(entries.begin(), entries.end(), [](const Entry& x, const Entry& y) {
    return x.ms != y.ms ? x.ms > y.ms : x.first_seen < y.first_seen;
  });
  std::vector<std::vector<std::string>> rows;
  bool show_op = title != "op";
  rows.push_back({title, "op", "ms/run", "share", "cum", "calls/run", "GFLOP/s"});
  double cum = 0;
  size_t shown = std::min(entries.size(), static_cast<size_t>(top));
  for (size_t i = 0; i < shown; ++i) {
    const Entry& e = entries[i];
    cum += e.ms;
    std::string gf = e.flops_known && e.flops > 0 && e.ms > 0 ? fixed(e.flops / (e.ms * 1e-3) * 1e-9, 2) : "-";
    std::string name = e.name.size() > 48 ? e.name.substr(0, 22) + "..." + e.name.substr(e.name.size() - 23) : e.name;
    std::string op = e.op.size() > 32 ? e.op.substr(0, 29) + "..." : e.op;
    rows.push_back({name, op, fixed(e.ms / runs, 3), fixed(100.0 * e.ms / total_ms, 1) + "%",
                    fixed(100.0 * cum / total_ms, 1) + "%", fixed(static_cast<double>(e.calls) / runs, 0), gf});
  }
  std::vector<size_t> w(rows[0].size(), 0);
  for (const auto& r : rows)
    for (size_t c = 0; c < r.size(); ++c) w[c] = std::max(w[c], r[c].size());
  for (const auto& r : rows) {
    for (size_t c = 0; c < r.size(); ++c) {
      if (c == 1 && !show_op) continue;
      if (c < 2) std::cout << (c ? "  " : "") << std::left << std::setw(static_cast<int>(w[c])) << r[c];
      else std::cout << "  " << std::right << std::setw(static_cast<int>(w[c])) << r[c];
    }
    std::cout << "\n";
  }
  if (entries.size() > shown) {
    double rest = 0;
    for (size_t i = shown; i < entries.size(); ++i) rest += entries[i].ms;
    std::cout << "(" << entries.size() - shown << " more: " << fixed(rest / runs, 3) << " ms/run, "
              << fixed(100.0 * rest / total_ms, 1) << "%)\n";
  }
}

int profile_command(const ProfileArgs& a) {
  InputShapeOptions shapes;
  shapes.batch = a.batch;
  parse_dim_options(a.dims, shapes);
  SessionOptions opts;
  opts.engine = parse_engine(a.engine);
  opts.threads = a.threads;
  opts.seed = a.seed;
  opts.optimize = a.optimize;
  opts.profile = true;
  opts.tuning = tune::load_tuning(a.records, a.threads);
  opts.tuned_offload = tune::load_offload_choices(a.records, a.threads);
  opts.offload = a.offload;
  opts.offload_min_cost = a.offload_min_cost;
  auto session = Session::load(a.model, opts);
  std::vector<RtValue> feeds = make_bench_inputs(*session, shapes, a.seed);
  auto flops = flops_by_node(a, feeds);

  for (int i = 0; i < a.warmup; ++i) session->run(feeds);
  struct Event {
    std::string name, op;
    double ts_us, dur_us;
  };
  std::vector<Event> events;
  std::vector<double> wall_ms;
  std::map<std::pair<std::string, std::string>, Entry> by_node;
  std::map<std::string, Entry> by_op;
  size_t order = 0;
  double node_total = 0;
  auto origin = Clock::now();
  for (int r = 0; r < a.runs; ++r) {
    auto s = Clock::now();
    session->run(feeds);
    double wall = std::chrono::duration<double, std::milli>(Clock::now() - s).count();
    wall_ms.push_back(wall);
    double ts = std::chrono::duration<double, std::micro>(s - origin).count();
    events.push_back({"run " + std::to_string(r), "run", ts, wall * 1e3});
    for (const NodeTiming& t : session->timings()) {
      auto fit = flops.find(t.node);
      for (Entry* e : {&by_node[{t.node, t.op}], &by_op[t.op]}) {
        if (e->calls == 0) {
          e->name = e == &by_op[t.op] ? t.op : t.node;
          e->op = t.op;
          e->first_seen = order++;
        }
        e->ms += t.ms;
        e->calls += 1;
        if (fit != flops.end()) e->flops += fit->second;
        else e->flops_known = false;
      }
      node_total += t.ms;
      events.push_back({t.node, t.op, ts, t.ms * 1e3});
      ts += t.ms * 1e3;
    }
  }
  if (node_total <= 0) {
    std::cout << "the " << a.engine << " engine reported no per-node timings for this model\n";
    return 0;
  }
  std::sort(wall_ms.begin(), wall_ms.end());
  double wall_total = 0;
  for (double w : wall_ms) wall_total += w;
  double total_flops = 0;
  for (const auto& [k, f] : flops) total_flops += f;
  std::cout << "model: " << a.model << ", engine " << a.engine << ", " << a.threads << " thread(s), inputs";
  const Graph& g = *session->model().graph;
  for (size_t i = 0; i < feeds.size(); ++i)
    if (feeds[i].is_tensor()) std::cout << " " << g.inputs[i]->name << dims_text(feeds[i].tensor.dims());
  std::cout << "\n" << a.runs << " profiled run(s) after " << a.warmup << " warm-up: median wall "
            << fixed(wall_ms[wall_ms.size() / 2], 3) << " ms/run, timed entries " << fixed(node_total / a.runs, 3)
            << " ms/run (" << fixed(100.0 * node_total / wall_total, 1) << "% of wall)";
  if (total_flops > 0)
    std::cout << ", " << fixed(total_flops * 1e-9, 3) << " GFLOP in Conv/MatMul/Gemm ("
              << fixed(total_flops / (wall_ms[wall_ms.size() / 2] * 1e-3) * 1e-9, 2) << " GFLOP/s over the median wall)";
  std::cout << "\n\n";
  auto values = [](const auto& m) {
    std::vector<Entry> v;
    for (const auto& [k, e] : m) v.push_back(e);
    return v;
  };
  if (a.by == "op" || a.by == "both") {
    print_table("op", values(by_op), node_total, a.runs, a.top);
    std::cout << "\n";
  }
  if (a.by == "node" || a.by == "both") print_table(a.engine == "compiled" ? "step" : "node", values(by_node),
                                                    node_total, a.runs, a.top);
  if (!a.trace.empty()) {
    std::ofstream f(a.trace);
    if (!f) throw Error(ErrorKind::kUsage, "cannot write the trace to '" + a.trace + "'");
    f << "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"model\": " << json_string(a.model)
      << ", \"engine\": " << json_string(a.engine) << ", \"threads\": " << a.threads << "},\n\"traceEvents\": [\n";
    f << "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": 0, \"args\": {\"name\": "
      << json_string("kiln " + a.engine) << "}},\n";
    f << "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": 1, \"args\": {\"name\": \"nodes\"}},\n";
    f << "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": 0, \"args\": {\"name\": \"runs\"}}";
    for (const Event& e : events) {
      bool run = e.op == "run";
      f << ",\n{\"name\": " << json_string(e.name) << ", \"cat\": " << json_string(e.op)
        << ", \"ph\": \"X\", \"pid\": 1, \"tid\": " << (run ? 0 : 1) << ", \"ts\": " << fixed(e.ts_us, 3)
        << ", \"dur\": " << fixed(e.dur_us, 3);
      auto fit = flops.find(e.name);
      if (!run && fit != flops.end() && e.dur_us > 0)
        f << ", \"args\": {\"op\": " << json_string(e.op) << ", \"gflop\": " << json_number(fit->second * 1e-9)
          << ", \"gflops_per_s\": " << json_number(fit->second / (e.dur_us * 1e-6) * 1e-9) << "}";
      else if (!run)
        f << ", \"args\": {\"op\": " << json_string(e.op) << "}";
      f << "}";
    }
    f << "\n]}\n";
    std::cout << "\nwrote " << events.size() << " trace events to " << a.trace << " (open in https://ui.perfetto.dev)\n";
  }
  return 0;
}

}  // namespace

void add_profile_command(CLI::App& app, Action& action) {
  auto a = std::make_shared<ProfileArgs>();
  CLI::App* cmd = app.add_subcommand("profile", "Per-node/per-kernel time table and a Chrome-trace JSON");
  cmd->add_option("model", a->model, "ONNX model file")->required();
  cmd->add_option("--top", a->top, "rows per table")->capture_default_str()->check(CLI::Range(1, 1000000));
  cmd->add_option("--trace", a->trace, "write a Chrome-trace JSON (Perfetto opens it)");
  cmd->add_option("--engine", a->engine, "interp (reference interpreter) or compiled")
      ->capture_default_str()->check(CLI::IsMember({"interp", "compiled"}));
  add_offload_option(cmd, a->offload);
  add_offload_min_cost_option(cmd, a->offload_min_cost);
  cmd->add_option("--records", a->records, "tuning records from `kiln tune`: the kernel choices they hold for this CPU and --threads are applied");
  cmd->add_option("--threads", a->threads, "worker threads")->capture_default_str()->check(CLI::Range(1, 1024));
  cmd->add_option("--batch", a->batch, "size of symbolic batch dims")
      ->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--dim", a->dims, "name=value for a symbolic dim (seq-like dims default to 128); repeatable");
  cmd->add_option("--runs", a->runs, "profiled runs (averaged)")->capture_default_str()->check(CLI::Range(1, 100000));
  cmd->add_option("--warmup", a->warmup, "untimed runs first")->capture_default_str()->check(CLI::Range(0, 100000));
  cmd->add_option("--seed", a->seed, "seed of the random inputs")->capture_default_str();
  cmd->add_option("--by", a->by, "tables to print: op, node or both")
      ->capture_default_str()->check(CLI::IsMember({"op", "node", "both"}));
  cmd->add_flag("--optimize", a->optimize, "with --engine interp: run the default graph-pass pipeline first (the compiled engine always runs it)");
  cmd->callback([a, &action] { action = [a] { return profile_command(*a); }; });
}

}  // namespace kiln::cli
