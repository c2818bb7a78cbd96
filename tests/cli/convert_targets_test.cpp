// `moepack convert CKPT --target A,B,C -o OUT`: one pass over the source writes OUT/A, OUT/B and
// OUT/C, each byte for byte what `convert --target A -o ...` writes alone; every device is planned
// before anything is written, so a refusal leaves nothing; OUT appears complete or not at all.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace moepack::test {
namespace {
namespace fs = std::filesystem;

std::string sample(const std::string& name) { return source_dir() + "/samples/" + name; }

std::vector<std::string> split_list(const std::string& list) {
  std::vector<std::string> names;
  std::istringstream in(list);
  for (std::string name; std::getline(in, name, ',');) names.push_back(name);
  return names;
}

// Converts `source` for every device of `targets` in one run and once per device, with the same
// extra flags, and compares every file of every artifact.
void expect_same_bytes_as_separate_runs(const std::string& source, const std::string& targets, const std::vector<std::string>& flags) {
  TempDir dir;
  std::vector<std::string> args = {"convert", source, "--target", targets, "-o", dir.file("together"), "--threads", "2"};
  args.insert(args.end(), flags.begin(), flags.end());
  CommandResult r = run_moepack(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(dir.file("together.tmp")));
  std::set<std::string> listed;
  for (const auto& e : fs::directory_iterator(dir.file("together"))) listed.insert(e.path().filename().string());
  const std::vector<std::string> devices = split_list(targets);
  EXPECT_EQ(listed, std::set<std::string>(devices.begin(), devices.end()));
  for (const std::string& device : devices) {
    std::vector<std::string> alone = {"convert", source, "--target", device, "-o", dir.file("alone-" + device), "--threads", "1"};
    alone.insert(alone.end(), flags.begin(), flags.end());
    r = run_moepack(alone);
    ASSERT_EQ(r.exit_code, 0) << device << ": " << r.err;
    const auto together = all_files(dir.file("together/" + device));
    const auto separate = all_files(dir.file("alone-" + device));
    EXPECT_FALSE(together.empty());
    EXPECT_EQ(together, separate) << source << " on " << device;
  }
}

TEST(ConvertSeveralTargets, SameBytesAsSeparateRuns) {
  expect_same_bytes_as_separate_runs(sample("gpt-oss-mxfp4"), "sm90,cpu-amx,sm100,gfx950", {});
}

TEST(ConvertSeveralTargets, SameBytesAsSeparateRunsWithSeveralRanks) {
  // Two ranks: each artifact's rank files hold every layer again, so the artifacts do not walk
  // the source in lockstep; the bytes must still be each device's own.
  expect_same_bytes_as_separate_runs(sample("qwen3-moe-bf16"), "sm90,cpu-amx,gfx942", {"--tp", "2"});
  expect_same_bytes_as_separate_runs(sample("ct-nvfp4"), "sm100,sm90,sm120", {"--tp", "2", "--tp-rank", "1"});
}

TEST(ConvertSeveralTargets, SameBytesAsSeparateRunsOverManyLayersAndShards) {
  TempDir dir;
  const std::string src = dir.file("src");
  CommandResult r = run_moepack({"sample", "--family", "gpt-oss-mxfp4", "--layers", "12", "-o", src});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Small shards: the artifacts' files end at different tensors.
  expect_same_bytes_as_separate_runs(src, "cpu-amx,sm90", {"--max-shard-size", "300KB"});
}

TEST(ConvertSeveralTargets, EachArtifactVerifies) {
  TempDir dir;
  const std::string out = dir.file("out");
  CommandResult r = run_moepack({"convert", sample("modelopt-nvfp4"), "--target", "sm100,sm90,gfx950", "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* device : {"sm100", "sm90", "gfx950"}) {
    r = run_moepack({"verify", out + "/" + device, "--source", sample("modelopt-nvfp4")});
    EXPECT_EQ(r.exit_code, 0) << device << ": " << r.out << r.err;
  }
}

TEST(ConvertSeveralTargets, ARefusedDeviceWritesNothingAndIsNamed) {
  TempDir dir;
  const std::string out = dir.file("out");
  // AWQ needs compute capability 75: sm70 refuses, after sm90 planned fine.
  CommandResult r = run_moepack({"convert", sample("awq-int4"), "--target", "sm90,sm70", "-o", out});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("moepack: error: --target sm70: layer model.layers.0.mlp.experts: ValueError"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out + ".tmp"));
  r = run_moepack({"convert", sample("awq-int4"), "--target", "sm90,sm70", "-o", out, "--json"});
  EXPECT_EQ(r.exit_code, 3);
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["error"]["kind"], "refused");
  EXPECT_NE(j["error"]["message"].get<std::string>().find("--target sm70: "), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(out));
}

TEST(ConvertSeveralTargets, AllRepeatsAndUnknownDevicesAreUsageErrors) {
  TempDir dir;
  const std::string out = dir.file("out");
  for (const std::string targets : {"all", "sm90,sm90", "sm90,,sm100", "sm90,sm91"}) {
    CommandResult r = run_moepack({"convert", sample("gpt-oss-mxfp4"), "--target", targets, "-o", out});
    EXPECT_EQ(r.exit_code, 2) << targets << ": " << r.err;
    EXPECT_NE(r.err.find("moepack: error: "), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out)) << targets;
  }
  CommandResult r = run_moepack({"convert", sample("gpt-oss-mxfp4"), "--target", "all", "-o", out});
  EXPECT_NE(r.err.find("plan CKPT --target all"), std::string::npos) << r.err;
}

TEST(ConvertSeveralTargets, AnExistingOutputNeedsForce) {
  TempDir dir;
  const std::string out = dir.file("out");
  ASSERT_EQ(run_moepack({"convert", sample("gpt-oss-mxfp4"), "--target", "sm90,sm100", "-o", out}).exit_code, 0);
  CommandResult r = run_moepack({"convert", sample("gpt-oss-mxfp4"), "--target", "sm90,cpu-amx", "-o", out});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(fs::exists(out + "/sm100"));
  r = run_moepack({"convert", sample("gpt-oss-mxfp4"), "--target", "sm90,cpu-amx", "-o", out, "--force"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Replaced whole: the old sm100 artifact is gone with the directory it was in.
  EXPECT_FALSE(fs::exists(out + "/sm100"));
  EXPECT_TRUE(fs::exists(out + "/cpu-amx/moepack.json"));
}

TEST(ConvertSeveralTargets, JsonSummaryAndDryRunNameEachArtifact) {
  TempDir dir;
  const std::string out = dir.file("out");
  CommandResult r = run_moepack({"convert", sample("gpt-oss-mxfp4"), "--target", "sm90,cpu-amx", "-o", out, "--dry-run", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(out));
  auto plan = nlohmann::json::parse(r.out);
  EXPECT_EQ(plan["dry_run"], true);
  ASSERT_EQ(plan["artifacts"].size(), 2u);
  EXPECT_EQ(plan["artifacts"][0]["device"], "sm90");
  EXPECT_EQ(plan["artifacts"][0]["output"], out + "/sm90");
  EXPECT_EQ(plan["artifacts"][0]["target"]["device"], "sm90");
  EXPECT_EQ(plan["artifacts"][1]["target"]["device"], "cpu-amx");
  EXPECT_EQ(plan["artifacts"][1]["layers"][0]["backend"], "CPU");

  r = run_moepack({"convert", sample("gpt-oss-mxfp4"), "--target", "sm90,cpu-amx", "-o", out, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto summary = nlohmann::json::parse(r.out);
  EXPECT_EQ(summary["output"], out);
  ASSERT_EQ(summary["artifacts"].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const std::string device = i == 0 ? "sm90" : "cpu-amx";
    const auto& a = summary["artifacts"][i];
    EXPECT_EQ(a["device"], device);
    EXPECT_EQ(a["output"], out + "/" + device);
    EXPECT_EQ(a["layers"], 1);
    uint64_t bytes = 0;
    size_t files = 0;
    for (const auto& [name, content] : all_files(out + "/" + device)) {
      if (name == "moepack.json") continue;  // the manifest lists the other files
      bytes += content.size();
      ++files;
    }
    EXPECT_EQ(a["files"], files);
    EXPECT_EQ(a["bytes"], bytes);
  }
  EXPECT_TRUE(summary["seconds"].is_number());
}

// The progress line counts a layer done when every device has written it, and names the device
// of the tensor it packs.
TEST(ConvertSeveralTargets, ProgressCountsLayersDoneOnEveryDevice) {
  TempDir dir;
  const std::string src = dir.file("src");
  CommandResult r = run_moepack({"sample", "--family", "gpt-oss-mxfp4", "--layers", "3", "-o", src});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_moepack({"convert", src, "--target", "sm90,cpu-amx", "-o", dir.file("out"), "--threads", "1", "--progress"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::regex packing_line(R"(^layer (\d+)/3 .*packing model\.layers\.(\d+)\.mlp\.experts\.\S+ \(\d+ experts\) for (sm90|cpu-amx)$)");
  std::map<std::string, int> lines_per_device;
  std::istringstream lines(r.err);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, packing_line)) continue;
    EXPECT_EQ(std::stoi(m[1]), std::stoi(m[2])) << line;
    ++lines_per_device[m[3]];
  }
  EXPECT_GT(lines_per_device["sm90"], 0) << r.err;
  EXPECT_EQ(lines_per_device["sm90"], lines_per_device["cpu-amx"]) << r.err;
}

}  // namespace
}  // namespace moepack::test
