// Internal to codegen/llvm: glibc's vector math library (libmvec, glibc >= 2.35) as the vector
// form of libm calls. Names follow the x86 vector function ABI: _ZGV<isa>N<lanes><v|vv>_<name>
// with isa b (SSE, 128-bit), d (AVX2, 256-bit), e (AVX-512, 512-bit); "f" suffix for float.
#pragma once

#include <string>
#include <vector>

#include <llvm/Analysis/TargetLibraryInfo.h>

namespace kiln::codegen {

// True when libmvec has a vector variant of the C math function `name` ("exp", "tanh", ...).
bool has_libmvec_variant(const std::string& name);
bool is_binary_math(const std::string& name);  // atan2, pow, fmod
// The variant of `name` over `lanes` elements of 32- or 64-bit floats.
std::string libmvec_name(const std::string& name, int elem_bits, int lanes);
// Scalar -> vector mappings for the loop vectorizer (libm names and llvm.<fn>.f32/f64
// intrinsics), for vectors up to `max_bits` wide.
std::vector<llvm::VecDesc> libmvec_mappings(int max_bits);
// Loads libmvec into the process once (for the JIT); false when it is not available.
bool load_libmvec();

}  // namespace kiln::codegen
