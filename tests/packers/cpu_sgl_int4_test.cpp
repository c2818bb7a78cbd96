// sgl-kernel's CPU INT4 prepack (packers/cpu_sgl_int4.h): the drawn worked example, the same
// codes from the GPTQ and the AWQ packing, the [N/32, G, 32] scale and zero-point blocks, round
// trips and refusals. (The whole op with its compensation sums, transliterated from upstream:
// tests/convert/cpu_int4_test.cpp; every registered row against its map: layout_contract_test.)
#include "packers/cpu_sgl_int4.h"

#include <gtest/gtest.h>

#include <array>
#include <cstring>

#include "lib/core/codecs.h"
#include "packers/registry.h"
#include "tests/packers/triton_reference_ops.h"

namespace moepack::packers {
namespace {

using testing::pack_all;

// q[k][n] = (k + n) % 16 packed the GPTQ way (field k%8 of word (k/8, n)) and the AWQ way
// (field AWQ[n%8] of word (k, n/8)).
OwnedTensor gptq_words(uint64_t K, uint64_t N) {
  OwnedTensor t(DType::I32, {K / 8, N});
  for (uint64_t k = 0; k < K; ++k)
    for (uint64_t n = 0; n < N; ++n) {
      uint32_t word;
      std::memcpy(&word, t.bytes.data() + 4 * ((k / 8) * N + n), 4);
      word |= static_cast<uint32_t>((k + n) % 16) << (4 * (k % 8));
      std::memcpy(t.bytes.data() + 4 * ((k / 8) * N + n), &word, 4);
    }
  return t;
}
OwnedTensor awq_words(uint64_t K, uint64_t N) {
  static constexpr std::array<unsigned, 8> kField = {0, 4, 1, 5, 2, 6, 3, 7};
  OwnedTensor t(DType::I32, {K, N / 8});
  for (uint64_t k = 0; k < K; ++k)
    for (uint64_t n = 0; n < N; ++n) {
      uint32_t word;
      std::memcpy(&word, t.bytes.data() + 4 * (k * (N / 8) + n / 8), 4);
      word |= static_cast<uint32_t>((k + n) % 16) << (4 * kField[n % 8]);
      std::memcpy(t.bytes.data() + 4 * (k * (N / 8) + n / 8), &word, 4);
    }
  return t;
}

std::vector<uint8_t> bytes_at(const std::vector<uint8_t>& v, uint64_t at, uint64_t n) {
  return {v.begin() + static_cast<long>(at), v.begin() + static_cast<long>(at + n)};
}

TEST(CpuSglInt4Weight, DrawnWorkedExample) {
  const CpuSglInt4WeightLayout gptq(CpuInt4Source::gptq, 32), awq(CpuInt4Source::awq, 32);
  EXPECT_EQ(gptq.name(), "cpu.sgl_int4_weight_packed(gptq,block_k=32,e9d1398d9)");
  EXPECT_EQ(awq.name(), "cpu.sgl_int4_weight_packed(awq,block_k=32,e9d1398d9)");
  // K = 64 (two blocks of 32 inputs), N = 64 (two blocks of 32 outputs).
  const std::vector<uint8_t> p = pack_all(gptq, gptq_words(64, 64));
  EXPECT_EQ(gptq.packed_shape(std::vector<uint64_t>{8, 64}), (std::vector<uint64_t>{2, 2, 32 * 16 + 128}));
  EXPECT_EQ(p.size(), 2u * 2 * 640);
  EXPECT_EQ(bytes_at(p, 0, 4), (std::vector<uint8_t>{0x80, 0x91, 0xA2, 0xB3}));   // outputs 0 (low) and 8 (high), inputs 0..3
  EXPECT_EQ(bytes_at(p, 4, 4), (std::vector<uint8_t>{0x91, 0xA2, 0xB3, 0xC4}));   // outputs 1 and 9
  EXPECT_EQ(bytes_at(p, 32, 4), (std::vector<uint8_t>{0x80, 0x91, 0xA2, 0xB3}));  // outputs 16 and 24
  EXPECT_EQ(bytes_at(p, 64, 4), (std::vector<uint8_t>{0xC4, 0xD5, 0xE6, 0xF7}));  // inputs 4..7
  // The compensation bytes are the derivation's: the map leaves them zero.
  EXPECT_EQ(bytes_at(p, 512, 128), std::vector<uint8_t>(128, 0));
  // Block (nc = 0, kc = 1) starts at byte 640 with inputs 32..35 (q = k % 16 for output 0).
  EXPECT_EQ(bytes_at(p, 640, 4), (std::vector<uint8_t>{0x80, 0x91, 0xA2, 0xB3}));
  // Block (nc = 1, kc = 0) at byte 1280: outputs 32 (low) and 40 (high).
  EXPECT_EQ(bytes_at(p, 1280, 4), (std::vector<uint8_t>{0x80, 0x91, 0xA2, 0xB3}));
  // The same codes packed the AWQ way give the same bytes.
  EXPECT_EQ(pack_all(awq, awq_words(64, 64)), p);
}

TEST(CpuSglInt4Weight, RoundTripsAndRefusals) {
  for (uint64_t block_k : {16u, 32u, 64u, 128u}) {
    const CpuSglInt4WeightLayout gptq(CpuInt4Source::gptq, block_k), awq(CpuInt4Source::awq, block_k);
    testing::expect_round_trip(gptq, DType::I32, {3 * block_k / 8, 96}, block_k);
    testing::expect_round_trip(awq, DType::I32, {2 * block_k, 12}, block_k + 1);
    testing::expect_refused(gptq, DType::I32, {3 * block_k / 8, 48});  // N % 32
    testing::expect_refused(gptq, DType::I32, {block_k / 8 + 1, 32});  // K % block_k
    testing::expect_refused(awq, DType::I32, {block_k, 6});            // N = 48
    testing::expect_refused(awq, DType::I32, {block_k + 8, 4});        // K % block_k
    testing::expect_dtype_refused(gptq, DType::U8, {block_k / 8, 32});
  }
}

TEST(CpuSglInt4GroupRows, ScalesWidenAndZeroPointsMoveInBlocksOf32Outputs) {
  const CpuSglInt4GroupRowsLayout scales(CpuInt4GroupRows::scales_f32), zeros(CpuInt4GroupRows::zero_points_i8);
  EXPECT_EQ(scales.name(), "cpu.sgl_int4_blocked_scales(f32,e9d1398d9)");
  EXPECT_EQ(zeros.name(), "cpu.sgl_int4_blocked_zero_points(i8,e9d1398d9)");
  // G = 2, N = 64: (g, n) holds 10g + n; packed [2, 2, 32].
  OwnedTensor s(DType::BF16, {2, 64}), z(DType::I8, {2, 64});
  for (uint64_t g = 0; g < 2; ++g)
    for (uint64_t n = 0; n < 64; ++n) {
      const uint16_t b = float_to_bf16(static_cast<float>(100 * g + n));
      std::memcpy(s.bytes.data() + 2 * (g * 64 + n), &b, 2);
      z.bytes[g * 64 + n] = static_cast<uint8_t>(1 + (g * 64 + n) % 16);
    }
  EXPECT_EQ(scales.packed_dtype(DType::BF16), DType::F32);
  EXPECT_EQ(scales.packed_shape(s.shape), (std::vector<uint64_t>{2, 2, 32}));
  const std::vector<uint8_t> ps = pack_all(scales, s);
  std::vector<float> f(ps.size() / 4);
  std::memcpy(f.data(), ps.data(), ps.size());
  EXPECT_EQ(f[0], 0.0f);
  EXPECT_EQ(f[31], 31.0f);
  EXPECT_EQ(f[32], 100.0f);   // group 1 of outputs 0..31
  EXPECT_EQ(f[64], 32.0f);    // outputs 32..63, group 0
  EXPECT_EQ(f[127], 163.0f);  // group 1, output 63
  const std::vector<uint8_t> pz = pack_all(zeros, z);
  EXPECT_EQ(zeros.packed_dtype(DType::I8), DType::I8);
  EXPECT_EQ(pz[32], z.bytes[64]);    // (g 1, n 0)
  EXPECT_EQ(pz[64], z.bytes[32]);    // (g 0, n 32)
  EXPECT_EQ(pz[127], z.bytes[127]);  // (g 1, n 63)
  OwnedTensor back(DType::BF16, s.shape);
  scales.unpack(ps, back);  // narrowing back is exact for every widened value
  EXPECT_EQ(back.bytes, s.bytes);
  testing::expect_round_trip(zeros, DType::I8, {4, 160}, 7);
  testing::expect_refused(scales, DType::BF16, {2, 48});
  testing::expect_refused(zeros, DType::I8, {2, 16});
}

TEST(CpuSglInt4, EveryBlockSizeIsRegistered) {
  for (const char* src : {"gptq", "awq"})
    for (int block_k : {16, 32, 64, 128}) {
      const std::string id = std::string("cpu.sgl_int4_weight_packed(") + src + ",block_k=" + std::to_string(block_k) + ",e9d1398d9)";
      EXPECT_NE(find_layout(id), nullptr) << id;
    }
  EXPECT_NE(find_layout("cpu.sgl_int4_blocked_scales(f32,e9d1398d9)"), nullptr);
  EXPECT_NE(find_layout("cpu.sgl_int4_blocked_zero_points(i8,e9d1398d9)"), nullptr);
}

}  // namespace
}  // namespace moepack::packers
