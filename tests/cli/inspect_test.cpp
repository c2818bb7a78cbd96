// `moepack inspect`: human output, --json shape, exit codes (0 valid, 4 bad input / bad values).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "checkpoints/fixtures.h"

namespace moepack::test {
namespace {

using nlohmann::json;

constexpr uint64_t H = 64, I = 32, E = 4;

// A two-layer compressed-tensors NVFP4 checkpoint plus one ignored (BF16) layer.
void write_nvfp4(const TempDir& tmp) {
  CheckpointBuilder b(tmp.path());
  for (int l = 0; l < 2; ++l)
    add_per_expert_layer(b, "model.layers." + std::to_string(l) + ".mlp.experts", E, H, I,
                         {{"weight_packed", DType::U8, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, i / 2}; }},
                          {"weight_scale", DType::F8_E4M3, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, i / 16}; }},
                          {"weight_global_scale", DType::F32, one_shape},
                          {"input_global_scale", DType::F32, one_shape}});
  add_per_expert_layer(b, "model.layers.2.mlp.experts", E, H, I, {{"weight", DType::BF16, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, i}; }}});
  for (auto& t : b.tensors()) t.bytes.assign(byte_size(t.dtype, t.shape), 0x11);
  json nv = {{"num_bits", 4}, {"type", "float"}, {"symmetric", true}, {"group_size", 16}, {"strategy", "tensor_group"}};
  json nva = nv;
  nva["dynamic"] = "local";
  json config = moe_config("qwen3_moe", H, I, E, 3);
  config["architectures"] = {"Qwen3MoeForCausalLM"};
  json group = {{"targets", {"Linear"}}, {"weights", nv}, {"input_activations", nva}};
  config["quantization_config"] = {{"quant_method", "compressed-tensors"},
                                   {"format", "nvfp4-pack-quantized"},
                                   {"config_groups", {{"group_0", group}}},
                                   {"ignore", {"lm_head", "re:.*layers[.]2[.].*"}}};
  b.config(config).write();
}

TEST(Inspect, HumanOutputGroupsIdenticalLayers) {
  TempDir tmp;
  write_nvfp4(tmp);
  auto r = run_moepack({"inspect", tmp.path()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("compressed-tensors: nvfp4-pack-quantized"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("qwen3_moe (Qwen3MoeForCausalLM), bfloat16"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("layers 0-1: 4 experts, nvfp4 (W4A4)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("layer 2: 4 experts, bf16"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("weight kNvfp4Static, activation kNvfp4Dynamic"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("w13_weight_packed U8 [64, 32]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("routing RenormalizeNaive"), std::string::npos) << r.out;
  EXPECT_TRUE(r.err.empty()) << r.err;
}

TEST(Inspect, JsonShape) {
  TempDir tmp;
  write_nvfp4(tmp);
  auto r = run_moepack({"inspect", tmp.path(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["family"], "compressed-tensors");
  EXPECT_EQ(j["model"]["hidden_size"], H);
  EXPECT_EQ(j["model"]["moe_intermediate_size"], I);
  EXPECT_EQ(j["model"]["num_experts"], E);
  EXPECT_EQ(j["model"]["routing_method"], "RenormalizeNaive");
  EXPECT_EQ(j["tensors"]["files"], 1);
  ASSERT_EQ(j["moe_layers"].size(), 3u);
  const json& l0 = j["moe_layers"][0];
  EXPECT_EQ(l0["prefix"], "model.layers.0.mlp.experts");
  EXPECT_EQ(l0["family"], "nvfp4");
  EXPECT_EQ(l0["weight_key"], "kNvfp4Static");
  EXPECT_EQ(l0["activation_key"], "kNvfp4Dynamic");
  EXPECT_EQ(l0["moe_method"], "CompressedTensorsW4A4Nvfp4MoEMethod");
  EXPECT_EQ(l0["quant_method"], "compressed-tensors");
  EXPECT_EQ(l0["global_scale_convention"], "divisor");
  EXPECT_EQ(l0["w13_order"], "gate_then_up");
  EXPECT_EQ(l0["num_experts"], E);
  EXPECT_EQ(l0["tensor_count"], E * 3 * 4);
  EXPECT_EQ(l0["params"][0]["name"], "w13_weight_packed");
  const json& l2 = j["moe_layers"][2];
  EXPECT_EQ(l2["family"], "unquantized");
  EXPECT_TRUE(l2["weight_key"].is_null());
  EXPECT_TRUE(l2["quant_method"].is_null());
  EXPECT_FALSE(j.contains("check_values"));
}

TEST(Inspect, NoMoeLayersIsExitZero) {
  TempDir tmp;
  auto r = run_moepack({"inspect", tmp.path()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("MoE layers   none"), std::string::npos) << r.out;
  auto rj = run_moepack({"inspect", tmp.path(), "--json"});
  ASSERT_EQ(rj.exit_code, 0);
  json j = json::parse(rj.out);
  EXPECT_TRUE(j["moe_layers"].empty());
  EXPECT_EQ(j["tensors"]["count"], 0);
}

TEST(Inspect, BadInputIsExitFourWithJsonError) {
  TempDir tmp;
  write_nvfp4(tmp);
  write_text(tmp.file("config.json"), "[1, 2, 3]");
  auto r = run_moepack({"inspect", tmp.path(), "--json"});
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_NE(r.err.find("moepack: error: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("config.json is not a JSON object"), std::string::npos) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["error"]["exit_code"], 4);
  EXPECT_EQ(j["error"]["kind"], "bad_input");
}

// docs/CLI.md: a single valid file is described (exit 0) even without a config.json; only plan and
// convert need one.
TEST(Inspect, LoneFileWithoutConfigIsDescribed) {
  TempDir tmp;
  write_nvfp4(tmp);
  std::remove(tmp.file("config.json").c_str());
  const std::string file = tmp.file("model.safetensors");
  auto r = run_moepack({"inspect", file});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("format       unknown"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no config.json"), std::string::npos) << r.out;
  auto rj = run_moepack({"inspect", file, "--json"});
  ASSERT_EQ(rj.exit_code, 0) << rj.err;
  json j = json::parse(rj.out);
  EXPECT_EQ(j["family"], "unknown");
  EXPECT_EQ(j["scheme_id"], "unknown");
  EXPECT_FALSE(j["has_config"].get<bool>());
  ASSERT_EQ(j["moe_layers"].size(), 3u);  // found by name, sizes from the tensors
  EXPECT_EQ(j["moe_layers"][0]["num_experts"], E);
  EXPECT_EQ(j["moe_layers"][2]["prefix"], "model.layers.2.mlp.experts");
  ASSERT_EQ(j["tensor_list"].size(), j["tensors"]["count"].get<size_t>());
  for (const auto& t : j["tensor_list"]) {
    EXPECT_TRUE(t["name"].is_string());
    EXPECT_TRUE(t["dtype"].is_string());
    EXPECT_TRUE(t["shape"].is_array());
    EXPECT_TRUE(t["bytes"].is_number_unsigned());
  }
  EXPECT_EQ(j["metadata"]["format"], "pt");
  // plan and convert still need the config, and say so (exit 4, naming config.json).
  auto p = run_moepack({"plan", file, "--target", "sm100", "--json"});
  EXPECT_EQ(p.exit_code, 4) << p.err;
  EXPECT_NE(p.err.find("config.json is missing"), std::string::npos) << p.err;
  EXPECT_EQ(json::parse(p.out)["error"]["kind"], "bad_input");
  auto c = run_moepack({"convert", file, "--target", "sm100", "-o", tmp.file("out")});
  EXPECT_EQ(c.exit_code, 4) << c.err;
  EXPECT_NE(c.err.find("config.json is missing"), std::string::npos) << c.err;
  EXPECT_FALSE(std::filesystem::exists(tmp.file("out")));
}

// A converted artifact read as a checkpoint has no MoE layers under the checkpoint names; inspect
// says what it is (the manifest's format, target, source scheme and per-layer backends).
TEST(Inspect, ArtifactIsNamedAsOne) {
  TempDir tmp;
  const std::string out = tmp.file("out");
  ASSERT_EQ(run_moepack({"convert", source_dir() + "/samples/gpt-oss-mxfp4", "--target", "sm90", "-o", out, "-q"}).exit_code, 0);
  CommandResult r = run_moepack({"inspect", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("artifact     moepack/1 artifact for sm90 (tp 1), converted from mxfp4 (gpt-oss): 1 MoE layer packed for TRITON"), std::string::npos)
      << r.out;
  CommandResult j = run_moepack({"inspect", out, "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const json doc = json::parse(j.out);
  ASSERT_TRUE(doc.contains("artifact"));
  EXPECT_EQ(doc["artifact"]["format"], "moepack/1");
  EXPECT_EQ(doc["artifact"]["source_scheme"], "gpt-oss-mxfp4");
  EXPECT_EQ(doc["artifact"]["target"]["device"], "sm90");
  ASSERT_EQ(doc["artifact"]["layers"].size(), 1u);
  EXPECT_EQ(doc["artifact"]["layers"][0]["backend"], "TRITON");
  // A checkpoint has no "artifact" key.
  EXPECT_FALSE(json::parse(run_moepack({"inspect", source_dir() + "/samples/gpt-oss-mxfp4", "--json"}).out).contains("artifact"));
}

TEST(Inspect, MissingPathIsBadInput) {
  auto r = run_moepack({"inspect", "/nonexistent/moepack/ckpt"});
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_NE(r.err.find("no such file or directory"), std::string::npos) << r.err;
}

TEST(Inspect, UsageErrorWithoutCheckpoint) {
  auto r = run_moepack({"inspect"});
  EXPECT_EQ(r.exit_code, 2);
}

TEST(Cli, MisspeltCommandIsNamedWithTheRealOnes) {
  auto r = run_moepack({"inpsect", "samples/gpt-oss-mxfp4"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown command 'inpsect'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("inspect, plan, convert"), std::string::npos) << r.err;
  EXPECT_EQ(run_moepack({"--version"}).exit_code, 0);
}

TEST(Inspect, CheckValues) {
  TempDir tmp;
  write_nvfp4(tmp);
  auto clean = run_moepack({"inspect", tmp.path(), "--check-values"});
  EXPECT_EQ(clean.exit_code, 0) << clean.err;
  EXPECT_NE(clean.out.find("no NaN/Inf"), std::string::npos) << clean.out;

  // Poison one E4M3 block scale (0x7F is NaN) in place.
  auto bytes = read_file(tmp.file("model.safetensors"));
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(bytes[static_cast<size_t>(i)]) << (8 * i);
  json header = json::parse(std::string(bytes.begin() + 8, bytes.begin() + 8 + static_cast<long>(n)));
  const std::string victim = "model.layers.1.mlp.experts.3.down_proj.weight_scale";
  uint64_t begin = header[victim]["data_offsets"][0];
  bytes[8 + n + begin + 2] = 0x7F;
  write_file(tmp.file("model.safetensors"), bytes);

  auto bad = run_moepack({"inspect", tmp.path(), "--check-values"});
  EXPECT_EQ(bad.exit_code, 4);
  EXPECT_NE(bad.out.find(victim + "[2] = NaN"), std::string::npos) << bad.out;
  EXPECT_NE(bad.err.find("tensor `" + victim + "`: element 2 is NaN"), std::string::npos) << bad.err;
  auto badj = run_moepack({"inspect", tmp.path(), "--check-values", "--json"});
  EXPECT_EQ(badj.exit_code, 4);
  json j = json::parse(badj.out);
  EXPECT_EQ(j["check_values"]["bad_values"], 1);
  EXPECT_EQ(j["check_values"]["findings"][0]["tensor"], victim);
  EXPECT_EQ(j["check_values"]["findings"][0]["element"], 2);
  EXPECT_EQ(j["error"]["exit_code"], 4);
}

TEST(Inspect, RealSizeSparseGptOss) {
  // gpt-oss-120b shapes with a sparse data region: inspect reads headers only.
  constexpr uint64_t h = 2880, e = 128;
  TempDir tmp;
  CheckpointBuilder b(tmp.path());
  for (int l = 0; l < 36; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".mlp.experts";
    b.add(p + ".gate_up_proj_blocks", DType::U8, {e, 2 * h, h / 32, 16});
    b.add(p + ".gate_up_proj_scales", DType::U8, {e, 2 * h, h / 32});
    b.add(p + ".gate_up_proj_bias", DType::BF16, {e, 2 * h});
    b.add(p + ".down_proj_blocks", DType::U8, {e, h, h / 32, 16});
    b.add(p + ".down_proj_scales", DType::U8, {e, h, h / 32});
    b.add(p + ".down_proj_bias", DType::BF16, {e, h});
  }
  json config = moe_config("gpt_oss", h, h, e, 36);
  config["quantization_config"] = {{"quant_method", "mxfp4"}};
  b.config(config);
  b.write_sparse(3, [](const std::string& n) { return std::stoul(n.substr(13)) % 3; });
  auto r = run_moepack({"inspect", tmp.path()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("gpt-oss: mxfp4 (gpt-oss)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("layers 0-35: 128 experts, mxfp4, 1.69 GB per layer"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("w13 interleaved"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace moepack::test
