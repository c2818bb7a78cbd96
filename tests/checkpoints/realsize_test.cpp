// Header-faithful real-size checkpoints (data regions are sparse holes): gpt-oss-120b fused
// MXFP4, DeepSeek-V3 per-expert FP8 block (sharded, with an index, ~90k tensors) and
// Qwen3-30B-A3B GPTQ. Opening reads headers only, so these run in a fraction of a second; no
// timing is asserted.
#include <gtest/gtest.h>

#include "checkpoints/fixtures.h"
#include "formats/checkpoints/checkpoint.h"

namespace moepack::test {
namespace {

using nlohmann::json;

// The layer index of a tensor name ("model.layers.17.mlp..." -> 17), for sharding by layer.
size_t layer_of(const std::string& name) {
  size_t p = name.find("layers.");
  if (p == std::string::npos) return 0;
  return std::stoul(name.substr(p + 7));
}

TEST(RealSize, GptOss120b) {
  constexpr uint64_t H = 2880, I = 2880, E = 128, L = 36;
  TempDir tmp;
  CheckpointBuilder b(tmp.path());
  for (uint64_t l = 0; l < L; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    b.add(p + "mlp.experts.gate_up_proj_blocks", DType::U8, {E, 2 * I, H / 32, 16});
    b.add(p + "mlp.experts.gate_up_proj_scales", DType::U8, {E, 2 * I, H / 32});
    b.add(p + "mlp.experts.gate_up_proj_bias", DType::BF16, {E, 2 * I});
    b.add(p + "mlp.experts.down_proj_blocks", DType::U8, {E, H, I / 32, 16});
    b.add(p + "mlp.experts.down_proj_scales", DType::U8, {E, H, I / 32});
    b.add(p + "mlp.experts.down_proj_bias", DType::BF16, {E, H});
    b.add(p + "mlp.router.weight", DType::BF16, {E, H});
    b.add(p + "mlp.router.bias", DType::BF16, {E});
    b.add(p + "self_attn.q_proj.weight", DType::BF16, {4096, H});
    b.add(p + "self_attn.sinks", DType::BF16, {64});
  }
  b.add("model.embed_tokens.weight", DType::BF16, {201088, H});
  b.add("lm_head.weight", DType::BF16, {201088, H});
  json config = {{"architectures", {"GptOssForCausalLM"}}, {"model_type", "gpt_oss"}, {"hidden_size", H}, {"intermediate_size", I},
                 {"num_local_experts", E}, {"num_experts_per_tok", 4}, {"num_hidden_layers", L}, {"swiglu_limit", 7.0}, {"torch_dtype", "bfloat16"},
                 {"quantization_config", {{"quant_method", "mxfp4"}, {"modules_to_not_convert", {"model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"}}}}};
  b.config(config);
  b.write_sparse(15, [](const std::string& n) { return layer_of(n) % 15; });

  auto c = ckpt::open_checkpoint(tmp.path());
  EXPECT_EQ(c.family, ckpt::Family::gpt_oss);
  ASSERT_EQ(c.layers.size(), L);
  for (const auto& l : c.layers) {
    EXPECT_EQ(l.num_experts, E);
    EXPECT_EQ(l.source_bytes, 1'694'269'440u);  // checkpoint-formats.md 3.2
    EXPECT_EQ(l.quant.method.weight_key, "kMxfp4Static");
  }
  EXPECT_EQ(c.layers[35].prefix, "model.layers.35.mlp.experts");
  EXPECT_EQ(c.layers[0].params[0].shape, (std::vector<uint64_t>{5760, 1440}));
  EXPECT_EQ(c.facts.activation, "swigluoai");
  EXPECT_EQ(c.facts.top_k, 4u);
  EXPECT_TRUE(c.facts.has_bias);
}

TEST(RealSize, DeepSeekV3ShardedFp8Block) {
  constexpr uint64_t H = 7168, I = 2048, E = 256, L = 61, FirstMoe = 3;
  TempDir tmp;
  CheckpointBuilder b(tmp.path());
  auto scale = [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{(o + 127) / 128, (i + 127) / 128}; };
  for (uint64_t l = 0; l < L; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    b.add(p + "input_layernorm.weight", DType::BF16, {H});
    if (l < FirstMoe) {
      b.add(p + "mlp.gate_proj.weight", DType::F8_E4M3, {18432, H});
      b.add(p + "mlp.gate_proj.weight_scale_inv", DType::F32, scale(18432, H));
      continue;
    }
    add_per_expert_layer(b, p + "mlp.experts", E, H, I, {{"weight", DType::F8_E4M3, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, i}; }}, {"weight_scale_inv", DType::F32, scale}});
    b.add(p + "mlp.gate.weight", DType::BF16, {E, H});
    b.add(p + "mlp.gate.e_score_correction_bias", DType::F32, {E});
    for (const char* proj : {"gate_proj", "up_proj"}) {
      b.add(p + "mlp.shared_experts." + proj + ".weight", DType::F8_E4M3, {I, H});
      b.add(p + "mlp.shared_experts." + proj + ".weight_scale_inv", DType::F32, scale(I, H));
    }
  }
  b.add("model.embed_tokens.weight", DType::BF16, {129280, H});
  json config = {{"architectures", {"DeepseekV3ForCausalLM"}}, {"model_type", "deepseek_v3"}, {"hidden_size", H}, {"intermediate_size", 18432},
                 {"moe_intermediate_size", I}, {"n_routed_experts", E}, {"n_shared_experts", 1}, {"num_experts_per_tok", 8}, {"num_hidden_layers", L},
                 {"first_k_dense_replace", FirstMoe}, {"scoring_func", "sigmoid"}, {"norm_topk_prob", true}, {"n_group", 8}, {"topk_group", 4},
                 {"routed_scaling_factor", 2.5}, {"hidden_act", "silu"}, {"torch_dtype", "bfloat16"},
                 {"quantization_config", {{"activation_scheme", "dynamic"}, {"fmt", "e4m3"}, {"quant_method", "fp8"}, {"weight_block_size", {128, 128}}}}};
  b.config(config);
  b.write_sparse(20, [](const std::string& n) { return layer_of(n) % 20; });
  EXPECT_TRUE(std::filesystem::exists(tmp.file("model.safetensors.index.json")));

  auto c = ckpt::open_checkpoint(tmp.path());
  EXPECT_EQ(c.family, ckpt::Family::fp8);
  EXPECT_EQ(c.scheme, "fp8 block 128x128 (dynamic activations)");
  ASSERT_EQ(c.layers.size(), L - FirstMoe);
  EXPECT_EQ(c.layers.front().layer_index, 3);
  EXPECT_EQ(c.layers.back().layer_index, 60);
  for (const auto& l : c.layers) {
    ASSERT_EQ(l.num_experts, E);
    ASSERT_EQ(l.tensors.size(), E * 6);
    EXPECT_EQ(l.quant.method.weight_key, "kFp8Static128BlockSym");
  }
  const auto& params = c.layers[0].params;
  ASSERT_EQ(params.size(), 4u);
  EXPECT_EQ(params[0].shape, (std::vector<uint64_t>{2 * I, H}));
  EXPECT_EQ(params[2].name, "w13_weight_scale_inv");
  EXPECT_EQ(params[2].shape, (std::vector<uint64_t>{32, 56}));
  EXPECT_EQ(params[3].shape, (std::vector<uint64_t>{56, 16}));
  EXPECT_EQ(c.facts.routing_method, "DeepSeekV3");
  EXPECT_EQ(c.facts.num_experts, E);
  EXPECT_EQ(c.facts.top_k, 8u);
}

TEST(RealSize, Qwen3_30B_A3B_Gptq) {
  constexpr uint64_t H = 2048, I = 768, E = 128, L = 48, G = 128;
  TempDir tmp;
  CheckpointBuilder b(tmp.path());
  for (uint64_t l = 0; l < L; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".mlp.";
    add_per_expert_layer(b, p + "experts", E, H, I,
                         {{"qweight", DType::I32, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{i / 8, o}; }},
                          {"qzeros", DType::I32, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{i / G, o / 8}; }},
                          {"scales", DType::F16, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{i / G, o}; }},
                          {"g_idx", DType::I32, [](uint64_t, uint64_t i) { return std::vector<uint64_t>{i}; }}});
    b.add(p + "gate.weight", DType::F16, {E, H});
  }
  json config = {{"architectures", {"Qwen3MoeForCausalLM"}}, {"model_type", "qwen3_moe"}, {"hidden_size", H}, {"moe_intermediate_size", I},
                 {"intermediate_size", 6144}, {"num_experts", E}, {"num_experts_per_tok", 8}, {"num_hidden_layers", L}, {"norm_topk_prob", true},
                 {"hidden_act", "silu"}, {"torch_dtype", "float16"},
                 {"quantization_config", {{"quant_method", "gptq"}, {"bits", 4}, {"group_size", G}, {"desc_act", false}, {"sym", true}, {"checkpoint_format", "gptq"}}}};
  b.config(config);
  b.write_sparse(4, [](const std::string& n) { return layer_of(n) % 4; });

  auto c = ckpt::open_checkpoint(tmp.path());
  EXPECT_EQ(c.family, ckpt::Family::gptq);
  ASSERT_EQ(c.layers.size(), L);
  const auto& l = c.layers[0];
  EXPECT_EQ(l.num_experts, E);
  EXPECT_EQ(l.quant.method.weight_key, "kInt4Static");
  EXPECT_EQ(l.quant.group_size, 128);
  ASSERT_GE(l.params.size(), 8u);
  EXPECT_EQ(l.params[0].name, "w13_qweight");
  EXPECT_EQ(l.params[0].shape, (std::vector<uint64_t>{256, 1536}));
  EXPECT_EQ(l.params[1].shape, (std::vector<uint64_t>{96, 2048}));
  EXPECT_EQ(l.params[2].shape, (std::vector<uint64_t>{16, 192}));  // w13_qzeros
  EXPECT_EQ(c.facts.routing_method, "RenormalizeNaive");
  EXPECT_EQ(c.facts.dtype, "float16");
}

}  // namespace
}  // namespace moepack::test
