// `--check-values` scan: NaN/Inf in float tensors, E8M0 NaN in MX scales, E4M3 NaN, reported by
// tensor and flat element index with counts.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace moepack::test
