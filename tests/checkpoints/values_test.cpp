// `--check-values` scan: NaN/Inf in float tensors, E8M0 NaN in MX scales, E4M3 NaN, reported by
// tensor and flat element index with counts.
#include <gtest/gtest.h>

#include <cstring>

#include "checkpoints/fixtures.h"
#include "formats/checkpoints/checkpoint.h"

namespace moepack::test {
namespace {

using nlohmann::json;

TEST(Values, FindsNaNInfAndNaNScales) {
  constexpr uint64_t H = 64, I = 32, E = 2;
  TempDir tmp;
  CheckpointBuilder b(tmp.path());
  const std::string p = "model.layers.0.mlp.experts";
  add_per_expert_layer(b, p, E, H, I,
                       {{"weight_packed", DType::U8, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, i / 2}; }},
                        {"weight_scale", DType::U8, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, i / 32}; }}});
  for (auto& t : b.tensors()) t.bytes.assign(byte_size(t.dtype, t.shape), 0x7F);  // ordinary values everywhere
  // An E8M0 NaN in one MX scale; packed FP4 bytes of 0xFF are ordinary (-6, -6) and must not count.
  b.tensors()[1].bytes[5] = 0xFF;
  b.tensors()[0].bytes[0] = 0xFF;
  // A BF16 router with +Inf at element 3 and NaN at element 6; an F8_E4M3 tensor with NaN at 1.
  std::vector<uint8_t> router(E * H * 2, 0);
  router[3 * 2] = 0x80, router[3 * 2 + 1] = 0x7F;
  router[6 * 2] = 0xC1, router[6 * 2 + 1] = 0x7F;
  b.add("model.layers.0.mlp.gate.weight", DType::BF16, {E, H}, router);
  b.add("model.layers.0.self_attn.o_proj.weight", DType::F8_E4M3, {4}, {0x00, 0xFF, 0x7E, 0x01});
  b.add("model.layers.0.self_attn.o_proj.weight_scale", DType::F32, {1}, f32_bytes({1.0f}));
  json config = moe_config("qwen3_moe", H, I, E);
  json group = {{"targets", {"Linear"}}, {"weights", {{"num_bits", 4}, {"type", "float"}, {"group_size", 32}, {"strategy", "group"}}}};
  config["quantization_config"] = {{"quant_method", "compressed-tensors"}, {"format", "mxfp4-pack-quantized"}, {"config_groups", {{"group_0", group}}}};
  b.config(config).write();

  auto ck = ckpt::open_checkpoint(tmp.path());
  auto scan = ckpt::scan_values(ck, 2);
  EXPECT_EQ(scan.bad_values, 4u);
  ASSERT_EQ(scan.per_tensor.size(), 3u);
  EXPECT_EQ(scan.per_tensor.at("model.layers.0.mlp.gate.weight"), 2u);
  EXPECT_EQ(scan.per_tensor.at("model.layers.0.self_attn.o_proj.weight"), 1u);
  EXPECT_EQ(scan.per_tensor.at(b.tensors()[1].name), 1u);
  ASSERT_EQ(scan.listed.size(), 2u);  // capped; counts stay complete
  bool saw_inf = false;
  auto full = ckpt::scan_values(ck, 100);
  for (const auto& f : full.listed) {
    if (f.tensor == "model.layers.0.mlp.gate.weight" && f.element == 3) {
      saw_inf = f.what == "+Inf";
    } else if (f.tensor == "model.layers.0.mlp.gate.weight") {
      EXPECT_EQ(f.element, 6u);
      EXPECT_EQ(f.what, "NaN");
    } else if (f.tensor == b.tensors()[1].name) {
      EXPECT_EQ(f.element, 5u);
      EXPECT_EQ(f.what, "E8M0 NaN (0xFF)");
    } else {
      EXPECT_EQ(f.tensor, "model.layers.0.self_attn.o_proj.weight");
      EXPECT_EQ(f.element, 1u);
    }
  }
  EXPECT_TRUE(saw_inf);
  EXPECT_EQ(full.listed.size(), 4u);
}

TEST(Values, CleanCheckpointHasNoFindings) {
  TempDir tmp;
  CheckpointBuilder b(tmp.path());
  b.add("w", DType::F32, {3}, f32_bytes({1.0f, -2.0f, 0.0f}));
  b.add("s", DType::F8_E8M0, {2}, {127, 0xFE});
  b.write();
  auto ck = ckpt::open_checkpoint(tmp.path());
  auto scan = ckpt::scan_values(ck);
  EXPECT_EQ(scan.bad_values, 0u);
  EXPECT_EQ(scan.tensors_scanned, 2u);
  EXPECT_EQ(scan.bytes_scanned, 14u);
}

// The scan screens each chunk before classifying its elements: every bit pattern of the 8- and
// 16-bit types is counted as the definitions say (BF16: 2 signs x 128 mantissas with the
// exponent all ones; F16: 2 x 1024; E4M3 0x7F/0xFF; E5M2 4 + 4; E8M0 0xFF; FNUZ 0x80), and a
// finding in the second chunk of a large tensor keeps its element index.
TEST(Values, EveryBitPatternAndLaterChunks) {
  TempDir tmp;
  CheckpointBuilder b(tmp.path());
  std::vector<uint8_t> all16(2 * 65536), all8(256);
  for (uint32_t v = 0; v < 65536; ++v) all16[2 * v] = static_cast<uint8_t>(v), all16[2 * v + 1] = static_cast<uint8_t>(v >> 8);
  for (uint32_t v = 0; v < 256; ++v) all8[v] = static_cast<uint8_t>(v);
  b.add("bf16", DType::BF16, {65536}, all16);
  b.add("f16", DType::F16, {65536}, all16);
  b.add("e4m3", DType::F8_E4M3, {256}, all8);
  b.add("e5m2", DType::F8_E5M2, {256}, all8);
  b.add("e8m0", DType::F8_E8M0, {256}, all8);
  b.add("fnuz", DType::F8_E4M3FNUZ, {256}, all8);
  b.add("u8", DType::U8, {256}, all8);  // not an MX scale: not scanned
  std::vector<uint8_t> big(3u << 19, 0);  // 1.5 MiB of F32 zeros, -Inf as the last element
  const uint32_t minus_inf = 0xFF800000u;
  std::memcpy(big.data() + big.size() - 4, &minus_inf, 4);
  b.add("f32", DType::F32, {big.size() / 4}, big);
  b.write();
  auto ck = ckpt::open_checkpoint(tmp.path());
  auto scan = ckpt::scan_values(ck, 1000);
  EXPECT_EQ(scan.per_tensor["bf16"], 256u);
  EXPECT_EQ(scan.per_tensor["f16"], 2048u);
  EXPECT_EQ(scan.per_tensor["e4m3"], 2u);
  EXPECT_EQ(scan.per_tensor["e5m2"], 8u);
  EXPECT_EQ(scan.per_tensor["e8m0"], 1u);
  EXPECT_EQ(scan.per_tensor["fnuz"], 1u);
  EXPECT_EQ(scan.per_tensor.count("u8"), 0u);
  EXPECT_EQ(scan.per_tensor["f32"], 1u);
  bool saw_last = false;
  for (const auto& f : scan.listed)
    if (f.tensor == "f32") saw_last = f.element == big.size() / 4 - 1 && f.what == "-Inf";
  EXPECT_TRUE(saw_last);
}

}  // namespace
}  // namespace moepack::test
