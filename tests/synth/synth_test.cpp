// The synthetic checkpoint generator: determinism, readability of every family, names/dtypes/
// shapes against checkpoint-formats.md, and atomic output.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <sys/stat.h>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "formats/checkpoints/checkpoint.h"
#include "formats/safetensors/file.h"
#include "lib/core/error.h"
#include "lib/synth/synth.h"
#include "support/test_support.h"

namespace moepack::synth {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

std::vector<std::string> files_under(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// Expects `name` in the checkpoint with this dtype and shape.
void expect_tensor(const st::ShardSet& set, const std::string& name, const char* dtype, std::vector<uint64_t> shape) {
  auto ref = set.find(name);
  ASSERT_TRUE(ref.has_value()) << "missing " << name;
  EXPECT_EQ(dtype_name(ref->info->dtype), dtype) << name;
  EXPECT_EQ(ref->info->shape, shape) << name;
}

TEST(Synth, SameSeedSameBytesDifferentSeedDifferentBytes) {
  TempDir tmp;
  for (const auto& family : synth_families()) {
    SampleOptions o;
    o.seed = 7;
    write_sample(family, tmp.file(family + "-a"), o);
    write_sample(family, tmp.file(family + "-b"), o);
    o.seed = 8;
    write_sample(family, tmp.file(family + "-c"), o);
    auto names = files_under(tmp.file(family + "-a"));
    ASSERT_EQ(names, files_under(tmp.file(family + "-b"))) << family;
    bool some_differ = false;
    for (const auto& n : names) {
      auto a = test::read_file(tmp.file(family + "-a/" + n));
      EXPECT_EQ(a, test::read_file(tmp.file(family + "-b/" + n))) << family << "/" << n;
      if (n.ends_with(".safetensors") && a != test::read_file(tmp.file(family + "-c/" + n))) some_differ = true;
    }
    EXPECT_TRUE(some_differ) << family << ": seed 8 wrote the same tensors as seed 7";
  }
}

TEST(Synth, EveryFamilyIsReadableAndDescribesItself) {
  TempDir tmp;
  for (const auto& info : family_table()) {
    std::string dir = tmp.file(info.name);
    WriteReport r = write_sample(info.name, dir, {});
    st::ShardSet set(dir);  // validates every header and the index
    EXPECT_EQ(set.tensor_count(), r.tensors) << info.name;
    EXPECT_TRUE(set.unindexed().empty()) << info.name;
    uint64_t total = 0;
    for (const auto& f : set.files())
      for (const auto& t : f->header().tensors) total += t.num_bytes();
    EXPECT_EQ(total, r.data_bytes) << info.name;
    auto config = read_json(dir + "/config.json");
    EXPECT_EQ(config["model_type"], info.arch) << info.name;
    EXPECT_EQ(config["quantization_config"].is_null(), info.name.ends_with("-bf16")) << info.name;
    EXPECT_TRUE(fs::exists(dir + "/generation_config.json"));
    EXPECT_TRUE(fs::exists(dir + "/tokenizer_config.json"));
    EXPECT_FALSE(fs::exists(dir + ".tmp"));
  }
}

TEST(Synth, GptOssFusedMxfp4LayoutAndZeroBasedShards) {
  TempDir tmp;
  std::string dir = tmp.file("g");
  write_sample("gpt-oss-mxfp4", dir, {});
  EXPECT_TRUE(fs::exists(dir + "/model-00000-of-00002.safetensors"));
  EXPECT_TRUE(fs::exists(dir + "/model-00002-of-00002.safetensors"));
  EXPECT_FALSE(fs::exists(dir + "/model-00003-of-00003.safetensors"));
  st::ShardSet set(dir);
  EXPECT_TRUE(set.has_index());
  const std::string p = "model.layers.0.mlp.";
  // H = I = 192: six 32-element blocks, deliberately not a multiple of 128.
  expect_tensor(set, p + "experts.gate_up_proj_blocks", "U8", {4, 384, 6, 16});
  expect_tensor(set, p + "experts.gate_up_proj_scales", "U8", {4, 384, 6});
  expect_tensor(set, p + "experts.gate_up_proj_bias", "BF16", {4, 384});
  expect_tensor(set, p + "experts.down_proj_blocks", "U8", {4, 192, 6, 16});
  expect_tensor(set, p + "experts.down_proj_scales", "U8", {4, 192, 6});
  expect_tensor(set, p + "experts.down_proj_bias", "BF16", {4, 192});
  expect_tensor(set, p + "router.weight", "BF16", {4, 192});
  expect_tensor(set, p + "router.bias", "BF16", {4});
  expect_tensor(set, "model.embed_tokens.weight", "BF16", {16, 192});
  expect_tensor(set, "lm_head.weight", "BF16", {16, 192});
  auto config = read_json(dir + "/config.json");
  EXPECT_EQ(config["quantization_config"]["quant_method"], "mxfp4");
  EXPECT_EQ(config["num_local_experts"], 4);
  EXPECT_EQ(config["intermediate_size"], 192);
  auto index = read_json(dir + "/model.safetensors.index.json");
  uint64_t total = 0;
  for (const auto& f : set.files())
    for (const auto& t : f->header().tensors) total += t.num_bytes();
  EXPECT_EQ(index["metadata"]["total_size"], total);
}

TEST(Synth, CompressedTensorsRows) {
  TempDir tmp;
  SampleOptions o;
  o.hidden = 256;  // K of gate/up: 2 groups of 128
  o.intermediate = 384;  // K of down: 3 groups
  const std::string e = "model.layers.0.mlp.experts.1.";
  {
    write_sample("ct-nvfp4", tmp.file("nv"), o);
    st::ShardSet s(tmp.file("nv"));
    expect_tensor(s, e + "gate_proj.weight_packed", "U8", {384, 128});
    expect_tensor(s, e + "gate_proj.weight_scale", "F8_E4M3", {384, 16});
    expect_tensor(s, e + "gate_proj.weight_global_scale", "F32", {1});
    expect_tensor(s, e + "gate_proj.input_global_scale", "F32", {1});
    expect_tensor(s, e + "down_proj.weight_packed", "U8", {256, 192});
    expect_tensor(s, e + "down_proj.weight_scale", "F8_E4M3", {256, 24});
    expect_tensor(s, "model.layers.0.mlp.gate.weight", "BF16", {4, 256});
    auto q = read_json(tmp.file("nv/config.json"))["quantization_config"];
    EXPECT_EQ(q["format"], "nvfp4-pack-quantized");
    EXPECT_EQ(q["config_groups"]["group_0"]["weights"]["strategy"], "tensor_group");
    EXPECT_EQ(q["config_groups"]["group_0"]["input_activations"]["dynamic"], "local");
  }
  {
    write_sample("ct-nvfp4a16", tmp.file("a16"), o);
    st::ShardSet s(tmp.file("a16"));
    EXPECT_TRUE(s.find(e + "gate_proj.weight_global_scale").has_value());
    EXPECT_FALSE(s.find(e + "gate_proj.input_global_scale").has_value());
  }
  {
    write_sample("ct-mxfp4", tmp.file("mx"), o);
    st::ShardSet s(tmp.file("mx"));
    expect_tensor(s, e + "up_proj.weight_packed", "U8", {384, 128});
    expect_tensor(s, e + "up_proj.weight_scale", "U8", {384, 8});
  }
  {
    write_sample("ct-w4a16-asym", tmp.file("asym"), o);
    st::ShardSet s(tmp.file("asym"));
    expect_tensor(s, e + "gate_proj.weight_packed", "I32", {384, 32});
    expect_tensor(s, e + "gate_proj.weight_scale", "BF16", {384, 2});
    expect_tensor(s, e + "gate_proj.weight_shape", "I64", {2});
    expect_tensor(s, e + "gate_proj.weight_zero_point", "I32", {48, 2});
    expect_tensor(s, e + "down_proj.weight_packed", "I32", {256, 48});
    expect_tensor(s, e + "down_proj.weight_zero_point", "I32", {32, 3});
    EXPECT_FALSE(s.find(e + "gate_proj.weight_g_idx").has_value());
    auto shape = s.find(e + "down_proj.weight_shape")->data();
    EXPECT_EQ(shape[0] | shape[1] << 8, 256);  // [O, K] as int64
    EXPECT_EQ(shape[8] | shape[9] << 8, 384);
  }
  {
    write_sample("ct-w4a16-actorder", tmp.file("act"), o);
    st::ShardSet s(tmp.file("act"));
    expect_tensor(s, e + "gate_proj.weight_g_idx", "I32", {256});
    EXPECT_FALSE(s.find(e + "gate_proj.weight_zero_point").has_value());
    EXPECT_EQ(read_json(tmp.file("act/config.json"))["quantization_config"]["config_groups"]["group_0"]["weights"]["actorder"], "group");
  }
  {
    write_sample("ct-w8a16", tmp.file("w8"), o);
    st::ShardSet s(tmp.file("w8"));
    expect_tensor(s, e + "gate_proj.weight_packed", "I32", {384, 64});
    expect_tensor(s, e + "gate_proj.weight_scale", "BF16", {384, 1});
  }
  {
    write_sample("ct-fp8-tensor", tmp.file("f8t"), o);
    st::ShardSet s(tmp.file("f8t"));
    expect_tensor(s, e + "gate_proj.weight", "F8_E4M3", {384, 256});
    expect_tensor(s, e + "gate_proj.weight_scale", "BF16", {1});
    expect_tensor(s, e + "gate_proj.input_scale", "BF16", {1});
  }
  {
    write_sample("ct-fp8-channel", tmp.file("f8c"), o);
    st::ShardSet s(tmp.file("f8c"));
    expect_tensor(s, e + "gate_proj.weight_scale", "BF16", {384, 1});
    EXPECT_FALSE(s.find(e + "gate_proj.input_scale").has_value());
  }
  {
    write_sample("ct-fp8-block", tmp.file("f8b"), o);
    st::ShardSet s(tmp.file("f8b"));
    expect_tensor(s, e + "gate_proj.weight_scale", "BF16", {3, 2});
    expect_tensor(s, e + "down_proj.weight_scale", "BF16", {2, 3});
    auto w = read_json(tmp.file("f8b/config.json"))["quantization_config"]["config_groups"]["group_0"]["weights"];
    EXPECT_EQ(w["block_structure"], nlohmann::json::array({128, 128}));
  }
  {
    write_sample("ct-w8a8-int8", tmp.file("i8"), o);
    st::ShardSet s(tmp.file("i8"));
    expect_tensor(s, e + "gate_proj.weight", "I8", {384, 256});
    expect_tensor(s, e + "gate_proj.weight_scale", "BF16", {384, 1});
    EXPECT_EQ(read_json(tmp.file("i8/config.json"))["quantization_config"]["format"], "int-quantized");
  }
  {
    write_sample("ct-w4a8-fp8", tmp.file("w4a8"), o);
    auto g = read_json(tmp.file("w4a8/config.json"))["quantization_config"]["config_groups"]["group_0"];
    EXPECT_EQ(g["weights"]["num_bits"], 4);
    EXPECT_EQ(g["input_activations"]["type"], "float");
    EXPECT_EQ(g["input_activations"]["strategy"], "token");
  }
}

TEST(Synth, ModelOptQuarkGptqAwqRows) {
  TempDir tmp;
  SampleOptions o;
  o.hidden = 256;
  o.intermediate = 384;
  const std::string e = "model.layers.0.mlp.experts.2.";
  {
    write_sample("modelopt-nvfp4", tmp.file("mo"), o);
    st::ShardSet s(tmp.file("mo"));
    expect_tensor(s, e + "gate_proj.weight", "U8", {384, 128});
    expect_tensor(s, e + "gate_proj.weight_scale", "F8_E4M3", {384, 16});
    expect_tensor(s, e + "gate_proj.weight_scale_2", "F32", {});
    expect_tensor(s, e + "gate_proj.input_scale", "F32", {});
    auto hq = read_json(tmp.file("mo/hf_quant_config.json"));
    EXPECT_EQ(hq["quantization"]["quant_algo"], "NVFP4");
    EXPECT_EQ(hq["quantization"]["group_size"], 16);
    EXPECT_EQ(read_json(tmp.file("mo/config.json"))["quantization_config"]["quant_method"], "modelopt");
  }
  {
    write_sample("modelopt-w4a16-nvfp4", tmp.file("mo16"), o);
    st::ShardSet s(tmp.file("mo16"));
    EXPECT_FALSE(s.find(e + "gate_proj.input_scale").has_value());
    EXPECT_EQ(read_json(tmp.file("mo16/hf_quant_config.json"))["quantization"]["quant_algo"], "W4A16_NVFP4");
  }
  {
    write_sample("modelopt-fp8", tmp.file("mof8"), o);
    st::ShardSet s(tmp.file("mof8"));
    expect_tensor(s, e + "down_proj.weight", "F8_E4M3", {256, 384});
    expect_tensor(s, e + "down_proj.weight_scale", "F32", {});
    expect_tensor(s, e + "down_proj.input_scale", "F32", {});
  }
  {
    write_sample("modelopt-mxfp8", tmp.file("momx"), o);
    st::ShardSet s(tmp.file("momx"));
    expect_tensor(s, e + "down_proj.weight", "F8_E4M3", {256, 384});
    expect_tensor(s, e + "down_proj.weight_scale", "U8", {256, 12});
  }
  {
    write_sample("quark-w-mxfp4-a-fp8", tmp.file("q"), o);
    st::ShardSet s(tmp.file("q"));
    expect_tensor(s, e + "gate_proj.weight", "U8", {384, 128});
    expect_tensor(s, e + "gate_proj.weight_scale", "U8", {384, 8});
    expect_tensor(s, e + "gate_proj.input_scale", "F32", {});
    auto q = read_json(tmp.file("q/config.json"))["quantization_config"];
    EXPECT_EQ(q["quant_method"], "quark");
    EXPECT_EQ(q["global_quant_config"]["weight"]["dtype"], "fp4");
    EXPECT_EQ(q["global_quant_config"]["input_tensors"]["dtype"], "fp8_e4m3");
    EXPECT_TRUE(q.contains("export"));
  }
  {
    write_sample("quark-w-mxfp6-e3m2", tmp.file("q6"), o);
    st::ShardSet s(tmp.file("q6"));
    expect_tensor(s, e + "gate_proj.weight", "U8", {384, 192});  // 3K/4
    expect_tensor(s, e + "gate_proj.weight_scale", "U8", {384, 8});
  }
  {
    write_sample("gptq-int4", tmp.file("gq"), o);
    st::ShardSet s(tmp.file("gq"));
    expect_tensor(s, e + "gate_proj.qweight", "I32", {32, 384});
    expect_tensor(s, e + "gate_proj.qzeros", "I32", {2, 48});
    expect_tensor(s, e + "gate_proj.scales", "F16", {2, 384});
    expect_tensor(s, e + "gate_proj.g_idx", "I32", {256});
    expect_tensor(s, e + "down_proj.qweight", "I32", {48, 256});
    expect_tensor(s, e + "down_proj.qzeros", "I32", {3, 32});
    // Symmetric v1 checkpoints store zero-1 = 7 in every nibble.
    auto z = s.find(e + "down_proj.qzeros")->data();
    for (size_t i = 0; i < z.size(); i += 4) ASSERT_EQ(z[i] | z[i + 1] << 8 | z[i + 2] << 16 | uint32_t(z[i + 3]) << 24, 0x77777777u);
    auto cfg = read_json(tmp.file("gq/config.json"))["quantization_config"];
    EXPECT_EQ(cfg["quant_method"], "gptq");
    EXPECT_EQ(cfg["desc_act"], false);
    EXPECT_EQ(read_json(tmp.file("gq/quantize_config.json")), cfg);
  }
  {
    write_sample("gptq-int8", tmp.file("g8"), o);
    st::ShardSet s(tmp.file("g8"));
    expect_tensor(s, e + "gate_proj.qweight", "I32", {64, 384});
    expect_tensor(s, e + "gate_proj.qzeros", "I32", {2, 96});
  }
  {
    write_sample("awq-int4", tmp.file("aw"), o);
    st::ShardSet s(tmp.file("aw"));
    expect_tensor(s, e + "gate_proj.qweight", "I32", {256, 48});
    expect_tensor(s, e + "gate_proj.qzeros", "I32", {2, 48});
    expect_tensor(s, e + "gate_proj.scales", "F16", {2, 384});
    expect_tensor(s, e + "down_proj.qweight", "I32", {384, 32});
    EXPECT_EQ(read_json(tmp.file("aw/config.json"))["quantization_config"]["version"], "gemm");
  }
}

TEST(Synth, DeepSeekMixtralAndUnquantizedRows) {
  TempDir tmp;
  {
    write_sample("deepseek-v3-fp8", tmp.file("ds"), {});
    st::ShardSet s(tmp.file("ds"));
    EXPECT_TRUE(fs::exists(tmp.file("ds/model-00001-of-00002.safetensors")));
    // Layer 0 is dense (first_k_dense_replace = 1), layer 1 is the MoE layer.
    expect_tensor(s, "model.layers.0.mlp.gate_proj.weight", "F8_E4M3", {128, 128});
    expect_tensor(s, "model.layers.0.mlp.gate_proj.weight_scale_inv", "F32", {1, 1});
    expect_tensor(s, "model.layers.1.mlp.experts.3.down_proj.weight", "F8_E4M3", {128, 128});
    expect_tensor(s, "model.layers.1.mlp.experts.3.down_proj.weight_scale_inv", "F32", {1, 1});
    expect_tensor(s, "model.layers.1.mlp.shared_experts.up_proj.weight", "F8_E4M3", {128, 128});
    expect_tensor(s, "model.layers.1.mlp.gate.weight", "BF16", {4, 128});
    expect_tensor(s, "model.layers.1.mlp.gate.e_score_correction_bias", "F32", {4});
    auto c = read_json(tmp.file("ds/config.json"));
    EXPECT_EQ(c["first_k_dense_replace"], 1);
    EXPECT_EQ(c["num_hidden_layers"], 2);
    EXPECT_EQ(c["quantization_config"]["weight_block_size"], nlohmann::json::array({128, 128}));
  }
  {
    write_sample("deepseek-v4-mxfp4", tmp.file("v4"), {});
    st::ShardSet s(tmp.file("v4"));
    expect_tensor(s, "layers.0.ffn.experts.0.w1.weight", "I8", {128, 64});
    expect_tensor(s, "layers.0.ffn.experts.0.w1.scale", "F8_E8M0", {128, 4});
    expect_tensor(s, "layers.0.ffn.experts.0.w2.weight", "I8", {128, 64});
    expect_tensor(s, "layers.0.ffn.shared_experts.w3.weight", "F8_E4M3", {128, 128});
    expect_tensor(s, "layers.0.ffn.shared_experts.w3.scale", "F8_E8M0", {1, 1});
    expect_tensor(s, "layers.0.ffn.gate.weight", "BF16", {4, 128});
    expect_tensor(s, "embed.weight", "BF16", {16, 128});
    expect_tensor(s, "head.weight", "BF16", {16, 128});
    auto c = read_json(tmp.file("v4/config.json"));
    EXPECT_EQ(c["expert_dtype"], "fp4");
    EXPECT_EQ(c["quantization_config"]["quant_method"], "fp8");
  }
  {
    write_sample("mixtral-bf16", tmp.file("mx"), {});
    st::ShardSet s(tmp.file("mx"));
    expect_tensor(s, "model.layers.0.block_sparse_moe.experts.3.w1.weight", "BF16", {128, 128});
    expect_tensor(s, "model.layers.0.block_sparse_moe.experts.3.w2.weight", "BF16", {128, 128});
    expect_tensor(s, "model.layers.0.block_sparse_moe.gate.weight", "BF16", {4, 128});
    EXPECT_EQ(read_json(tmp.file("mx/config.json"))["num_local_experts"], 4);
  }
  {
    SampleOptions o;
    o.experts = 8;
    o.layers = 2;
    write_sample("qwen3-moe-bf16", tmp.file("qw"), o);
    st::ShardSet s(tmp.file("qw"));
    expect_tensor(s, "model.layers.1.mlp.experts.7.down_proj.weight", "BF16", {128, 128});
    auto c = read_json(tmp.file("qw/config.json"));
    EXPECT_EQ(c["num_experts"], 8);
    EXPECT_EQ(c["num_hidden_layers"], 2);
  }
}

// The published layouts of ERRATA 11-16 that the readers take (tests/checkpoints/real_layouts.h
// has the same grammar as byte-pattern fixtures).
TEST(Synth, RealLayoutRows) {
  TempDir tmp;
  {
    write_sample("nemotron-h-nvfp4", tmp.file("nh"), {});
    st::ShardSet s(tmp.file("nh"));
    const std::string m = "backbone.layers.0.mixer.";
    expect_tensor(s, m + "experts.3.up_proj.weight", "U8", {128, 64});
    expect_tensor(s, m + "experts.3.up_proj.weight_scale", "F8_E4M3", {128, 8});
    expect_tensor(s, m + "experts.3.up_proj.weight_scale_2", "F32", {});
    expect_tensor(s, m + "experts.3.up_proj.input_scale", "F32", {});
    expect_tensor(s, m + "experts.3.down_proj.weight", "U8", {128, 64});
    EXPECT_FALSE(s.find(m + "experts.3.gate_proj.weight").has_value()) << "Nemotron-H experts are not gated";
    expect_tensor(s, m + "gate.weight", "BF16", {4, 128});
    expect_tensor(s, m + "gate.e_score_correction_bias", "F32", {4});
    expect_tensor(s, m + "shared_experts.up_proj.weight", "BF16", {128, 128});
    expect_tensor(s, m + "shared_experts.down_proj.weight", "BF16", {128, 128});
    expect_tensor(s, "backbone.embeddings.weight", "BF16", {16, 128});
    expect_tensor(s, "backbone.norm_f.weight", "BF16", {128});
    auto c = read_json(tmp.file("nh/config.json"));
    EXPECT_EQ(c["mlp_hidden_act"], "relu2");
    EXPECT_EQ(c["hybrid_override_pattern"], "E");
    EXPECT_EQ(c["n_routed_experts"], 4);
    EXPECT_EQ(c["moe_shared_expert_intermediate_size"], 128);
    EXPECT_EQ(c["n_group"], 1);
    EXPECT_EQ(c["topk_group"], 1);
    EXPECT_EQ(c["norm_topk_prob"], true);
    EXPECT_EQ(c["quantization_config"]["quant_algo"], "NVFP4");
    auto side = read_json(tmp.file("nh/hf_quant_config.json"))["quantization"];
    EXPECT_EQ(side["quant_algo"], "NVFP4");
    EXPECT_EQ(side["exclude_modules"], nlohmann::json({"lm_head", "backbone.layers.*.mixer.gate", "backbone.layers.*.mixer.shared_experts.*"}));
  }
  {
    write_sample("deepseek-v4-nvfp4", tmp.file("v4"), {});
    st::ShardSet s(tmp.file("v4"));
    const std::string x = "layers.0.ffn.experts.2.";
    expect_tensor(s, x + "w1.weight", "U8", {128, 64});
    expect_tensor(s, x + "w1.weight_scale", "F8_E4M3", {128, 8});
    expect_tensor(s, x + "w3.weight_scale_2", "F32", {});
    expect_tensor(s, x + "w2.input_scale", "F32", {});
    EXPECT_FALSE(s.find(x + "w1.scale").has_value());
    expect_tensor(s, "layers.0.ffn.shared_experts.w1.weight", "F8_E4M3", {128, 128});
    expect_tensor(s, "layers.0.ffn.shared_experts.w1.scale", "F8_E8M0", {1, 1});
    auto c = read_json(tmp.file("v4/config.json"));
    EXPECT_EQ(c["expert_dtype"], "fp4");
    EXPECT_EQ(c["quantization_config"]["quant_method"], "fp8");
    EXPECT_EQ(c["quantization_config"]["moe_quant_algo"], "NVFP4");
    // ModelOpt ties the gate and up global scales, as for modelopt-nvfp4.
    EXPECT_EQ(s.find(x + "w1.weight_scale_2")->data()[0], s.find(x + "w3.weight_scale_2")->data()[0]);
  }
  {
    write_sample("ct-gpt-oss-mxfp4", tmp.file("cg"), {});
    st::ShardSet s(tmp.file("cg"));
    const std::string x = "model.layers.0.mlp.experts.1.";
    for (const char* proj : {"gate_proj", "up_proj"}) {
      expect_tensor(s, x + proj + ".weight_packed", "U8", {192, 96});
      expect_tensor(s, x + proj + ".weight_scale", "U8", {192, 6});
      expect_tensor(s, x + proj + ".bias", "BF16", {192});
    }
    expect_tensor(s, x + "down_proj.weight_packed", "U8", {192, 96});
    expect_tensor(s, x + "down_proj.bias", "BF16", {192});
    expect_tensor(s, "model.layers.0.mlp.router.weight", "BF16", {4, 192});
    auto q = read_json(tmp.file("cg/config.json"))["quantization_config"];
    EXPECT_EQ(q["format"], "mxfp4-pack-quantized");
    EXPECT_EQ(q["ignore"], nlohmann::json({"lm_head", "re:.*mlp.router$", "re:.*self_attn.*"}));
  }
  {
    write_sample("ct-w4a8-int8", tmp.file("w4"), {});
    st::ShardSet s(tmp.file("w4"));
    const std::string x = "model.layers.0.mlp.experts.1.";
    expect_tensor(s, x + "gate_proj.weight", "I8", {128, 128});
    expect_tensor(s, x + "gate_proj.weight_scale", "BF16", {128, 1});
    expect_tensor(s, x + "down_proj.weight", "I8", {128, 128});
    EXPECT_FALSE(s.find(x + "gate_proj.weight_packed").has_value());
    EXPECT_FALSE(s.find(x + "gate_proj.weight_shape").has_value());
    int lowest = 0, highest = 0;
    for (uint8_t b : s.find(x + "up_proj.weight")->data()) {
      lowest = std::min<int>(lowest, static_cast<int8_t>(b));
      highest = std::max<int>(highest, static_cast<int8_t>(b));
    }
    EXPECT_EQ(lowest, -8);
    EXPECT_EQ(highest, 7);
    auto q = read_json(tmp.file("w4/config.json"))["quantization_config"];
    EXPECT_EQ(q["format"], "int-quantized");
    auto g = q["config_groups"]["group_0"];
    EXPECT_EQ(g["weights"]["num_bits"], 4);
    EXPECT_EQ(g["weights"]["type"], "int");
    EXPECT_EQ(g["weights"]["strategy"], "group");
    EXPECT_EQ(g["weights"]["group_size"], 128);
    EXPECT_EQ(g["input_activations"]["num_bits"], 8);
    EXPECT_EQ(g["input_activations"]["type"], "int");
    EXPECT_EQ(g["input_activations"]["strategy"], "token");
    EXPECT_EQ(g["input_activations"]["dynamic"], true);
  }
  {
    write_sample("llama4-fp8", tmp.file("l4"), {});
    st::ShardSet s(tmp.file("l4"));
    const std::string f = "language_model.model.layers.0.feed_forward.";
    expect_tensor(s, f + "experts.gate_up_proj", "F8_E4M3", {4, 128, 256});
    expect_tensor(s, f + "experts.down_proj", "F8_E4M3", {4, 128, 128});
    for (const char* scalar : {"gate_up_proj_weight_scale", "down_proj_weight_scale", "gate_up_proj_input_scale", "down_proj_input_scale"})
      expect_tensor(s, f + "experts." + scalar, "F32", {});
    expect_tensor(s, f + "router.weight", "BF16", {4, 128});
    expect_tensor(s, f + "shared_expert.gate_proj.weight", "F8_E4M3", {128, 128});
    expect_tensor(s, f + "shared_expert.down_proj.weight_scale", "F32", {});
    expect_tensor(s, "language_model.model.embed_tokens.weight", "BF16", {16, 128});
    expect_tensor(s, "language_model.lm_head.weight", "BF16", {16, 128});
    auto c = read_json(tmp.file("l4/config.json"));
    EXPECT_EQ(c["text_config"]["num_local_experts"], 4);
    EXPECT_EQ(c["text_config"]["num_experts_per_tok"], 1);  // Llama-4 routes top-1 with any expert count
    EXPECT_EQ(c["text_config"]["hidden_size"], 128);
    EXPECT_FALSE(c.contains("hidden_size"));
    EXPECT_EQ(c["quantization_config"]["quant_method"], "modelopt");
    EXPECT_EQ(c["quantization_config"]["quant_algo"], "FP8");
    EXPECT_TRUE(fs::exists(tmp.file("l4/hf_quant_config.json")));
  }
  {
    write_sample("gpt-oss-bf16", tmp.file("gb"), {});
    st::ShardSet s(tmp.file("gb"));
    const std::string x = "model.layers.0.mlp.experts.";
    expect_tensor(s, x + "gate_up_proj", "BF16", {4, 192, 384});
    expect_tensor(s, x + "gate_up_proj_bias", "BF16", {4, 384});
    expect_tensor(s, x + "down_proj", "BF16", {4, 192, 192});
    expect_tensor(s, x + "down_proj_bias", "BF16", {4, 192});
    auto c = read_json(tmp.file("gb/config.json"));
    EXPECT_FALSE(c.contains("quantization_config"));
    EXPECT_EQ(c["torch_dtype"], "bfloat16");
  }
}

// What `moepack inspect` and `plan` start from: every committed sample opens with the readers,
// with the MoE layers and experts its config declares.
TEST(Synth, EveryCommittedSampleOpensWithTheReaders) {
  for (const auto& family : synth_families()) {
    SCOPED_TRACE(family);
    ckpt::Checkpoint c = ckpt::open_checkpoint(test::source_dir() + "/samples/" + family);
    ASSERT_FALSE(c.layers.empty());
    for (const auto& l : c.layers) EXPECT_EQ(l.num_experts, c.facts.num_experts) << l.prefix;
    EXPECT_EQ(c.layers[0].gated, family != "nemotron-h-nvfp4");
  }
}

TEST(Synth, OutputIsAtomicAndNeedsForceToReplace) {
  TempDir tmp;
  std::string dir = tmp.file("out");
  write_sample("ct-mxfp4", dir, {});
  try {
    write_sample("ct-mxfp4", dir, {});
    FAIL() << "an existing directory was overwritten without force";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::usage);
  }
  SampleOptions o;
  o.force = true;
  o.seed = 3;
  write_sample("awq-int4", dir, o);
  EXPECT_TRUE(fs::exists(dir + "/model.safetensors"));
  EXPECT_EQ(read_json(dir + "/config.json")["quantization_config"]["quant_method"], "awq");
  EXPECT_FALSE(fs::exists(dir + ".tmp"));
}

TEST(Synth, RejectsSizesTheFamilyCannotPack) {
  SampleOptions o;
  o.hidden = 192;  // not a multiple of the int4 group
  EXPECT_THROW(sample_dims("gptq-int4", o), Error);
  EXPECT_NO_THROW(sample_dims("ct-nvfp4", o));
  EXPECT_THROW(sample_dims("no-such-family", {}), Error);
  SampleOptions real;
  real.real_shape = "gpt-oss-20b";
  EXPECT_THROW(sample_dims("ct-nvfp4", real), Error);  // fused gpt-oss layout only
  real.real_shape = "no-such-model";
  EXPECT_THROW(sample_dims("gpt-oss-mxfp4", real), Error);
}

// samples/ is made by samples/regenerate.sh; a generator change must come with regenerated samples.
TEST(Synth, CommittedSamplesMatchTheGenerator) {
  const std::string samples = test::source_dir() + "/samples";
  TempDir tmp;
  int checked = 0;
  for (const auto& family : synth_families()) {
    std::string committed = samples + "/" + family;
    if (!fs::exists(committed + "/config.json")) continue;
    auto config = read_json(committed + "/config.json");
    SampleOptions o;  // seed 0, as regenerate.sh
    // Llama-4 keeps its numbers in text_config.
    const nlohmann::json& text = config.contains("text_config") ? config["text_config"] : config;
    for (const char* key : {"num_experts", "num_local_experts", "n_routed_experts"})
      if (text.contains(key)) o.experts = text[key].get<int>();
    write_sample(family, tmp.file(family), o);
    auto names = files_under(tmp.file(family));
    EXPECT_EQ(names, files_under(committed)) << family;
    for (const auto& n : names)
      EXPECT_EQ(test::read_file(tmp.file(family + "/" + n)), test::read_file(committed + "/" + n))
          << "samples/" << family << "/" << n << " is stale: run samples/regenerate.sh";
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(synth_families().size())) << "a family has no committed sample";
}

// ---- real-shape sparse checkpoints ----------------------------------------------------------

uint64_t allocated_bytes(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0);
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

TEST(SynthRealShape, GptOss120bHeaderIsExactAndDataIsSparse) {
  TempDir tmp;
  SampleOptions o;
  o.real_shape = "gpt-oss-120b";
  o.layers = 1;
  write_sample("gpt-oss-mxfp4", tmp.file("g"), o);
  st::ShardSet s(tmp.file("g"));
  const std::string p = "model.layers.0.mlp.experts.";
  expect_tensor(s, p + "gate_up_proj_blocks", "U8", {128, 5760, 90, 16});
  expect_tensor(s, p + "gate_up_proj_scales", "U8", {128, 5760, 90});
  expect_tensor(s, p + "gate_up_proj_bias", "BF16", {128, 5760});
  expect_tensor(s, p + "down_proj_blocks", "U8", {128, 2880, 90, 16});
  expect_tensor(s, p + "down_proj_scales", "U8", {128, 2880, 90});
  expect_tensor(s, p + "down_proj_bias", "BF16", {128, 2880});
  expect_tensor(s, "model.layers.0.mlp.router.weight", "BF16", {128, 2880});
  expect_tensor(s, "model.layers.0.self_attn.q_proj.weight", "BF16", {4096, 2880});
  expect_tensor(s, "model.layers.0.self_attn.sinks", "BF16", {64});
  expect_tensor(s, "model.embed_tokens.weight", "BF16", {201088, 2880});
  uint64_t experts = 0;
  for (const auto& f : s.files())
    for (const auto& t : f->header().tensors)
      if (t.name.starts_with(p)) experts += t.num_bytes();
  EXPECT_EQ(experts, 1'694'269'440u);  // checkpoint-formats.md 3.2: bytes per 120b layer
  uint64_t size = 0, allocated = 0;
  for (const auto& f : s.files()) {
    size += f->file_size();
    allocated += allocated_bytes(f->path());
  }
  EXPECT_GT(size, 2'000'000'000u);
  EXPECT_LT(allocated, size / 100) << "the data region should be sparse";
  EXPECT_EQ(read_json(tmp.file("g/config.json"))["num_hidden_layers"], 1);
}

TEST(SynthRealShape, GptOss20bLayerBytes) {
  TempDir tmp;
  SampleOptions o;
  o.real_shape = "gpt-oss-20b";
  o.layers = 2;
  write_sample("", tmp.file("g"), o);  // the model's own family
  st::ShardSet s(tmp.file("g"));
  expect_tensor(s, "model.layers.1.mlp.experts.gate_up_proj_blocks", "U8", {32, 5760, 90, 16});
  uint64_t layer = 0;
  for (const auto& f : s.files())
    for (const auto& t : f->header().tensors)
      if (t.name.starts_with("model.layers.1.mlp.experts.")) layer += t.num_bytes();
  EXPECT_EQ(layer, 423'567'360u);
}

TEST(SynthRealShape, DeepSeekV3ShardsAndShapes) {
  TempDir tmp;
  SampleOptions o;
  o.real_shape = "deepseek-v3";
  o.layers = 4;  // three dense layers, then the first MoE layer
  write_sample("deepseek-v3-fp8", tmp.file("d"), o);
  st::ShardSet s(tmp.file("d"));
  EXPECT_TRUE(s.has_index());
  EXPECT_GT(s.files().size(), 2u);  // > 11 GB of experts in 5 GB shards
  const std::string e = "model.layers.3.mlp.experts.255.";
  expect_tensor(s, e + "gate_proj.weight", "F8_E4M3", {2048, 7168});
  expect_tensor(s, e + "gate_proj.weight_scale_inv", "F32", {16, 56});
  expect_tensor(s, e + "down_proj.weight", "F8_E4M3", {7168, 2048});
  expect_tensor(s, e + "down_proj.weight_scale_inv", "F32", {56, 16});
  expect_tensor(s, "model.layers.3.mlp.shared_experts.down_proj.weight", "F8_E4M3", {7168, 2048});
  expect_tensor(s, "model.layers.3.mlp.gate.weight", "BF16", {256, 7168});
  expect_tensor(s, "model.layers.3.mlp.gate.e_score_correction_bias", "F32", {256});
  expect_tensor(s, "model.layers.0.mlp.gate_proj.weight", "F8_E4M3", {18432, 7168});
  expect_tensor(s, "model.layers.0.self_attn.kv_a_proj_with_mqa.weight", "F8_E4M3", {576, 7168});
  expect_tensor(s, "model.layers.0.self_attn.kv_a_proj_with_mqa.weight_scale_inv", "F32", {5, 56});
  expect_tensor(s, "model.layers.0.self_attn.q_b_proj.weight", "F8_E4M3", {24576, 1536});
  auto index = read_json(tmp.file("d/model.safetensors.index.json"));
  uint64_t total = 0;
  for (const auto& f : s.files())
    for (const auto& t : f->header().tensors) total += t.num_bytes();
  EXPECT_EQ(index["metadata"]["total_size"], total);
  char first[64];
  std::snprintf(first, sizeof first, "d/model-00001-of-%05zu.safetensors", s.files().size());  // 1-based HF names
  EXPECT_TRUE(fs::exists(tmp.file(first)));
}

TEST(SynthRealShape, Qwen3GptqAndNvfp4Experts) {
  TempDir tmp;
  SampleOptions o;
  o.real_shape = "qwen3-30b-a3b";
  o.layers = 1;
  const std::string e = "model.layers.0.mlp.experts.127.";
  {
    write_sample("gptq-int4", tmp.file("g"), o);
    st::ShardSet s(tmp.file("g"));
    expect_tensor(s, e + "gate_proj.qweight", "I32", {256, 768});
    expect_tensor(s, e + "gate_proj.qzeros", "I32", {16, 96});
    expect_tensor(s, e + "gate_proj.scales", "F16", {16, 768});
    expect_tensor(s, e + "gate_proj.g_idx", "I32", {2048});
    expect_tensor(s, e + "down_proj.qweight", "I32", {96, 2048});
    expect_tensor(s, e + "down_proj.qzeros", "I32", {6, 256});
    expect_tensor(s, e + "down_proj.scales", "F16", {6, 2048});
    expect_tensor(s, e + "down_proj.g_idx", "I32", {768});
    expect_tensor(s, "model.layers.0.mlp.gate.weight", "BF16", {128, 2048});
  }
  {
    write_sample("ct-nvfp4", tmp.file("n"), o);
    st::ShardSet s(tmp.file("n"));
    expect_tensor(s, e + "gate_proj.weight_packed", "U8", {768, 1024});
    expect_tensor(s, e + "gate_proj.weight_scale", "F8_E4M3", {768, 128});
    expect_tensor(s, e + "down_proj.weight_packed", "U8", {2048, 384});
    expect_tensor(s, e + "down_proj.weight_scale", "F8_E4M3", {2048, 48});
    expect_tensor(s, "model.layers.0.self_attn.q_proj.weight_packed", "U8", {4096, 1024});
    auto c = read_json(tmp.file("n/config.json"));
    EXPECT_EQ(c["num_experts"], 128);
    EXPECT_EQ(c["moe_intermediate_size"], 768);
  }
}

TEST(SynthRealShape, GptOssExportsOfOtherProducers) {
  TempDir tmp;
  SampleOptions o;
  o.real_shape = "gpt-oss-20b";
  o.layers = 1;
  {
    write_sample("ct-gpt-oss-mxfp4", tmp.file("ct"), o);
    st::ShardSet s(tmp.file("ct"));
    const std::string x = "model.layers.0.mlp.experts.31.";
    expect_tensor(s, x + "gate_proj.weight_packed", "U8", {2880, 1440});
    expect_tensor(s, x + "gate_proj.weight_scale", "U8", {2880, 90});
    expect_tensor(s, x + "gate_proj.bias", "BF16", {2880});
    expect_tensor(s, x + "down_proj.weight_packed", "U8", {2880, 1440});
    expect_tensor(s, "model.layers.0.self_attn.q_proj.weight", "BF16", {4096, 2880});  // ignored by the config
  }
  {
    o.real_shape = "gpt-oss-120b";
    write_sample("gpt-oss-bf16", tmp.file("bf16"), o);
    st::ShardSet s(tmp.file("bf16"));
    expect_tensor(s, "model.layers.0.mlp.experts.gate_up_proj", "BF16", {128, 2880, 5760});
    expect_tensor(s, "model.layers.0.mlp.experts.down_proj", "BF16", {128, 2880, 2880});
    // 6.4 GB of experts: sharded, with save_pretrained's 1-based names (only openai's MXFP4
    // release counts from 0).
    EXPECT_GT(s.files().size(), 1u);
    char first[64];
    std::snprintf(first, sizeof first, "bf16/model-00001-of-%05zu.safetensors", s.files().size());
    EXPECT_TRUE(fs::exists(tmp.file(first))) << first;
  }
  {
    SampleOptions q;
    q.real_shape = "qwen3-30b-a3b";
    q.layers = 1;
    write_sample("ct-w4a8-int8", tmp.file("w4"), q);
    st::ShardSet s(tmp.file("w4"));
    expect_tensor(s, "model.layers.0.mlp.experts.127.gate_proj.weight", "I8", {768, 2048});
    expect_tensor(s, "model.layers.0.mlp.experts.127.gate_proj.weight_scale", "BF16", {768, 16});
    expect_tensor(s, "model.layers.0.mlp.experts.127.down_proj.weight_scale", "BF16", {2048, 6});
  }
}

TEST(SynthRealShape, LayoutsWithoutAPresetAreRefusedByName) {
  for (const char* family : {"nemotron-h-nvfp4", "llama4-fp8", "deepseek-v4-nvfp4"}) {
    SampleOptions o;
    o.real_shape = "deepseek-v3";
    try {
      sample_dims(family, o);
      ADD_FAILURE() << family << " took the DeepSeek-V3 shapes";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::usage);
      EXPECT_NE(std::string(e.what()).find("no real-shape model has the"), std::string::npos) << e.what();
    }
  }
  SampleOptions o;
  o.real_shape = "gpt-oss-20b";
  try {
    sample_dims("ct-nvfp4", o);
    ADD_FAILURE() << "ct-nvfp4 took the gpt-oss shapes";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("it fits qwen3-30b-a3b"), std::string::npos) << e.what();
  }
}

// ---- the CLI ---------------------------------------------------------------------------------

TEST(SynthCli, SampleListWriteAndErrors) {
  TempDir tmp;
  auto list = test::run_moepack({"sample", "--list"});
  EXPECT_EQ(list.exit_code, 0) << list.err;
  for (const auto& f : synth_families()) EXPECT_NE(list.out.find(f), std::string::npos) << f;
  EXPECT_NE(list.out.find("gpt-oss-120b"), std::string::npos);

  auto ok = test::run_moepack({"sample", "--family", "ct-nvfp4", "-o", tmp.file("s"), "--seed", "5", "--experts", "8"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(read_json(tmp.file("s/config.json"))["num_experts"], 8);
  SampleOptions o;
  o.seed = 5;
  o.experts = 8;
  write_sample("ct-nvfp4", tmp.file("api"), o);
  EXPECT_EQ(test::read_file(tmp.file("s/model.safetensors")), test::read_file(tmp.file("api/model.safetensors")));

  EXPECT_EQ(test::run_moepack({"sample", "--family", "ct-nvfp4", "-o", tmp.file("s")}).exit_code, 2);
  EXPECT_EQ(test::run_moepack({"sample", "--family", "ct-nvfp4", "-o", tmp.file("s"), "--force"}).exit_code, 0);
  EXPECT_EQ(test::run_moepack({"sample", "--family", "nope", "-o", tmp.file("x")}).exit_code, 2);
  EXPECT_EQ(test::run_moepack({"sample", "--real-shape", "gpt-oss-20b", "-o", tmp.file("x")}).exit_code, 2);  // no --sparse
  EXPECT_EQ(test::run_moepack({"sample", "-o", tmp.file("x")}).exit_code, 2);
  auto real = test::run_moepack({"sample", "--real-shape", "gpt-oss-20b", "--sparse", "--layers", "1", "-o", tmp.file("r"), "--json"});
  EXPECT_EQ(real.exit_code, 0) << real.err;
  EXPECT_EQ(nlohmann::json::parse(real.out)["dir"], tmp.file("r"));
}

}  // namespace
}  // namespace moepack::synth
