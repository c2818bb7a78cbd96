// `moepack run` through the binary: the output file, the JSON summary, and the exit codes of
// moepack-run(1) (4 for inputs that break the contract, 2 for --layer problems).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "formats/safetensors/file.h"
#include "formats/safetensors/writer.h"
#include "support/test_support.h"

namespace moepack::test {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

void write_f32_input(const std::string& path, const std::vector<std::pair<std::string, std::vector<uint64_t>>>& tensors) {
  std::vector<st::TensorSpec> specs;
  for (const auto& [name, shape] : tensors) specs.push_back({name, DType::F32, shape});
  st::sort_like_reference_writer(specs);
  st::Writer w(path, specs);
  for (const auto& s : specs) {
    uint64_t n = 1;
    for (uint64_t d : s.shape) n *= d;
    std::vector<float> v(n);
    for (uint64_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 37 + 11) % 101) / 50.0f - 1.0f;
    w.write(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()), n * 4));
  }
  w.commit();
}

TEST(RunCli, RunsTheLayerAndPrintsASummary) {
  TempDir dir;
  const std::string art = dir.file("a");
  ASSERT_EQ(run_moepack({"convert", source_dir() + "/samples/gpt-oss-mxfp4", "--target", "sm90", "-o", art, "-q"}).exit_code, 0);
  write_f32_input(dir.file("x.safetensors"), {{"hidden_states", {4, 192}}, {"router_logits", {4, 4}}});
  CommandResult r = run_moepack({"run", art, "--input", dir.file("x.safetensors"), "-o", dir.file("y.safetensors"), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  json doc = json::parse(r.out);
  EXPECT_EQ(doc["layer"], "model.layers.0.mlp.experts");
  EXPECT_EQ(doc["backend"], "TRITON");
  EXPECT_EQ(doc["tokens"], 4);
  EXPECT_EQ(doc["hidden_size"], 192);
  EXPECT_EQ(doc["top_k"], 2);
  EXPECT_EQ(doc["routing"], "router_logits");
  EXPECT_EQ(doc["routing_method"], "RenormalizeNaive");
  EXPECT_EQ(doc["nonfinite_outputs"], 0);
  EXPECT_GT(doc["max_abs_output"].get<double>(), 0.0);
  st::File y(dir.file("y.safetensors"));
  ASSERT_NE(y.find("output"), nullptr);
  EXPECT_EQ(y.find("output")->shape, (std::vector<uint64_t>{4, 192}));
  EXPECT_EQ(y.find("topk_ids")->dtype, DType::I32);
  EXPECT_EQ(y.find("topk_weights")->shape, (std::vector<uint64_t>{4, 2}));
  EXPECT_EQ(y.header().metadata.at("layer"), "model.layers.0.mlp.experts");

  CommandResult text = run_moepack({"run", art, "--input", dir.file("x.safetensors"), "-o", dir.file("y2.safetensors"), "--layer", "model.layers.0.mlp.experts"});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("routed by RenormalizeNaive"), std::string::npos) << text.out;
  EXPECT_EQ(read_file(dir.file("y.safetensors")), read_file(dir.file("y2.safetensors"))) << "same inputs, same bytes";
}

TEST(RunCli, BadInputIsExitFourAndLayerProblemsExitTwo) {
  TempDir dir;
  const std::string art = dir.file("a");
  ASSERT_EQ(run_moepack({"convert", source_dir() + "/samples/gpt-oss-mxfp4", "--target", "cpu-amx", "-o", art, "-q"}).exit_code, 0);
  write_f32_input(dir.file("wide.safetensors"), {{"hidden_states", {2, 200}}, {"router_logits", {2, 4}}});
  CommandResult wide = run_moepack({"run", art, "--input", dir.file("wide.safetensors"), "-o", dir.file("y"), "--json"});
  EXPECT_EQ(wide.exit_code, 4) << wide.err;
  EXPECT_EQ(json::parse(wide.out)["error"]["kind"], "bad_input");
  EXPECT_NE(wide.err.find("tensor `hidden_states`"), std::string::npos) << wide.err;
  EXPECT_NE(wide.err.find("hidden size = 192"), std::string::npos) << wide.err;

  write_f32_input(dir.file("nolog.safetensors"), {{"hidden_states", {2, 192}}});
  CommandResult nolog = run_moepack({"run", art, "--input", dir.file("nolog.safetensors"), "-o", dir.file("y")});
  EXPECT_EQ(nolog.exit_code, 4) << nolog.err;
  EXPECT_NE(nolog.err.find("router_logits"), std::string::npos) << nolog.err;

  CommandResult missing = run_moepack({"run", art, "--input", dir.file("none.safetensors"), "-o", dir.file("y")});
  EXPECT_EQ(missing.exit_code, 4) << missing.err;

  write_f32_input(dir.file("x.safetensors"), {{"hidden_states", {2, 192}}, {"router_logits", {2, 4}}});
  CommandResult layer = run_moepack({"run", art, "--input", dir.file("x.safetensors"), "-o", dir.file("y"), "--layer", "model.layers.9.mlp.experts"});
  EXPECT_EQ(layer.exit_code, 2) << layer.err;
  EXPECT_NE(layer.err.find("model.layers.0.mlp.experts"), std::string::npos) << "the layers are listed: " << layer.err;
  CommandResult no_output = run_moepack({"run", art, "--input", dir.file("x.safetensors")});
  EXPECT_EQ(no_output.exit_code, 2) << no_output.err;
  EXPECT_FALSE(fs::exists(dir.file("y")));

  TempDir two;
  ASSERT_EQ(run_moepack({"sample", "--family", "gpt-oss-mxfp4", "--layers", "2", "-o", two.file("src")}).exit_code, 0);
  ASSERT_EQ(run_moepack({"convert", two.file("src"), "--target", "sm90", "-o", two.file("a"), "-q"}).exit_code, 0);
  CommandResult several = run_moepack({"run", two.file("a"), "--input", dir.file("x.safetensors"), "-o", dir.file("y")});
  EXPECT_EQ(several.exit_code, 2) << several.err;
  EXPECT_NE(several.err.find("--layer"), std::string::npos) << several.err;
  CommandResult picked = run_moepack({"run", two.file("a"), "--input", dir.file("x.safetensors"), "-o", dir.file("y"), "--layer", "model.layers.1.mlp.experts"});
  EXPECT_EQ(picked.exit_code, 0) << picked.err;
}

}  // namespace
}  // namespace moepack::test
