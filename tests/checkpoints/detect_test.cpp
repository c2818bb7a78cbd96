// Family and scheme detection: for every family/scheme, the vLLM method, the oracle family, the
// QuantKey names (oracle.md 2.1-2.3), the selector flags and the model facts.
#include <gtest/gtest.h>

#include "checkpoints/fixtures.h"
#include "formats/checkpoints/checkpoint.h"
#include "lib/core/error.h"

namespace moepack::test {
namespace {

using ckpt::Checkpoint;
using ckpt::Family;
using nlohmann::json;

constexpr uint64_t H = 64, I = 32, E = 4;

std::vector<uint64_t> full(uint64_t o, uint64_t i) { return {o, i}; }
std::vector<uint64_t> half(uint64_t o, uint64_t i) { return {o, i / 2}; }
std::vector<uint64_t> per16(uint64_t o, uint64_t i) { return {o, i / 16}; }
std::vector<uint64_t> per32(uint64_t o, uint64_t i) { return {o, i / 32}; }

// Two MoE layers of per-expert tensors plus a router and an attention weight (pass-through).
Checkpoint build(TempDir& tmp, const json& config, const std::vector<ExpertTensorSpec>& specs, const std::string& quant_side = "", const json& side = nullptr) {
  CheckpointBuilder b(tmp.path());
  for (int l = 0; l < 2; ++l) {
    add_per_expert_layer(b, "model.layers." + std::to_string(l) + ".mlp.experts", E, H, I, specs);
    b.add("model.layers." + std::to_string(l) + ".mlp.gate.weight", DType::BF16, {E, H});
  }
  b.add("model.embed_tokens.weight", DType::BF16, {16, H});
  b.config(config);
  if (!quant_side.empty()) b.side_file(quant_side, side);
  b.write();
  return ckpt::open_checkpoint(tmp.path());
}

json with_quant(json config, const json& quant) {
  config["quantization_config"] = quant;
  return config;
}

json ct_quant(const json& weights, const json& input, const std::string& format, const json& ignore = json::array({"lm_head"})) {
  return {{"quant_method", "compressed-tensors"},
          {"format", format},
          {"config_groups", {{"group_0", {{"targets", {"Linear"}}, {"weights", weights}, {"input_activations", input}, {"format", format}}}}},
          {"ignore", ignore}};
}

void expect_method(const ckpt::MoeLayer& l, const std::string& quant_method, const std::string& moe_method, const std::string& family, const std::string& w,
                   const std::string& a) {
  EXPECT_EQ(l.quant.method.quant_method, quant_method);
  EXPECT_EQ(l.quant.method.moe_method, moe_method);
  EXPECT_EQ(l.quant.method.oracle_family, family);
  EXPECT_EQ(l.quant.method.weight_key, w);
  EXPECT_EQ(l.quant.method.activation_key, a);
}

const std::vector<ExpertTensorSpec> kCtNvfp4 = {{"weight_packed", DType::U8, half}, {"weight_scale", DType::F8_E4M3, per16},
                                                {"weight_global_scale", DType::F32, one_shape}, {"input_global_scale", DType::F32, one_shape}};

TEST(Detect, CompressedTensorsNvfp4W4A4) {
  TempDir tmp;
  json nv = {{"num_bits", 4}, {"type", "float"}, {"symmetric", true}, {"group_size", 16}, {"strategy", "tensor_group"}, {"dynamic", false}};
  json nva = nv;
  nva["dynamic"] = "local";
  auto c = build(tmp, with_quant(moe_config("qwen3_moe", H, I, E), ct_quant(nv, nva, "nvfp4-pack-quantized", {"lm_head", "re:.*mlp.gate$"})), kCtNvfp4);
  EXPECT_EQ(c.family, Family::compressed_tensors);
  EXPECT_NE(c.scheme.find("nvfp4-pack-quantized"), std::string::npos);
  ASSERT_EQ(c.layers.size(), 2u);
  const auto& l = c.layers[0];
  EXPECT_EQ(l.prefix, "model.layers.0.mlp.experts");
  EXPECT_EQ(l.layer_index, 0);
  EXPECT_EQ(l.num_experts, E);
  expect_method(l, "compressed-tensors", "CompressedTensorsW4A4Nvfp4MoEMethod", "nvfp4", "kNvfp4Static", "kNvfp4Dynamic");
  EXPECT_EQ(l.quant.global_scale_convention, "divisor");
  EXPECT_EQ(l.tensors.size(), E * 3 * 4);  // the router is not part of the layer
  ASSERT_EQ(l.params.size(), 8u);
  EXPECT_EQ(l.params[0].name, "w13_weight_packed");
  EXPECT_EQ(l.params[0].shape, (std::vector<uint64_t>{2 * I, H / 2}));
  EXPECT_EQ(l.params[1].name, "w2_weight_packed");
  EXPECT_EQ(l.params[1].shape, (std::vector<uint64_t>{H, I / 2}));
  EXPECT_EQ(l.params[4].name, "w13_weight_global_scale");
  EXPECT_EQ(l.params[4].shape, (std::vector<uint64_t>{2}));
  // Facts of a Qwen3-MoE style config.
  EXPECT_EQ(c.facts.model_type, "qwen3_moe");
  EXPECT_EQ(c.facts.hidden_size, H);
  EXPECT_EQ(c.facts.moe_intermediate_size, I);
  EXPECT_EQ(c.facts.num_experts, E);
  EXPECT_EQ(c.facts.top_k, 2u);
  EXPECT_EQ(c.facts.activation, "silu");
  EXPECT_EQ(c.facts.routing_method, "RenormalizeNaive");
  EXPECT_FALSE(c.facts.has_bias);
}

TEST(Detect, CompressedTensorsNvfp4A16AndIgnoredLayer) {
  TempDir tmp;
  json nv = {{"num_bits", 4}, {"type", "float"}, {"symmetric", true}, {"group_size", 16}, {"strategy", "tensor_group"}};
  // Layer 1's experts are ignored: they must be plain BF16.
  CheckpointBuilder b(tmp.path());
  add_per_expert_layer(b, "model.layers.0.mlp.experts", E, H, I, {{"weight_packed", DType::U8, half}, {"weight_scale", DType::F8_E4M3, per16}, {"weight_global_scale", DType::F32, one_shape}});
  add_per_expert_layer(b, "model.layers.1.mlp.experts", E, H, I, {{"weight", DType::BF16, full}});
  b.config(with_quant(moe_config("qwen3_moe", H, I, E), ct_quant(nv, nullptr, "nvfp4-pack-quantized", {"lm_head", "re:model[.]layers[.]1[.]mlp[.]experts.*"})));
  b.write();
  auto c = ckpt::open_checkpoint(tmp.path());
  ASSERT_EQ(c.layers.size(), 2u);
  expect_method(c.layers[0], "compressed-tensors", "CompressedTensorsW4A4Nvfp4MoEMethod", "nvfp4", "kNvfp4Static", "");
  EXPECT_EQ(c.layers[0].quant.scheme, "nvfp4 (W4A16)");
  expect_method(c.layers[1], "", "UnquantizedFusedMoEMethod", "unquantized", "", "");
  EXPECT_FALSE(c.layers[1].quant.quantized());
}

TEST(Detect, CompressedTensorsMxfp4AndMxfp8) {
  {
    TempDir tmp;
    json w = {{"num_bits", 4}, {"type", "float"}, {"symmetric", true}, {"group_size", 32}, {"strategy", "group"}};
    auto c = build(tmp, with_quant(moe_config("qwen3_moe", H, I, E), ct_quant(w, nullptr, "mxfp4-pack-quantized")),
                   {{"weight_packed", DType::U8, half}, {"weight_scale", DType::U8, per32}});
    expect_method(c.layers[0], "compressed-tensors", "CompressedTensorsW4A4Mxfp4MoEMethod", "mxfp4", "kMxfp4Static", "");
  }
  {
    TempDir tmp;
    json w = {{"num_bits", 8}, {"type", "float"}, {"symmetric", true}, {"group_size", 32}, {"strategy", "group"}, {"scale_dtype", "torch.uint8"}};
    auto c = build(tmp, with_quant(moe_config("qwen3_moe", H, I, E), ct_quant(w, w, "mxfp8-quantized")), {{"weight", DType::F8_E4M3, full}, {"weight_scale", DType::U8, per32}});
    expect_method(c.layers[0], "compressed-tensors", "CompressedTensorsW8A8Mxfp8MoEMethod", "mxfp8", "kMxfp8Static", "kMxfp8Dynamic");
  }
}

TEST(Detect, CompressedTensorsWna16Variants) {
  struct Case {
    int bits;
    int group;
    bool sym;
    std::string actorder;
    std::string key;
  };
  for (const Case& k : {Case{4, 32, true, "", "kInt4Static32"}, Case{4, 16, true, "weight", "kInt4Static"}, Case{4, 32, false, "", "kInt4Static32Asym"},
                        Case{4, 16, false, "group", "kInt4StaticAsym"}, Case{8, -1, true, "", "kInt8Static"}}) {
    SCOPED_TRACE(k.key);
    TempDir tmp;
    json w = {{"num_bits", k.bits}, {"type", "int"}, {"symmetric", k.sym}, {"strategy", k.group > 0 ? "group" : "channel"}, {"actorder", k.actorder.empty() ? json(nullptr) : json(k.actorder)}};
    if (k.group > 0) w["group_size"] = k.group;
    const uint64_t bits = static_cast<uint64_t>(k.bits);
    const uint64_t groups_of = k.group > 0 ? static_cast<uint64_t>(k.group) : 0;
    std::vector<ExpertTensorSpec> specs = {
        {"weight_packed", DType::I32, [bits](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, i * bits / 32}; }},
        {"weight_scale", DType::BF16, [groups_of](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, groups_of ? i / groups_of : 1}; }},
        {"weight_shape", DType::I64, [](uint64_t, uint64_t) { return std::vector<uint64_t>{2}; }},
    };
    if (!k.sym) specs.push_back({"weight_zero_point", DType::I32, [bits, groups_of](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o * bits / 32, groups_of ? i / groups_of : 1}; }});
    if (k.actorder == "group") specs.push_back({"weight_g_idx", DType::I32, [](uint64_t, uint64_t i) { return std::vector<uint64_t>{i}; }});
    json config = with_quant(moe_config("qwen3_moe", H, I, E), ct_quant(w, nullptr, "pack-quantized"));
    CheckpointBuilder b(tmp.path());
    add_per_expert_layer(b, "model.layers.0.mlp.experts", E, H, I, specs);
    b.config(config);
    b.write();
    auto c = ckpt::open_checkpoint(tmp.path());
    const auto& l = c.layers.at(0);
    expect_method(l, "compressed-tensors", "CompressedTensorsWNA16MoEMethod", "wna16", k.key, "");
    EXPECT_EQ(l.quant.may_have_zp, !k.sym);
    EXPECT_FALSE(l.quant.may_have_bias);
    EXPECT_EQ(l.quant.act_order, k.actorder == "group");
    EXPECT_EQ(l.quant.allow_tile_padding, k.actorder != "group");
    EXPECT_EQ(l.quant.group_size, k.group > 0 ? k.group : -1);
    EXPECT_EQ(l.quant.weight_bits, k.bits);
    EXPECT_TRUE(l.quant.unsupported.empty());
    // Marlin orientation: [K-packed, 2I].
    EXPECT_EQ(l.params[0].name, "w13_weight_packed");
    EXPECT_EQ(l.params[0].shape, (std::vector<uint64_t>{H * bits / 32, 2 * I}));
  }
}

TEST(Detect, CompressedTensorsFp8Variants) {
  json fw = {{"num_bits", 8}, {"type", "float"}, {"symmetric", true}, {"dynamic", false}};
  {
    TempDir tmp;  // per-tensor weights, static per-tensor activations
    json w = fw, a = fw;
    w["strategy"] = "tensor";
    a["strategy"] = "tensor";
    auto c = build(tmp, with_quant(moe_config("qwen3_moe", H, I, E), ct_quant(w, a, "float-quantized")),
                   {{"weight", DType::F8_E4M3, full}, {"weight_scale", DType::F32, one_shape}, {"input_scale", DType::F32, one_shape}});
    expect_method(c.layers[0], "compressed-tensors", "CompressedTensorsW8A8Fp8MoEMethod", "fp8", "kFp8StaticTensorSym", "kFp8StaticTensorSym");
    EXPECT_EQ(c.layers[0].quant.input_scales, "static");
  }
  {
    TempDir tmp;  // channel weights, dynamic per-token activations
    json w = fw, a = fw;
    w["strategy"] = "channel";
    a["strategy"] = "token";
    a["dynamic"] = true;
    auto c = build(tmp, with_quant(moe_config("qwen3_moe", H, I, E), ct_quant(w, a, "float-quantized")),
                   {{"weight", DType::F8_E4M3, full}, {"weight_scale", DType::BF16, [](uint64_t o, uint64_t) { return std::vector<uint64_t>{o, 1}; }}});
    expect_method(c.layers[0], "compressed-tensors", "CompressedTensorsW8A8Fp8MoEMethod", "fp8", "kFp8StaticChannelSym", "kFp8DynamicTokenSym");
  }
  {
    TempDir tmp;  // block weights
    json w = fw, a = fw;
    w["strategy"] = "block";
    w["block_structure"] = {16, 16};
    a["strategy"] = "group";
    a["group_size"] = 128;
    a["dynamic"] = true;
    auto c = build(tmp, with_quant(moe_config("qwen3_moe", H, I, E), ct_quant(w, a, "float-quantized")),
                   {{"weight", DType::F8_E4M3, full}, {"weight_scale", DType::F32, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o / 16, i / 16}; }}});
    expect_method(c.layers[0], "compressed-tensors", "CompressedTensorsW8A8Fp8MoEMethod", "fp8", "kFp8Static128BlockSym", "kFp8Dynamic128Sym");
    EXPECT_EQ(c.layers[0].quant.weight_block_size, (std::vector<int64_t>{16, 16}));
  }
}

TEST(Detect, CompressedTensorsInt8AndW4A8) {
  {
    TempDir tmp;
    json w = {{"num_bits", 8}, {"type", "int"}, {"symmetric", true}, {"strategy", "channel"}};
    json a = {{"num_bits", 8}, {"type", "int"}, {"symmetric", true}, {"strategy", "token"}, {"dynamic", true}};
    auto c = build(tmp, with_quant(moe_config("qwen3_moe", H, I, E), ct_quant(w, a, "int-quantized")),
                   {{"weight", DType::I8, full}, {"weight_scale", DType::F32, [](uint64_t o, uint64_t) { return std::vector<uint64_t>{o, 1}; }}});
    expect_method(c.layers[0], "compressed-tensors", "CompressedTensorsW8A8Int8MoEMethod", "int8", "kInt8StaticChannelSym", "kInt8DynamicTokenSym");
  }
  for (std::string act_type : {"float", "int"}) {
    SCOPED_TRACE(act_type);
    TempDir tmp;
    json w = {{"num_bits", 4}, {"type", "int"}, {"symmetric", true}, {"strategy", "group"}, {"group_size", 32}};
    json a = {{"num_bits", 8}, {"type", act_type}, {"symmetric", true}, {"strategy", "token"}, {"dynamic", true}};
    auto c = build(tmp, with_quant(moe_config("qwen3_moe", H, I, E), ct_quant(w, a, "pack-quantized")),
                   {{"weight_packed", DType::I32, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, i / 8}; }},
                    {"weight_scale", DType::BF16, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, i / 32}; }}});
    const auto& q = c.layers[0].quant;
    expect_method(c.layers[0], "compressed-tensors", "CompressedTensorsW4A8Int8MoEMethod", "w4a8_int8", "kInt4W4A8StaticGroup32Sym", "");
    ASSERT_TRUE(q.on_sm90.has_value());  // `_is_fp8_w4a8` only looks at bit widths
    EXPECT_EQ(q.on_sm90->moe_method, "CompressedTensorsW4A8Fp8MoEMethod");
    EXPECT_EQ(q.on_sm90->oracle_family, "w4a8");
    EXPECT_EQ(q.on_sm90->weight_key, "kInt4Static");
    EXPECT_EQ(q.on_sm90->activation_key, "kFp8DynamicTokenSym");
  }
}

TEST(Detect, CompressedTensorsMixedProjectionsAreRefused) {
  TempDir tmp;
  json w = {{"num_bits", 4}, {"type", "float"}, {"symmetric", true}, {"group_size", 32}, {"strategy", "group"}};
  CheckpointBuilder b(tmp.path());
  add_per_expert_layer(b, "model.layers.0.mlp.experts", E, H, I, {{"weight", DType::BF16, full}});
  b.config(with_quant(moe_config("qwen3_moe", H, I, E), ct_quant(w, nullptr, "mxfp4-pack-quantized", {"re:.*down_proj$"})));
  b.write();
  try {
    ckpt::open_checkpoint(tmp.path());
    ADD_FAILURE() << "expected a bad-input error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::bad_input);
    EXPECT_NE(std::string(e.what()).find("same quantization scheme"), std::string::npos) << e.what();
  }
}

const std::vector<ExpertTensorSpec> kModelOptNvfp4 = {{"weight", DType::U8, half}, {"weight_scale", DType::F8_E4M3, per16},
                                                      {"weight_scale_2", DType::F32, scalar_shape}, {"input_scale", DType::F32, scalar_shape}};

TEST(Detect, ModelOptNvfp4FromHfQuantConfig) {
  TempDir tmp;
  json side = {{"producer", {{"name", "modelopt"}, {"version", "0.29"}}},
               {"quantization", {{"quant_algo", "NVFP4"}, {"group_size", 16}, {"kv_cache_quant_algo", nullptr}, {"exclude_modules", {"lm_head", "model.layers.*.mlp.gate"}}}}};
  auto c = build(tmp, moe_config("deepseek_v3", H, I, E), kModelOptNvfp4, "hf_quant_config.json", side);
  EXPECT_EQ(c.family, Family::modelopt);
  EXPECT_NE(c.quant_config_source.find("hf_quant_config.json"), std::string::npos);
  expect_method(c.layers[0], "modelopt_fp4", "ModelOptNvFp4FusedMoE", "nvfp4", "kNvfp4Static", "kNvfp4Dynamic");
  EXPECT_EQ(c.layers[0].quant.global_scale_convention, "multiplier");
}

TEST(Detect, ModelOptConfigJsonShapes) {
  {
    TempDir tmp;  // newer export: config.json quant_method modelopt + quant_algo
    json q = {{"quant_method", "modelopt"}, {"quant_algo", "W4A16_NVFP4"}, {"ignore", {"lm_head"}}};
    auto c = build(tmp, with_quant(moe_config("qwen3_moe", H, I, E), q),
                   {{"weight", DType::U8, half}, {"weight_scale", DType::F8_E4M3, per16}, {"weight_scale_2", DType::F32, scalar_shape}});
    expect_method(c.layers[0], "modelopt_fp4", "ModelOptNvFp4FusedMoE", "nvfp4", "kNvfp4Static", "");
  }
  {
    TempDir tmp;
    json q = {{"quant_method", "modelopt"}, {"quant_algo", "FP8"}};
    auto c = build(tmp, with_quant(moe_config("qwen3_moe", H, I, E), q),
                   {{"weight", DType::F8_E4M3, full}, {"weight_scale", DType::F32, scalar_shape}, {"input_scale", DType::F32, scalar_shape}});
    expect_method(c.layers[0], "modelopt", "ModelOptFp8MoEMethod", "fp8", "kFp8StaticTensorSym", "kFp8StaticTensorSym");
  }
  {
    TempDir tmp;  // MiniMax style
    json q = {{"quant_method", "mxfp8"}, {"ignored_layers", {"lm_head"}}};
    auto c = build(tmp, with_quant(moe_config("qwen3_moe", H, I, E), q), {{"weight", DType::F8_E4M3, full}, {"weight_scale", DType::U8, per32}});
    expect_method(c.layers[0], "modelopt_mxfp8", "ModelOptMxFp8FusedMoE", "mxfp8", "kMxfp8Static", "kMxfp8Dynamic");
  }
}

json quark_quant(const json& weight, const json& input) {
  return {{"quant_method", "quark"},
          {"export", {{"pack_method", "reorder"}, {"weight_format", "real_quantized"}}},
          {"global_quant_config", {{"weight", weight}, {"input_tensors", input}, {"output_tensors", nullptr}, {"bias", nullptr}}},
          {"layer_quant_config", json::object()},
          {"exclude", {"lm_head"}}};
}

TEST(Detect, QuarkOcpMxSchemes) {
  json w = {{"dtype", "fp4"}, {"qscheme", "per_group"}, {"group_size", 32}, {"ch_axis", -1}, {"scale_format", "e8m0"}, {"is_dynamic", false}};
  const std::vector<ExpertTensorSpec> mx = {{"weight", DType::U8, half}, {"weight_scale", DType::U8, per32}};
  {
    TempDir tmp;
    auto c = build(tmp, with_quant(moe_config("qwen3_moe", H, I, E), quark_quant(w, nullptr)), mx);
    EXPECT_EQ(c.family, Family::quark);
    EXPECT_EQ(c.layers[0].quant.scheme, "w_mxfp4");
    expect_method(c.layers[0], "quark", "QuarkOCP_MX_MoEMethod", "mxfp4", "kMxfp4Static", "");
  }
  {
    TempDir tmp;
    json a = {{"dtype", "fp8_e4m3"}, {"qscheme", "per_tensor"}, {"is_dynamic", false}};
    auto specs = mx;
    specs.push_back({"input_scale", DType::F32, scalar_shape});
    auto c = build(tmp, with_quant(moe_config("qwen3_moe", H, I, E), quark_quant(w, a)), specs);
    EXPECT_EQ(c.layers[0].quant.scheme, "w_mxfp4_a_fp8");
    expect_method(c.layers[0], "quark", "QuarkOCP_MX_MoEMethod", "mxfp4", "kMxfp4Static", "kFp8StaticTensorSym");
    EXPECT_TRUE(c.layers[0].quant.unsupported.empty());
  }
  {
    TempDir tmp;  // dynamic FP8 activations: vLLM raises NotImplementedError
    json a = {{"dtype", "fp8_e4m3"}, {"qscheme", "per_tensor"}, {"is_dynamic", true}};
    auto c = build(tmp, with_quant(moe_config("qwen3_moe", H, I, E), quark_quant(w, a)), mx);
    EXPECT_FALSE(c.layers[0].quant.unsupported.empty());
  }
  {
    TempDir tmp;
    json a = {{"dtype", "fp4"}, {"qscheme", "per_group"}, {"group_size", 32}, {"scale_format", "e8m0"}, {"is_dynamic", true}};
    auto c = build(tmp, with_quant(moe_config("qwen3_moe", H, I, E), quark_quant(w, a)), mx);
    EXPECT_EQ(c.layers[0].quant.scheme, "w_mxfp4_a_mxfp4");
    expect_method(c.layers[0], "quark", "QuarkOCP_MX_MoEMethod", "mxfp4", "kMxfp4Static", "kMxfp4Dynamic");
  }
  {
    TempDir tmp;  // fp6 weights: 3/4 byte per element, emulation only
    json w6 = w;
    w6["dtype"] = "fp6_e3m2";
    json a = {{"dtype", "fp6_e3m2"}, {"qscheme", "per_group"}, {"group_size", 32}, {"scale_format", "e8m0"}, {"is_dynamic", true}};
    auto c = build(tmp, with_quant(moe_config("qwen3_moe", H, I, E), quark_quant(w6, a)),
                   {{"weight", DType::U8, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, i * 3 / 4}; }}, {"weight_scale", DType::U8, per32}});
    EXPECT_EQ(c.layers[0].quant.scheme, "w_mxfp6_e3m2_a_mxfp6_e3m2 (emulation only)");
    expect_method(c.layers[0], "quark", "QuarkOCP_MX_MoEMethod", "mxfp6", "kMxfp6E3M2Static", "kMxfp6E3M2Dynamic");
  }
}

std::vector<ExpertTensorSpec> gptq_specs(uint64_t bits, uint64_t group) {
  return {{"qweight", DType::I32, [bits](uint64_t o, uint64_t i) { return std::vector<uint64_t>{i * bits / 32, o}; }},
          {"qzeros", DType::I32, [bits, group](uint64_t o, uint64_t i) { return std::vector<uint64_t>{group ? i / group : 1, o * bits / 32}; }},
          {"scales", DType::F16, [group](uint64_t o, uint64_t i) { return std::vector<uint64_t>{group ? i / group : 1, o}; }},
          {"g_idx", DType::I32, [](uint64_t, uint64_t i) { return std::vector<uint64_t>{i}; }}};
}

TEST(Detect, GptqVariants) {
  {
    TempDir tmp;
    json q = {{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 32}, {"desc_act", true}, {"sym", true}, {"checkpoint_format", "gptq_v2"}};
    CheckpointBuilder b(tmp.path());
    add_per_expert_layer(b, "model.layers.0.mlp.experts", E, H, I, gptq_specs(4, 32));
    b.config(with_quant(moe_config("qwen3_moe", H, I, E), q));
    b.write();
    auto c = ckpt::open_checkpoint(tmp.path());
    EXPECT_EQ(c.family, Family::gptq);
    const auto& l = c.layers[0];
    expect_method(l, "auto_gptq", "AutoGPTQMoEMethod", "wna16", "kInt4Static", "");  // every group size, oracle.md 2.2
    EXPECT_TRUE(l.quant.act_order);
    EXPECT_FALSE(l.quant.allow_tile_padding);
    EXPECT_TRUE(l.quant.may_have_bias);
    EXPECT_FALSE(l.quant.may_have_zp);
    EXPECT_EQ(l.quant.checkpoint_format, "gptq_v2");
    EXPECT_EQ(l.quant.group_size, 32);
  }
  {
    TempDir tmp;  // legacy quantize_config.json, channel-wise desc_act (dropped), 8 bit
    json q = {{"bits", 8}, {"group_size", -1}, {"desc_act", true}, {"sym", true}};
    CheckpointBuilder b(tmp.path());
    add_per_expert_layer(b, "model.layers.0.block_sparse_moe.experts", E, H, I, gptq_specs(8, 0), "w1", "w3", "w2");
    b.config(moe_config("mixtral", H, I, E));
    b.side_file("quantize_config.json", q);
    b.write();
    auto c = ckpt::open_checkpoint(tmp.path());
    const auto& l = c.layers[0];
    EXPECT_EQ(l.naming, ckpt::ExpertNaming::mixtral);
    expect_method(l, "auto_gptq", "AutoGPTQMoEMethod", "wna16", "kInt8Static", "");
    EXPECT_FALSE(l.quant.act_order);
    EXPECT_TRUE(l.quant.allow_tile_padding);
    EXPECT_EQ(l.quant.checkpoint_format, "gptq");
  }
  {
    TempDir tmp;  // GPTQModel dynamic rule skips layer 1; asymmetric base is refused by vLLM
    json q = {{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 32}, {"desc_act", false}, {"sym", false}, {"dynamic", {{"-:.*layers[.]1[.]mlp.*", json::object()}}}};
    CheckpointBuilder b(tmp.path());
    add_per_expert_layer(b, "model.layers.0.mlp.experts", E, H, I, gptq_specs(4, 32));
    add_per_expert_layer(b, "model.layers.1.mlp.experts", E, H, I, {{"weight", DType::F16, full}});
    b.config(with_quant(moe_config("qwen3_moe", H, I, E), q));
    b.write();
    auto c = ckpt::open_checkpoint(tmp.path());
    EXPECT_TRUE(c.layers[0].quant.may_have_zp);
    EXPECT_NE(c.layers[0].quant.unsupported.find("sym=False"), std::string::npos);
    EXPECT_FALSE(c.layers[1].quant.quantized());
  }
}

TEST(Detect, Awq) {
  TempDir tmp;
  json q = {{"quant_method", "awq"}, {"bits", 4}, {"group_size", 32}, {"zero_point", true}, {"version", "gemm"}, {"modules_to_not_convert", {"gate"}}};
  auto c = build(tmp, with_quant(moe_config("qwen3_moe", H, I, E), q),
                 {{"qweight", DType::I32, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{i, o / 8}; }},
                  {"qzeros", DType::I32, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{i / 32, o / 8}; }},
                  {"scales", DType::F16, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{i / 32, o}; }}});
  EXPECT_EQ(c.family, Family::awq);
  const auto& l = c.layers[0];
  expect_method(l, "auto_awq", "AutoAWQMoEMethod", "wna16", "kInt4Static", "");
  EXPECT_TRUE(l.quant.may_have_zp);
  EXPECT_TRUE(l.quant.may_have_bias);
  EXPECT_TRUE(l.quant.allow_tile_padding);
  EXPECT_FALSE(l.quant.symmetric);
  EXPECT_EQ(l.params[0].shape, (std::vector<uint64_t>{H, 2 * I / 8}));
}

TEST(Detect, Fp8BlockDeepSeekV3Routing) {
  TempDir tmp;
  json config = moe_config("deepseek_v3", 256, 128, E);
  config["scoring_func"] = "sigmoid";
  config["n_group"] = 2;
  config["topk_group"] = 1;
  config["routed_scaling_factor"] = 2.5;
  config["norm_topk_prob"] = true;
  config["n_shared_experts"] = 1;
  config["quantization_config"] = {{"quant_method", "fp8"}, {"activation_scheme", "dynamic"}, {"fmt", "e4m3"}, {"weight_block_size", {128, 128}}};
  CheckpointBuilder b(tmp.path());
  add_per_expert_layer(b, "model.layers.3.mlp.experts", E, 256, 128,
                       {{"weight", DType::F8_E4M3, full}, {"weight_scale_inv", DType::F32, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o / 128, i / 128}; }}});
  b.add("model.layers.3.mlp.gate.e_score_correction_bias", DType::F32, {E});
  b.add("model.layers.3.mlp.shared_experts.gate_proj.weight", DType::F8_E4M3, {128, 256});
  b.config(config);
  b.write();
  auto c = ckpt::open_checkpoint(tmp.path());
  EXPECT_EQ(c.family, Family::fp8);
  ASSERT_EQ(c.layers.size(), 1u);  // shared experts are not routed experts
  expect_method(c.layers[0], "fp8", "Fp8MoEMethod", "fp8", "kFp8Static128BlockSym", "kFp8Dynamic128Sym");
  EXPECT_EQ(c.layers[0].layer_index, 3);
  EXPECT_TRUE(c.facts.has_e_score_correction_bias);
  EXPECT_EQ(c.facts.routing_method, "DeepSeekV3");
  EXPECT_EQ(c.facts.num_shared_experts, 1u);
  EXPECT_EQ(c.facts.moe_intermediate_size, 128u);  // not the dense intermediate_size
  ASSERT_TRUE(c.facts.routed_scaling_factor.has_value());
  EXPECT_DOUBLE_EQ(*c.facts.routed_scaling_factor, 2.5);
}

TEST(Detect, Fp8PerTensorStaticAndDynamic) {
  for (std::string scheme : {"static", "dynamic"}) {
    SCOPED_TRACE(scheme);
    TempDir tmp;
    std::vector<ExpertTensorSpec> specs = {{"weight", DType::F8_E4M3, full}, {"weight_scale", DType::F32, scalar_shape}};
    if (scheme == "static") specs.push_back({"input_scale", DType::F32, scalar_shape});
    auto c = build(tmp, with_quant(moe_config("mixtral", H, I, E), {{"quant_method", "fp8"}, {"activation_scheme", scheme}}), specs);
    expect_method(c.layers[0], "fp8", "Fp8MoEMethod", "fp8", "kFp8StaticTensorSym", scheme == "static" ? "kFp8StaticTensorSym" : "kFp8DynamicTensorSym");
  }
}

TEST(Detect, DeepSeekV4NativeNames) {
  for (std::string expert_dtype : {"fp4", "fp8"}) {
    SCOPED_TRACE(expert_dtype);
    TempDir tmp;
    json config = moe_config("deepseek_v4", 256, 128, E);
    config["expert_dtype"] = expert_dtype;
    config["swiglu_limit"] = 10.0;
    config["quantization_config"] = {{"quant_method", "fp8"}, {"activation_scheme", "dynamic"}, {"weight_block_size", {128, 128}}};
    CheckpointBuilder b(tmp.path());
    std::vector<ExpertTensorSpec> specs;
    if (expert_dtype == "fp4") specs = {{"weight", DType::I8, half}, {"scale", DType::F8_E8M0, per32}};
    else specs = {{"weight", DType::F8_E4M3, full}, {"scale", DType::F32, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o / 128, i / 128}; }}};
    add_per_expert_layer(b, "layers.5.ffn.experts", E, 256, 128, specs, "w1", "w3", "w2");
    b.add("layers.5.ffn.gate.weight", DType::BF16, {E, 256});
    b.add("layers.5.ffn.gate.bias", DType::F32, {E});
    b.config(config);
    b.write();
    auto c = ckpt::open_checkpoint(tmp.path());
    EXPECT_EQ(c.family, Family::deepseek_v4);
    const auto& l = c.layers.at(0);
    EXPECT_EQ(l.prefix, "layers.5.ffn.experts");
    EXPECT_EQ(l.layer_index, 5);
    EXPECT_EQ(l.naming, ckpt::ExpertNaming::deepseek_native);
    if (expert_dtype == "fp4") {
      expect_method(l, "deepseek_v4_fp8", "Mxfp4MoEMethod", "mxfp4", "kMxfp4Static", "");
      EXPECT_EQ(l.params[0].dtype, DType::U8);  // I8 bytes viewed as packed FP4
      EXPECT_EQ(l.params[2].name, "w13_weight_scale");
    } else {
      expect_method(l, "deepseek_v4_fp8", "Fp8MoEMethod", "fp8", "kFp8Static128BlockSym", "kFp8Dynamic128Sym");
      EXPECT_EQ(l.params[2].name, "w13_weight_scale_inv");
    }
    EXPECT_EQ(c.facts.scoring_func, "sqrtsoftplus");
    EXPECT_EQ(c.facts.routing_method, "DeepseekV4");
    ASSERT_TRUE(c.facts.swiglu_limit.has_value());
    EXPECT_DOUBLE_EQ(*c.facts.swiglu_limit, 10.0);
  }
}

TEST(Detect, UnquantizedMixtral) {
  TempDir tmp;
  CheckpointBuilder b(tmp.path());
  add_per_expert_layer(b, "model.layers.0.block_sparse_moe.experts", E, H, I, {{"weight", DType::BF16, full}}, "w1", "w3", "w2");
  b.add("model.layers.0.block_sparse_moe.gate.weight", DType::BF16, {E, H});
  b.config(moe_config("mixtral", H, I, E));
  b.write();
  auto c = ckpt::open_checkpoint(tmp.path());
  EXPECT_EQ(c.family, Family::unquantized);
  EXPECT_EQ(c.scheme, "unquantized (bf16)");
  const auto& l = c.layers.at(0);
  EXPECT_EQ(l.prefix, "model.layers.0.block_sparse_moe.experts");
  expect_method(l, "", "UnquantizedFusedMoEMethod", "unquantized", "", "");
  EXPECT_EQ(c.facts.routing_method, "RenormalizeNaive");  // Mixtral renormalizes without norm_topk_prob
  EXPECT_EQ(l.params[0].shape, (std::vector<uint64_t>{2 * I, H}));
}

TEST(Detect, GptOssFused) {
  TempDir tmp;
  const uint64_t h = 64, i = 64, e = 4;
  CheckpointBuilder b(tmp.path());
  const std::string p = "model.layers.0.mlp.experts";
  b.add(p + ".gate_up_proj_blocks", DType::U8, {e, 2 * i, h / 32, 16});
  b.add(p + ".gate_up_proj_scales", DType::U8, {e, 2 * i, h / 32});
  b.add(p + ".gate_up_proj_bias", DType::BF16, {e, 2 * i});
  b.add(p + ".down_proj_blocks", DType::U8, {e, h, i / 32, 16});
  b.add(p + ".down_proj_scales", DType::U8, {e, h, i / 32});
  b.add(p + ".down_proj_bias", DType::BF16, {e, h});
  b.add("model.layers.0.mlp.router.weight", DType::BF16, {e, h});
  json config = moe_config("gpt_oss", h, i, e);
  config.erase("hidden_act");
  config["swiglu_limit"] = 7.0;
  config["quantization_config"] = {{"quant_method", "mxfp4"}, {"modules_to_not_convert", {"model.layers.*.self_attn", "model.layers.*.mlp.router", "lm_head"}}};
  b.config(config);
  b.write();
  auto c = ckpt::open_checkpoint(tmp.path());
  EXPECT_EQ(c.family, Family::gpt_oss);
  const auto& l = c.layers.at(0);
  EXPECT_EQ(l.naming, ckpt::ExpertNaming::gpt_oss_fused);
  EXPECT_EQ(l.num_experts, e);
  EXPECT_EQ(l.recipe.w13_order, ckpt::W13Order::interleaved);
  expect_method(l, "gpt_oss_mxfp4", "GptOssMxfp4MoEMethod", "mxfp4", "kMxfp4Static", "");
  EXPECT_TRUE(l.has_bias);
  EXPECT_EQ(l.tensors.size(), 6u);
  EXPECT_EQ(c.facts.activation, "swigluoai");
  EXPECT_EQ(c.facts.routing_method, "RenormalizeNaive");
  EXPECT_TRUE(c.facts.has_bias);
}

TEST(Detect, NoMoeLayersIsValid) {
  {
    TempDir tmp;  // a dense model
    CheckpointBuilder b(tmp.path());
    b.add("model.layers.0.mlp.gate_proj.weight", DType::BF16, {I, H});
    b.config({{"model_type", "llama"}, {"hidden_size", H}});
    b.write();
    auto c = ckpt::open_checkpoint(tmp.path());
    EXPECT_TRUE(c.layers.empty());
    EXPECT_EQ(c.facts.model_type, "llama");
    EXPECT_EQ(c.tensor_count(), 1u);
  }
  {
    TempDir tmp;  // an empty directory: no tensors, no config
    auto c = ckpt::open_checkpoint(tmp.path());
    EXPECT_TRUE(c.layers.empty());
    EXPECT_EQ(c.tensor_count(), 0u);
  }
  {
    TempDir tmp;  // a single file with zero tensors
    CheckpointBuilder b(tmp.path());
    std::string path = b.write("empty.safetensors");
    auto c = ckpt::open_checkpoint(path);
    EXPECT_TRUE(c.layers.empty());
  }
}

}  // namespace
}  // namespace moepack::test
