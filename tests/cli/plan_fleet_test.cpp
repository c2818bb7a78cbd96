// `moepack plan CKPT --target all` and comma lists: one table for a fleet of devices, and with
// --json every device's own plan document.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace moepack::test {
namespace {

std::string gpt_oss_sample() { return source_dir() + "/samples/gpt-oss-mxfp4"; }

// Three MXFP4 layers: a and c alike, b with another hidden size; hidden 352 hits the SM90
// triton_kernels partial-K-tile hazard.
std::string three_layers(const TempDir& dir) {
  const std::string path = dir.file("layers.json");
  std::string layers = "[";
  for (const auto& [prefix, hidden] : {std::pair{"a", 352}, std::pair{"b", 384}, std::pair{"c", 352}})
    layers += std::string(layers.size() > 1 ? "," : "") + R"({"prefix":")" + prefix + R"(","family":"mxfp4","quant_method":"gpt_oss_mxfp4","hidden_size":)" +
              std::to_string(hidden) + R"(,"intermediate_size":256,"num_experts":8,"top_k":2,"activation":"swigluoai","has_bias":true})";
  write_text(path, layers + "]");
  return path;
}

TEST(PlanFleet, EachDevicesDocumentIsItsOwnPlan) {
  CommandResult fleet = run_moepack({"plan", gpt_oss_sample(), "--target", "all", "--json"});
  ASSERT_EQ(fleet.exit_code, 0) << fleet.err;
  const auto doc = nlohmann::ordered_json::parse(fleet.out);
  const auto& targets = doc.at("targets");
  ASSERT_EQ(targets.size(), doc.at("plans").size());
  EXPECT_EQ(targets.size(), 18u);
  for (const auto& t : targets) EXPECT_NE(t, "host");
  for (size_t i = 0; i < targets.size(); ++i) {
    const std::string target = targets[i].get<std::string>();
    CommandResult alone = run_moepack({"plan", gpt_oss_sample(), "--target", target, "--json"});
    EXPECT_EQ(doc.at("plans")[i], nlohmann::ordered_json::parse(alone.out)) << target;
  }
  ASSERT_EQ(doc.at("layer_groups").size(), 1u);
  EXPECT_EQ(doc.at("layer_groups")[0].at("layers"), nlohmann::ordered_json::array({"model.layers.0.mlp.experts"}));
}

TEST(PlanFleet, LayersDecidedAlikeShareAColumnAndHazardsAreNamed) {
  TempDir dir;
  const std::string layers = three_layers(dir);
  CommandResult r = run_moepack({"plan", "--layer-json", layers, "--target", "sm90,sm100", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc.at("targets"), nlohmann::json::array({"sm90", "sm100"}));
  EXPECT_EQ(doc.at("layer_groups"), nlohmann::json::parse(R"([{"layers":["a","c"]},{"layers":["b"]}])"));

  r = run_moepack({"plan", "--layer-json", layers, "--target", "sm90,sm100"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("target  a, c "), std::string::npos) << r.out;
  const size_t sm90 = r.out.find("\nsm90 "), sm100 = r.out.find("\nsm100 ");
  ASSERT_NE(sm90, std::string::npos);
  ASSERT_NE(sm100, std::string::npos);
  const std::string sm90_row = r.out.substr(sm90 + 1, r.out.find('\n', sm90 + 1) - sm90 - 1);
  const std::string sm100_row = r.out.substr(sm100 + 1, r.out.find('\n', sm100 + 1) - sm100 - 1);
  EXPECT_NE(sm90_row.find("TRITON / OAITritonMxfp4ExpertsMonolithic"), std::string::npos) << sm90_row;
  EXPECT_TRUE(sm90_row.ends_with("triton_kernels-3.5.1-sm90-partial-k-tile")) << sm90_row;
  EXPECT_TRUE(sm100_row.ends_with(" -")) << sm100_row;
}

TEST(PlanFleet, RefusalsAreNumberedAndOnlyAFleetWithNoDeviceFails) {
  CommandResult some = run_moepack({"plan", gpt_oss_sample(), "--target", "sm70,sm90"});
  EXPECT_EQ(some.exit_code, 0) << some.err;
  EXPECT_NE(some.out.find("\nsm70    refused [1]"), std::string::npos) << some.out;
  EXPECT_NE(some.out.find("\n[1] ValueError: The quantization method gpt_oss_mxfp4 is not supported for the current GPU."), std::string::npos)
      << some.out;
  EXPECT_EQ(some.err, "");

  CommandResult none = run_moepack({"plan", gpt_oss_sample(), "--target", "sm70,cpu-arm", "--json"});
  EXPECT_EQ(none.exit_code, 3) << none.err;
  EXPECT_NE(none.err.find("no device of sm70,cpu-arm runs every MoE layer"), std::string::npos) << none.err;
  EXPECT_EQ(nlohmann::json::parse(none.out).at("plans").size(), 2u);
}

TEST(PlanFleet, BadListsAreUsageErrors) {
  for (const std::string list : {"sm90,,sm100", "sm90,sm90", "sm90,", "sm90,sm999"}) {
    CommandResult r = run_moepack({"plan", gpt_oss_sample(), "--target", list, "--json"});
    EXPECT_EQ(r.exit_code, 2) << list << ": " << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out).at("error").at("exit_code"), 2) << r.out;
  }
}

// convert takes a list of devices (tests/cli/convert_targets_test.cpp) but not `all`, plan's
// question: refused by name, with the JSON error document, and nothing is written.
TEST(PlanFleet, ConvertRefusesAll) {
  TempDir dir;
  CommandResult r = run_moepack({"convert", gpt_oss_sample(), "--target", "all", "-o", dir.file("out"), "--json"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("convert writes the devices it is given"), std::string::npos) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("error").at("exit_code"), 2) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir.file("out")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("out.tmp")));
}

}  // namespace
}  // namespace moepack::test
