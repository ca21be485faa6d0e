// kiln's extension API for external backends ("bring your own codegen"): a backend says which
// nodes it runs, turns each region of such nodes that kiln partitions out of a model into an
// artifact of its own, and runs that artifact. Header-only, plain C++17 data, no kiln internals:
// a backend built out of tree needs only this header (find_package(kiln): kiln::extension) and
// is loaded as a plugin (KILN_EXTENSION_INIT below; docs/byoc.md).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln::ext {

// Element types, numbered as ONNX's TensorProto.DataType.
enum class ElementType : int32_t {
  kUndefined = 0, kFloat32 = 1, kUint8 = 2, kInt8 = 3, kUint16 = 4, kInt16 = 5, kInt32 = 6, kInt64 = 7,
  kString = 8, kBool = 9, kFloat16 = 10, kFloat64 = 11, kUint32 = 12, kUint64 = 13, kBFloat16 = 16,
};

// A value of a region: a region input, a node output or a constant.
struct ValueInfo {
  std::string name;
  ElementType type = ElementType::kUndefined;
  // -1 where the size is not known (symbolic at partitioning). Regions handed to
  // Backend::load have every dim bound.
  std::vector<int64_t> dims;
  bool known_rank = true;
  // Constants: their elements, row-major, valid for the duration of the call that sees them.
  const void* data = nullptr;
  bool constant() const { return data != nullptr; }
  int64_t elements() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
};

// An attribute of a node (graph- and tensor-valued ones are not shown to backends: kOther).
struct Attr {
  enum class Kind { kInt, kFloat, kString, kInts, kFloats, kStrings, kOther };
  Kind kind = Kind::kOther;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;
};

struct Node {
  std::string op;      // "Conv"
  std::string domain;  // "" for ONNX's default domain; "kiln" for kiln's composites (Gelu, LayerNorm, ...)
  std::string name;
  std::vector<int> inputs;   // indices into Region::values; -1 for an omitted optional input
  std::vector<int> outputs;  // indices into Region::values; -1 for an omitted optional output
  std::map<std::string, Attr> attrs;
  // The composite (Backend::composites) this node was matched into, or empty.
  std::string composite;

  bool has(const std::string& key) const { return attrs.count(key) > 0; }
  int64_t attr_int(const std::string& key, int64_t fallback) const {
    auto it = attrs.find(key);
    return it != attrs.end() && it->second.kind == Attr::Kind::kInt ? it->second.i : fallback;
  }
  double attr_float(const std::string& key, double fallback) const {
    auto it = attrs.find(key);
    return it != attrs.end() && it->second.kind == Attr::Kind::kFloat ? it->second.f : fallback;
  }
  std::string attr_string(const std::string& key, const std::string& fallback) const {
    auto it = attrs.find(key);
    return it != attrs.end() && it->second.kind == Attr::Kind::kString ? it->second.s : fallback;
  }
  std::vector<int64_t> attr_ints(const std::string& key, std::vector<int64_t> fallback = {}) const {
    auto it = attrs.find(key);
    return it != attrs.end() && it->second.kind == Attr::Kind::kInts ? it->second.ints : fallback;
  }
};

// A connected set of nodes handed to one backend, in topological order. Region inputs are fed
// per run; constants (weights) are values with data.
struct Region {
  std::string name;  // "dnnl_0": unique within the model, used in messages
  std::vector<ValueInfo> values;
  std::vector<Node> nodes;
  std::vector<int> inputs;   // indices into values, in the order RuntimeModule::run receives them
  std::vector<int> outputs;  // the same for the outputs
};

// A tensor handed to a running module: kiln's memory, row-major (plain layout), 64-byte aligned.
struct TensorRef {
  ElementType type = ElementType::kUndefined;
  std::vector<int64_t> dims;
  void* data = nullptr;
};

// A region's artifact, loaded for one set of input dims.
class RuntimeModule {
 public:
  virtual ~RuntimeModule() = default;
  // `inputs` parallel to Region::inputs, `outputs` to Region::outputs (memory sized by kiln from
  // the region's bound dims). Throws std::exception on failure; kiln reports it naming the
  // backend and the region. Called by one thread at a time.
  virtual void run(const std::vector<TensorRef>& inputs, const std::vector<TensorRef>& outputs) = 0;
};

// A chain of ops a backend runs as one unit (conv + bias + relu): each op's output is the next
// op's input and has no other consumer. Matched chains are partitioned together or not at all,
// and a chain is offered to the backend even when one of its ops alone is not supported.
struct Composite {
  std::string name;
  std::vector<std::string> ops;  // "Conv", "Relu"; "kiln::Gelu" for kiln's domain
};

struct ModuleOptions {
  int threads = 1;  // the session's thread count
};

// Runs body(i, ctx) for every i in [0, n) on a team of `threads` threads and returns when all
// are done (Backend::thread_team).
using ParallelFor = void (*)(int64_t n, int threads, void (*body)(int64_t i, void* ctx), void* ctx);

class Backend {
 public:
  virtual ~Backend() = default;
  // The name users select it by (`--offload NAME`): lower-case letters, digits and '_'.
  virtual std::string name() const = 0;
  // Whether the backend runs node `n` of `r` (`r` holds the node's inputs and outputs with their
  // types, dims known at partitioning and constant data). Must not throw.
  virtual bool supports(const Region& r, const Node& n) const = 0;
  virtual std::vector<Composite> composites() const { return {}; }
  // Work a node brings to a region; regions whose total is below min_region_cost stay native
  // (offloading one Relu costs more in layout conversions than it saves).
  virtual double node_cost(const Node& n) const;
  virtual double min_region_cost() const { return 10.0; }
  // A region as an artifact: bytes only this backend reads back (a JSON graph of library calls,
  // a binary). Called once per region at compile time, with symbolic dims as -1. Throws on
  // failure.
  virtual std::string codegen(const Region& region) const = 0;
  // A runnable module for `artifact`, with `region`'s dims all bound (one module per input-shape
  // signature: create the library's primitives here) and its constants' data valid during the
  // call (copy what you keep). Throws on failure.
  virtual std::unique_ptr<RuntimeModule> load(const std::string& artifact, const Region& region,
                                              const ModuleOptions& options) const = 0;
  // A backend whose library runs its own thread team (OpenMP) lends it here: a session that
  // offloads to it runs kiln's own parallel loops on that team too, so the two never compete
  // for cores. Null (the default): kiln keeps its pool.
  virtual ParallelFor thread_team() const { return nullptr; }
};

// Makes `backend` selectable by its name (std::invalid_argument when the name is taken or not
// lower-case letters, digits and '_'). In kiln itself (libkiln_external); plugins get it as the
// argument of their init function instead.
void register_backend(std::shared_ptr<const Backend> backend);
// The backend registered under `name`, or null.
std::shared_ptr<const Backend> find_backend(const std::string& name);
std::vector<std::string> backend_names();

// Plugins: a shared library that defines its init function with KILN_EXTENSION_INIT is loaded
// by `--backend-plugin FILE` (CLI) or KILN_BACKEND_PLUGINS=FILE[:FILE...] (every entry point);
// kiln calls it once with the version of this header it was built with and its registration
// function. Return 0, or nonzero (and register nothing) when `api_version` is not the one the
// plugin was built for. The plugin must be built with the same C++ standard library as kiln.
inline constexpr int kApiVersion = 1;
using RegisterFn = void (*)(std::shared_ptr<const Backend> backend);
using InitFn = int (*)(int api_version, RegisterFn register_fn);
#define KILN_EXTENSION_INIT(version_arg, register_arg)                                        \
  extern "C" __attribute__((visibility("default"))) int kiln_extension_init(int version_arg, \
                                                                            kiln::ext::RegisterFn register_arg)

// The default cost: 10 for Conv, ConvTranspose, MatMul, Gemm and the
// kiln::Attention family, 1 for anything else.
inline double Backend::node_cost(const Node& n) const {
  static const char* const heavy[] = {"Conv", "ConvTranspose", "MatMul", "Gemm", "Attention"};
  for (const char* h : heavy)
    if (n.op == h) return 10.0;
  return 1.0;
}

}  // namespace kiln::ext
