// Narrow floating-point formats kept as one raw code per byte: the float8 variants (E4M3FN,
// E4M3FNUZ, E5M2, E5M2FNUZ, E8M0) and float4 E2M1 (code in the low 4 bits). Decoding is exact;
// encoding follows the ONNX reference (onnx.numpy_helper / ml_dtypes) bit for bit.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace kiln {

// f8e4m3fn, f8e4m3fnuz, f8e5m2, f8e5m2fnuz, f8e8m0, f4e2m1.
bool is_narrow_float(DType t);

// The value of `code` (exact in float: every code of these formats is a float).
float narrow_float_decode(DType t, uint8_t code);

// Rounding of float8e8m0 (Cast's round_mode attribute); the other formats round to nearest even.
enum class E8M0Rounding { kUp, kDown, kNearest };

// The code nearest to x:
// - float8 E4M3/E5M2 variants: round to nearest even; out-of-range values saturate to the
//   largest finite value when `saturate`, else become inf (E5M2) or NaN;
// - float4 E2M1 (no inf/NaN): round to nearest even, always saturating (ml_dtypes' astype,
//   which the reference uses whatever `saturate` says); NaN becomes a zero whose sign is the
//   opposite of the NaN's sign bit, as ml_dtypes does;
// - float8 E8M0 (unsigned powers of two, 0xFF = NaN): x is first rounded to float32 and its
//   exponent kept, rounded as `rounding` says; saturate stops rounding up past 2^127;
//   inf and NaN become 0xFF; the sign is dropped.
uint8_t narrow_float_encode(DType t, double x, bool saturate,
                            E8M0Rounding rounding = E8M0Rounding::kUp);

}  // namespace kiln
