// Ahead-of-time export into a shared library, and opening one (see aot.h). The library is:
//   kernels.o  codegen::emit_object of the plan's PrimFuncs for the target (PIC);
//   image.s    the blob (runtime/plan_io.h) through `.incbin` into .rodata, 64-byte aligned, and
//              the kernel table + `kiln_aot_image` descriptor that c_api.cc's
//              kiln_model_load_embedded reads;
//   libkiln_runtime.a, whole, statically (PIC, hidden visibility), so the .so needs no kiln
//   library at run time; a version script exports only the C API; -Bsymbolic binds the
//   library's own calls inside it (two models in one process never mix runtimes).
#include "driver/aot.h"

#include "capi/model_library.h"

#include <dlfcn.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "codegen/llvm/codegen.h"
#include "driver/compile/plan_builder.h"
#include "driver/compile_model.h"
#include "driver/engine_passes.h"
#include "frontend/onnx/onnx_io.h"
#include "kiln/c_api.h"
#include "driver/offload.h"
#include "pass/pass.h"
#include "runtime/library_seal.h"
#include "runtime/plan_io.h"

#ifndef KILN_RUNTIME_ARCHIVE
#define KILN_RUNTIME_ARCHIVE ""
#endif
#ifndef KILN_DNNL_ARCHIVES
#define KILN_DNNL_ARCHIVES ""
#endif

namespace kiln {
namespace {

// The archives and libraries of the external backends the plans' regions need, for the link
// line (inside its --whole-archive: a backend registers itself when the library loads).
std::string backend_link_args(const std::vector<ExecPlan>& plans) {
  std::set<std::string> backends;
  for (const ExecPlan& p : plans)
    for (const PlanExternal& x : p.externals) backends.insert(x.backend);
  std::string args, libs;
  for (const std::string& b : backends) {
    if (b == "dnnl" && std::string(KILN_DNNL_ARCHIVES).size() > 0) {
      args += std::string(" ") + KILN_DNNL_ARCHIVES;
      libs = " -ldnnl -lgomp";
      continue;
    }
    throw Error(ErrorKind::kUnsupported, "regions of the external backend '" + b +
                                             "' cannot be linked into a compiled library (only built-in backends: dnnl)");
  }
  return args + (libs.empty() ? "" : " -Wl,--no-whole-archive" + libs + " -Wl,--whole-archive");
}

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

constexpr uint64_t kAotImageMagic = 0x45474d49544f414bULL;  // must match capi/c_api.cc

// The C API names a model library exports (keep in sync with include/kiln/c_api.h and
// src/capi/exports.map).
const char* const kExports[] = {"kiln_api_version",      "kiln_last_error",        "kiln_status_name",
                                "kiln_dtype_size",       "kiln_model_load_file",   "kiln_model_load_memory",
                                "kiln_model_load_embedded", "kiln_model_free",     "kiln_model_num_inputs",
                                "kiln_model_num_outputs", "kiln_model_input_info", "kiln_model_output_info",
                                "kiln_model_num_signatures", "kiln_model_signature_input",
                                "kiln_run", "kiln_cancel"};

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

void write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
  if (!f) throw Error(ErrorKind::kUsage, "cannot write '" + p.string() + "'");
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string runtime_archive(const AotOptions& o) {
  std::string a = o.runtime_archive;
  if (a.empty())
    if (const char* e = std::getenv("KILN_RUNTIME_LIB")) a = e;
  if (a.empty()) a = KILN_RUNTIME_ARCHIVE;
  if (a.empty() || !std::filesystem::exists(a))
    throw Error(ErrorKind::kUsage, "libkiln_runtime.a not found" + (a.empty() ? std::string() : " at '" + a + "'") +
                                       "; build the kiln_runtime_static target or set KILN_RUNTIME_LIB");
  return a;
}

// A plan's data without what a run or the JIT bound to it (GemmOps, arena views, kernel pointers).
ExecPlan plan_data(const ExecPlan& src) {
  ExecPlan p;
  p.slots = src.slots;
  p.inputs = src.inputs;
  p.input_names = src.input_names;
  p.outputs = src.outputs;
  p.output_names = src.output_names;
  p.constants = src.constants;
  p.steps = src.steps;
  p.kernel_names = src.kernel_names;
  p.arena_bytes = src.arena_bytes;
  for (auto& st : p.steps) {
    st.gemm_op.reset();
    for (auto& a : st.args) a.view = Tensor();
  }
  p.externals = src.externals;
  for (PlanExternal& x : p.externals) x.module.reset();  // the library's loader makes its own
  return p;
}

// The plan as the library runs it: graph inputs with defaults become constants (only the
// inputs a caller feeds remain), kernels and GemmOps are left to the loader.
ExecPlan export_plan(const ExecPlan& src, const Graph& g, const std::vector<RtValue>& feeds) {
  ExecPlan p = plan_data(src);
  p.inputs.clear();
  p.input_names.clear();
  for (size_t i = 0; i < src.inputs.size(); ++i) {
    const Value& in = *g.inputs[i];
    int32_t s = src.inputs[i];
    if (in.initializer.defined()) {
      p.slots[static_cast<size_t>(s)].constant = static_cast<int32_t>(p.constants.size());
      p.constants.push_back(feeds[i].is_tensor() ? feeds[i].tensor : in.initializer);
      continue;
    }
    if (!feeds[i].is_tensor())
      throw Error(ErrorKind::kUnsupported, "ahead-of-time export of a model whose input '" + in.name +
                                               "' is not a tensor");
    p.inputs.push_back(s);
    p.input_names.push_back(src.input_names[i]);
  }
  return p;
}

std::string assembler_image(const std::string& blob_path, const std::vector<std::string>& kernels) {
  std::ostringstream s;
  s << "# kiln ahead-of-time model image (generated by kiln compile -o; plain assembler, no cpp)\n"
    << "  .section .rodata.kiln_blob,\"a\",@progbits\n"
    << "  .p2align 6\n"
    << ".Lkiln_blob:\n"
    << "  .incbin \"" << blob_path << "\"\n"
    << ".Lkiln_blob_end:\n"
    << "  .section .data.rel.ro.kiln_image,\"aw\",@progbits\n"
    << "  .p2align 3\n"
    << ".Lkiln_kernels:\n";
  for (const auto& k : kernels) s << "  .quad " << k << "\n";
  s << "  .globl kiln_aot_image\n"
    << "  .hidden kiln_aot_image\n"
    << "  .type kiln_aot_image,@object\n"
    << "  .size kiln_aot_image,48\n"
    << "kiln_aot_image:\n"
    << "  .quad " << kAotImageMagic << "\n"
    << "  .quad " << KILN_C_API_VERSION << "\n"
    << "  .quad .Lkiln_blob\n"
    << "  .quad .Lkiln_blob_end - .Lkiln_blob\n"
    << "  .quad " << kernels.size() << "\n"
    << "  .quad .Lkiln_kernels\n"
    << "  .section .note.GNU-stack,\"\",@progbits\n";
  return s.str();
}

std::string version_script() {
  std::string s = "{\n  global:\n";
  for (const char* e : kExports) s += std::string("    ") + e + ";\n";
  return s + "  local: *;\n};\n";
}

// Every combination of the listed sizes (a map with no lists: one signature of defaults).
std::vector<std::map<std::string, int64_t>> signatures_of(const std::map<std::string, std::vector<int64_t>>& dims) {
  std::vector<std::map<std::string, int64_t>> out{{}};
  for (const auto& [name, values] : dims) {
    if (values.empty()) throw Error(ErrorKind::kUsage, "--dim " + name + ": no size");
    std::vector<std::map<std::string, int64_t>> next;
    for (const auto& sig : out)
      for (int64_t v : std::set<int64_t>(values.begin(), values.end())) {
        next.push_back(sig);
        next.back()[name] = v;
      }
    out = std::move(next);
  }
  if (out.size() > kMaxSignatures)
    throw Error(ErrorKind::kUsage, "the --dim lists make " + std::to_string(out.size()) + " input signatures; a library holds at most " +
                                       std::to_string(kMaxSignatures));
  return out;
}

// kUsage when a --dim name is not a symbolic dim of the model's inputs (its sizes would make
// signatures that are all the same).
void check_dim_names(const Model& model, const std::map<std::string, std::vector<int64_t>>& dims) {
  std::set<std::string> symbols;
  for (const Value* in : model.graph->inputs)
    if (!in->initializer.defined() && in->type.shape)
      for (const Dim& d : in->type.shape->dims)
        if (!d.known() && !d.symbol.empty()) symbols.insert(d.symbol);
  for (const auto& [name, values] : dims)
    if (!symbols.count(name)) {
      std::string known;
      for (const auto& s : symbols) known += (known.empty() ? "" : ", ") + s;
      throw Error(ErrorKind::kUsage, "--dim " + name + ": the model's inputs have no symbolic dim of that name (" +
                                         (known.empty() ? std::string("they have none") : "they have: " + known) + ")");
    }
}

// The kernels of several plans as one table: a kernel the plans share (same TIR up to names:
// dims that vary with the input sizes are params) is emitted once, and every plan's steps index
// the one table.
class KernelTable {
 public:
  void add(ExecPlan& plan, const std::vector<tir::PrimFunc>& funcs) {
    std::map<std::string, int32_t> index_of;  // the plan's kernel name -> the table's index
    for (const tir::PrimFunc& f : funcs) {
      auto [it, fresh] = table_index_.emplace(compile::kernel_identity(f), static_cast<int32_t>(funcs_.size()));
      if (fresh) {
        funcs_.push_back(f);
        funcs_.back().name = "k" + std::to_string(it->second);
      }
      index_of[f.name] = it->second;
    }
    for (PlanStep& st : plan.steps)
      if (st.kind == PlanStep::Kind::kKernel) st.kernel = index_of.at(plan.kernel_names[static_cast<size_t>(st.kernel)]);
  }
  const std::vector<tir::PrimFunc>& funcs() const { return funcs_; }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& f : funcs_) out.push_back(f.name);
    return out;
  }

 private:
  std::map<std::string, int32_t> table_index_;  // kernel identity -> index in funcs_
  std::vector<tir::PrimFunc> funcs_;
};

// The plans of a library: one per signature, then the plans of their If branches (each after the
// plan whose kIf step runs it: runtime/plan_io.h), with one kernel table. A step no library can
// hold is recorded: a reference kernel in `refused`, Loop or Scan in `control_flow`.
class LibraryPlans {
 public:
  explicit LibraryPlans(size_t signatures) : signatures_(signatures) {}

  // `plan`: the last plan of `ex` in the library's form (export_plan).
  void add_entry(ExecPlan plan, const CompiledExecutor& ex) {
    kernels.add(plan, *ex.last_kernels());
    add_branches(plan, ex);
    entries.push_back(std::move(plan));
  }
  // Every plan, entries first; their kernel tables set to the library's.
  std::vector<ExecPlan> all() {
    std::vector<ExecPlan> out = std::move(entries);
    for (ExecPlan& b : branches) out.push_back(std::move(b));
    for (ExecPlan& p : out) p.kernel_names = kernels.names();
    return out;
  }
  // kUnsupported naming the refused steps (the first 10 of each kind, then per-op counts).
  void check() const {
    std::string msg;
    if (!control_flow.empty())
      msg = "ahead-of-time export of " + listed(control_flow) +
            ": a library holds If only (Loop and Scan bodies run on nested JIT plans)";
    if (!refused.empty())
      msg += (msg.empty() ? "ahead-of-time export of " : "; and of ") + listed(refused) +
             (refused.size() > 1 ? ": they run" : ": it runs") + " on a reference kernel";
    if (!msg.empty()) throw Error(ErrorKind::kUnsupported, msg);
  }

  KernelTable kernels;
  std::vector<ExecPlan> entries, branches;
  std::vector<std::pair<std::string, std::string>> refused, control_flow;  // op, node

 private:
  static std::string listed(const std::vector<std::pair<std::string, std::string>>& steps) {
    std::string out;
    std::map<std::string, int> per_op;
    for (size_t i = 0; i < steps.size(); ++i) {
      if (i < 10) out += (i ? "; " : "") + steps[i].first + " (node " + steps[i].second + ")";
      ++per_op[steps[i].first];
    }
    if (steps.size() > 10) {
      out += " (" + std::to_string(steps.size()) + " nodes in all:";
      for (const auto& [op, n] : per_op) out += " " + op + " " + std::to_string(n);
      out += ")";
    }
    return out;
  }
  // Turns the If steps of `plan` (made by `ex`) into kIf steps and exports each branch's plan.
  void add_branches(ExecPlan& plan, const CompiledExecutor& ex) {
    for (PlanStep& st : plan.steps) {
      if (st.kind != PlanStep::Kind::kFallback) continue;
      const Node& n = *ex.graph().nodes.at(static_cast<size_t>(st.node));
      if (n.op_type != "If" || !n.domain.empty()) {
        (n.has_subgraphs() ? control_flow : refused).emplace_back(st.op, st.name);
        continue;
      }
      st.kind = PlanStep::Kind::kIf;
      st.branches = {-1, -1};
      st.branch_feeds = {{}, {}};
      for (int b = 0; b < 2; ++b) {
        CompiledExecutor::BranchPlan bp = ex.branch_plan(st.node, b);
        if (!bp.plan || !fits(plan, st, bp)) continue;  // taking it fails at run time, naming the If
        ExecPlan body = plan_data(*bp.plan);
        kernels.add(body, *bp.kernels);
        const size_t index = branches.size();
        branches.emplace_back();  // (its place first: the branches inside come after it)
        add_branches(body, *bp.executor);
        branches[index] = std::move(body);
        st.branches[static_cast<size_t>(b)] = static_cast<int32_t>(signatures_ + index);
        st.branch_feeds[static_cast<size_t>(b)] = bp.feeds;
      }
    }
  }
  // Whether the branch's plan was made for the values this step feeds it (a branch's last plan
  // may come from another signature's run).
  static bool fits(const ExecPlan& plan, const PlanStep& st, const CompiledExecutor::BranchPlan& bp) {
    if (bp.feeds.size() != bp.plan->inputs.size() || bp.plan->outputs.size() != st.outputs.size()) return false;
    for (size_t k = 0; k < bp.feeds.size(); ++k) {
      const int32_t outer = st.inputs.at(static_cast<size_t>(bp.feeds[k]));
      if (outer < 0) return false;
      const PlanSlot& a = plan.slots[static_cast<size_t>(outer)];
      const PlanSlot& b = bp.plan->slots[static_cast<size_t>(bp.plan->inputs[k])];
      if (a.tensor != b.tensor || a.dtype != b.dtype || a.dims != b.dims) return false;
    }
    return true;
  }
  size_t signatures_;
};

}  // namespace

AotResult compile_shared_library(const std::string& model_path, const std::string& out_path, const AotOptions& o) {
  namespace fs = std::filesystem;
  AotResult r;
  auto t0 = Clock::now();
  const std::string archive = runtime_archive(o);
  if (o.target != "native" && o.target.empty()) throw Error(ErrorKind::kUsage, "--target is empty");
  const std::vector<std::map<std::string, int64_t>> signatures = signatures_of(o.dims);

  // The plans, built as `kiln compile` builds them (default pass pipeline, seeded random inputs),
  // one per signature; one executor, so later signatures reuse the kernels of earlier ones.
  Model model = load_onnx_model(model_path);
  check_dim_names(model, o.dims);
  {
    PassContext ctx = engine_pass_context();
    ctx.offload = offload_backends(!o.offload.empty() || !o.tuned_offload ? o.offload : tuned_backends(model, *o.tuned_offload));
    ctx.offload_min_cost = o.offload_min_cost;
    run_passes(model, default_pipeline(), ctx);
  }
  CompiledOptions co;
  co.threads = o.threads;
  co.seed = o.seed;
  co.target.cpu = o.target;
  co.plan_untaken_branches = true;
  co.tuning = o.tuning;
  CompiledExecutor ex(model, co);
  if (!o.input_files.empty() && (!o.dims.empty() || !o.shapes.empty()))
    throw Error(ErrorKind::kUsage, "input files give the library its one signature: --dim and --shape do not apply");
  LibraryPlans library(signatures.size());
  for (const auto& dims : signatures) {
    std::vector<RtValue> feeds;
    if (o.input_files.empty()) {
      feeds = random_feeds(model, dims, o.seed, o.shapes);
    } else {
      std::vector<NamedValue> values;
      for (const std::string& f : o.input_files) values.push_back(read_value_file(f, nullptr));
      feeds = bind_inputs(model, values);
    }
    ex.run(feeds);
    if (library.entries.empty()) r.stats = ex.stats();
    if (!ex.last_exec_plan()) throw Error(ErrorKind::kUnsupported, "ahead-of-time export: the model has no compiled plan");
    // run() fills defaulted inputs itself; the export needs their values.
    for (size_t i = 0; i < feeds.size(); ++i)
      if (feeds[i].is_none() && model.graph->inputs[i]->initializer.defined()) feeds[i] = RtValue(model.graph->inputs[i]->initializer);
    library.add_entry(export_plan(*ex.last_exec_plan(), *model.graph, feeds), ex);
  }
  library.check();
  r.kernels = static_cast<int>(library.kernels.funcs().size());
  std::vector<ExecPlan> out_plans = library.all();
  r.signatures = static_cast<int>(signatures.size());
  r.branch_plans = static_cast<int>(out_plans.size() - signatures.size());
  r.plan_ms = ms_since(t0);

  // A private temporary directory for the pieces.
  std::string tmpl = (fs::temp_directory_path() / "kiln-aot-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw Error(ErrorKind::kUsage, "cannot create a temporary directory: " + std::string(std::strerror(errno)));
  const fs::path dir = tmpl;
  struct Cleanup {
    fs::path dir;
    bool keep;
    ~Cleanup() {
      std::error_code ec;
      if (!keep) fs::remove_all(dir, ec);
    }
  } cleanup{dir, o.keep_temps};

  auto t1 = Clock::now();
  codegen::TargetOptions target;
  target.cpu = o.target;
  target = compile::codegen_target(target);
  const fs::path obj = dir / "kernels.o";
  const std::vector<tir::PrimFunc>& funcs = library.kernels.funcs();
  if (!funcs.empty()) codegen::emit_object(funcs, target, obj.string());
  r.object_ms = ms_since(t1);

  auto t2 = Clock::now();
  const fs::path blob = dir / "blob.bin";
  std::vector<const ExecPlan*> plans;
  for (const ExecPlan& p : out_plans) plans.push_back(&p);
  r.blob_bytes = write_plan_blob(plans, signatures.size(), blob.string());
  write_file(dir / "image.s", assembler_image(blob.string(), library.kernels.names()));
  write_file(dir / "exports.map", version_script());
  std::string cxx = o.cxx;
  if (cxx.empty())
    if (const char* e = std::getenv("CXX")) cxx = e;
  if (cxx.empty()) cxx = "c++";
  const fs::path tmp_out = dir / "model.so";
  std::string cmd = cxx + " -shared -o " + quote(tmp_out.string()) + " " + quote((dir / "image.s").string());
  if (!funcs.empty()) cmd += " " + quote(obj.string());
  cmd += " -Wl,--whole-archive " + quote(archive) + backend_link_args(out_plans) + " -Wl,--no-whole-archive -Wl,--version-script=" +
         quote((dir / "exports.map").string()) +
         " -Wl,-Bsymbolic -Wl,-z,noexecstack -Wl,--as-needed -lmvec -lm -ldl -lpthread 2> " +
         quote((dir / "link.log").string());
  int rc = std::system(cmd.c_str());
  if (rc != 0)
    throw Error(ErrorKind::kUsage, "linking the model library failed (" + cmd + "):\n" + read_file(dir / "link.log"));
  seal_library_file(tmp_out.string());
  std::error_code ec;
  fs::rename(tmp_out, out_path, ec);
  if (ec) {  // another file system: copy
    fs::copy_file(tmp_out, out_path, fs::copy_options::overwrite_existing, ec);
    if (ec) throw Error(ErrorKind::kUsage, "cannot write '" + out_path + "': " + ec.message());
  }
  r.link_ms = ms_since(t2);
  r.library_bytes = fs::file_size(out_path);
  r.total_ms = ms_since(t0);
  return r;
}

bool is_shared_library_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char m[4] = {0, 0, 0, 0};
  f.read(m, 4);
  return f && std::memcmp(m, "\x7f" "ELF", 4) == 0;
}

// ---- CompiledLibrary -----------------------------------------------------------------------------

struct CompiledLibrary::Api : ModelLibraryApi {
  void* dl = nullptr;

  void check(kiln_status s) const {
    if (s == KILN_OK) return;
    ErrorKind k = s == KILN_ERROR_INVALID_ARGUMENT ? ErrorKind::kUsage
                  : s == KILN_ERROR_INVALID_MODEL  ? ErrorKind::kInvalidModel
                  : s == KILN_ERROR_UNSUPPORTED    ? ErrorKind::kUnsupported
                  : s == KILN_ERROR_BAD_INPUT      ? ErrorKind::kBadInput
                  : s == KILN_ERROR_CANCELLED      ? ErrorKind::kCancelled
                  : s == KILN_ERROR_TIMEOUT        ? ErrorKind::kTimeout
                  : s == KILN_ERROR_RESOURCE_LIMIT ? ErrorKind::kResourceLimit
                                                   : ErrorKind::kInternal;
    throw Error(k, last_error());
  }
};

std::unique_ptr<CompiledLibrary> CompiledLibrary::open(const std::string& path, int threads, int64_t max_memory_bytes,
                                                       int64_t run_timeout_ms) {
  if (std::string why = check_library_file(path); !why.empty())
    throw Error(ErrorKind::kInvalidModel, "cannot load '" + path + "': " + why);
  std::string p = path.find('/') == std::string::npos ? "./" + path : path;
  void* dl = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    const char* e = dlerror();
    throw Error(ErrorKind::kInvalidModel, "cannot load '" + path + "': " + (e ? e : "dlopen failed"));
  }
  std::unique_ptr<CompiledLibrary> lib(new CompiledLibrary());
  lib->api_ = std::make_unique<Api>();
  Api& a = *lib->api_;
  a.dl = dl;
  if (const char* missing = bind_model_library(dl, &a))
    throw Error(ErrorKind::kInvalidModel, "'" + path + "' is not a kiln compiled model (no " + missing + ")");
  auto api_version = a.api_version;
  if (api_version() != KILN_C_API_VERSION)
    throw Error(ErrorKind::kUnsupported, "'" + path + "' was built for C API version " +
                                             std::to_string(api_version()) + ", this kiln has " +
                                             std::to_string(KILN_C_API_VERSION));
  kiln_options opts = KILN_OPTIONS_INIT;
  opts.threads = threads;
  opts.max_memory_bytes = max_memory_bytes;
  opts.run_timeout_ms = run_timeout_ms;
  kiln_model* m = nullptr;
  a.check(a.load_embedded(&opts, &m));
  lib->model_ = m;
  auto infos = [&](size_t n, auto get) {
    std::vector<Info> v;
    for (size_t i = 0; i < n; ++i) {
      kiln_tensor_info ti;
      a.check(get(m, i, &ti));
      v.push_back(Info{ti.name, static_cast<DType>(ti.dtype), std::vector<int64_t>(ti.dims, ti.dims + ti.rank)});
    }
    return v;
  };
  lib->inputs_ = infos(a.num_inputs(m), a.input_info);
  lib->outputs_ = infos(a.num_outputs(m), a.output_info);
  const size_t nsig = a.num_signatures && a.signature_input ? a.num_signatures(m) : 0;
  for (size_t s = 0; s < nsig; ++s)
    lib->signatures_.push_back(infos(lib->inputs_.size(), [&](const kiln_model* mm, size_t i, kiln_tensor_info* ti) {
      return a.signature_input(mm, s, i, ti);
    }));
  return lib;
}

CompiledLibrary::~CompiledLibrary() {
  if (model_) api_->free(static_cast<kiln_model*>(model_));
}

std::vector<Tensor> CompiledLibrary::run(const std::vector<Tensor>& inputs) {
  std::vector<kiln_tensor> in(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (t.rank() > KILN_MAX_RANK) throw Error(ErrorKind::kBadInput, "input rank above KILN_MAX_RANK");
    in[i].dtype = static_cast<kiln_dtype>(t.dtype());
    in[i].rank = t.rank();
    for (int k = 0; k < t.rank(); ++k) in[i].dims[k] = t.dim(k);
    in[i].data = t.raw();
    in[i].size_bytes = t.nbytes();
  }
  std::vector<Tensor> outs(outputs_.size());
  std::vector<kiln_tensor> out(outputs_.size());
  auto bind = [&](size_t i, const std::vector<int64_t>& dims) {
    outs[i] = Tensor(outputs_[i].dtype, dims);
    out[i].dtype = static_cast<kiln_dtype>(outputs_[i].dtype);
    out[i].data = outs[i].raw();
    out[i].size_bytes = outs[i].nbytes();
  };
  bool symbolic = false;
  for (size_t i = 0; i < outputs_.size(); ++i) {
    const auto& d = outputs_[i].dims;
    if (std::find(d.begin(), d.end(), -1) == d.end()) {
      bind(i, d);
      continue;
    }
    // A library of several signatures: a zero-byte buffer asks kiln_run for the output's shape
    // (it fails before running, with rank and dims set); then the run proper.
    static char no_bytes;
    symbolic = true;
    out[i].dtype = static_cast<kiln_dtype>(outputs_[i].dtype);
    out[i].rank = -1;
    out[i].data = &no_bytes;
  }
  auto* model = static_cast<kiln_model*>(model_);
  if (symbolic) {
    const kiln_status s = api_->run(model, in.data(), in.size(), out.data(), out.size());
    bool all_set = s == KILN_OK || s == KILN_ERROR_BAD_INPUT;
    for (size_t i = 0; i < outputs_.size(); ++i) all_set = all_set && out[i].rank >= 0;
    if (!all_set) api_->check(s);
    for (size_t i = 0; i < outputs_.size(); ++i)
      if (!outs[i].defined()) bind(i, std::vector<int64_t>(out[i].dims, out[i].dims + out[i].rank));
    if (s == KILN_OK) return outs;  // (every symbolic output was empty)
  }
  api_->check(api_->run(model, in.data(), in.size(), out.data(), out.size()));
  return outs;
}

}  // namespace kiln
