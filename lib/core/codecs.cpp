#include "lib/core/codecs.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace moepack {
namespace {

constexpr float kE2M1Magnitude[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

float from_bits(uint32_t b) { return std::bit_cast<float>(b); }
uint32_t to_bits(float f) { return std::bit_cast<uint32_t>(f); }

// Generic decoder for small floats with `mbits` mantissa bits and exponent bias `bias`.
float decode_minifloat(uint32_t exp, uint32_t man, int mbits, int bias) {
  if (exp == 0) return std::ldexp(static_cast<float>(man), 1 - bias - mbits);
  return std::ldexp(1.0f + static_cast<float>(man) / static_cast<float>(1u << mbits), static_cast<int>(exp) - bias);
}

}  // namespace

float e2m1_to_float(uint8_t code) {
  float m = kE2M1Magnitude[code & 0x7];
  return (code & 0x8) ? -m : m;
}

uint8_t float_to_e2m1(float v) {
  if (std::isnan(v)) return 0;
  uint8_t sign = std::signbit(v) ? 0x8 : 0x0;
  float a = std::fabs(v);
  // Midpoints between neighbouring magnitudes; at an exact midpoint the even code wins.
  uint8_t code;
  if (a <= 0.25f) code = 0;
  else if (a < 0.75f) code = 1;
  else if (a <= 1.25f) code = 2;
  else if (a < 1.75f) code = 3;
  else if (a <= 2.5f) code = 4;
  else if (a < 3.5f) code = 5;
  else if (a <= 5.0f) code = 6;
  else code = 7;
  return sign | code;
}

float e8m0_to_float(uint8_t s) {
  if (s == 0xFF) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, static_cast<int>(s) - 127);
}

float e3m2_to_float(uint8_t code) {
  float m = decode_minifloat((code >> 2) & 0x7, code & 0x3, 2, 3);
  return (code & 0x20) ? -m : m;
}

float e2m3_to_float(uint8_t code) {
  float m = decode_minifloat((code >> 3) & 0x3, code & 0x7, 3, 1);
  return (code & 0x20) ? -m : m;
}

float e4m3_to_float(uint8_t code) {
  if (e4m3_is_nan(code)) return std::numeric_limits<float>::quiet_NaN();
  float m = decode_minifloat((code >> 3) & 0xF, code & 0x7, 3, 7);
  return (code & 0x80) ? -m : m;
}

uint8_t float_to_e4m3(float v) {
  uint8_t sign = std::signbit(v) ? 0x80 : 0x00;
  if (std::isnan(v)) return sign | 0x7F;
  float a = std::fabs(v);
  if (a > 464.0f) return sign | 0x7F;  // c10 rounds past the midpoint above 448 to NaN
  if (a >= 448.0f) return sign | 0x7E;
  // Round a to the E4M3 grid with round-to-nearest-even. Below 2^-6 the spacing is 2^-9
  // (subnormals); above, it is 2^(e-3) for the binade [2^e, 2^(e+1)).
  int e;
  std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1)
  int binade = e - 1;
  if (binade < -6) binade = -6;
  float quantum = std::ldexp(1.0f, binade - 3);
  float q = std::nearbyint(a / quantum) * quantum;  // nearbyint rounds half to even in the default mode
  if (q == 0.0f) return sign;
  // Encode q exactly.
  int qe;
  float qf = std::frexp(q, &qe);
  int exp = qe - 1 + 7;
  if (exp <= 0) {  // subnormal
    uint32_t man = static_cast<uint32_t>(std::lround(q / std::ldexp(1.0f, -9)));
    return sign | static_cast<uint8_t>(man);
  }
  uint32_t man = static_cast<uint32_t>(std::lround((qf * 2.0f - 1.0f) * 8.0f));
  return sign | static_cast<uint8_t>((exp << 3) | man);
}

uint8_t float_to_e4m3fnuz(float v) {
  if (std::isnan(v)) return 0x80;
  const uint8_t sign = std::signbit(v) ? 0x80 : 0x00;
  const float a = std::fmin(std::fabs(v), 240.0f);
  // The grid: quantum 2^(e-3) in the binade [2^e, 2^(e+1)), 2^-10 below the smallest normal 2^-7.
  int e;
  std::frexp(a, &e);
  const int binade = std::max(e - 1, -7);
  const float quantum = std::ldexp(1.0f, binade - 3);
  const float q = std::nearbyint(a / quantum) * quantum;  // half to even in the default mode
  if (q == 0.0f) return 0x00;
  int qe;
  const float qf = std::frexp(q, &qe);
  const int exp = qe - 1 + 8;
  if (exp <= 0) return sign | static_cast<uint8_t>(std::lround(q / std::ldexp(1.0f, -10)));
  return sign | static_cast<uint8_t>((exp << 3) | static_cast<uint32_t>(std::lround((qf * 2.0f - 1.0f) * 8.0f)));
}

float e4m3fnuz_to_float(uint8_t code) {
  if (code == 0x80) return std::numeric_limits<float>::quiet_NaN();
  float m = decode_minifloat((code >> 3) & 0xF, code & 0x7, 3, 8);
  return (code & 0x80) ? -m : m;
}

float e5m2_to_float(uint8_t code) {
  uint32_t exp = (code >> 2) & 0x1F, man = code & 0x3;
  float m;
  if (exp == 0x1F) m = man ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  else m = decode_minifloat(exp, man, 2, 15);
  return (code & 0x80) ? -m : m;
}

float e5m2fnuz_to_float(uint8_t code) {
  if (code == 0x80) return std::numeric_limits<float>::quiet_NaN();
  float m = decode_minifloat((code >> 2) & 0x1F, code & 0x3, 2, 16);
  return (code & 0x80) ? -m : m;
}

float bf16_to_float(uint16_t bits) { return from_bits(static_cast<uint32_t>(bits) << 16); }

uint16_t float_to_bf16(float v) {
  uint32_t b = to_bits(v);
  if (std::isnan(v)) return static_cast<uint16_t>((b >> 16) | 0x40);
  uint32_t rounding = 0x7FFF + ((b >> 16) & 1);
  return static_cast<uint16_t>((b + rounding) >> 16);
}

float f16_to_float(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1F, man = h & 0x3FF;
  float m;
  if (exp == 0x1F) m = man ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  else m = decode_minifloat(exp, man, 10, 15);
  return from_bits(to_bits(m) | sign);
}

uint16_t float_to_f16(float v) {
  uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  if (std::isnan(v)) return sign | 0x7E00;
  float a = std::fabs(v);
  if (a >= 65520.0f) return sign | 0x7C00;  // rounds to inf
  int e;
  std::frexp(a, &e);
  int binade = e - 1;
  if (binade < -14) binade = -14;
  float quantum = std::ldexp(1.0f, binade - 10);
  float q = std::nearbyint(a / quantum) * quantum;
  if (q == 0.0f) return sign;
  int qe;
  float qf = std::frexp(q, &qe);
  int exp = qe - 1 + 15;
  if (exp <= 0) return sign | static_cast<uint16_t>(std::lround(q / std::ldexp(1.0f, -24)));
  uint32_t man = static_cast<uint32_t>(std::lround((qf * 2.0f - 1.0f) * 1024.0f));
  return sign | static_cast<uint16_t>((exp << 10) | man);
}

}  // namespace moepack
