// IEEE half (fp16), bfloat16 and float8 storage types with exact round-to-nearest-even conversion.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace kiln {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct Float16 {
  uint16_t bits = 0;
  Float16() = default;
  explicit Float16(float f) : bits(from_float(f)) {}
  operator float() const { return to_float(bits); }

  static uint16_t from_float(float f) {
    uint32_t x = float_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u)  // inf or nan
      return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
    if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
    if (absx < 0x38800000u) {  // subnormal half or zero
      float af = bits_float(absx);
      // Adding 0.5 pushes the value into a float whose low mantissa bits are the half subnormal.
      float r = af + 0.5f;
      return static_cast<uint16_t>(sign | (float_bits(r) - 0x3f000000u));
    }
    uint32_t mant_odd = (absx >> 13) & 1u;
    absx += 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round to nearest even
    return static_cast<uint16_t>(sign | (absx >> 13));
  }
  static float to_float(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
      float m = std::ldexp(static_cast<float>(mant), -24);
      return sign ? -m : m;
    }
    if (exp == 31) return bits_float(sign | 0x7f800000u | (mant << 13));
    return bits_float(sign | ((exp + 112) << 23) | (mant << 13));
  }
};

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float f) : bits(from_float(f)) {}
  operator float() const { return bits_float(static_cast<uint32_t>(bits) << 16); }
  static uint16_t from_float(float f) {
    uint32_t x = float_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
    uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
    return static_cast<uint16_t>((x + rounding) >> 16);
  }
};

static_assert(sizeof(Float16) == 2 && sizeof(BFloat16) == 2);

}  // namespace kiln
