// codegen/llvm: TIR PrimFuncs -> one LLVM module -> in-process JIT (ORC LLJIT) or an object file.
// This header is the layer's whole public interface and names no LLVM type, so the rest of kiln
// keeps compiling with RTTI while the LLVM-facing files build with -fno-rtti.
//
// Kernel ABI: every PrimFunc becomes `void name(void* const* buffers, const int64_t* scalars)`:
// buffer params then scalar params, in the PrimFunc's order. Buffer pointers must be 64-byte
// aligned (kiln's Tensor and arena allocations are): kernels use aligned streaming stores for
// outputs larger than 16 MiB. Generated code calls back into the
// runtime only through the C symbols given in a SymbolMap:
//   kiln_parallel_for(int64_t n, void (*body)(int64_t begin, int64_t end, void* closure),
//                     void* closure)   -- runs body over a partition of [0, n)
// and the external microkernels named by Evaluate(Call) statements, declared with a void return
// and one argument per call operand: a Load operand passes the address of the element it reads
// (a pointer), an integer operand an i64, a float operand its own float type.
// Math without an LLVM intrinsic (tanhf, erff, ...) and malloc/free resolve from the process.
// Tests: tests/codegen/test_llvm_codegen.cc.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tir/ir.h"

namespace kiln::codegen {

// cpu "native": the host CPU name and features (LLVM's getHostCPUName/getHostCPUFeatures); any
// other LLVM CPU name ("x86-64-v3", "x86-64-v4", "znver5") with `features` added
// ("+avx512f,-avx512bf16").
struct TargetOptions {
  std::string cpu = "native";
  std::string features;
  int opt_level = 3;  // 0..3
  // The on-disk cache of compiled objects (codegen/llvm/disk_cache.h): JitModule::compile loads
  // the object of an identical module (same TIR, options, host CPU, LLVM) instead of running
  // LLVM. Directory: cache_dir, else $KILN_CACHE_DIR ("off" disables it), else
  // $XDG_CACHE_HOME/kiln, else ~/.cache/kiln. Neither field is part of the key.
  bool use_disk_cache = true;
  std::string cache_dir;
};

using KernelFn = void (*)(void* const* buffers, const int64_t* scalars);
// Symbols generated code may call (runtime C ABI): name -> address, e.g. "kiln_parallel_for".
using SymbolMap = std::map<std::string, void*>;

// One LLVM module holding many kernels, optimized for the target and compiled with ORC LLJIT.
// Throws kiln::Error (kUnsupported) for TIR it cannot compile, naming the kernel and construct.
class JitModule {
 public:
  static std::unique_ptr<JitModule> compile(const std::vector<tir::PrimFunc>& funcs,
                                            const TargetOptions& target,
                                            const SymbolMap& runtime_symbols);
  // The kernel's entry point; throws kUsage for a name the module does not define.
  KernelFn lookup(const std::string& name) const;
  const std::string& llvm_ir() const;  // the optimized module as text (for --dump)
  bool from_cache() const;                // loaded from the disk cache (no LLVM optimization)
  const std::string& cache_dir() const;   // the disk cache used; "" when disabled
  ~JitModule();

  struct Impl;

 private:
  explicit JitModule(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Writes a relocatable object file (ELF on Linux) with the same kernels, for AOT linking.
void emit_object(const std::vector<tir::PrimFunc>& funcs, const TargetOptions& target,
                 const std::string& path);

// "znver5 (+avx512f,+avx512vnni,...)": the host CPU and its enabled features, for logs and
// cache keys.
std::string host_cpu_description();

}  // namespace kiln::codegen
