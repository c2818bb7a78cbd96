#include <gtest/gtest.h>

#include "formats/artifact/manifest.h"
#include "formats/safetensors/strict_json.h"
#include "lib/core/error.h"
#include "support/test_support.h"

namespace moepack::artifact {
namespace {

Manifest sample_manifest() {
  Manifest m;
  m.moepack_version = "0.1.0";
  m.reference = "vllm e9d1398d9 (2026-08-22); triton_kernels v3.5.1; flashinfer 0.6.17";
  m.source_scheme = "gpt-oss-mxfp4";
  m.source_fingerprint = "xxh3-128:0123456789abcdef0123456789abcdef";
  m.source_files = {{"model.safetensors", 1234, "00112233445566778899aabbccddeeff"}};
  m.target = {{"device", "sm90"}, {"tp_size", 1}};
  Layer l;
  l.prefix = "model.layers.0.mlp.experts";
  l.family = "mxfp4";
  l.weight_key = "kMxfp4Static";
  l.backend = "TRITON";
  l.experts_class = "OAITritonMxfp4ExpertsMonolithic";
  l.num_experts = 32;
  l.top_k = 4;
  l.activation = "swigluoai";
  l.hidden_size = l.intermediate_size = l.padded_hidden_size = l.padded_intermediate_size = 2880;
  RankTensors r;
  PackedTensor w13;
  w13.file = "model.safetensors";
  w13.name = "model.layers.0.mlp.experts.w13_weight";
  w13.dtype = "U8";
  w13.shape = {32, 1440, 11520};
  w13.layout = "triton_kernels.HopperMXValue(mx_axis=1,v3.5.1)";
  w13.xxh3 = "ffeeddccbbaa99887766554433221100";
  r.tensors["w13_weight"] = w13;
  l.ranks.push_back(r);
  m.layers.push_back(l);
  m.files = {{"model.safetensors", 99, "0123456789abcdef0123456789abcdef"}};
  return m;
}

std::string expect_bad(const std::string& text);

TEST(Manifest, RunFactsRoundTrip) {
  Manifest m = sample_manifest();
  Layer& l = m.layers[0];
  RoutingFacts r;
  r.method = "DeepSeekV3";
  r.scoring_func = "sigmoid";
  r.renormalize = true;
  r.n_group = 8;
  r.topk_group = 4;
  r.routed_scaling_factor = 2.5;
  r.correction_bias = "model.layers.0.mlp.gate.e_score_correction_bias";
  l.routing = r;
  l.swiglu_limit = 7.0;
  l.has_bias = true;
  l.w13_rows = "interleaved";
  l.gated = true;
  PackedTensor& t = l.ranks[0].tensors.at("w13_weight");
  t.canonical_dtype = "U8";
  t.canonical_shape = {5760, 1440};
  PackedTensor s = t;
  s.name = "model.layers.0.mlp.experts.w13_input_scale";
  s.per_expert = false;
  s.derived = "vllm.max_over_experts(f32) over the rank's 32 experts";
  l.ranks[0].tensors["w13_input_scale"] = s;
  const std::string text = manifest_text(m);
  Manifest back = manifest_from_json(parse_strict_json(text, "moepack.json"), "moepack.json");
  EXPECT_EQ(manifest_text(back), text);
  ASSERT_TRUE(back.layers[0].routing.has_value());
  EXPECT_EQ(back.layers[0].routing->correction_bias, r.correction_bias);
  EXPECT_EQ(back.layers[0].routing->routed_scaling_factor, 2.5);
  EXPECT_EQ(back.layers[0].ranks[0].tensors.at("w13_weight").canonical_shape, (std::vector<uint64_t>{5760, 1440}));
  EXPECT_FALSE(back.layers[0].ranks[0].tensors.at("w13_input_scale").per_expert);
  // A row order nobody knows is refused, not guessed.
  std::string bad = text;
  bad.replace(bad.find("\"interleaved\""), 13, "\"sideways\"");
  EXPECT_NE(expect_bad(bad).find("w13_rows"), std::string::npos);
}

TEST(Manifest, RoundTripsThroughText) {
  Manifest m = sample_manifest();
  std::string text = manifest_text(m);
  Manifest back = manifest_from_json(parse_strict_json(text, "moepack.json"), "moepack.json");
  EXPECT_EQ(manifest_text(back), text);
  EXPECT_EQ(back.layers[0].ranks[0].tensors.at("w13_weight").shape, (std::vector<uint64_t>{32, 1440, 11520}));
  EXPECT_FALSE(back.layers[0].activation_key.has_value());
  // Keys keep the contract's order: format first, files last.
  EXPECT_EQ(text.find("\"format\""), 4u);
  EXPECT_LT(text.find("\"layers\""), text.rfind("\"files\""));
}

std::string expect_bad(const std::string& text) {
  try {
    manifest_from_json(parse_strict_json(text, "m.json"), "m.json");
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 4);
    return e.what();
  }
  ADD_FAILURE() << "accepted: " << text;
  return "";
}

TEST(Manifest, RejectsMalformedWithTheKeyPath) {
  nlohmann::ordered_json good = to_json(sample_manifest());
  auto mutate = [&](auto&& f) {
    nlohmann::ordered_json j = good;
    f(j);
    return expect_bad(j.dump());
  };
  EXPECT_NE(mutate([](auto& j) { j["format"] = "moepack/2"; }).find("moepack/2"), std::string::npos);
  EXPECT_NE(mutate([](auto& j) { j.erase("layers"); }).find("$.layers"), std::string::npos);
  EXPECT_NE(mutate([](auto& j) { j["files"][0]["xxh3"] = "xyz"; }).find("$.files[0].xxh3"), std::string::npos);
  EXPECT_NE(mutate([](auto& j) { j["files"][0]["name"] = "../etc/passwd"; }).find("inside the artifact"), std::string::npos);
  EXPECT_NE(mutate([](auto& j) { j["files"][0]["name"] = "/abs"; }).find("relative"), std::string::npos);
  EXPECT_NE(mutate([](auto& j) { j["layers"][0]["num_experts"] = -1; }).find("num_experts"), std::string::npos);
  EXPECT_NE(mutate([](auto& j) { j["layers"][0]["ranks"][0]["tensors"]["w13_weight"]["shape"][0] = "x"; }).find("shape"), std::string::npos);
  EXPECT_NE(expect_bad("[]").find("not an object"), std::string::npos);
}

TEST(Manifest, IntermediateSizeScopeIsWrittenOnlyWhenSet) {
  Manifest one_rank = sample_manifest();
  EXPECT_EQ(manifest_text(one_rank).find("intermediate_size_scope"), std::string::npos);  // single-rank bytes as before
  Manifest two_ranks = sample_manifest();
  two_ranks.layers[0].intermediate_size = two_ranks.layers[0].padded_intermediate_size = 1440;
  two_ranks.layers[0].intermediate_size_scope = kPerRankScope;
  std::string text = manifest_text(two_ranks);
  EXPECT_LT(text.find("\"padded_intermediate_size\""), text.find("\"intermediate_size_scope\": \"per_rank\""));
  EXPECT_LT(text.find("\"intermediate_size_scope\""), text.find("\"ranks\""));
  Manifest back = manifest_from_json(parse_strict_json(text, "moepack.json"), "moepack.json");
  EXPECT_EQ(back.layers[0].intermediate_size_scope.value_or(""), "per_rank");
  EXPECT_EQ(manifest_text(back), text);
  // Another scope would change what the sizes mean: refused, not guessed.
  nlohmann::ordered_json j = to_json(two_ranks);
  j["layers"][0]["intermediate_size_scope"] = "whole";
  EXPECT_NE(expect_bad(j.dump()).find("intermediate_size_scope"), std::string::npos);
  j["layers"][0]["intermediate_size_scope"] = 2;
  EXPECT_NE(expect_bad(j.dump()).find("intermediate_size_scope"), std::string::npos);
}

TEST(Manifest, ReadsFromDiskAndRejectsDuplicateKeys) {
  test::TempDir dir;
  test::write_text(dir.file("moepack.json"), manifest_text(sample_manifest()));
  EXPECT_EQ(read_manifest(dir.file("moepack.json")).layers.size(), 1u);
  test::write_text(dir.file("dup.json"), R"({"format":"moepack/1","format":"moepack/1"})");
  try {
    read_manifest(dir.file("dup.json"));
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("duplicate key"), std::string::npos);
  }
}

}  // namespace
}  // namespace moepack::artifact
