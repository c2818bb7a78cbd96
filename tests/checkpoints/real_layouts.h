// Small checkpoints laid out exactly like published ones whose tensor grammar differs from the
// textbook per-expert one (ERRATA 11-16). Shared by the reader, convert and CLI tests.
// Weights are byte patterns; scales are kept in range (E8M0 codes 120..131, positive F32
// scales) so that value scans and converters see plausible numbers.
#pragma once

#include <cstring>
#include <optional>
#include <tuple>

#include "checkpoints/fixtures.h"

namespace moepack::test {

constexpr uint64_t kRealH = 128, kRealI = 128, kRealE = 4;

inline std::vector<uint8_t> e8m0_bytes(uint64_t n, uint32_t seed) {
  std::vector<uint8_t> b = pattern_bytes(n, seed);
  for (auto& x : b) x = static_cast<uint8_t>(120 + x % 12);
  return b;
}

// BF16 values in [-0.5, 0.5): finite, so casts and scans behave.
inline std::vector<uint8_t> bf16_bytes(uint64_t n, uint32_t seed) {
  std::vector<uint8_t> raw = pattern_bytes(n, seed), out(2 * n);
  for (uint64_t i = 0; i < n; ++i) {
    float v = (static_cast<float>(raw[i]) - 128.0f) / 256.0f;
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    out[2 * i] = static_cast<uint8_t>(bits >> 16);
    out[2 * i + 1] = static_cast<uint8_t>(bits >> 24);
  }
  return out;
}

// E4M3 codes of positive normal values (exponent field 1..14), never NaN.
inline std::vector<uint8_t> e4m3_bytes(uint64_t n, uint32_t seed) {
  std::vector<uint8_t> b = pattern_bytes(n, seed);
  for (auto& x : b) x = static_cast<uint8_t>(((1 + x % 14) << 3) | (x >> 5));
  return b;
}

inline std::vector<uint8_t> f32_scalar(float v) { return f32_bytes({v}); }

inline nlohmann::json quark_mxfp4_fp8_quant(std::optional<bool> input_is_dynamic) {
  nlohmann::json w = {{"dtype", "fp4"}, {"qscheme", "per_group"}, {"group_size", 32}, {"ch_axis", -1}, {"scale_format", "e8m0"}, {"is_dynamic", false}};
  nlohmann::json a = {{"dtype", "fp8_e4m3"}, {"qscheme", "per_tensor"}, {"ch_axis", nullptr}, {"group_size", nullptr}};
  if (input_is_dynamic) a["is_dynamic"] = *input_is_dynamic;
  return {{"quant_method", "quark"},
          {"export", {{"kv_cache_group", nlohmann::json::array()}, {"pack_method", "reorder"}}},
          {"global_quant_config", {{"weight", w}, {"input_tensors", a}, {"output_tensors", nullptr}, {"bias", nullptr}}},
          {"layer_quant_config", nlohmann::json::object()},
          {"exclude", {"lm_head", "*router*", "*self_attn*"}}};
}

// amd-quark gpt-oss export (ERRATA 11): experts separated, gate/up fused and interleaved.
inline CheckpointBuilder quark_gpt_oss_builder(const std::string& dir, std::optional<bool> input_is_dynamic) {
  CheckpointBuilder b(dir);
  const uint64_t H = kRealH, I = kRealI;
  const std::string p = "model.layers.0.mlp.experts.";
  uint32_t seed = 1;
  for (uint64_t e = 0; e < kRealE; ++e) {
    const std::string x = p + std::to_string(e) + ".";
    b.add(x + "gate_up_proj.weight", DType::U8, {2 * I, H / 2});
    b.add(x + "gate_up_proj.weight_scale", DType::U8, {2 * I, H / 32}, e8m0_bytes(2 * I * H / 32, seed++));
    b.add(x + "gate_up_proj.bias", DType::BF16, {2 * I}, bf16_bytes(2 * I, seed++));
    const bool static_inputs = !input_is_dynamic.value_or(false);  // dynamic exports carry no input scales
    if (static_inputs) b.add(x + "gate_up_proj.input_scale", DType::F32, {}, f32_scalar(0.01f * static_cast<float>(e + 1)));
    b.add(x + "down_proj.weight", DType::U8, {H, I / 2});
    b.add(x + "down_proj.weight_scale", DType::U8, {H, I / 32}, e8m0_bytes(H * I / 32, seed++));
    b.add(x + "down_proj.bias", DType::BF16, {H}, bf16_bytes(H, seed++));
    if (static_inputs) b.add(x + "down_proj.input_scale", DType::F32, {}, f32_scalar(0.02f * static_cast<float>(e + 1)));
  }
  b.add("model.layers.0.mlp.router.weight", DType::BF16, {kRealE, H}, bf16_bytes(kRealE * H, seed++));
  b.add("model.layers.0.mlp.router.bias", DType::BF16, {kRealE}, bf16_bytes(kRealE, seed++));
  b.add("model.embed_tokens.weight", DType::BF16, {16, H}, bf16_bytes(16 * H, seed++));
  nlohmann::json cfg = moe_config("gpt_oss", H, I, kRealE, 1);
  cfg["swiglu_limit"] = 7.0;
  cfg["quantization_config"] = quark_mxfp4_fp8_quant(input_is_dynamic);
  b.config(cfg);
  return b;
}

inline nlohmann::json nemotron_h_config() {
  return {{"model_type", "nemotron_h"}, {"architectures", {"NemotronHForCausalLM"}}, {"hidden_size", kRealH}, {"moe_intermediate_size", kRealI},
          {"n_routed_experts", kRealE}, {"n_shared_experts", 1}, {"moe_shared_expert_intermediate_size", kRealI}, {"num_experts_per_tok", 2},
          {"mlp_hidden_act", "relu2"}, {"mamba_hidden_act", "silu"}, {"n_group", 1}, {"topk_group", 1}, {"norm_topk_prob", true},
          {"routed_scaling_factor", 2.5}, {"num_hidden_layers", 2}, {"torch_dtype", "bfloat16"},
          {"quantization_config", {{"quant_method", "modelopt"}, {"quant_algo", "NVFP4"}, {"group_size", 16}, {"ignore", {"lm_head"}}}}};
}

// Nemotron-H ModelOpt NVFP4 (ERRATA 12): non-gated experts, up_proj and down_proj only.
inline CheckpointBuilder nemotron_h_nvfp4_builder(const std::string& dir) {
  CheckpointBuilder b(dir);
  const uint64_t H = kRealH, I = kRealI;
  uint32_t seed = 100;
  for (uint64_t e = 0; e < kRealE; ++e)
    for (auto [proj, out, in] : {std::tuple{"up_proj", I, H}, std::tuple{"down_proj", H, I}}) {
      const std::string x = "backbone.layers.1.mixer.experts." + std::to_string(e) + "." + proj + ".";
      b.add(x + "weight", DType::U8, {out, in / 2});
      b.add(x + "weight_scale", DType::F8_E4M3, {out, in / 16}, e4m3_bytes(out * in / 16, seed++));
      b.add(x + "weight_scale_2", DType::F32, {}, f32_scalar(0.0005f * static_cast<float>(seed++)));
      b.add(x + "input_scale", DType::F32, {}, f32_scalar(0.001f * static_cast<float>(seed++)));
    }
  b.add("backbone.layers.1.mixer.gate.weight", DType::BF16, {kRealE, H}, bf16_bytes(kRealE * H, seed++));
  b.add("backbone.layers.1.mixer.gate.e_score_correction_bias", DType::F32, {kRealE}, f32_bytes({0.1f, 0.2f, 0.3f, 0.4f}));
  b.add("backbone.layers.1.mixer.shared_experts.up_proj.weight", DType::BF16, {I, H}, bf16_bytes(I * H, seed++));
  b.add("backbone.layers.1.mixer.shared_experts.down_proj.weight", DType::BF16, {H, I}, bf16_bytes(I * H, seed++));
  b.add("backbone.embeddings.weight", DType::BF16, {16, H}, bf16_bytes(16 * H, seed++));
  b.config(nemotron_h_config());
  return b;
}

// DeepSeek-V4 with NVFP4 experts (ERRATA 13): fp8 quant method, moe_quant_algo NVFP4.
inline CheckpointBuilder deepseek_v4_nvfp4_builder(const std::string& dir) {
  CheckpointBuilder b(dir);
  const uint64_t H = kRealH, I = kRealI;
  uint32_t seed = 200;
  for (uint64_t e = 0; e < kRealE; ++e)
    for (auto [proj, out, in] : {std::tuple{"w1", I, H}, std::tuple{"w3", I, H}, std::tuple{"w2", H, I}}) {
      const std::string x = "layers.0.ffn.experts." + std::to_string(e) + "." + proj + ".";
      b.add(x + "weight", DType::U8, {out, in / 2});
      b.add(x + "weight_scale", DType::F8_E4M3, {out, in / 16}, e4m3_bytes(out * in / 16, seed++));
      b.add(x + "weight_scale_2", DType::F32, {}, f32_scalar(0.0005f * static_cast<float>(seed++)));
      b.add(x + "input_scale", DType::F32, {}, f32_scalar(0.001f * static_cast<float>(seed++)));
    }
  b.add("layers.0.ffn.gate.weight", DType::BF16, {kRealE, H}, bf16_bytes(kRealE * H, seed++));
  b.add("layers.0.ffn.gate.bias", DType::F32, {kRealE}, f32_bytes({0.1f, 0.2f, 0.3f, 0.4f}));
  nlohmann::json cfg = moe_config("deepseek_v4", H, I, kRealE, 1);
  cfg["expert_dtype"] = "fp4";
  cfg["quantization_config"] = {{"quant_method", "fp8"}, {"activation_scheme", "dynamic"}, {"fmt", "e4m3"}, {"scale_fmt", "ue8m0"},
                                {"weight_block_size", {128, 128}}, {"moe_quant_algo", "NVFP4"}};
  b.config(cfg);
  return b;
}

// llm-compressor's gpt-oss (ERRATA 15): linearized per-expert MXFP4 with a bias per projection.
inline CheckpointBuilder ct_gpt_oss_builder(const std::string& dir, bool biases) {
  CheckpointBuilder b(dir);
  const uint64_t H = kRealH, I = kRealI;
  uint32_t seed = 300;
  for (uint64_t e = 0; e < kRealE; ++e)
    for (auto [proj, out, in] : {std::tuple{"gate_proj", I, H}, std::tuple{"up_proj", I, H}, std::tuple{"down_proj", H, I}}) {
      const std::string x = "model.layers.0.mlp.experts." + std::to_string(e) + "." + proj + ".";
      b.add(x + "weight_packed", DType::U8, {out, in / 2});
      b.add(x + "weight_scale", DType::U8, {out, in / 32}, e8m0_bytes(out * in / 32, seed++));
      if (biases) b.add(x + "bias", DType::BF16, {out}, bf16_bytes(out, seed++));
    }
  b.add("model.layers.0.mlp.router.weight", DType::BF16, {kRealE, H}, bf16_bytes(kRealE * H, seed++));
  nlohmann::json cfg = moe_config("gpt_oss", H, I, kRealE, 1);
  nlohmann::json w = {{"num_bits", 4}, {"type", "float"}, {"strategy", "group"}, {"group_size", 32}, {"symmetric", true}, {"dynamic", false}, {"scale_dtype", "torch.uint8"}};
  cfg["quantization_config"] = {{"quant_method", "compressed-tensors"}, {"format", "mxfp4-pack-quantized"},
                                {"config_groups", {{"group_0", {{"targets", {"Linear"}}, {"weights", w}, {"input_activations", nullptr}, {"format", "mxfp4-pack-quantized"}}}}},
                                {"ignore", {"lm_head", "re:.*router$"}}};
  b.config(cfg);
  return b;
}

// compressed-tensors W4A8 with int8 activations, `int-quantized` format (ERRATA 14).
inline CheckpointBuilder ct_w4a8_int_builder(const std::string& dir) {
  CheckpointBuilder b(dir);
  const uint64_t H = kRealH, I = kRealI;
  uint32_t seed = 400;
  for (uint64_t e = 0; e < kRealE; ++e)
    for (auto [proj, out, in] : {std::tuple{"gate_proj", I, H}, std::tuple{"up_proj", I, H}, std::tuple{"down_proj", H, I}}) {
      const std::string x = "model.layers.0.mlp.experts." + std::to_string(e) + "." + proj + ".";
      std::vector<uint8_t> q = pattern_bytes(out * in, seed++);
      for (auto& v : q) v = static_cast<uint8_t>(static_cast<int8_t>(static_cast<int>(v % 16) - 8));
      b.add(x + "weight", DType::I8, {out, in}, q);
      b.add(x + "weight_scale", DType::BF16, {out, in / 32}, bf16_bytes(out * in / 32, seed++));
    }
  b.add("model.layers.0.mlp.gate.weight", DType::BF16, {kRealE, H}, bf16_bytes(kRealE * H, seed++));
  nlohmann::json cfg = moe_config("qwen3_moe", H, I, kRealE, 1);
  nlohmann::json w = {{"num_bits", 4}, {"type", "int"}, {"strategy", "group"}, {"group_size", 32}, {"symmetric", true}, {"dynamic", false}};
  nlohmann::json a = {{"num_bits", 8}, {"type", "int"}, {"strategy", "token"}, {"symmetric", true}, {"dynamic", true}};
  cfg["quantization_config"] = {{"quant_method", "compressed-tensors"}, {"format", "int-quantized"},
                                {"config_groups", {{"group_0", {{"targets", {"Linear"}}, {"weights", w}, {"input_activations", a}, {"format", "int-quantized"}}}}},
                                {"ignore", {"lm_head", "re:.*mlp.gate$"}}};
  b.config(cfg);
  return b;
}

// Llama-4 ModelOpt FP8 (ERRATA 16): fused input-major experts and broadcast scalar scales.
inline CheckpointBuilder llama4_fp8_builder(const std::string& dir) {
  CheckpointBuilder b(dir);
  const uint64_t H = kRealH, I = kRealI, E = kRealE;
  const std::string p = "language_model.model.layers.0.feed_forward.";
  uint32_t seed = 500;
  b.add(p + "experts.gate_up_proj", DType::F8_E4M3, {E, H, 2 * I}, e4m3_bytes(E * H * 2 * I, seed++));
  b.add(p + "experts.down_proj", DType::F8_E4M3, {E, I, H}, e4m3_bytes(E * I * H, seed++));
  b.add(p + "experts.gate_up_proj_weight_scale", DType::F32, {}, f32_scalar(0.0125f));
  b.add(p + "experts.down_proj_weight_scale", DType::F32, {}, f32_scalar(0.025f));
  b.add(p + "experts.gate_up_proj_input_scale", DType::F32, {}, f32_scalar(0.5f));
  b.add(p + "experts.down_proj_input_scale", DType::F32, {}, f32_scalar(0.75f));
  b.add(p + "router.weight", DType::BF16, {E, H}, bf16_bytes(E * H, seed++));
  b.add(p + "shared_expert.gate_proj.weight", DType::F8_E4M3, {I, H}, e4m3_bytes(I * H, seed++));
  b.add("language_model.model.embed_tokens.weight", DType::BF16, {16, H}, bf16_bytes(16 * H, seed++));
  nlohmann::json text = {{"model_type", "llama4_text"}, {"hidden_size", H}, {"intermediate_size", I}, {"intermediate_size_mlp", 2 * I},
                         {"num_local_experts", E}, {"num_experts_per_tok", 1}, {"num_hidden_layers", 1}, {"hidden_act", "silu"},
                         {"interleave_moe_layer_step", 1}};
  nlohmann::json cfg = {{"model_type", "llama4"}, {"architectures", {"Llama4ForConditionalGeneration"}}, {"text_config", text}, {"torch_dtype", "bfloat16"},
                        {"quantization_config", {{"quant_method", "modelopt"}, {"quant_algo", "FP8"}, {"ignore", {"lm_head", "*router*", "*vision*"}}}}};
  b.config(cfg);
  return b;
}

// gpt-oss in BF16 (the unquantized release layout): fused input-major experts with biases.
inline CheckpointBuilder gpt_oss_bf16_builder(const std::string& dir) {
  CheckpointBuilder b(dir);
  const uint64_t H = kRealH, I = kRealI, E = kRealE;
  const std::string p = "model.layers.0.mlp.";
  uint32_t seed = 600;
  b.add(p + "experts.gate_up_proj", DType::BF16, {E, H, 2 * I}, bf16_bytes(E * H * 2 * I, seed++));
  b.add(p + "experts.gate_up_proj_bias", DType::BF16, {E, 2 * I}, bf16_bytes(E * 2 * I, seed++));
  b.add(p + "experts.down_proj", DType::BF16, {E, I, H}, bf16_bytes(E * I * H, seed++));
  b.add(p + "experts.down_proj_bias", DType::BF16, {E, H}, bf16_bytes(E * H, seed++));
  b.add(p + "router.weight", DType::BF16, {E, H}, bf16_bytes(E * H, seed++));
  nlohmann::json cfg = moe_config("gpt_oss", H, I, E, 1);
  cfg["swiglu_limit"] = 7.0;
  b.config(cfg);
  return b;
}

}  // namespace moepack::test
