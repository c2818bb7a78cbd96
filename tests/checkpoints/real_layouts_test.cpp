// Layouts of published checkpoints that differ from the textbook per-expert grammar (ERRATA
// 11-16): amd-quark gpt-oss (per-expert fused gate_up), non-gated Nemotron-H experts,
// DeepSeek-V4 NVFP4, llm-compressor gpt-oss, compressed-tensors W4A8 int-quantized, fused 3-D
// experts (Llama-4 ModelOpt FP8, gpt-oss BF16). Each is read, described with the vLLM method and
// facts, and one expert's canonical params are checked byte for byte against the fixture.
#include <gtest/gtest.h>

#include <cstring>

#include "checkpoints/fixtures.h"
#include "checkpoints/real_layouts.h"
#include "formats/checkpoints/checkpoint.h"
#include "lib/core/error.h"

namespace moepack::test {
namespace {

using ckpt::Checkpoint;
using nlohmann::json;

const FixtureTensor& tensor(CheckpointBuilder& b, const std::string& name) {
  for (const auto& t : b.tensors())
    if (t.name == name) return t;
  throw std::runtime_error("fixture has no " + name);
}

const ckpt::ParamSummary* param(const ckpt::MoeLayer& l, const std::string& name) {
  for (const auto& p : l.params)
    if (p.name == name) return &p;
  return nullptr;
}

std::string bad_input(const std::string& path) {
  try {
    ckpt::open_checkpoint(path);
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 4) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected bad input for " << path;
  return "";
}

TEST(RealLayouts, QuarkGptOssPerExpertFusedGateUp) {
  TempDir tmp;
  CheckpointBuilder b = quark_gpt_oss_builder(tmp.path(), /*input_is_dynamic=*/std::nullopt);
  b.write();
  Checkpoint c = ckpt::open_checkpoint(tmp.path());
  EXPECT_EQ(c.family, ckpt::Family::quark);
  EXPECT_EQ(c.scheme_id, "quark-w_mxfp4_a_fp8");
  ASSERT_EQ(c.layers.size(), 1u);
  const auto& l = c.layers[0];
  EXPECT_EQ(l.naming, ckpt::ExpertNaming::per_expert_gate_up);
  EXPECT_EQ(l.recipe.w13_order, ckpt::W13Order::interleaved);
  EXPECT_TRUE(l.gated);
  EXPECT_TRUE(l.has_bias);
  EXPECT_EQ(l.num_experts, kRealE);
  EXPECT_EQ(l.quant.method.moe_method, "QuarkOCP_MX_MoEMethod");
  EXPECT_EQ(l.quant.quark_ocp_mx_scheme, "w_mxfp4_a_fp8");
  // No `is_dynamic` in the input spec: static, as Quark's QuantizationSpec defaults.
  EXPECT_EQ(l.quant.input_scales, "static");
  EXPECT_TRUE(l.quant.unsupported.empty()) << l.quant.unsupported;
  EXPECT_EQ(c.facts.activation, "swigluoai");
  ASSERT_NE(param(l, "w13_weight"), nullptr);
  EXPECT_EQ(param(l, "w13_weight")->shape, (std::vector<uint64_t>{2 * kRealI, kRealH / 2}));
  EXPECT_EQ(param(l, "w13_weight_scale")->shape, (std::vector<uint64_t>{2 * kRealI, kRealH / 32}));
  EXPECT_EQ(param(l, "w13_bias")->shape, (std::vector<uint64_t>{2 * kRealI}));
  EXPECT_TRUE(param(l, "w13_input_scale")->shape.empty());
  EXPECT_EQ(param(l, "w2_weight")->shape, (std::vector<uint64_t>{kRealH, kRealI / 2}));
  // Canonical params are the expert's tensors as they are (the rows stay interleaved).
  ckpt::ExpertParams p = ckpt::read_expert_params(c, l, 2);
  const std::string x = "model.layers.0.mlp.experts.2.";
  EXPECT_EQ(p.w13_order, ckpt::W13Order::interleaved);
  EXPECT_EQ(p.tensors.at("w13_weight").bytes, tensor(b, x + "gate_up_proj.weight").bytes);
  EXPECT_EQ(p.tensors.at("w13_weight_scale").bytes, tensor(b, x + "gate_up_proj.weight_scale").bytes);
  EXPECT_EQ(p.tensors.at("w13_bias").bytes, tensor(b, x + "gate_up_proj.bias").bytes);
  EXPECT_EQ(p.tensors.at("w13_input_scale").bytes, tensor(b, x + "gate_up_proj.input_scale").bytes);
  EXPECT_EQ(p.tensors.at("w2_weight").bytes, tensor(b, x + "down_proj.weight").bytes);
  EXPECT_EQ(p.tensors.at("w2_input_scale").bytes, tensor(b, x + "down_proj.input_scale").bytes);
}

TEST(RealLayouts, QuarkGptOssDynamicFp8IsDescribedAsRefusedByVllm) {
  TempDir tmp;
  quark_gpt_oss_builder(tmp.path(), true).write();
  Checkpoint c = ckpt::open_checkpoint(tmp.path());
  EXPECT_EQ(c.layers[0].quant.input_scales, "dynamic");
  EXPECT_NE(c.layers[0].quant.unsupported.find("not implemented"), std::string::npos) << c.layers[0].quant.unsupported;
}

TEST(RealLayouts, QuarkGptOssShapeErrorsNameTheTensor) {
  TempDir tmp;
  CheckpointBuilder b = quark_gpt_oss_builder(tmp.path(), std::nullopt);
  for (auto& t : b.tensors())
    if (t.name == "model.layers.0.mlp.experts.1.gate_up_proj.weight") t.shape = {kRealI, kRealH / 2};  // gate only: not fused
  b.write();
  std::string m = bad_input(tmp.path());
  EXPECT_NE(m.find("experts.1.gate_up_proj.weight"), std::string::npos) << m;
  EXPECT_NE(m.find("gate and up"), std::string::npos) << m;
}

TEST(RealLayouts, QuarkMxfp4WithMxfp6ActivationsIsItsOwnScheme) {
  TempDir tmp;
  CheckpointBuilder b(tmp.path());
  add_per_expert_layer(b, "model.layers.0.mlp.experts", 4, 64, 64, {{"weight", DType::U8, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, i / 2}; }},
                                                                   {"weight_scale", DType::U8, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, i / 32}; }}});
  json cfg = moe_config("qwen3_moe", 64, 64, 4, 1);
  json spec_w = {{"dtype", "fp4"}, {"qscheme", "per_group"}, {"group_size", 32}, {"scale_format", "e8m0"}};
  json spec_a = {{"dtype", "fp6_e2m3"}, {"qscheme", "per_group"}, {"group_size", 32}, {"is_dynamic", true}};
  cfg["quantization_config"] = {{"quant_method", "quark"}, {"export", {{"kv_cache_group", json::array()}}},
                                {"global_quant_config", {{"weight", spec_w}, {"input_tensors", spec_a}}}};
  b.config(cfg).write();
  Checkpoint c = ckpt::open_checkpoint(tmp.path());
  const auto& q = c.layers[0].quant;
  EXPECT_EQ(q.quark_ocp_mx_scheme, "w_mxfp4_a_mxfp6_e2m3");
  EXPECT_EQ(q.method.activation_key, "kMxfp6E2M3Dynamic");
  EXPECT_EQ(c.scheme_id, "quark-w_mxfp4_a_mxfp6_e2m3");
}

TEST(RealLayouts, NemotronHNonGatedModelOptNvfp4) {
  TempDir tmp;
  CheckpointBuilder b = nemotron_h_nvfp4_builder(tmp.path());
  b.write();
  Checkpoint c = ckpt::open_checkpoint(tmp.path());
  EXPECT_EQ(c.family, ckpt::Family::modelopt);
  EXPECT_EQ(c.scheme_id, "modelopt-nvfp4");
  EXPECT_EQ(c.facts.activation, "relu2_no_mul");
  EXPECT_EQ(c.facts.scoring_func, "sigmoid");
  EXPECT_TRUE(c.facts.has_e_score_correction_bias);
  ASSERT_EQ(c.layers.size(), 1u);
  const auto& l = c.layers[0];
  EXPECT_FALSE(l.gated);
  EXPECT_EQ(l.naming, ckpt::ExpertNaming::hf_no_gate);
  EXPECT_EQ(l.prefix, "backbone.layers.1.mixer.experts");
  EXPECT_EQ(l.quant.method.moe_method, "ModelOptNvFp4FusedMoE");
  // w13 holds only the up projection: I rows, one global scale slot.
  EXPECT_EQ(param(l, "w13_weight")->shape, (std::vector<uint64_t>{kRealI, kRealH / 2}));
  EXPECT_EQ(param(l, "w13_weight_scale")->shape, (std::vector<uint64_t>{kRealI, kRealH / 16}));
  EXPECT_EQ(param(l, "w13_weight_scale_2")->shape, (std::vector<uint64_t>{1}));
  EXPECT_EQ(param(l, "w2_weight")->shape, (std::vector<uint64_t>{kRealH, kRealI / 2}));
  ckpt::ExpertParams p = ckpt::read_expert_params(c, l, 3);
  const std::string x = "backbone.layers.1.mixer.experts.3.";
  EXPECT_EQ(p.tensors.at("w13_weight").bytes, tensor(b, x + "up_proj.weight").bytes);
  EXPECT_EQ(p.tensors.at("w13_weight_scale_2").bytes, tensor(b, x + "up_proj.weight_scale_2").bytes);
  EXPECT_EQ(p.tensors.at("w13_weight_scale_2").shape, (std::vector<uint64_t>{1}));
  EXPECT_EQ(p.tensors.at("w2_weight").bytes, tensor(b, x + "down_proj.weight").bytes);
}

TEST(RealLayouts, MissingGateInAGatedModelIsStillAnError) {
  TempDir tmp;
  CheckpointBuilder b = nemotron_h_nvfp4_builder(tmp.path());
  json cfg = nemotron_h_config();
  cfg.erase("mlp_hidden_act");
  cfg["model_type"] = "qwen3_moe";
  b.config(cfg).write();
  std::string m = bad_input(tmp.path());
  EXPECT_NE(m.find("missing gate_proj"), std::string::npos) << m;
}

TEST(RealLayouts, DeepSeekV4Nvfp4) {
  TempDir tmp;
  CheckpointBuilder b = deepseek_v4_nvfp4_builder(tmp.path());
  b.write();
  Checkpoint c = ckpt::open_checkpoint(tmp.path());
  EXPECT_EQ(c.family, ckpt::Family::deepseek_v4);
  EXPECT_EQ(c.scheme_id, "deepseek-v4-nvfp4");
  const auto& l = c.layers[0];
  EXPECT_EQ(l.quant.method.quant_method, "deepseek_v4_fp8");
  EXPECT_EQ(l.quant.method.moe_method, "ModelOptNvFp4FusedMoE");
  EXPECT_EQ(l.quant.method.oracle_family, "nvfp4");
  EXPECT_EQ(l.quant.global_scale_convention, "multiplier");
  EXPECT_EQ(param(l, "w13_weight_scale_2")->shape, (std::vector<uint64_t>{2}));
  EXPECT_EQ(param(l, "w13_weight_scale")->dtype, DType::F8_E4M3);
  ckpt::ExpertParams p = ckpt::read_expert_params(c, l, 1);
  const std::string x = "layers.0.ffn.experts.1.";
  std::vector<uint8_t> w13 = tensor(b, x + "w1.weight").bytes;
  const auto& up = tensor(b, x + "w3.weight").bytes;
  w13.insert(w13.end(), up.begin(), up.end());
  EXPECT_EQ(p.tensors.at("w13_weight").bytes, w13);
}

TEST(RealLayouts, DeepSeekV4WithoutNvfp4AlgoStaysMxfp4) {
  TempDir tmp;
  CheckpointBuilder b(tmp.path());
  add_per_expert_layer(b, "layers.0.ffn.experts", 4, 128, 128,
                       {{"weight", DType::I8, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, i / 2}; }},
                        {"scale", DType::F8_E8M0, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, i / 32}; }}},
                       "w1", "w3", "w2");
  json cfg = moe_config("deepseek_v4", 128, 128, 4, 1);
  cfg["quantization_config"] = {{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}, {"moe_quant_algo", nullptr}};
  b.config(cfg).write();
  Checkpoint c = ckpt::open_checkpoint(tmp.path());
  EXPECT_EQ(c.layers[0].quant.method.moe_method, "Mxfp4MoEMethod");
  EXPECT_EQ(c.scheme_id, "deepseek-v4-mxfp4");
}

TEST(RealLayouts, CompressedTensorsGptOssWithAndWithoutBiases) {
  for (bool biases : {true, false}) {
    SCOPED_TRACE(biases ? "with biases" : "biases dropped");
    TempDir tmp;
    CheckpointBuilder b = ct_gpt_oss_builder(tmp.path(), biases);
    b.write();
    Checkpoint c = ckpt::open_checkpoint(tmp.path());
    const auto& l = c.layers[0];
    EXPECT_EQ(l.naming, ckpt::ExpertNaming::hf);
    EXPECT_EQ(l.quant.method.moe_method, "CompressedTensorsW4A4Mxfp4MoEMethod");
    // gpt-oss has expert biases by architecture: the oracle sees them either way.
    EXPECT_TRUE(l.has_bias);
    EXPECT_TRUE(c.facts.has_bias);
    EXPECT_EQ(param(l, "w13_bias") != nullptr, biases);
    if (biases) {
      ckpt::ExpertParams p = ckpt::read_expert_params(c, l, 0);
      std::vector<uint8_t> w13 = tensor(b, "model.layers.0.mlp.experts.0.gate_proj.bias").bytes;
      const auto& up = tensor(b, "model.layers.0.mlp.experts.0.up_proj.bias").bytes;
      w13.insert(w13.end(), up.begin(), up.end());
      EXPECT_EQ(p.tensors.at("w13_bias").bytes, w13);
    }
  }
}

TEST(RealLayouts, CompressedTensorsW4A8IntQuantized) {
  TempDir tmp;
  CheckpointBuilder b = ct_w4a8_int_builder(tmp.path());
  b.write();
  Checkpoint c = ckpt::open_checkpoint(tmp.path());
  const auto& l = c.layers[0];
  EXPECT_EQ(l.quant.method.moe_method, "CompressedTensorsW4A8Int8MoEMethod");
  EXPECT_EQ(l.quant.checkpoint_format, "int-quantized");
  EXPECT_EQ(c.scheme_id, "compressed-tensors-w4a8-int8");
  EXPECT_EQ(param(l, "w13_weight")->dtype, DType::I8);
  EXPECT_EQ(param(l, "w13_weight")->shape, (std::vector<uint64_t>{2 * kRealI, kRealH}));
  EXPECT_EQ(param(l, "w13_weight_scale")->shape, (std::vector<uint64_t>{2 * kRealI, kRealH / 32}));
  EXPECT_EQ(param(l, "w13_weight_packed"), nullptr);
}

TEST(RealLayouts, Llama4ModelOptFp8FusedExperts) {
  TempDir tmp;
  CheckpointBuilder b = llama4_fp8_builder(tmp.path());
  b.write();
  Checkpoint c = ckpt::open_checkpoint(tmp.path());
  EXPECT_EQ(c.family, ckpt::Family::modelopt);
  EXPECT_EQ(c.scheme_id, "modelopt-fp8-tensor");
  ASSERT_EQ(c.layers.size(), 1u);
  const auto& l = c.layers[0];
  EXPECT_EQ(l.naming, ckpt::ExpertNaming::fused_3d);
  EXPECT_EQ(l.recipe.w13_order, ckpt::W13Order::gate_then_up);
  EXPECT_EQ(l.num_experts, kRealE);
  EXPECT_EQ(l.quant.method.moe_method, "ModelOptFp8MoEMethod");
  EXPECT_EQ(c.facts.routing_method, "Llama4");
  EXPECT_EQ(param(l, "w13_weight")->shape, (std::vector<uint64_t>{2 * kRealI, kRealH}));
  EXPECT_EQ(param(l, "w2_weight")->shape, (std::vector<uint64_t>{kRealH, kRealI}));
  EXPECT_EQ(param(l, "w13_weight_scale")->shape, (std::vector<uint64_t>{2}));
  // One expert's w13 is the transpose of its [H, 2I] slice; scales are broadcast.
  const uint64_t e = 2;
  ckpt::ExpertParams p = ckpt::read_expert_params(c, l, e);
  const auto& src = tensor(b, l.prefix + ".gate_up_proj").bytes;
  const auto& w13 = p.tensors.at("w13_weight");
  ASSERT_EQ(w13.shape, (std::vector<uint64_t>{2 * kRealI, kRealH}));
  for (uint64_t r = 0; r < 2 * kRealI; ++r)
    for (uint64_t h = 0; h < kRealH; ++h) ASSERT_EQ(w13.bytes[r * kRealH + h], src[(e * kRealH + h) * 2 * kRealI + r]) << r << "," << h;
  const auto& dsrc = tensor(b, l.prefix + ".down_proj").bytes;
  const auto& w2 = p.tensors.at("w2_weight");
  for (uint64_t h = 0; h < kRealH; ++h)
    for (uint64_t i = 0; i < kRealI; ++i) ASSERT_EQ(w2.bytes[h * kRealI + i], dsrc[(e * kRealI + i) * kRealH + h]);
  const auto& s = tensor(b, l.prefix + ".gate_up_proj_weight_scale").bytes;
  std::vector<uint8_t> pair = s;
  pair.insert(pair.end(), s.begin(), s.end());
  EXPECT_EQ(p.tensors.at("w13_weight_scale").bytes, pair);
  EXPECT_EQ(p.tensors.at("w2_input_scale").bytes, tensor(b, l.prefix + ".down_proj_input_scale").bytes);
}

TEST(RealLayouts, GptOssBf16FusedExperts) {
  TempDir tmp;
  CheckpointBuilder b = gpt_oss_bf16_builder(tmp.path());
  b.write();
  Checkpoint c = ckpt::open_checkpoint(tmp.path());
  EXPECT_EQ(c.family, ckpt::Family::unquantized);
  EXPECT_EQ(c.scheme_id, "unquantized-bf16");
  const auto& l = c.layers[0];
  EXPECT_EQ(l.naming, ckpt::ExpertNaming::fused_3d);
  EXPECT_EQ(l.recipe.w13_order, ckpt::W13Order::interleaved);
  EXPECT_TRUE(l.has_bias);
  EXPECT_EQ(param(l, "w13_bias")->shape, (std::vector<uint64_t>{2 * kRealI}));
  ckpt::ExpertParams p = ckpt::read_expert_params(c, l, 1);
  const auto& bias = tensor(b, l.prefix + ".gate_up_proj_bias").bytes;
  const size_t per = 2 * kRealI * 2;
  EXPECT_EQ(p.tensors.at("w13_bias").bytes, std::vector<uint8_t>(bias.begin() + per, bias.begin() + 2 * per));
  // BF16 elements move as 2-byte units in the transpose.
  const auto& src = tensor(b, l.prefix + ".gate_up_proj").bytes;
  const auto& w13 = p.tensors.at("w13_weight").bytes;
  for (uint64_t r = 0; r < 2 * kRealI; ++r)
    for (uint64_t h = 0; h < kRealH; ++h)
      ASSERT_EQ(std::memcmp(&w13[(r * kRealH + h) * 2], &src[((1 * kRealH + h) * 2 * kRealI + r) * 2], 2), 0);
}

TEST(RealLayouts, FusedExpertsWithWrongShapeOrStrayScaleAreRefused) {
  {
    TempDir tmp;
    CheckpointBuilder b = gpt_oss_bf16_builder(tmp.path());
    for (auto& t : b.tensors())
      if (t.name.ends_with(".gate_up_proj")) t.shape = {kRealE, 2 * kRealI, kRealH};  // output-major: not what vLLM transposes
    b.write();
    std::string m = bad_input(tmp.path());
    EXPECT_NE(m.find("gate_up_proj"), std::string::npos) << m;
    EXPECT_NE(m.find("input-major"), std::string::npos) << m;
  }
  {
    TempDir tmp;
    CheckpointBuilder b = gpt_oss_bf16_builder(tmp.path());
    b.add("model.layers.0.mlp.experts.gate_up_proj_weight_scale", DType::F32, {});
    b.write();
    std::string m = bad_input(tmp.path());
    EXPECT_NE(m.find("per-tensor scale in an unquantized layer"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace moepack::test
