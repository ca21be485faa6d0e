// NumPy .npy files (format versions 1-3, little-endian, C order) to and from Tensors.
#pragma once

#include <string>

#include "core/tensor.h"

namespace kiln {

Tensor read_npy(const std::string& path);  // throws kBadInput on malformed files
Tensor parse_npy(const std::string& bytes, const std::string& display_name);
// False when the dtype has no NumPy equivalent (bf16, strings, float8).
bool npy_representable(DType t);
void write_npy(const std::string& path, const Tensor& t);

}  // namespace kiln
