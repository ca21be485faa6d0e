#include "driver/compile_model.h"

#include <algorithm>

#include <chrono>
#include <random>

#include "core/error.h"

namespace kiln {

std::pair<std::string, int64_t> parse_dim_binding(const std::string& arg) {
  auto eq = arg.find('=');
  int64_t v = -1;
  try {
    size_t used = 0;
    if (eq != std::string::npos) v = std::stoll(arg.substr(eq + 1), &used);
    if (used != arg.size() - eq - 1) v = -1;  // trailing text ("16,32", "8x")
  } catch (const std::exception&) {
  }
  if (eq == std::string::npos || eq == 0 || v < 0) throw Error(ErrorKind::kUsage, "--dim expects NAME=VALUE, got '" + arg + "'");
  return {arg.substr(0, eq), v};
}

namespace {

// "A<sep>B<sep>..." after the '=' of `arg` as sizes; kUsage naming `expects` for anything else.
std::pair<std::string, std::vector<int64_t>> parse_sizes(const std::string& arg, char sep, const std::string& expects) {
  const size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0) throw Error(ErrorKind::kUsage, expects + ", got '" + arg + "'");
  const std::string name = arg.substr(0, eq);
  std::vector<int64_t> sizes;
  for (size_t at = eq + 1;;) {
    const size_t end = arg.find(sep, at);
    const std::string piece = arg.substr(at, end == std::string::npos ? std::string::npos : end - at);
    try {
      sizes.push_back(parse_dim_binding(name + "=" + piece).second);
    } catch (const Error&) {
      throw Error(ErrorKind::kUsage, expects + ", got '" + arg + "'");
    }
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return {name, sizes};
}

}  // namespace

std::pair<std::string, std::vector<int64_t>> parse_dim_list(const std::string& arg) {
  return parse_sizes(arg, ',', "--dim expects NAME=V1,V2,...");
}

std::pair<std::string, std::vector<int64_t>> parse_shape_binding(const std::string& arg) {
  return parse_sizes(arg, 'x', "--shape expects INPUT=D0xD1x...");
}

std::vector<RtValue> random_feeds(const Model& model, const std::map<std::string, int64_t>& dims, uint64_t seed,
                                  const std::map<std::string, std::vector<int64_t>>& shapes) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  std::vector<RtValue> feeds(model.graph->inputs.size());
  for (const auto& given : shapes) {
    const std::string& name = given.first;  // (a structured binding cannot be captured in C++17)
    auto it = std::find_if(model.graph->inputs.begin(), model.graph->inputs.end(), [&](const Value* v) {
      return v->name == name && !v->initializer.defined();
    });
    if (it == model.graph->inputs.end()) throw Error(ErrorKind::kUsage, "--shape " + name + ": the model has no input of that name");
  }
  for (size_t i = 0; i < feeds.size(); ++i) {
    const Value& in = *model.graph->inputs[i];
    if (in.initializer.defined()) continue;
    const Type& t = in.type;
    if (t.kind != Type::Kind::kTensor || t.dtype == DType::kUndefined || !t.shape)
      throw Error(ErrorKind::kUsage, "input '" + in.name + "' has type " + to_string(t) + ": no random input");
    std::vector<int64_t> shape;
    for (const Dim& d : t.shape->dims) {
      auto it = dims.find(d.symbol);
      shape.push_back(d.known() ? d.value : (it != dims.end() ? it->second : 1));
    }
    if (auto given = shapes.find(in.name); given != shapes.end()) {
      bool fits = given->second.size() == t.shape->dims.size();
      for (size_t k = 0; fits && k < given->second.size(); ++k)
        fits = !t.shape->dims[k].known() || t.shape->dims[k].value == given->second[k];
      if (!fits)
        throw Error(ErrorKind::kUsage, "--shape " + in.name + "=" + dims_to_string(given->second) + ": the input is " +
                                           to_string(t));
      shape = given->second;
    }
    Tensor x(t.dtype, shape);
    for (int64_t k = 0; k < x.numel(); ++k) x.set_double(k, is_float(t.dtype) ? uni(rng) : static_cast<double>(rng() % 2));
    feeds[i] = RtValue(std::move(x));
  }
  return feeds;
}

CompileModelResult compile_model(Model model, const CompileModelOptions& o) {
  using Clock = std::chrono::steady_clock;
  auto ms = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
  SessionOptions so;
  so.engine = Engine::kCompiled;  // (runs the default pass pipeline)
  so.threads = o.threads;
  so.seed = o.seed;
  so.tuning = o.tuning;
  so.offload = o.offload;
  so.offload_min_cost = o.offload_min_cost;
  so.tuned_offload = o.tuned_offload;
  auto t0 = Clock::now();
  Session session(std::move(model), so);
  auto t1 = Clock::now();
  auto feeds = random_feeds(session.model(), o.dims, o.seed, o.shapes);
  session.run(feeds);
  auto t2 = Clock::now();
  CompileModelResult r;
  r.stats = session.compiled()->stats();
  r.kernels_text = session.compiled()->kernels_text();
  r.passes_ms = ms(t0, t1);
  r.first_run_ms = ms(t1, t2) - r.stats.total_ms;
  return r;
}

}  // namespace kiln
