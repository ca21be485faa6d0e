// The module pipeline: PrimFuncs -> one LLVM module (Emitter per kernel) -> verify -> O3 with the
// new pass manager for the target machine -> ORC LLJIT (JitModule) or an object file
// (emit_object). Runtime symbols are defined as absolute symbols in the JIT's main dylib; libm
// and libc functions resolve from the current process, and libmvec (vector math) is loaded into
// it when present (object files then need -lmvec).
#include <mutex>
#include <optional>

#include <llvm/Analysis/CGSCCPassManager.h>
#include <llvm/Analysis/LoopAnalysisManager.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/PassManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/SubtargetFeature.h>

#include "codegen/llvm/codegen.h"
#include "codegen/llvm/disk_cache.h"
#include "codegen/llvm/emitter.h"
#include "codegen/llvm/vector_math.h"
#include "core/error.h"

namespace kiln::codegen {

namespace {

void init_llvm() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

std::string host_features() {
  std::vector<std::string> on, off;
  for (const auto& f : llvm::sys::getHostCPUFeatures()) (f.second ? on : off).push_back(f.first().str());
  std::sort(on.begin(), on.end());
  std::sort(off.begin(), off.end());
  std::string s;
  for (const auto& f : on) s += (s.empty() ? "+" : ",+") + f;
  for (const auto& f : off) s += (s.empty() ? "-" : ",-") + f;
  return s;
}

struct ResolvedTarget {
  std::string triple, cpu, features;
  llvm::CodeGenOptLevel level = llvm::CodeGenOptLevel::Aggressive;
  int opt_level = 3;
  int vector_math_bits = 0;  // see FunctionTarget
};

[[noreturn]] void llvm_error(const std::string& what, llvm::Error err) {
  throw Error(ErrorKind::kInternal, "codegen/llvm: " + what + ": " + llvm::toString(std::move(err)));
}

ResolvedTarget resolve(const TargetOptions& o) {
  init_llvm();
  ResolvedTarget t;
  t.triple = llvm::sys::getProcessTriple();
  if (o.cpu.empty() || o.cpu == "native") {
    t.cpu = llvm::sys::getHostCPUName().str();
    t.features = host_features();
    if (!o.features.empty()) t.features += "," + o.features;
  } else {
    t.cpu = o.cpu;
    t.features = o.features;
  }
  if (o.opt_level < 0 || o.opt_level > 3)
    throw Error(ErrorKind::kUsage, "codegen/llvm: opt_level must be 0..3, got " + std::to_string(o.opt_level));
  t.opt_level = o.opt_level;
  static const llvm::CodeGenOptLevel kLevels[] = {
      llvm::CodeGenOptLevel::None, llvm::CodeGenOptLevel::Less, llvm::CodeGenOptLevel::Default,
      llvm::CodeGenOptLevel::Aggressive};
  t.level = kLevels[o.opt_level];
  return t;
}

std::unique_ptr<llvm::TargetMachine> make_target_machine(const ResolvedTarget& t) {
  std::string err;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(t.triple, err);
  if (!target) throw Error(ErrorKind::kUnsupported, "codegen/llvm: no LLVM target for " + t.triple + ": " + err);
  std::unique_ptr<llvm::MCSubtargetInfo> sti(target->createMCSubtargetInfo(t.triple, "", ""));
  if (sti && !sti->isCPUStringValid(t.cpu))
    throw Error(ErrorKind::kUsage, "codegen/llvm: unknown CPU '" + t.cpu + "' for " + t.triple);
  llvm::TargetOptions options;
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      t.triple, t.cpu, t.features, options, llvm::Reloc::PIC_, std::nullopt, t.level));
  if (!tm) throw Error(ErrorKind::kUnsupported, "codegen/llvm: cannot create a target machine for " + t.cpu);
  return tm;
}

// The widest libmvec variant the target can call: e (AVX-512F), d (AVX2), b (SSE2), on x86-64.
int vector_math_bits(const ResolvedTarget& t, llvm::TargetMachine& tm) {
  if (tm.getTargetTriple().getArch() != llvm::Triple::x86_64) return 0;
  const llvm::MCSubtargetInfo* sti = tm.getMCSubtargetInfo();
  const llvm::SubtargetFeatures explicit_features(t.features);
  auto has = [&](const char* f) {
    // Features of the CPU, then the explicit list (whose last mention of a feature wins).
    bool on = sti->checkFeatures(std::string("+") + f);
    for (const std::string& x : explicit_features.getFeatures())
      if (x.size() > 1 && x.substr(1) == f) on = x[0] == '+';
    return on;
  };
  return has("avx512f") ? 512 : has("avx2") ? 256 : 128;
}

// Builds, verifies and optimizes the module holding every kernel of `funcs`.
std::unique_ptr<llvm::Module> build_module(llvm::LLVMContext& ctx, const std::vector<tir::PrimFunc>& funcs,
                                           const ResolvedTarget& t, llvm::TargetMachine& tm) {
  auto module = std::make_unique<llvm::Module>("kiln", ctx);
  module->setTargetTriple(t.triple);
  module->setDataLayout(tm.createDataLayout());
  for (const tir::PrimFunc& f : funcs)
    Emitter(*module, {t.cpu, t.features, t.vector_math_bits}, f).emit_kernel();
  std::string err;
  llvm::raw_string_ostream os(err);
  if (llvm::verifyModule(*module, &os))
    throw_internal(__FILE__, __LINE__, "codegen/llvm: invalid module: " + os.str());

  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = t.opt_level >= 2;
  pto.SLPVectorization = t.opt_level >= 2;
  llvm::PassBuilder pb(&tm, pto);
  llvm::TargetLibraryInfoImpl tlii(llvm::Triple(t.triple));
  if (t.vector_math_bits > 0) tlii.addVectorizableFunctions(libmvec_mappings(t.vector_math_bits));
  fam.registerPass([&] { return llvm::TargetLibraryAnalysis(tlii); });
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  static const llvm::OptimizationLevel* kLevels[] = {&llvm::OptimizationLevel::O0, &llvm::OptimizationLevel::O1,
                                                     &llvm::OptimizationLevel::O2, &llvm::OptimizationLevel::O3};
  const llvm::OptimizationLevel& level = *kLevels[t.opt_level];
  llvm::ModulePassManager mpm = t.opt_level == 0 ? pb.buildO0DefaultPipeline(level)
                                                 : pb.buildPerModuleDefaultPipeline(level);
  mpm.run(*module, mam);
  return module;
}

}  // namespace

struct JitModule::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::string ir;
  std::map<std::string, KernelFn> kernels;
  bool from_cache = false;
  std::string cache_dir;
};

namespace {

// Runs the target's code generator over `module` and returns the relocatable object.
std::string emit_object_bytes(llvm::TargetMachine& tm, llvm::Module& module) {
  llvm::SmallVector<char, 0> bytes;
  llvm::raw_svector_ostream out(bytes);
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, out, nullptr, llvm::CodeGenFileType::ObjectFile))
    throw Error(ErrorKind::kUnsupported, "codegen/llvm: the target cannot emit object files");
  pm.run(module);
  return std::string(bytes.data(), bytes.size());
}

// Creates the JIT with the runtime symbols, adds the IR module or the object, and looks up
// every kernel.
void link(JitModule::Impl& impl, const ResolvedTarget& t, const SymbolMap& runtime_symbols,
          const std::vector<tir::PrimFunc>& funcs, std::unique_ptr<llvm::LLVMContext> ctx,
          std::unique_ptr<llvm::Module> module, const std::string* object) {
  llvm::orc::JITTargetMachineBuilder jtmb{llvm::Triple(t.triple)};
  jtmb.setCPU(t.cpu);
  llvm::SubtargetFeatures features(t.features);
  jtmb.addFeatures(features.getFeatures());
  jtmb.setCodeGenOptLevel(t.level);
  auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(jtmb)).create();
  if (!jit) llvm_error("cannot create the JIT", jit.takeError());
  impl.jit = std::move(*jit);
  llvm::orc::JITDylib& dylib = impl.jit->getMainJITDylib();
  auto process = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      impl.jit->getDataLayout().getGlobalPrefix());
  if (!process) llvm_error("cannot search the process for symbols", process.takeError());
  dylib.addGenerator(std::move(*process));
  llvm::orc::SymbolMap symbols;
  for (const auto& [name, address] : runtime_symbols)
    symbols[impl.jit->mangleAndIntern(name)] = llvm::orc::ExecutorSymbolDef(
        llvm::orc::ExecutorAddr::fromPtr(address), llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable);
  if (!symbols.empty())
    if (llvm::Error err = dylib.define(llvm::orc::absoluteSymbols(std::move(symbols))))
      llvm_error("cannot define runtime symbols", std::move(err));
  if (object) {
    if (llvm::Error err = impl.jit->addObjectFile(llvm::MemoryBuffer::getMemBufferCopy(*object, "kiln-module.o")))
      llvm_error("cannot add the object to the JIT", std::move(err));
  } else if (llvm::Error err = impl.jit->addIRModule(llvm::orc::ThreadSafeModule(std::move(module), std::move(ctx)))) {
    llvm_error("cannot add the module to the JIT", std::move(err));
  }
  for (const tir::PrimFunc& f : funcs) {
    auto address = impl.jit->lookup(f.name);
    if (!address) {
      std::string msg = llvm::toString(address.takeError());
      throw Error(ErrorKind::kUnsupported,
                  "codegen/llvm: kernel '" + f.name + "' does not link (missing runtime symbol?): " + msg);
    }
    impl.kernels[f.name] = address->toPtr<KernelFn>();
  }
}

}  // namespace

JitModule::JitModule(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
JitModule::~JitModule() = default;

std::unique_ptr<JitModule> JitModule::compile(const std::vector<tir::PrimFunc>& funcs,
                                              const TargetOptions& target, const SymbolMap& runtime_symbols) {
  ResolvedTarget t = resolve(target);
  const bool mvec = load_libmvec();
  std::unique_ptr<llvm::TargetMachine> tm = make_target_machine(t);
  if (mvec) t.vector_math_bits = vector_math_bits(t, *tm);

  // A disk-cache hit links the stored object; a kernel that then fails to link is recompiled.
  const std::string dir = disk_cache_dir(target);
  std::optional<DiskCache> cache;
  std::string key;
  if (!dir.empty()) {
    cache.emplace(dir);
    key = disk_cache_key(funcs, target,
                         t.triple + " cpu=" + t.cpu + " features=" + t.features +
                             " vector_math=" + std::to_string(t.vector_math_bits));
    if (std::optional<DiskCache::Entry> entry = cache->load(key)) {
      auto impl = std::make_unique<Impl>();
      impl->from_cache = true;
      impl->cache_dir = dir;
      impl->ir = std::move(entry->ir);
      try {
        link(*impl, t, runtime_symbols, funcs, nullptr, nullptr, &entry->object);
        return std::unique_ptr<JitModule>(new JitModule(std::move(impl)));
      } catch (const Error&) {
        // Fall through: compile the IR and overwrite the entry.
      }
    }
  }

  auto impl = std::make_unique<Impl>();
  impl->cache_dir = dir;
  auto ctx = std::make_unique<llvm::LLVMContext>();
  std::unique_ptr<llvm::Module> module = build_module(*ctx, funcs, t, *tm);
  llvm::raw_string_ostream os(impl->ir);
  module->print(os, nullptr);
  os.flush();
  if (cache) {
    // The same code on a miss as on a hit: the object, not the IR, goes into the JIT.
    DiskCache::Entry entry{emit_object_bytes(*tm, *module), impl->ir};
    cache->store(key, entry);
    link(*impl, t, runtime_symbols, funcs, nullptr, nullptr, &entry.object);
  } else {
    link(*impl, t, runtime_symbols, funcs, std::move(ctx), std::move(module), nullptr);
  }
  return std::unique_ptr<JitModule>(new JitModule(std::move(impl)));
}

KernelFn JitModule::lookup(const std::string& name) const {
  auto it = impl_->kernels.find(name);
  if (it == impl_->kernels.end())
    throw Error(ErrorKind::kUsage, "codegen/llvm: no kernel named '" + name + "' in this module");
  return it->second;
}

const std::string& JitModule::llvm_ir() const { return impl_->ir; }
bool JitModule::from_cache() const { return impl_->from_cache; }
const std::string& JitModule::cache_dir() const { return impl_->cache_dir; }

void emit_object(const std::vector<tir::PrimFunc>& funcs, const TargetOptions& target, const std::string& path) {
  ResolvedTarget t = resolve(target);
  std::unique_ptr<llvm::TargetMachine> tm = make_target_machine(t);
  t.vector_math_bits = vector_math_bits(t, *tm);
  llvm::LLVMContext ctx;
  std::unique_ptr<llvm::Module> module = build_module(ctx, funcs, t, *tm);
  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec, llvm::sys::fs::OF_None);
  if (ec) throw Error(ErrorKind::kUsage, "codegen/llvm: cannot write " + path + ": " + ec.message());
  std::string object = emit_object_bytes(*tm, *module);
  out.write(object.data(), object.size());
  out.flush();
  if (out.has_error()) throw Error(ErrorKind::kUsage, "codegen/llvm: error writing " + path);
}

std::string host_cpu_description() {
  init_llvm();
  std::string s = llvm::sys::getHostCPUName().str() + " (";
  std::vector<std::string> on;
  for (const auto& f : llvm::sys::getHostCPUFeatures())
    if (f.second) on.push_back("+" + f.first().str());
  std::sort(on.begin(), on.end());
  for (size_t i = 0; i < on.size(); ++i) s += (i ? "," : "") + on[i];
  return s + ")";
}

}  // namespace kiln::codegen
