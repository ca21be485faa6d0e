// Session: loading, input binding and engine dispatch.
#include "driver/session.h"

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "driver/npy.h"
#include "driver/engine_passes.h"
#include "driver/offload.h"
#include "frontend/onnx/onnx_io.h"
#include "pass/pass.h"

namespace kiln {

Engine parse_engine(const std::string& name) {
  if (name == "interp") return Engine::kInterp;
  if (name == "compiled") return Engine::kCompiled;
  throw Error(ErrorKind::kUsage, "unknown engine '" + name + "' (expected interp or compiled)");
}

int64_t parse_byte_size(const std::string& text, const std::string& what) {
  auto bad = [&] {
    return Error(ErrorKind::kUsage, what + " '" + text + "' is not a size (bytes, or with K, M, G, T: 512M, 2GiB, 1.5G)");
  };
  size_t used = 0;
  double number = 0;
  try {
    number = std::stod(text, &used);
  } catch (const std::exception&) {
    throw bad();
  }
  std::string unit = text.substr(used);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
  if (unit.size() == 2 && (unit[1] == 'i' || unit[1] == 'I')) unit.pop_back();
  double scale = 1;
  if (unit.size() > 1) throw bad();
  if (!unit.empty()) {
    const std::string units = "KMGT";
    size_t k = units.find(static_cast<char>(std::toupper(static_cast<unsigned char>(unit[0]))));
    if (k == std::string::npos) throw bad();
    for (size_t i = 0; i <= k; ++i) scale *= 1024;
  }
  const double bytes = number * scale;
  if (!(bytes >= 0) || bytes > 9.0e18) throw bad();
  return static_cast<int64_t>(bytes);
}

std::unique_ptr<Session> Session::load(const std::string& path, const SessionOptions& opts) {
  return std::make_unique<Session>(load_onnx_model(path), opts);
}

Session::Session(Model model, const SessionOptions& opts) : model_(std::move(model)), opts_(opts) {
  if (opts.threads < 1) throw Error(ErrorKind::kUsage, "--threads must be at least 1");
  if (!opts.offload.empty() && opts.engine != Engine::kCompiled)
    throw Error(ErrorKind::kUsage, "--offload needs the compiled engine (--engine compiled)");
  // The compiled engine always runs the default pipeline (it needs the fusion groups), so the
  // CLI, `kiln bench`, Python and the C API all run the same graph; the interpreter runs the
  // model as given unless asked to optimize.
  if (opts.optimize || opts.engine == Engine::kCompiled) {
    PassContext ctx = engine_pass_context();
    if (opts.engine == Engine::kCompiled) {
      std::vector<std::string> offload = opts.offload;
      if (offload.empty() && opts.tuned_offload) offload = tuned_backends(model_, *opts.tuned_offload);
      ctx.offload = offload_backends(offload);
    }
    ctx.offload_min_cost = opts.offload_min_cost;
    // KILN_DISABLE_PASSES=a,b: skip passes of the pipeline (A/B measurements, bisecting a pass).
    if (const char* off = std::getenv("KILN_DISABLE_PASSES"))
      for (const std::string& name : split_names(off)) ctx.disabled.insert(name);
    try {
      run_passes(model_, default_pipeline(), ctx);
    } catch (const Error& e) {
      ErrorLocation loc;
      loc.file = model_.path;
      throw e.with_context(loc);
    }
  }
  InterpreterOptions io;
  io.seed = opts.seed;
  io.profile = opts.profile;
  io.max_memory_bytes = opts.max_memory_bytes;
  try {
    if (opts.engine == Engine::kCompiled) {
      CompiledOptions co;
      co.max_memory_bytes = opts.max_memory_bytes;
      co.threads = opts.threads;
      co.seed = opts.seed;
      co.profile = opts.profile;
      co.tuning = opts.tuning;
      compiled_ = std::make_unique<CompiledExecutor>(model_, co);
      return;
    }
    interp_ = std::make_unique<Interpreter>(model_, io);
  } catch (const Error& e) {
    ErrorLocation loc;
    loc.file = model_.path;
    throw e.with_context(loc);
  }
}

std::vector<Value*> Session::feed_inputs() const {
  std::vector<Value*> out;
  for (Value* v : model_.graph->inputs)
    if (!v->initializer.defined()) out.push_back(v);
  return out;
}

NamedValue read_value_file(const std::string& path, const Type* hint) {
  NamedValue nv;
  nv.source = path;
  std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".npy") {
    nv.value = RtValue(read_npy(path));
  } else if (ext == ".pb") {
    nv.value = read_value_pb(path, hint, &nv.name);
  } else {
    throw Error(ErrorKind::kUsage, "input file '" + path + "' must end in .pb or .npy");
  }
  return nv;
}

std::vector<NamedValue> Session::read_inputs(const std::vector<std::string>& paths) const {
  auto feeds = feed_inputs();
  std::vector<NamedValue> out;
  for (size_t i = 0; i < paths.size(); ++i) {
    // Positional type hint; .pb files with a name are re-read if the hint was wrong.
    const Type* hint = i < feeds.size() ? &feeds[i]->type : nullptr;
    NamedValue nv = read_value_file(paths[i], hint);
    if (!nv.name.empty()) {
      const Value* named = model_.graph->find_local(nv.name);
      if (named && named->is_graph_input && !(named->type.kind == (hint ? hint->kind : Type::Kind::kTensor)))
        nv = read_value_file(paths[i], &named->type);
    }
    out.push_back(std::move(nv));
  }
  return out;
}

std::vector<RtValue> Session::bind(const std::vector<NamedValue>& values) const { return bind_inputs(model_, values); }

std::vector<RtValue> bind_inputs(const Model& model, const std::vector<NamedValue>& values) {
  const auto& inputs = model.graph->inputs;
  std::vector<RtValue> feeds(inputs.size());
  std::vector<bool> bound(inputs.size(), false);
  auto index_of = [&](const std::string& name) -> int {
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i]->name == name) return static_cast<int>(i);
    return -1;
  };
  std::vector<int> positional;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i]->initializer.defined()) positional.push_back(static_cast<int>(i));
  size_t next = 0;
  for (const auto& nv : values) {
    int idx = -1;
    if (!nv.name.empty()) {
      idx = index_of(nv.name);
      if (idx < 0) {
        std::string names;
        for (const Value* v : inputs)
          if (!v->initializer.defined()) names += (names.empty() ? "" : ", ") + v->name;
        throw Error(ErrorKind::kBadInput, "'" + nv.source + "' holds a value named '" + nv.name +
                                              "', but the model has no such input (inputs: " + names + ")");
      }
    } else {
      while (next < positional.size() && bound[static_cast<size_t>(positional[next])]) ++next;
      if (next >= positional.size())
        throw Error(ErrorKind::kBadInput, "too many inputs: the model takes " +
                                              std::to_string(positional.size()) + " (extra: '" + nv.source + "')");
      idx = positional[next++];
    }
    if (bound[static_cast<size_t>(idx)])
      throw Error(ErrorKind::kBadInput, "input '" + inputs[static_cast<size_t>(idx)]->name + "' is given twice");
    bound[static_cast<size_t>(idx)] = true;
    feeds[static_cast<size_t>(idx)] = nv.value;
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!bound[i] && !inputs[i]->initializer.defined() && inputs[i]->type.kind != Type::Kind::kOptional)
      throw Error(ErrorKind::kBadInput, "input '" + inputs[i]->name + "' (" + to_string(inputs[i]->type) +
                                            ") was not given");
  return feeds;
}

std::vector<RtValue> Session::random_inputs(uint64_t seed,
                                            const std::function<std::vector<int64_t>(const Value&)>& resolve) const {
  std::mt19937_64 rng(seed);
  std::vector<RtValue> feeds(model_.graph->inputs.size());
  for (size_t i = 0; i < feeds.size(); ++i) {
    const Value& in = *model_.graph->inputs[i];
    if (in.initializer.defined()) continue;
    const Type& t = in.type;
    if (t.kind != Type::Kind::kTensor || t.dtype == DType::kUndefined || !t.shape ||
        (!t.shape->is_static() && !resolve))
      throw Error(ErrorKind::kUsage, "input '" + in.name + "' has type " + to_string(t) +
                                         ": random inputs need a tensor shape of known rank (symbolic dims: --dim NAME=VALUE, --batch B); pass --input FILE");
    Tensor x(t.dtype, t.shape->is_static() ? t.shape->sizes() : resolve(in));
    std::uniform_real_distribution<double> uni(-1.0, 1.0);
    std::uniform_int_distribution<int> small(0, 9);
    for (int64_t k = 0; k < x.numel(); ++k) {
      if (t.dtype == DType::kString) x.data<std::string>()[k] = "kiln";
      else if (is_float(t.dtype)) x.set_double(k, uni(rng));
      else if (t.dtype == DType::kBool) x.set_double(k, small(rng) & 1);
      else x.set_double(k, small(rng));
    }
    feeds[i] = RtValue(std::move(x));
  }
  return feeds;
}

std::vector<RtValue> Session::run(const std::vector<RtValue>& feeds) {
  try {
    return compiled_ ? compiled_->run(feeds) : interp_->run(feeds);
  } catch (const Error& e) {
    ErrorLocation loc;
    loc.file = model_.path;
    throw e.with_context(loc);
  }
}

}  // namespace kiln
