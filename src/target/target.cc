// Host detection for target.h: cpuid through GCC's builtins, caches through sysconf, the CPU's
// name from /proc/cpuinfo.
#include "target/target.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>

namespace kiln::target {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kGeneric: return "generic";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "?";
}

bool parse_isa(const std::string& name, Isa* isa) {
  for (Isa i : {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512})
    if (name == isa_name(i)) {
      *isa = i;
      return true;
    }
  return false;
}

CpuFeatures CpuFeatures::detect() {
  __builtin_cpu_init();
  CpuFeatures f;
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512dq = __builtin_cpu_supports("avx512dq");
  f.avx512vnni = __builtin_cpu_supports("avx512vnni");
  f.avx512bf16 = __builtin_cpu_supports("avx512bf16");
#if __GNUC__ >= 12
  f.avx512fp16 = __builtin_cpu_supports("avx512fp16");
  f.amx_tile = __builtin_cpu_supports("amx-tile");
  f.amx_int8 = __builtin_cpu_supports("amx-int8");
  f.amx_bf16 = __builtin_cpu_supports("amx-bf16");
#endif
  return f;
}

bool CpuFeatures::supports(Isa isa) const {
  switch (isa) {
    case Isa::kGeneric: return true;
    case Isa::kAvx2: return avx2 && fma;
    case Isa::kAvx512: return avx512f && avx512vl && fma;
  }
  return false;
}

Isa CpuFeatures::best() const {
  return supports(Isa::kAvx512) ? Isa::kAvx512 : supports(Isa::kAvx2) ? Isa::kAvx2 : Isa::kGeneric;
}

namespace {

int vector_bits_of(Isa isa) { return isa == Isa::kAvx512 ? 512 : isa == Isa::kAvx2 ? 256 : 128; }

int64_t cache_bytes(int name, int64_t fallback, int64_t lo, int64_t hi) {
  const long s = sysconf(name);
  return s > 0 ? std::clamp<int64_t>(s, lo, hi) : fallback;
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon == std::string::npos) break;
      const size_t start = line.find_first_not_of(' ', colon + 1);
      return start == std::string::npos ? "" : line.substr(start);
    }
  return "";
}

std::string human_bytes(int64_t b) {
  if (b >= (1 << 20) && b % (1 << 20) == 0) return std::to_string(b >> 20) + " MiB";
  if (b >= (1 << 10)) return std::to_string(b >> 10) + " KiB";
  return std::to_string(b) + " B";
}

}  // namespace

Target Target::for_host(const char* isa_request, std::string* warning) {
  Target t;
  t.features = CpuFeatures::detect();
  t.isa = t.features.best();
  if (warning) warning->clear();
  if (isa_request && *isa_request) {
    Isa wanted;
    if (!parse_isa(isa_request, &wanted)) {
      if (warning)
        *warning = std::string("KILN_ISA=") + isa_request + " names no ISA (generic, avx2 or avx512); using " +
                   isa_name(t.isa);
    } else if (!t.features.supports(wanted)) {
      if (warning)
        *warning = std::string("KILN_ISA=") + isa_request + ": this CPU cannot run it; using " + isa_name(t.isa);
    } else {
      t.isa = wanted;
    }
  }
  t.vector_bits = vector_bits_of(t.isa);
  t.l1d_bytes = cache_bytes(_SC_LEVEL1_DCACHE_SIZE, 32 << 10, 16 << 10, 1 << 20);
  t.l2_bytes = cache_bytes(_SC_LEVEL2_CACHE_SIZE, 1 << 20, 256 << 10, 8 << 20);
  t.l3_bytes = cache_bytes(_SC_LEVEL3_CACHE_SIZE, 0, 0, int64_t{1} << 40);
  t.cores = static_cast<int>(std::max<long>(1, sysconf(_SC_NPROCESSORS_ONLN)));
  t.cpu_name = cpu_model_name();
  return t;
}

const Target& Target::host() {
  static const Target target = [] {
    std::string warning;
    Target t = for_host(std::getenv("KILN_ISA"), &warning);
    if (!warning.empty()) std::cerr << "kiln: warning: " << warning << "\n";
    return t;
  }();
  return target;
}

std::string Target::llvm_features() const {
  if (isa == features.best()) return "";
  // Every AVX-512 extension LLVM knows goes with avx512f; turning avx512f off turns them off.
  if (isa == Isa::kAvx2) return "-avx512f";
  return "-avx2,-fma,-avx512f";
}

std::string Target::describe() const {
  std::string s = std::string(isa_name(isa)) + " (" + std::to_string(vector_bits) + "-bit vectors; L2 " +
                  human_bytes(l2_bytes) + "/core; " + std::to_string(cores) + (cores == 1 ? " core" : " cores");
  std::string extra;
  if (features.avx512vnni) extra += " avx512vnni";
  if (features.avx512bf16) extra += " avx512bf16";
  if (features.amx_tile) extra += " amx";
  if (isa != features.best()) s += std::string("; CPU has ") + isa_name(features.best()) + extra;
  else if (!extra.empty()) s += ";" + extra;
  return s + ")";
}

}  // namespace kiln::target
