// Shared by `kiln bench`, `kiln profile` and `kiln run`: concrete input shapes for models with symbolic
// dims, seeded random inputs, and small text helpers (JSON strings, CPU name).
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "driver/session.h"
#include "target/target.h"

namespace kiln::cli {

struct InputShapeOptions {
  int64_t batch = 1;
  int64_t seq = 128;                     // default for seq-like symbolic dims
  std::map<std::string, int64_t> dims;   // --dim name=value
};

// Parses "name=value" options into `out` (kUsage on malformed ones).
inline void parse_dim_options(const std::vector<std::string>& specs, InputShapeOptions& out) {
  for (const auto& s : specs) {
    auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error(ErrorKind::kUsage, "--dim expects name=value, got '" + s + "'");
    try {
      size_t used = 0;
      int64_t v = std::stoll(s.substr(eq + 1), &used);
      if (used != s.size() - eq - 1 || v < 0) throw std::invalid_argument("");
      out.dims[s.substr(0, eq)] = v;
    } catch (const std::exception&) {
      throw Error(ErrorKind::kUsage, "--dim expects name=value with a non-negative integer, got '" + s + "'");
    }
  }
}

inline std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Concrete dims for one input: known dims as they are; symbolic ones by --dim name, else the
// batch for the first dim or batch-like names, 128 for seq-like names, else 1.
inline std::vector<int64_t> resolve_dims(const Value& in, const InputShapeOptions& o) {
  if (in.type.kind != Type::Kind::kTensor || !in.type.shape)
    throw Error(ErrorKind::kUsage, "input '" + in.name + "' has type " + to_string(in.type) +
                                       ": benchmarks need tensor inputs of known rank");
  std::vector<int64_t> out;
  const auto& dims = in.type.shape->dims;
  for (size_t i = 0; i < dims.size(); ++i) {
    const Dim& d = dims[i];
    if (d.known()) {
      out.push_back(d.value);
      continue;
    }
    auto it = o.dims.find(d.symbol);
    std::string n = lower(d.symbol);
    if (!d.symbol.empty() && it != o.dims.end()) out.push_back(it->second);
    else if (n == "n" || n == "b" || n.find("batch") != std::string::npos || (i == 0 && n.find("seq") == std::string::npos))
      out.push_back(o.batch);
    else if (n.find("seq") != std::string::npos || n.find("len") != std::string::npos || n == "s" || n == "t")
      out.push_back(o.seq);
    else
      out.push_back(1);
  }
  return out;
}

// Seeded random feeds parallel to the graph inputs (None for defaulted ones): floats uniform
// in [-1, 1), integers in [0, 10) (all ones for inputs named like a mask), bools random.
inline std::vector<RtValue> make_bench_inputs(const Session& s, const InputShapeOptions& o, uint64_t seed) {
  const Graph& g = *s.model().graph;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  std::uniform_int_distribution<int> small(0, 9);
  std::vector<RtValue> feeds(g.inputs.size());
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const Value& in = *g.inputs[i];
    if (in.initializer.defined()) continue;
    if (in.type.dtype == DType::kUndefined || in.type.dtype == DType::kString)
      throw Error(ErrorKind::kUsage, "input '" + in.name + "' has type " + to_string(in.type) +
                                         ": benchmarks need numeric tensor inputs");
    Tensor x(in.type.dtype, resolve_dims(in, o));
    bool mask = lower(in.name).find("mask") != std::string::npos;
    for (int64_t k = 0; k < x.numel(); ++k) {
      if (is_float(in.type.dtype)) x.set_double(k, uni(rng));
      else if (in.type.dtype == DType::kBool) x.set_double(k, mask ? 1 : (small(rng) & 1));
      else x.set_double(k, mask ? 1 : small(rng));
    }
    feeds[i] = RtValue(std::move(x));
  }
  return feeds;
}

inline std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

inline std::string json_number(double v) {
  if (!(v == v) || v > 1e300 || v < -1e300) return "null";
  std::ostringstream os;
  os.precision(6);
  os << v;
  return os.str();
}

inline std::string cpu_model_name() {
  const std::string& name = target::Target::host().cpu_name;
  return name.empty() ? "unknown" : name;
}

inline std::string dims_text(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

}  // namespace kiln::cli
