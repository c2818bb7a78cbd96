// `moepack plan` and `moepack targets` through the built binary: the --json contract of CLI.md
// and the exit codes (0 decided, 2 usage, 3 refused).
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "lib/synth/synth.h"
#include "support/test_support.h"

namespace moepack::test {
namespace {

using nlohmann::json;

const std::vector<std::string> kGptOssFlags = {"--family", "mxfp4", "--quant-method", "gpt_oss_mxfp4", "--hidden", "2880", "--intermediate", "2880",
                                               "--experts", "128", "--top-k", "4", "--moe-activation", "swigluoai", "--has-bias"};

std::vector<std::string> plan_args(std::vector<std::string> extra) {
  std::vector<std::string> args = {"plan"};
  args.insert(args.end(), kGptOssFlags.begin(), kGptOssFlags.end());
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

TEST(PlanCli, JsonHasTheDocumentedShape) {
  const CommandResult r = run_moepack(plan_args({"--target", "sm90", "--json"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["target"]["device"], "sm90");
  EXPECT_EQ(j["target"]["tp_size"], 1);
  EXPECT_EQ(j["reference"], "vllm e9d1398d9 (2026-08-22)");
  ASSERT_EQ(j["layers"].size(), 1u);
  const json& layer = j["layers"][0];
  for (const char* key : {"prefix", "family", "weight_key", "activation_key", "backend", "experts_class", "hidden_size", "intermediate_size",
                          "padded_hidden_size", "padded_intermediate_size", "candidates", "error", "hazards"})
    EXPECT_TRUE(layer.contains(key)) << key;
  EXPECT_EQ(layer["family"], "mxfp4");
  EXPECT_EQ(layer["weight_key"], "kMxfp4Static");
  EXPECT_TRUE(layer["activation_key"].is_null());
  EXPECT_EQ(layer["backend"], "TRITON");
  EXPECT_EQ(layer["experts_class"], "OAITritonMxfp4ExpertsMonolithic");
  EXPECT_EQ(layer["padded_hidden_size"], 2880);
  EXPECT_TRUE(layer["error"].is_null());
  EXPECT_EQ(layer["hazards"], json::array());  // hidden 2880 is a multiple of the K tile
  ASSERT_FALSE(layer["candidates"].empty());
  const json& first = layer["candidates"][0];
  EXPECT_EQ(first["backend"], "FLASHINFER_TRTLLM_MXFP4_BF16");
  EXPECT_EQ(first["ok"], false);
  EXPECT_EQ(first["reason"], "kernel does not support current device cuda");
}

TEST(PlanCli, RefusalIsExitThreeWithTheErrorInTheLayer) {
  const CommandResult r = run_moepack(plan_args({"--target", "cpu-avx512", "--json"}));
  EXPECT_EQ(r.exit_code, 3);
  const json j = json::parse(r.out);  // still exactly one JSON document
  const json& layer = j["layers"][0];
  EXPECT_TRUE(layer["backend"].is_null());
  EXPECT_EQ(layer["hazards"], json::array());
  EXPECT_EQ(layer["error"]["type"], "ValueError");
  EXPECT_NE(layer["error"]["message"].get<std::string>().find("Mxfp4 MoE backend 'CPU'"), std::string::npos);
  EXPECT_NE(r.err.find("moepack: error:"), std::string::npos);
}

// Layers refused for the same reason make one error line, not one per layer.
TEST(PlanCli, IdenticalRefusalsAreOneLine) {
  TempDir dir;
  ASSERT_EQ(run_moepack({"sample", "--family", "qwen3-moe-bf16", "--layers", "3", "--experts", "2", "-o", dir.file("ckpt")}).exit_code, 0);
  const CommandResult r = run_moepack({"plan", dir.file("ckpt"), "--target", "sm90", "--moe-backend", "marlin"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("moepack: error: 3 layers model.layers.0.mlp.experts .. model.layers.2.mlp.experts: ValueError"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(PlanCli, UnknownBackendNameIsRefusedWithValueErrorText) {
  const CommandResult r = run_moepack(plan_args({"--target", "sm100", "--moe-backend", "flashinfer-cutedsl"}));
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("ValueError: moe_backend='flashinfer_cutedsl' is not supported for MXFP4 MoE"), std::string::npos) << r.err;
}

TEST(PlanCli, HumanOutputListsTheDecisionThenEveryCandidate) {
  const CommandResult r = run_moepack(plan_args({"--target", "sm89"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("backend MARLIN, experts MarlinExperts"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no  TRITON / OAITritonMxfp4ExpertsMonolithic: kernel does not support current device cuda"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ok  MARLIN / MarlinExperts"), std::string::npos);
}

TEST(PlanCli, LayerJsonFileDescribesLayers) {
  TempDir dir;
  const std::string file = dir.file("layers.json");
  write_text(file, R"([{"prefix": "a", "family": "nvfp4", "quant_method": "modelopt_fp4", "weight_key": "kNvfp4Static",
                        "activation_key": "kNvfp4Dynamic", "hidden_size": 2048, "intermediate_size": 768, "num_experts": 128,
                        "top_k": 8, "activation": "silu", "scoring_func": "softmax", "renormalize": true},
                       {"prefix": "b", "family": "unquantized", "hidden_size": 2048, "intermediate_size": 768, "num_experts": 128,
                        "top_k": 8}])");
  const CommandResult r = run_moepack({"plan", "--layer-json", file, "--target", "sm100", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["layers"].size(), 2u);
  EXPECT_EQ(j["layers"][0]["experts_class"], "TrtLlmNvFp4ExpertsMonolithic");
  EXPECT_EQ(j["layers"][1]["backend"], "FLASHINFER_TRTLLM");
}

TEST(PlanCli, UsageErrors) {
  EXPECT_EQ(run_moepack({"plan", "--target", "sm90"}).exit_code, 2);                  // no layer source
  EXPECT_EQ(run_moepack(plan_args({"--target", "sm99"})).exit_code, 2);               // unknown device
  EXPECT_EQ(run_moepack(plan_args({"--target", "sm90", "--env", "NOEQUALS"})).exit_code, 2);
  EXPECT_EQ(run_moepack(plan_args({"--target", "sm90", "--with", "tensorrt"})).exit_code, 2);
  EXPECT_EQ(run_moepack(plan_args({"--target", "sm90", "--activation", "int3"})).exit_code, 2);
}

// lib/oracle/hazards through plan: a gpt-oss MXFP4 checkpoint with hidden 352 on SM90 runs
// triton_kernels' matmul_ogs with a partial last K tile. Every layer lists the hazard in JSON
// and as a line under the layer in text; SM100 and hidden 192 list none (the key stays).
TEST(PlanCli, HazardsOfAGptOssCheckpointWithHidden352) {
  TempDir dir;
  synth::SampleOptions options;
  options.hidden = 352;
  options.layers = 2;
  synth::write_sample("gpt-oss-mxfp4", dir.file("h352"), options);

  const CommandResult r = run_moepack({"plan", dir.file("h352"), "--target", "sm90", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["layers"].size(), 2u);
  for (const json& layer : j["layers"]) {
    EXPECT_EQ(layer["experts_class"], "OAITritonMxfp4ExpertsMonolithic");
    EXPECT_EQ(layer["padded_hidden_size"], 352);
    ASSERT_EQ(layer["hazards"].size(), 1u) << layer.dump();
    EXPECT_EQ(layer["hazards"][0]["id"], "triton_kernels-3.5.1-sm90-partial-k-tile");
    EXPECT_NE(layer["hazards"][0]["effect"].get<std::string>().find("ignores K 320-351"), std::string::npos);
    EXPECT_EQ(layer["hazards"][0]["seen"], "H200, hidden 352, moepack session measurements, 2026-11");
  }

  const CommandResult text = run_moepack({"plan", dir.file("h352"), "--target", "sm90"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  // The two identical layers print as one group, so the hazard line appears once.
  EXPECT_EQ(text.out.find("\n  hazard: triton_kernels-3.5.1-sm90-partial-k-tile: "), text.out.rfind("\n  hazard: ")) << text.out;
  EXPECT_NE(text.out.find("\n  hazard: triton_kernels-3.5.1-sm90-partial-k-tile: "), std::string::npos) << text.out;

  const CommandResult blackwell = run_moepack({"plan", dir.file("h352"), "--target", "sm100", "--json"});
  ASSERT_EQ(blackwell.exit_code, 0) << blackwell.err;
  // The document must outlive the loop: a range-for over a member of a temporary reads freed memory.
  const json blackwell_doc = json::parse(blackwell.out);
  for (const json& layer : blackwell_doc["layers"]) EXPECT_EQ(layer["hazards"], json::array());
  EXPECT_EQ(run_moepack({"plan", dir.file("h352"), "--target", "sm100"}).out.find("hazard:"), std::string::npos);

  const CommandResult hidden192 = run_moepack({"plan", source_dir() + "/samples/gpt-oss-mxfp4", "--target", "sm90", "--json"});
  ASSERT_EQ(hidden192.exit_code, 0) << hidden192.err;
  const json hidden192_doc = json::parse(hidden192.out);
  for (const json& layer : hidden192_doc["layers"]) EXPECT_EQ(layer["hazards"], json::array());
}

TEST(PlanCli, HazardOfALayerDescribedByFlags) {
  std::vector<std::string> args = plan_args({"--target", "sm90", "--json"});
  *std::find(args.begin(), args.end(), "2880") = "352";  // --hidden 352, intermediate stays 2880
  const CommandResult r = run_moepack(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json layer = json::parse(r.out)["layers"][0];
  EXPECT_EQ(layer["hidden_size"], 352);
  EXPECT_EQ(layer["intermediate_size"], 2880);
  ASSERT_EQ(layer["hazards"].size(), 1u);
  EXPECT_EQ(layer["hazards"][0]["id"], "triton_kernels-3.5.1-sm90-partial-k-tile");
}

TEST(TargetsCli, JsonListsDevicesBackendsClassesAndLayouts) {
  const CommandResult r = run_moepack({"targets", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["devices"].size(), 19u);
  EXPECT_FALSE(j["backends"].empty());
  EXPECT_FALSE(j["experts_classes"].empty());
  EXPECT_FALSE(j["layouts"].empty());
  const CommandResult human = run_moepack({"targets"});
  EXPECT_EQ(human.exit_code, 0);
  EXPECT_NE(human.out.find("OAITritonMxfp4ExpertsMonolithic"), std::string::npos);
}

}  // namespace
}  // namespace moepack::test
