// The scalar codecs: every code of every 8-bit format decodes to the value its bit fields say,
// the encoders round to nearest even like PyTorch's casts (ERRATA 7 for E4M3's top end), and
// decode->encode is the identity wherever the decode is exact.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "lib/core/codecs.h"

namespace moepack {
namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

// E4M3FN from its fields, written independently of the library's decoder.
float e4m3_from_fields(unsigned code) {
  unsigned e = (code >> 3) & 0xF, m = code & 0x7;
  if (e == 0xF && m == 0x7) return kNaN;
  float mag = e == 0 ? std::ldexp(static_cast<float>(m), -9) : std::ldexp(1.0f + static_cast<float>(m) / 8.0f, static_cast<int>(e) - 7);
  return (code & 0x80) ? -mag : mag;
}

TEST(E4M3, AllCodesDecode) {
  for (unsigned c = 0; c < 256; ++c) {
    float expected = e4m3_from_fields(c), got = e4m3_to_float(static_cast<uint8_t>(c));
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(got)) << c;
      EXPECT_TRUE(e4m3_is_nan(static_cast<uint8_t>(c)));
    } else {
      EXPECT_EQ(got, expected) << c;
      EXPECT_EQ(std::signbit(got), c >= 0x80) << c;
      EXPECT_FALSE(e4m3_is_nan(static_cast<uint8_t>(c)));
    }
  }
  EXPECT_EQ(e4m3_to_float(0x7E), 448.0f);
  EXPECT_EQ(e4m3_to_float(0x38), 1.0f);
  EXPECT_EQ(e4m3_to_float(0x08), 0x1p-6f);  // smallest normal
  EXPECT_EQ(e4m3_to_float(0x01), 0x1p-9f);  // smallest subnormal
  for (unsigned c = 1; c <= 0x7E; ++c) EXPECT_LT(e4m3_to_float(static_cast<uint8_t>(c - 1)), e4m3_to_float(static_cast<uint8_t>(c)));
}

TEST(E4M3, DecodeEncodeIsIdentity) {
  for (unsigned c = 0; c < 256; ++c) {
    if (!e4m3_is_nan(static_cast<uint8_t>(c))) {
      EXPECT_EQ(float_to_e4m3(e4m3_to_float(static_cast<uint8_t>(c))), c) << c;
    }
  }
}

TEST(E4M3, TopOfRangeFollowsPyTorch) {
  EXPECT_EQ(float_to_e4m3(448.0f), 0x7E);
  EXPECT_EQ(float_to_e4m3(449.0f), 0x7E);
  EXPECT_EQ(float_to_e4m3(464.0f), 0x7E);  // the midpoint to 480 ties to even (448)
  EXPECT_EQ(float_to_e4m3(std::nextafter(464.0f, 1000.0f)), 0x7F);
  EXPECT_EQ(float_to_e4m3(-464.0f), 0xFE);
  EXPECT_EQ(float_to_e4m3(-465.0f), 0xFF);
  EXPECT_EQ(float_to_e4m3(1e9f), 0x7F);
  EXPECT_EQ(float_to_e4m3(kInf), 0x7F);
  EXPECT_EQ(float_to_e4m3(-kInf), 0xFF);
  EXPECT_EQ(float_to_e4m3(kNaN), 0x7F);
  EXPECT_EQ(float_to_e4m3(-kNaN), 0xFF);
}

TEST(E4M3, RoundsToNearestEven) {
  EXPECT_EQ(float_to_e4m3(1.0625f), 0x38);  // midpoint of 1.0 (0x38) and 1.125 (0x39): even
  EXPECT_EQ(float_to_e4m3(1.1875f), 0x3A);  // midpoint of 1.125 and 1.25 (0x3A): even
  EXPECT_EQ(float_to_e4m3(1.07f), 0x39);
  EXPECT_EQ(float_to_e4m3(-1.0625f), 0xB8);
  EXPECT_EQ(float_to_e4m3(304.0f), 0x7A);   // top binade (step 32): 288 (0x79) | 320 (0x7A)
  EXPECT_EQ(float_to_e4m3(336.0f), 0x7A);   // 320 (0x7A) | 352 (0x7B)
}

TEST(E4M3, Subnormals) {
  EXPECT_EQ(float_to_e4m3(0x1p-10f), 0x00);         // half the smallest subnormal: ties to zero
  EXPECT_EQ(float_to_e4m3(std::nextafter(0x1p-10f, 1.0f)), 0x01);
  EXPECT_EQ(float_to_e4m3(0x3p-10f), 0x02);         // 1.5 * 2^-9: ties to 2 * 2^-9
  EXPECT_EQ(float_to_e4m3(0x5p-10f), 0x02);         // 2.5 * 2^-9: ties to 2 * 2^-9
  EXPECT_EQ(float_to_e4m3(0xFp-10f), 0x08);         // 7.5 * 2^-9: ties up to the smallest normal
  EXPECT_EQ(float_to_e4m3(-0x1p-10f), 0x80);        // negative zero keeps its sign
  EXPECT_EQ(float_to_e4m3(1e-30f), 0x00);
  EXPECT_EQ(float_to_e4m3(-0.0f), 0x80);
}

TEST(E2M1, AllCodes) {
  const float magnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (unsigned c = 0; c < 16; ++c) {
    float v = e2m1_to_float(static_cast<uint8_t>(c));
    EXPECT_EQ(std::fabs(v), magnitudes[c & 7]) << c;
    EXPECT_EQ(std::signbit(v), c >= 8) << c;
    EXPECT_EQ(float_to_e2m1(v), c) << c;
  }
}

TEST(E2M1, RoundingTiesToEvenCode) {
  const std::pair<float, uint8_t> cases[] = {
      {0.25f, 0}, {0.26f, 1}, {0.75f, 2}, {0.74f, 1}, {1.25f, 2}, {1.75f, 4}, {2.5f, 4}, {2.6f, 5},
      {3.5f, 6}, {5.0f, 6}, {5.1f, 7}, {7.0f, 7}, {1e30f, 7}, {-0.25f, 8}, {-5.0f, 14}, {-1e30f, 15},
  };
  for (const auto& [v, code] : cases) EXPECT_EQ(float_to_e2m1(v), code) << v;
  EXPECT_EQ(float_to_e2m1(kInf), 7);
  EXPECT_EQ(float_to_e2m1(-kInf), 15);
  EXPECT_EQ(float_to_e2m1(kNaN), 0);
}

TEST(E8M0, AllCodes) {
  for (unsigned s = 0; s < 255; ++s) EXPECT_EQ(e8m0_to_float(static_cast<uint8_t>(s)), std::ldexp(1.0f, static_cast<int>(s) - 127)) << s;
  EXPECT_EQ(e8m0_to_float(127), 1.0f);
  EXPECT_EQ(e8m0_to_float(0), 0x1p-127f);
  EXPECT_TRUE(std::isnan(e8m0_to_float(255)));
  EXPECT_TRUE(e8m0_is_nan(255));
  EXPECT_FALSE(e8m0_is_nan(254));
}

TEST(OtherFp8, SpecialCodes) {
  EXPECT_TRUE(std::isnan(e4m3fnuz_to_float(0x80)));
  EXPECT_EQ(e4m3fnuz_to_float(0x7F), 240.0f);
  EXPECT_EQ(e4m3fnuz_to_float(0x00), 0.0f);
  EXPECT_EQ(e5m2_to_float(0x7B), 57344.0f);
  EXPECT_EQ(e5m2_to_float(0x7C), kInf);
  EXPECT_EQ(e5m2_to_float(0xFC), -kInf);
  EXPECT_TRUE(std::isnan(e5m2_to_float(0x7D)));
  EXPECT_EQ(e5m2_to_float(0x01), 0x1p-16f);
  EXPECT_TRUE(std::isnan(e5m2fnuz_to_float(0x80)));
  EXPECT_EQ(e5m2fnuz_to_float(0x7F), 57344.0f);
}

// HIP's saturating E4M3FNUZ conversion (what vLLM's ROCm kernels write on MI300): every code
// decodes and encodes back (0x80 is NaN both ways), ties go to the even code, zero has no sign.
TEST(E4M3Fnuz, EncodeWorkedExamplesAndRoundTrip) {
  for (int c = 0; c < 256; ++c) EXPECT_EQ(float_to_e4m3fnuz(e4m3fnuz_to_float(static_cast<uint8_t>(c))), c) << c;
  EXPECT_EQ(float_to_e4m3fnuz(1.0f), 0x40);            // bias 8: exponent field 8, mantissa 0
  EXPECT_EQ(float_to_e4m3fnuz(-1.0f), 0xC0);
  EXPECT_EQ(float_to_e4m3fnuz(224.0f), 0x7E);          // vLLM's FNUZ bound
  EXPECT_EQ(float_to_e4m3fnuz(240.0f), 0x7F);
  EXPECT_EQ(float_to_e4m3fnuz(1000.0f), 0x7F);         // saturates, never NaN
  EXPECT_EQ(float_to_e4m3fnuz(-INFINITY), 0xFF);
  EXPECT_EQ(float_to_e4m3fnuz(std::nanf("")), 0x80);
  EXPECT_EQ(float_to_e4m3fnuz(232.0f), 0x7E);          // tie between 224 (even) and 240
  EXPECT_EQ(float_to_e4m3fnuz(1.0625f), 0x40);         // tie between 1 (even) and 1.125
  EXPECT_EQ(float_to_e4m3fnuz(1.1875f), 0x42);         // tie between 1.125 and 1.25 (even)
  EXPECT_EQ(float_to_e4m3fnuz(std::ldexp(1.0f, -10)), 0x01);   // smallest subnormal
  EXPECT_EQ(float_to_e4m3fnuz(std::ldexp(1.5f, -10)), 0x02);   // tie: to the even subnormal
  EXPECT_EQ(float_to_e4m3fnuz(std::ldexp(1.0f, -7)), 0x08);    // smallest normal
  EXPECT_EQ(float_to_e4m3fnuz(std::ldexp(1.0f, -11)), 0x00);   // tie with zero: even
  EXPECT_EQ(float_to_e4m3fnuz(-std::ldexp(1.0f, -12)), 0x00);  // rounds to zero: no -0 in FNUZ
  EXPECT_EQ(float_to_e4m3fnuz(-0.0f), 0x00);
  // The same bits are worth half their E4M3FN value (normalize_e4m3fn_to_e4m3fnuz doubles scales).
  for (int c = 0; c < 256; ++c) {
    if (c == 0x80 || e4m3_is_nan(static_cast<uint8_t>(c))) continue;
    EXPECT_EQ(e4m3fnuz_to_float(static_cast<uint8_t>(c)) * 2.0f, e4m3_to_float(static_cast<uint8_t>(c))) << c;
  }
}

TEST(BF16, AllCodesRoundTrip) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float v = bf16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(v)))) << h;
    } else {
      ASSERT_EQ(float_to_bf16(v), h) << h;
    }
  }
}

TEST(BF16, RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f), 0x3F80);                // midpoint: even
  EXPECT_EQ(float_to_bf16(1.0f + 0x3p-8f), 0x3F82);                // midpoint: even
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3F81);     // above the midpoint
  EXPECT_EQ(float_to_bf16(-1.0f - 0x1p-8f), 0xBF80);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7F80);  // rounds up to infinity
  EXPECT_EQ(float_to_bf16(kInf), 0x7F80);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(kNaN))));
  EXPECT_EQ(float_to_bf16(0x1p-133f), 0x0001);                     // float subnormal -> bf16 subnormal
}

TEST(F16, AllCodesRoundTrip) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float v = f16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(f16_to_float(float_to_f16(v)))) << h;
    } else {
      ASSERT_EQ(float_to_f16(v), h) << h;
    }
  }
}

TEST(F16, RoundsToNearestEven) {
  EXPECT_EQ(float_to_f16(1.0f), 0x3C00);
  EXPECT_EQ(float_to_f16(1.0f + 0x1p-11f), 0x3C00);
  EXPECT_EQ(float_to_f16(1.0f + 0x3p-11f), 0x3C02);
  EXPECT_EQ(float_to_f16(65504.0f), 0x7BFF);
  EXPECT_EQ(float_to_f16(65519.0f), 0x7BFF);
  EXPECT_EQ(float_to_f16(65520.0f), 0x7C00);  // the midpoint to 65536 ties to even: infinity
  EXPECT_EQ(float_to_f16(-1e10f), 0xFC00);
  EXPECT_EQ(float_to_f16(0x1p-24f), 0x0001);
  EXPECT_EQ(float_to_f16(0x1p-25f), 0x0000);  // half the smallest subnormal: ties to zero
  EXPECT_EQ(float_to_f16(0x3p-25f), 0x0002);
  EXPECT_EQ(float_to_f16(-0.0f), 0x8000);
  EXPECT_TRUE(std::isnan(f16_to_float(float_to_f16(kNaN))));
}

}  // namespace
}  // namespace moepack
