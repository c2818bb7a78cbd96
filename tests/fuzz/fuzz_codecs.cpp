// The scalar codecs against independent references: every byte and 16-bit pair of the input is
// decoded and re-encoded (identity wherever the decode is exact), and every 4-byte group is
// encoded as a float and checked to be the round-to-nearest-even choice, by brute force over
// all codes for E4M3 and E2M1 and against both neighbours for BF16 and F16.
// fuzz-links: moepack_core
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "fuzz/fuzz_target.h"
#include "lib/core/codecs.h"

namespace {

using namespace moepack;

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%x", v);
  return buf;
}

// Magnitude codes 0..top, ordered like their values (true of every IEEE-like encoding);
// `value_of(top)` is the value rounding treats as the first one past the largest finite one.
template <class ValueOf>
void check_nearest_even(double x, uint32_t code, uint32_t top, ValueOf value_of, const std::string& what) {
  MOEPACK_FUZZ_CHECK(code <= top, what);
  double d = std::fabs(x - value_of(code));
  for (uint32_t other : {code - 1, code + 1}) {
    if (other > top) continue;  // also code 0's lower neighbour, which wrapped around
    double od = std::fabs(x - value_of(other));
    MOEPACK_FUZZ_CHECK(d <= od, what + ": a neighbour is closer");
    if (d == od) MOEPACK_FUZZ_CHECK(code % 2 == 0, what + ": tie not broken to even");
  }
}

// PyTorch's float -> float8_e4m3fn: NaN keeps its sign, |x| > 464 is NaN, otherwise the nearest
// finite code (448 at most), ties to the even code.
uint8_t reference_e4m3(float x) {
  uint8_t sign = std::signbit(x) ? 0x80 : 0;
  if (std::isnan(x) || std::fabs(x) > 464.0f) return sign | 0x7F;
  double a = std::fabs(static_cast<double>(x));
  uint8_t best = 0;
  double best_d = INFINITY;
  for (uint8_t c = 0; c <= 0x7E; ++c) {
    double d = std::fabs(a - e4m3_to_float(c));
    if (d < best_d || (d == best_d && c % 2 == 0)) { best = c; best_d = d; }
  }
  return sign | best;
}

uint8_t reference_e2m1(float x) {
  if (std::isnan(x)) return 0;
  uint8_t sign = std::signbit(x) ? 0x8 : 0;
  // Above the largest value (6) the answer is 6; clamping first keeps the distances below exact
  // in double (for |x| near 1e38, |x - 4| and |x - 6| would round to the same double).
  double a = std::min(std::fabs(static_cast<double>(x)), 6.0);
  uint8_t best = 0;
  double best_d = INFINITY;
  for (uint8_t c = 0; c < 8; ++c) {
    double d = std::fabs(a - e2m1_to_float(c));
    if (d < best_d || (d == best_d && c % 2 == 0)) { best = c; best_d = d; }
  }
  return sign | best;
}

}  // namespace

MOEPACK_FUZZ_TARGET(codecs) {
  for (size_t i = 0; i < size; ++i) {
    uint8_t c = data[i];
    if (!e4m3_is_nan(c)) MOEPACK_FUZZ_CHECK(float_to_e4m3(e4m3_to_float(c)) == c, "E4M3 " + hex(c));
    else MOEPACK_FUZZ_CHECK(std::isnan(e4m3_to_float(c)), "E4M3 NaN " + hex(c));
    MOEPACK_FUZZ_CHECK(float_to_e2m1(e2m1_to_float(c & 0xF)) == (c & 0xF), "E2M1 " + hex(c & 0xF));
    float s = e8m0_to_float(c);
    if (c == 0xFF) MOEPACK_FUZZ_CHECK(std::isnan(s), "E8M0 0xff is not NaN");
    else MOEPACK_FUZZ_CHECK(s == std::ldexp(1.0f, c - 127), "E8M0 " + hex(c));
    // The decode-only formats: finite codes decode to finite values, sign from bit 7.
    for (float v : {e4m3fnuz_to_float(c), e5m2fnuz_to_float(c)})
      MOEPACK_FUZZ_CHECK(c == 0x80 ? std::isnan(v) : (std::isfinite(v) && std::signbit(v) == (c >= 0x80)), "FNUZ " + hex(c));
    float e5 = e5m2_to_float(c);
    MOEPACK_FUZZ_CHECK(((c & 0x7C) == 0x7C) == !std::isfinite(e5), "E5M2 " + hex(c));
  }
  for (size_t i = 0; i + 2 <= size; i += 2) {
    uint16_t h = static_cast<uint16_t>(data[i] | (data[i + 1] << 8));
    float b = bf16_to_float(h), f = f16_to_float(h);
    if (std::isnan(b)) MOEPACK_FUZZ_CHECK(std::isnan(bf16_to_float(float_to_bf16(b))), "BF16 NaN " + hex(h));
    else MOEPACK_FUZZ_CHECK(float_to_bf16(b) == h, "BF16 " + hex(h));
    if (std::isnan(f)) MOEPACK_FUZZ_CHECK(std::isnan(f16_to_float(float_to_f16(f))), "F16 NaN " + hex(h));
    else MOEPACK_FUZZ_CHECK(float_to_f16(f) == h, "F16 " + hex(h));
  }
  for (size_t i = 0; i + 4 <= size; i += 4) {
    uint32_t bits;
    std::memcpy(&bits, data + i, 4);
    float x = std::bit_cast<float>(bits);
    std::string what = "float bits " + hex(bits);
    MOEPACK_FUZZ_CHECK(float_to_e4m3(x) == reference_e4m3(x), "E4M3 encode of " + what);
    MOEPACK_FUZZ_CHECK(float_to_e2m1(x) == reference_e2m1(x), "E2M1 encode of " + what);
    uint16_t b = float_to_bf16(x), f = float_to_f16(x);
    if (std::isnan(x)) {
      MOEPACK_FUZZ_CHECK(std::isnan(bf16_to_float(b)) && std::isnan(f16_to_float(f)), "NaN lost: " + what);
      continue;
    }
    MOEPACK_FUZZ_CHECK(std::signbit(bf16_to_float(b)) == std::signbit(x) && std::signbit(f16_to_float(f)) == std::signbit(x), "sign lost: " + what);
    double a = std::fabs(static_cast<double>(x));
    // Infinity rounds like the next binade's first value (2^128, 2^16), and only a true
    // infinity may land on it exactly.
    check_nearest_even(a, b & 0x7FFFu, 0x7F80u, [](uint32_t c) { return c == 0x7F80u ? std::ldexp(1.0, 128) : double(bf16_to_float(static_cast<uint16_t>(c))); }, "BF16 encode of " + what);
    // Past F16's range the distances lose exactness in double; the answer there is known.
    if (a >= 65520.0) MOEPACK_FUZZ_CHECK((f & 0x7FFFu) == 0x7C00u, "F16 overflow of " + what);
    else check_nearest_even(a, f & 0x7FFFu, 0x7C00u, [](uint32_t c) { return c == 0x7C00u ? 65536.0 : double(f16_to_float(static_cast<uint16_t>(c))); }, "F16 encode of " + what);
  }
}
