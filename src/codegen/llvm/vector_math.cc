// glibc libmvec names and loop-vectorizer mappings; see vector_math.h.
#include "codegen/llvm/vector_math.h"

#include <deque>
#include <mutex>

#include <llvm/Support/DynamicLibrary.h>

namespace kiln::codegen {

namespace {

// Functions with _ZGV{b,d,e} float and double variants in glibc 2.35+.
const char* const kLibmvec[] = {"exp",   "exp2",  "exp10", "expm1", "log",   "log2",  "log10",
                                "log1p", "sin",   "cos",   "tan",   "asin",  "acos",  "atan",
                                "sinh",  "cosh",  "tanh",  "asinh", "acosh", "atanh", "erf",
                                "erfc",  "cbrt",  "pow",   "atan2"};
// Those LLVM also knows as intrinsics (llvm.exp.f32, ...), the form scalar code uses.
const char* const kIntrinsics[] = {"exp", "exp2", "exp10", "log", "log2", "log10", "sin", "cos",
                                   "tan", "pow"};

char isa_letter(int bits) { return bits == 512 ? 'e' : bits == 256 ? 'd' : 'b'; }

}  // namespace

bool has_libmvec_variant(const std::string& name) {
  for (const char* n : kLibmvec)
    if (name == n) return true;
  return false;
}

bool is_binary_math(const std::string& name) { return name == "pow" || name == "atan2" || name == "fmod"; }

std::string libmvec_name(const std::string& name, int elem_bits, int lanes) {
  std::string s = "_ZGV";
  s += isa_letter(elem_bits * lanes);
  s += "N" + std::to_string(lanes) + (is_binary_math(name) ? "vv_" : "v_") + name;
  return elem_bits == 32 ? s + "f" : s;
}

std::vector<llvm::VecDesc> libmvec_mappings(int max_bits) {
  // VecDesc holds StringRefs: the strings live for the process, built once.
  static std::deque<std::string> storage;
  static std::vector<std::tuple<const std::string*, const std::string*, int, const std::string*, int>> all;
  static std::once_flag once;
  std::call_once(once, [] {
    auto keep = [](std::string s) { return &storage.emplace_back(std::move(s)); };
    for (const char* fn : kLibmvec) {
      const std::string name = fn;
      bool intrinsic = false;
      for (const char* i : kIntrinsics) intrinsic |= name == i;
      for (int elem : {32, 64}) {
        for (int bits : {128, 256, 512}) {
          int lanes = bits / elem;
          const std::string* vec = keep(libmvec_name(name, elem, lanes));
          const std::string* abi = keep("_ZGV_LLVM_N" + std::to_string(lanes) + (is_binary_math(name) ? "vv" : "v"));
          all.emplace_back(keep(elem == 32 ? name + "f" : name), vec, lanes, abi, bits);
          if (intrinsic)
            all.emplace_back(keep("llvm." + name + (elem == 32 ? ".f32" : ".f64")), vec, lanes, abi, bits);
        }
      }
    }
  });
  std::vector<llvm::VecDesc> out;
  for (const auto& [scalar, vec, lanes, abi, bits] : all)
    if (bits <= max_bits) out.emplace_back(*scalar, *vec, llvm::ElementCount::getFixed(lanes), false, *abi);
  return out;
}

bool load_libmvec() {
  static const bool loaded = [] {
    std::string err;
    return !llvm::sys::DynamicLibrary::LoadLibraryPermanently("libmvec.so.1", &err);
  }();
  return loaded;
}

}  // namespace kiln::codegen
