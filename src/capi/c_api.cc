// The C API (include/kiln/c_api.h): status and message handling, argument checks, compiled
// models (the plan embedded in this library, or another compiled library loaded with dlopen
// whose own C API calls are forwarded) and, in libkiln (KILN_CAPI_FULL), ONNX models.
// Built into libkiln_runtime (compiled models only), every compiled model library, and libkiln.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <mutex>
#include <new>

#include "capi/model_impl.h"
#include "capi/model_library.h"
#include "core/error.h"
#include "core/shape.h"
#include "runtime/library_seal.h"
#include "runtime/plan_io.h"
#include "runtime/thread_pool.h"

// What a compiled model library embeds (written by driver/aot.cc as assembler data).
struct KilnAotImage {
  uint64_t magic;  // kAotImageMagic
  uint64_t abi;    // KILN_C_API_VERSION of the exporter
  const char* blob;
  uint64_t blob_size;
  uint64_t num_kernels;
  const kiln::PlanKernelFn* kernels;
};
// Defined only inside a compiled model library; weak, so elsewhere its address is null.
extern "C" {
extern const KilnAotImage kiln_aot_image __attribute__((weak, visibility("hidden")));
}

struct kiln_model {
  std::unique_ptr<kiln::capi::ModelImpl> impl;
};

namespace kiln::capi {
namespace {

constexpr uint64_t kAotImageMagic = 0x45474d49544f414bULL;  // "KAOTIMGE"
thread_local std::string g_last_error;

kiln_status status_of(ErrorKind k) {
  switch (k) {
    case ErrorKind::kInternal: return KILN_ERROR_INTERNAL;
    case ErrorKind::kUsage: return KILN_ERROR_INVALID_ARGUMENT;
    case ErrorKind::kInvalidModel: return KILN_ERROR_INVALID_MODEL;
    case ErrorKind::kUnsupported: return KILN_ERROR_UNSUPPORTED;
    case ErrorKind::kBadInput: return KILN_ERROR_BAD_INPUT;
    case ErrorKind::kCancelled: return KILN_ERROR_CANCELLED;
    case ErrorKind::kTimeout: return KILN_ERROR_TIMEOUT;
    case ErrorKind::kResourceLimit: return KILN_ERROR_RESOURCE_LIMIT;
  }
  return KILN_ERROR_INTERNAL;
}

// Runs `f`, turning every exception into a status and this thread's message.
template <typename F>
kiln_status guarded(F&& f) {
  try {
    f();
    g_last_error.clear();
    return KILN_OK;
  } catch (const StatusError& e) {
    g_last_error = e.message;
    return e.status;
  } catch (const Error& e) {
    g_last_error = e.what();
    return status_of(e.kind());
  } catch (const std::bad_alloc&) {
    g_last_error = "out of memory";
    return KILN_ERROR_BAD_INPUT;
  } catch (const std::exception& e) {
    g_last_error = std::string("internal error: ") + e.what();
    return KILN_ERROR_INTERNAL;
  } catch (...) {
    g_last_error = "internal error: unknown exception";
    return KILN_ERROR_INTERNAL;
  }
}

[[noreturn]] void fail(kiln_status s, const std::string& msg) { throw StatusError{s, msg}; }

bool has_field(const kiln_options* o, size_t end) { return o && o->struct_size >= end; }

bool pack_at_load(const kiln_options* o) {
  return o && o->struct_size >= offsetof(kiln_options, pack_weights_at_load) + sizeof(int32_t) &&
         o->pack_weights_at_load != 0;
}

}  // namespace

int64_t max_memory_of(const kiln_options* o) {
  if (!has_field(o, offsetof(kiln_options, max_memory_bytes) + sizeof(int64_t))) return 0;
  if (o->max_memory_bytes < 0) fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_options.max_memory_bytes must be >= 0");
  return o->max_memory_bytes;
}

std::string offload_of(const kiln_options* o) {
  if (!has_field(o, offsetof(kiln_options, offload) + sizeof(const char*)) || !o->offload) return "";
  return o->offload;
}

std::string records_of(const kiln_options* o) {
  if (!has_field(o, offsetof(kiln_options, records) + sizeof(const char*)) || !o->records) return "";
  return o->records;
}

double timeout_of(const kiln_options* o) {
  if (!has_field(o, offsetof(kiln_options, run_timeout_ms) + sizeof(int64_t))) return 0;
  if (o->run_timeout_ms < 0) fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_options.run_timeout_ms must be >= 0");
  return static_cast<double>(o->run_timeout_ms) / 1000.0;
}

namespace {

int resolve_threads(const kiln_options* o) {
  if (!o) return 1;
  if (o->struct_size < sizeof(uint32_t) + sizeof(int32_t)) fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_options.struct_size is too small");
  if (o->threads < 0) fail(KILN_ERROR_INVALID_ARGUMENT, "kiln_options.threads must be >= 0");
  return o->threads == 0 ? ThreadPool::default_threads() : o->threads;
}

// ---- a compiled plan embedded in this library --------------------------------------------------

// One plan per input-shape signature the library was compiled for (`kiln compile --dim`); a run
// takes the plan of its input shapes. The plans share the weights (views into the blob), their
// packed copies (runtime/pack_cache.h) and one arena, the largest plan's (runs are serialized).
// The plans of If branches after them have an arena each.
class PlanModel : public ModelImpl {
 public:
  PlanModel(const KilnAotImage& img, int threads, bool pack_at_load, int64_t max_memory) {
    if (img.magic != kAotImageMagic) fail(KILN_ERROR_INVALID_MODEL, "not a kiln compiled model (bad image magic)");
    if (img.abi != KILN_C_API_VERSION)
      fail(KILN_ERROR_UNSUPPORTED, "compiled model for C API version " + std::to_string(img.abi) + ", this is " +
                                       std::to_string(KILN_C_API_VERSION));
    PlanBlob blob = read_plan_blobs(img.blob, img.blob_size);
    plans_ = std::move(blob.plans);  // (the buffer moves: the plans' `linked` pointers hold)
    entries_ = blob.signatures;
    for (size_t p = 0; p < plans_.size(); ++p) {
      ExecPlan& plan = plans_[p];
      if (plan.kernel_names.size() != img.num_kernels) fail(KILN_ERROR_INVALID_MODEL, "compiled model: kernel table mismatch");
      plan.kernels.assign(img.kernels, img.kernels + img.num_kernels);
      if (plan.has_fallback()) fail(KILN_ERROR_UNSUPPORTED, "compiled model with reference-kernel steps");
      if (p >= entries_) continue;
      if (plan.inputs.size() != plans_[0].inputs.size() || plan.outputs.size() != plans_[0].outputs.size())
        fail(KILN_ERROR_INVALID_MODEL, "compiled model: its plans have different inputs or outputs");
      arena_bytes_ = std::max(arena_bytes_, plan.arena_bytes);
    }
    check_memory(img, max_memory);
    pool_ = std::make_unique<ThreadPool>(threads);
    // External regions (the library links their backends, which registered when it loaded):
    // their modules are made now, and a backend's thread team runs kiln's loops too.
    for (ExecPlan& plan : plans_) {
      use_backend_thread_teams(plan, *pool_);
      ScopedThreadPool scope(pool_.get());
      plan.load_externals(pool_->num_threads());
    }
    // Packing the sgemm weights is most of a load (~100 MB for ResNet-50): on request here,
    // else on each step's first run.
    if (pack_at_load) {
      ScopedThreadPool scope(pool_.get());
      for (ExecPlan& plan : plans_) plan.make_gemm_ops();
    }
    arena_ = allocate_arena_memory(arena_bytes_);
    for (size_t p = 0; p < plans_.size(); ++p)
      if (p < entries_) plans_[p].bind_arena(arena_.get());
      else plans_[p].allocate_arena();
    inputs = merged_info(plans_[0].input_names, &ExecPlan::inputs);
    outputs = merged_info(plans_[0].output_names, &ExecPlan::outputs);
    for (size_t p = 0; p < entries_; ++p) {
      const ExecPlan& plan = plans_[p];
      signatures.emplace_back();
      for (size_t i = 0; i < plan.inputs.size(); ++i)
        signatures.back().push_back(TensorInfo{inputs[i].name, inputs[i].dtype, slot_dims(plan, plan.inputs[i])});
    }
  }
  void run(const kiln_tensor* in, size_t nin, kiln_tensor* out, size_t nout) override {
    std::vector<Tensor> views = input_views(inputs, in, nin, nout, outputs.size());
    ExecPlan& plan = plan_for(views);
    check_output_sizes(plan, out);
    std::vector<OutputBuffer> bufs = output_buffers(outputs, out);
    std::vector<RtValue> feeds(views.begin(), views.end());
    std::lock_guard<std::mutex> lk(mu_);
    ScopedThreadPool scope(pool_.get());
    std::vector<RtValue> results = execute_plan(plan, feeds, bufs, nullptr);
    set_output_dims(results, out);
  }

 private:
  const std::vector<int64_t>& slot_dims(const ExecPlan& plan, int32_t slot) const {
    return plan.slots[static_cast<size_t>(slot)].dims;
  }
  // Inputs or outputs as the plans declare them: a dim that differs between the plans is -1.
  std::vector<TensorInfo> merged_info(const std::vector<std::string>& names,
                                      std::vector<int32_t> ExecPlan::*which) const {
    std::vector<TensorInfo> v;
    for (size_t i = 0; i < names.size(); ++i) {
      const PlanSlot& s = plans_[0].slots[static_cast<size_t>((plans_[0].*which)[i])];
      TensorInfo info{names[i], s.dtype, s.dims};
      for (size_t p = 0; p < entries_; ++p) {
        const ExecPlan& plan = plans_[p];
        const PlanSlot& t = plan.slots[static_cast<size_t>((plan.*which)[i])];
        if (t.dtype != s.dtype || t.dims.size() != s.dims.size())
          fail(KILN_ERROR_INVALID_MODEL, "compiled model: its plans disagree on the type of '" + names[i] + "'");
        for (size_t d = 0; d < t.dims.size(); ++d)
          if (t.dims[d] != s.dims[d]) info.dims[d] = -1;
      }
      v.push_back(std::move(info));
    }
    return v;
  }
  // The plan compiled for the inputs' shapes; kBadInput listing the shapes the library holds.
  ExecPlan& plan_for(const std::vector<Tensor>& views) {
    for (size_t p = 0; p < entries_; ++p) {
      ExecPlan& plan = plans_[p];
      bool same = true;
      for (size_t i = 0; i < views.size() && same; ++i) same = views[i].dims() == slot_dims(plan, plan.inputs[i]);
      if (same) return plan;
    }
    std::string got, held;
    for (size_t i = 0; i < views.size(); ++i) got += (i ? ", " : "") + dims_to_string(views[i].dims());
    for (size_t p = 0; p < entries_ && p < 16; ++p) {
      held += p ? "; " : "";
      for (size_t i = 0; i < plans_[p].inputs.size(); ++i) held += (i ? ", " : "") + dims_to_string(slot_dims(plans_[p], plans_[p].inputs[i]));
    }
    if (entries_ > 16) held += "; ... (" + std::to_string(entries_) + " in all)";
    fail(KILN_ERROR_BAD_INPUT, "input shapes " + got + " are not among the signatures this library was compiled for (" +
                                   held + "); `kiln compile --dim NAME=V1,V2,...` adds sizes");
  }
  // An output buffer too small for the plan's output: kBadInput before running, with the
  // output's rank and dims set so that the caller can allocate and call again.
  void check_output_sizes(const ExecPlan& plan, kiln_tensor* out) const {
    if (!out) return;
    std::string small;
    for (size_t i = 0; i < plan.outputs.size(); ++i) {
      const PlanSlot& s = plan.slots[static_cast<size_t>(plan.outputs[i])];
      if (!s.tensor || s.dims.size() > KILN_MAX_RANK) continue;
      const auto need = static_cast<size_t>(checked_numel(s.dims)) * dtype_size(s.dtype);
      if (out[i].size_bytes >= need) continue;
      out[i].rank = static_cast<int32_t>(s.dims.size());
      for (size_t k = 0; k < s.dims.size(); ++k) out[i].dims[k] = s.dims[k];
      if (small.empty())
        small = "output " + std::to_string(i) + " ('" + outputs[i].name + "') of shape " + dims_to_string(s.dims) +
                " needs " + std::to_string(need) + " bytes, size_bytes is " + std::to_string(out[i].size_bytes);
    }
    if (!small.empty()) fail(KILN_ERROR_BAD_INPUT, small + " (the rank and dims of every output too small are set)");
  }
  // The shapes are fixed per plan, so the whole budget is known at load: the embedded weights,
  // their packed copies, the arena and the outputs (the largest plan's).
  void check_memory(const KilnAotImage& img, int64_t max_memory) const {
    if (max_memory <= 0) return;
    int64_t packed = 0, outs = 0, branch_arenas = 0;
    for (size_t p = 0; p < plans_.size(); ++p) {
      packed = std::max(packed, plans_[p].packed_weight_bytes());
      if (p < entries_) outs = std::max(outs, plans_[p].output_bytes());
      else branch_arenas += plans_[p].arena_bytes;
    }
    const auto weights = static_cast<int64_t>(img.blob_size);
    const int64_t need = weights + packed + arena_bytes_ + branch_arenas + outs;
    if (need > max_memory)
      fail(KILN_ERROR_RESOURCE_LIMIT, "the compiled model needs " + format_bytes(need) + " (weights and plan " +
                                          format_bytes(weights) + ", packed GEMM weights " + format_bytes(packed) +
                                          ", activations " + format_bytes(arena_bytes_ + branch_arenas) + ", outputs " +
                                          format_bytes(outs) + "), more than max_memory_bytes " +
                                          format_bytes(max_memory));
  }
  std::vector<ExecPlan> plans_;
  size_t entries_ = 0;  // plans_[0, entries_): one per signature; the rest: If branches
  int64_t arena_bytes_ = 0;
  ArenaMemory arena_{nullptr, &std::free};
  std::unique_ptr<ThreadPool> pool_;
  std::mutex mu_;
};

// ---- another compiled model library: its own C API, forwarded -----------------------------------


class ForwardModel : public ModelImpl {
 public:
  ForwardModel(void* dl, const std::string& what, const kiln_options* options) : dl_(dl) {
    if (const char* missing = bind_model_library(dl_, &api_))
      fail(KILN_ERROR_INVALID_MODEL, what + " is not a kiln compiled model (no " + missing + ")");
    if (api_.api_version() != KILN_C_API_VERSION)
      fail(KILN_ERROR_UNSUPPORTED, what + " was compiled for C API version " + std::to_string(api_.api_version()) +
                                       ", this library is version " + std::to_string(KILN_C_API_VERSION));
    check(api_.load_embedded(options, &inner_));
    auto infos = [&](size_t n, auto get) {
      std::vector<TensorInfo> v;
      for (size_t i = 0; i < n; ++i) {
        kiln_tensor_info ti;
        check(get(inner_, i, &ti));
        v.push_back(TensorInfo{ti.name, static_cast<DType>(ti.dtype), std::vector<int64_t>(ti.dims, ti.dims + ti.rank)});
      }
      return v;
    };
    inputs = infos(api_.num_inputs(inner_), api_.input_info);
    outputs = infos(api_.num_outputs(inner_), api_.output_info);
    const size_t nsig = api_.num_signatures && api_.signature_input ? api_.num_signatures(inner_) : 0;
    for (size_t s = 0; s < nsig; ++s)
      signatures.push_back(infos(inputs.size(), [&](const kiln_model* m, size_t i, kiln_tensor_info* ti) {
        return api_.signature_input(m, s, i, ti);
      }));
  }
  ~ForwardModel() override {
    if (inner_) api_.free(inner_);
    // The library stays loaded: its thread pool's workers and thread-locals may outlive the model.
  }
  void run(const kiln_tensor* in, size_t nin, kiln_tensor* out, size_t nout) override {
    check(api_.run(inner_, in, nin, out, nout));
  }
  // The library's own runs check its own canceller (its copy of the runtime).
  void cancel() override {
    ModelImpl::cancel();
    if (api_.cancel) api_.cancel(inner_);
  }

 private:
  void check(kiln_status s) {
    if (s != KILN_OK) fail(s, api_.last_error());
  }
  void* dl_;
  ModelLibraryApi api_{};
  kiln_model* inner_ = nullptr;
};

std::unique_ptr<ModelImpl> load_library(const std::string& path, const std::string& what, const kiln_options* options) {
  // A path without '/' would make dlopen search the library path instead of opening the file.
  std::string p = path.find('/') == std::string::npos ? "./" + path : path;
  void* dl = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    const char* e = dlerror();
    fail(KILN_ERROR_INVALID_MODEL, "cannot load " + what + ": " + (e ? e : "dlopen failed"));
  }
  return std::make_unique<ForwardModel>(dl, what, options);
}

bool is_elf(const void* data, size_t size) { return size >= 4 && std::memcmp(data, "\x7f" "ELF", 4) == 0; }

// The seal and ELF checks before dlopen (runtime/library_seal.h).
void check_library(const std::string& why, const std::string& what) {
  if (!why.empty()) fail(KILN_ERROR_INVALID_MODEL, "cannot load " + what + ": " + why);
}

#ifndef KILN_CAPI_FULL
[[noreturn]] void runtime_only(const std::string& what) {
  fail(KILN_ERROR_UNSUPPORTED, "unsupported: " + what +
                                   " is not a compiled kiln model; this is the runtime-only library, which runs "
                                   "only compiled models: compile the model with `kiln compile MODEL -o model.so` "
                                   "(or load ONNX files with libkiln)");
}
#endif

kiln_model* wrap(std::unique_ptr<ModelImpl> impl, const kiln_options* options) {
  impl->timeout_s = timeout_of(options);
  auto* m = new kiln_model;
  m->impl = std::move(impl);
  return m;
}

void require(bool ok, const char* msg) {
  if (!ok) fail(KILN_ERROR_INVALID_ARGUMENT, msg);
}

}  // namespace

// ---- shared argument checks --------------------------------------------------------------------

std::vector<Tensor> input_views(const std::vector<TensorInfo>& info, const kiln_tensor* inputs, size_t num_inputs,
                                size_t num_outputs, size_t expected_outputs) {
  if (num_inputs != info.size())
    fail(KILN_ERROR_INVALID_ARGUMENT, "the model has " + std::to_string(info.size()) + " inputs, got " +
                                          std::to_string(num_inputs));
  if (num_outputs != expected_outputs)
    fail(KILN_ERROR_INVALID_ARGUMENT, "the model has " + std::to_string(expected_outputs) + " outputs, got " +
                                          std::to_string(num_outputs));
  require(num_inputs == 0 || inputs, "inputs is NULL");
  std::vector<Tensor> views;
  for (size_t i = 0; i < num_inputs; ++i) {
    const kiln_tensor& t = inputs[i];
    const TensorInfo& want = info[i];
    const std::string name = "input " + std::to_string(i) + " ('" + want.name + "')";
    if (static_cast<DType>(t.dtype) != want.dtype)
      fail(KILN_ERROR_BAD_INPUT, name + " has dtype " + std::to_string(t.dtype) + ", the model expects " +
                                     std::to_string(static_cast<int>(want.dtype)) + " (" +
                                     std::string(dtype_name(want.dtype)) + ")");
    if (t.rank < 0 || t.rank > KILN_MAX_RANK || static_cast<size_t>(t.rank) != want.dims.size())
      fail(KILN_ERROR_BAD_INPUT, name + " has rank " + std::to_string(t.rank) + ", the model expects " +
                                     std::to_string(want.dims.size()));
    std::vector<int64_t> dims(t.dims, t.dims + t.rank);
    for (size_t d = 0; d < dims.size(); ++d)
      if (dims[d] < 0 || (want.dims[d] >= 0 && dims[d] != want.dims[d]))
        fail(KILN_ERROR_BAD_INPUT, name + " has shape " + dims_to_string(dims) + ", the model expects " +
                                       dims_to_string(want.dims));
    Tensor v = Tensor::view(want.dtype, dims, t.data);
    if (t.size_bytes < v.nbytes())
      fail(KILN_ERROR_BAD_INPUT, name + " needs " + std::to_string(v.nbytes()) + " bytes, size_bytes is " +
                                     std::to_string(t.size_bytes));
    if (!t.data && v.nbytes() > 0) fail(KILN_ERROR_INVALID_ARGUMENT, name + " has NULL data");
    // Generated kernels need 64-byte aligned buffers (codegen/llvm/codegen.h): copy others.
    if (reinterpret_cast<uintptr_t>(t.data) % Tensor::kAlignment != 0) v = v.clone();
    views.push_back(std::move(v));
  }
  return views;
}

std::vector<OutputBuffer> output_buffers(const std::vector<TensorInfo>& info, kiln_tensor* outputs) {
  require(info.empty() || outputs, "outputs is NULL");
  std::vector<OutputBuffer> bufs;
  for (size_t i = 0; i < info.size(); ++i) {
    const kiln_tensor& t = outputs[i];
    const std::string name = "output " + std::to_string(i) + " ('" + info[i].name + "')";
    if (static_cast<DType>(t.dtype) != info[i].dtype)
      fail(KILN_ERROR_BAD_INPUT, name + " has dtype " + std::to_string(t.dtype) + ", the model produces " +
                                     std::to_string(static_cast<int>(info[i].dtype)) + " (" +
                                     std::string(dtype_name(info[i].dtype)) + ")");
    if (!t.data) fail(KILN_ERROR_INVALID_ARGUMENT, name + " has NULL data");
    bufs.push_back(OutputBuffer{t.data, t.size_bytes});
  }
  return bufs;
}

void set_output_dims(const std::vector<RtValue>& results, kiln_tensor* outputs) {
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& d = results[i].tensor.dims();
    if (d.size() > KILN_MAX_RANK) fail(KILN_ERROR_UNSUPPORTED, "output rank above KILN_MAX_RANK");
    outputs[i].rank = static_cast<int32_t>(d.size());
    for (size_t k = 0; k < d.size(); ++k) outputs[i].dims[k] = d[k];
  }
}

}  // namespace kiln::capi

// ---- the C entry points ------------------------------------------------------------------------

using kiln::capi::guarded;
using kiln::capi::require;

extern "C" {

KILN_API int kiln_api_version(void) { return KILN_C_API_VERSION; }

KILN_API const char* kiln_last_error(void) { return kiln::capi::g_last_error.c_str(); }

KILN_API const char* kiln_status_name(kiln_status s) {
  switch (s) {
    case KILN_OK: return "ok";
    case KILN_ERROR_INTERNAL: return "internal error";
    case KILN_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case KILN_ERROR_INVALID_MODEL: return "invalid model";
    case KILN_ERROR_UNSUPPORTED: return "unsupported";
    case KILN_ERROR_BAD_INPUT: return "bad input";
    case KILN_ERROR_CANCELLED: return "cancelled";
    case KILN_ERROR_TIMEOUT: return "timeout";
    case KILN_ERROR_RESOURCE_LIMIT: return "resource limit";
  }
  return "unknown status";
}

KILN_API size_t kiln_dtype_size(kiln_dtype dtype) {
  if (!kiln::dtype_is_valid(static_cast<int32_t>(dtype)) || dtype == KILN_DTYPE_UNDEFINED) return 0;
  return kiln::dtype_size(static_cast<kiln::DType>(dtype));
}

KILN_API kiln_status kiln_model_load_embedded(const kiln_options* options, kiln_model** out) {
  return guarded([&] {
    require(out, "out is NULL");
    *out = nullptr;
    const int threads = kiln::capi::resolve_threads(options);
    if (&kiln_aot_image == nullptr)
      kiln::capi::fail(KILN_ERROR_UNSUPPORTED, "this library embeds no compiled model (kiln_model_load_embedded "
                                               "works in libraries made by `kiln compile -o`)");
    *out = kiln::capi::wrap(std::make_unique<kiln::capi::PlanModel>(
                                kiln_aot_image, threads, kiln::capi::pack_at_load(options),
                                kiln::capi::max_memory_of(options)),
                            options);
  });
}

KILN_API kiln_status kiln_model_load_file(const char* path, const kiln_options* options, kiln_model** out) {
  return guarded([&] {
    require(out, "out is NULL");
    *out = nullptr;
    require(path, "path is NULL");
    const int threads = kiln::capi::resolve_threads(options);
    char magic[4] = {0, 0, 0, 0};
    {
      std::ifstream f(path, std::ios::binary);
      if (!f)
        kiln::capi::fail(KILN_ERROR_INVALID_ARGUMENT,
                         std::string("cannot open '") + path + "': " + std::strerror(errno));
      f.read(magic, 4);
    }
    const std::string what = std::string("'") + path + "'";
    if (kiln::capi::is_elf(magic, static_cast<size_t>(4))) {
      kiln::capi::check_library(kiln::check_library_file(path), what);
      *out = kiln::capi::wrap(kiln::capi::load_library(path, what, options), options);
      return;
    }
#ifdef KILN_CAPI_FULL
    *out = kiln::capi::wrap(
        kiln::capi::load_onnx_file(path, threads, kiln::capi::max_memory_of(options), kiln::capi::records_of(options),
                                   kiln::capi::offload_of(options)),
        options);
#else
    (void)threads;
    kiln::capi::runtime_only(what);
#endif
  });
}

KILN_API kiln_status kiln_model_load_memory(const void* data, size_t size, const kiln_options* options,
                                            kiln_model** out) {
  return guarded([&] {
    require(out, "out is NULL");
    *out = nullptr;
    require(data || size == 0, "data is NULL");
    const int threads = kiln::capi::resolve_threads(options);
    if (kiln::capi::is_elf(data, size)) {
      kiln::capi::check_library(kiln::check_library_image(data, size), "the compiled model in memory");
      // dlopen needs a file: an anonymous memory file holds the library image.
      int fd = memfd_create("kiln-model", MFD_CLOEXEC);
      if (fd < 0) kiln::capi::fail(KILN_ERROR_INTERNAL, std::string("memfd_create: ") + std::strerror(errno));
      const char* p = static_cast<const char*>(data);
      size_t left = size;
      while (left > 0) {
        ssize_t n = write(fd, p, left);
        if (n <= 0) {
          close(fd);
          kiln::capi::fail(KILN_ERROR_INTERNAL, std::string("writing the memory file: ") + std::strerror(errno));
        }
        p += n;
        left -= static_cast<size_t>(n);
      }
      std::string path = "/proc/self/fd/" + std::to_string(fd);
      try {
        *out = kiln::capi::wrap(kiln::capi::load_library(path, "the compiled model in memory", options), options);
      } catch (...) {
        close(fd);
        throw;
      }
      close(fd);  // the mapping keeps the library
      return;
    }
#ifdef KILN_CAPI_FULL
    *out = kiln::capi::wrap(kiln::capi::load_onnx_bytes(data, size, threads, kiln::capi::max_memory_of(options),
                                                         kiln::capi::records_of(options), kiln::capi::offload_of(options)),
                            options);
#else
    (void)threads;
    kiln::capi::runtime_only("the model in memory");
#endif
  });
}

KILN_API void kiln_model_free(kiln_model* model) { delete model; }

KILN_API size_t kiln_model_num_inputs(const kiln_model* model) { return model ? model->impl->inputs.size() : 0; }
KILN_API size_t kiln_model_num_outputs(const kiln_model* model) { return model ? model->impl->outputs.size() : 0; }

static void describe(const kiln::capi::TensorInfo& t, kiln_tensor_info* out) {
  out->name = t.name.c_str();
  out->dtype = static_cast<kiln_dtype>(t.dtype);
  out->rank = static_cast<int32_t>(t.dims.size());
  out->dims = t.dims.data();
}

static kiln_status tensor_info(const kiln_model* model, size_t index, kiln_tensor_info* out, bool input) {
  return guarded([&] {
    require(model && out, "model or out is NULL");
    const auto& v = input ? model->impl->inputs : model->impl->outputs;
    if (index >= v.size())
      kiln::capi::fail(KILN_ERROR_INVALID_ARGUMENT, std::string(input ? "input" : "output") + " index " +
                                                        std::to_string(index) + " out of range (the model has " +
                                                        std::to_string(v.size()) + ")");
    describe(v[index], out);
  });
}

KILN_API kiln_status kiln_model_input_info(const kiln_model* model, size_t index, kiln_tensor_info* out) {
  return tensor_info(model, index, out, true);
}
KILN_API kiln_status kiln_model_output_info(const kiln_model* model, size_t index, kiln_tensor_info* out) {
  return tensor_info(model, index, out, false);
}

KILN_API size_t kiln_model_num_signatures(const kiln_model* model) {
  return model ? model->impl->signatures.size() : 0;
}

KILN_API kiln_status kiln_model_signature_input(const kiln_model* model, size_t signature, size_t index,
                                                kiln_tensor_info* out) {
  return guarded([&] {
    require(model && out, "model or out is NULL");
    const auto& sigs = model->impl->signatures;
    if (signature >= sigs.size())
      kiln::capi::fail(KILN_ERROR_INVALID_ARGUMENT, "signature " + std::to_string(signature) +
                                                        " out of range (the model has " + std::to_string(sigs.size()) + ")");
    if (index >= sigs[signature].size())
      kiln::capi::fail(KILN_ERROR_INVALID_ARGUMENT, "input index " + std::to_string(index) + " out of range (the model has " +
                                                        std::to_string(sigs[signature].size()) + ")");
    describe(sigs[signature][index], out);
  });
}

KILN_API kiln_status kiln_run(kiln_model* model, const kiln_tensor* inputs, size_t num_inputs, kiln_tensor* outputs,
                              size_t num_outputs) {
  return guarded([&] {
    require(model, "model is NULL");
    kiln::RunScope scope(&model->impl->canceller, model->impl->timeout_s);
    model->impl->run(inputs, num_inputs, outputs, num_outputs);
  });
}

KILN_API void kiln_cancel(kiln_model* model) {
  if (model) model->impl->cancel();
}

}  // extern "C"
