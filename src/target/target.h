// The compilation target: what the host CPU can run (ISA features, vector width, caches, cores)
// and which of it kiln uses. Detected once per process (KILN_ISA may lower the ISA); the
// microkernel families dispatch on Target::host().isa and the code generator gets its LLVM CPU
// and feature string from the same object, so both agree on what runs.
// Tests: tests/target/test_target.cc.
#pragma once

#include <cstdint>
#include <string>

namespace kiln::target {

// The instruction sets kiln has microkernels for, in increasing order.
enum class Isa { kGeneric = 0, kAvx2 = 1, kAvx512 = 2 };
const char* isa_name(Isa isa);  // "generic", "avx2", "avx512" (KILN_ISA's spelling)

struct CpuFeatures {
  bool avx2 = false, fma = false;
  bool avx512f = false, avx512vl = false, avx512bw = false, avx512dq = false;
  bool avx512vnni = false, avx512bf16 = false, avx512fp16 = false;
  bool amx_tile = false, amx_int8 = false, amx_bf16 = false;
  // The features of this process's CPU (cpuid, through the compiler's cpu-feature builtins).
  static CpuFeatures detect();
  // True when the CPU can run code for `isa`.
  bool supports(Isa isa) const;
  // The best ISA kiln has kernels for on this CPU.
  Isa best() const;
};

enum class DeviceKind { kCpu };

struct Target {
  DeviceKind kind = DeviceKind::kCpu;
  CpuFeatures features;
  Isa isa = Isa::kGeneric;  // what the microkernels and generated code use (<= features.best())
  int vector_bits = 128;    // SIMD register width of `isa`
  int64_t l1d_bytes = 32 << 10, l2_bytes = 1 << 20, l3_bytes = 0;  // per core (L3: shared, 0 unknown)
  int cores = 1;            // online CPUs of this process
  std::string cpu_name;     // e.g. "Intel(R) Xeon(R) Processor" (/proc/cpuinfo), "" unknown

  // f32 lanes of one vector register.
  int f32_lanes() const { return vector_bits / 32; }
  // The LLVM feature string that keeps generated code within `isa` ("" for the host's best: no
  // restriction; for a lower ISA the host's higher features are turned off, e.g. "-avx512f,...").
  std::string llvm_features() const;
  // One line for logs and reports: "avx512 (512-bit vectors; L2 2 MiB/core; 2 cores; avx512vnni amx)".
  std::string describe() const;

  // The host target: detected once. KILN_ISA=generic|avx2|avx512 selects a lower ISA than the
  // CPU's best (a higher one than the CPU has, or an unknown name, is reported on stderr once
  // and ignored).
  static const Target& host();
  // The host's features and caches with `isa_request` applied as KILN_ISA would be; `warning`
  // receives why a request was ignored ("" when it was not).
  static Target for_host(const char* isa_request, std::string* warning);
};

// The ISA named by `name` (KILN_ISA spelling); false when it names none.
bool parse_isa(const std::string& name, Isa* isa);

}  // namespace kiln::target
