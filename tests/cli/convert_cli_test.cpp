// `moepack convert` as a user runs it: the artifact appears complete or not at all, the bytes do
// not depend on --threads, refusals write nothing, a signal leaves nothing behind.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <regex>
#include <sstream>
#include <thread>
#include <fcntl.h>
#include <unistd.h>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include "lib/synth/synth.h"
#include "support/test_support.h"

namespace moepack::test {
namespace {
namespace fs = std::filesystem;

std::string gpt_oss_sample() { return source_dir() + "/samples/gpt-oss-mxfp4"; }

TEST(ConvertCli, WritesACompleteArtifactAndCopiesEverythingElse) {
  TempDir dir;
  std::string out = dir.file("out");
  CommandResult r = run_moepack({"convert", gpt_oss_sample(), "--target", "sm90", "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(out + ".tmp"));
  auto manifest = nlohmann::json::parse(read_file(out + "/moepack.json"));
  EXPECT_EQ(manifest["format"], "moepack/1");
  EXPECT_EQ(manifest["layers"][0]["backend"], "TRITON");
  EXPECT_EQ(manifest["layers"][0]["ranks"][0]["tensors"]["w13_weight"]["layout"], "triton_kernels.HopperMXValue(mx_axis=1,v3.5.1)");
  // Every non-safetensors file of the source is in the artifact, byte for byte.
  for (const auto& e : fs::directory_iterator(gpt_oss_sample())) {
    std::string name = e.path().filename().string();
    if (e.path().extension() == ".safetensors" || name == "model.safetensors.index.json") continue;
    EXPECT_EQ(read_file(out + "/" + name), read_file(e.path().string())) << name;
  }
}

TEST(ConvertCli, SameBytesForAnyThreadCount) {
  TempDir dir;
  ASSERT_EQ(run_moepack({"convert", gpt_oss_sample(), "--target", "sm100", "-o", dir.file("a"), "--threads", "1"}).exit_code, 0);
  ASSERT_EQ(run_moepack({"convert", gpt_oss_sample(), "--target", "sm100", "-o", dir.file("b"), "--threads", "3"}).exit_code, 0);
  EXPECT_EQ(all_files(dir.file("a")), all_files(dir.file("b")));
}

// Twelve layers, so that name order (1, 10, 11, 2, ...) and the model's order differ: the
// progress line's count of layers done must be the number of the layer whose tensor it names
// (layers are written in natural order), for every packed tensor of every layer.
TEST(ConvertCli, ProgressCountsTheLayersItNames) {
  TempDir dir;
  const std::string src = dir.file("src");
  CommandResult r = run_moepack({"sample", "--family", "gpt-oss-mxfp4", "--layers", "12", "-o", src});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_moepack({"convert", src, "--target", "sm90", "-o", dir.file("out"), "--threads", "1", "--progress"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::regex packing_line(R"(^layer (\d+)/12 .*packing model\.layers\.(\d+)\.mlp\.experts\.)");
  std::vector<int> layers_named;
  std::istringstream lines(r.err);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, packing_line)) continue;
    EXPECT_EQ(std::stoi(m[1]), std::stoi(m[2])) << line;
    if (layers_named.empty() || layers_named.back() != std::stoi(m[2])) layers_named.push_back(std::stoi(m[2]));
  }
  std::vector<int> in_order(12);
  for (int i = 0; i < 12; ++i) in_order[i] = i;
  EXPECT_EQ(layers_named, in_order) << r.err;
}

TEST(ConvertCli, ExistingOutputNeedsForce) {
  TempDir dir;
  std::string out = dir.file("out");
  fs::create_directories(out);
  write_text(out + "/keep", "x");
  CommandResult r = run_moepack({"convert", gpt_oss_sample(), "--target", "sm90", "-o", out});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--force"), std::string::npos);
  EXPECT_TRUE(fs::exists(out + "/keep"));
  ASSERT_EQ(run_moepack({"convert", gpt_oss_sample(), "--target", "sm90", "-o", out, "--force"}).exit_code, 0);
  EXPECT_FALSE(fs::exists(out + "/keep"));
  EXPECT_TRUE(fs::exists(out + "/moepack.json"));
}

TEST(ConvertCli, RefusalsWriteNothing) {
  TempDir dir;
  std::string out = dir.file("out");
  // An explicit backend the device cannot run: vLLM's ValueError, exit 3.
  CommandResult r = run_moepack({"convert", gpt_oss_sample(), "--target", "sm90", "--moe-backend", "flashinfer_trtllm", "-o", out});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("ValueError"), std::string::npos) << r.err;
  // A layout vLLM's code does not define (PyTorch's KleidiAI pack): refused by name, never approximated.
  r = run_moepack({"convert", source_dir() + "/samples/ct-w4a8-int8", "--target", "cpu-arm", "-o", out});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("KleidiAI"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not implemented byte-exactly"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out + ".tmp"));
  // Online quantization (vLLM quantizes the 16-bit experts while loading): plan answers it,
  // convert does not quantize and says so. Even on MXFP4, whose layouts exist.
  r = run_moepack({"plan", source_dir() + "/samples/qwen3-moe-bf16", "--target", "gfx942", "--quantization", "mxfp4"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Mxfp4OnlineMoEMethod"), std::string::npos) << r.out;
  r = run_moepack({"convert", source_dir() + "/samples/qwen3-moe-bf16", "--target", "gfx942", "--quantization", "mxfp4", "-o", out});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("Mxfp4OnlineMoEMethod quantizes the 16-bit experts"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out + ".tmp"));
}

TEST(ConvertCli, DryRunWritesNothingAndDescribesEveryTensor) {
  TempDir dir;
  std::string out = dir.file("out");
  CommandResult r = run_moepack({"convert", gpt_oss_sample(), "--target", "sm90", "--tp", "2", "-o", out, "--dry-run", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(out));
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["layers"][0]["ranks"].size(), 2u);
  EXPECT_TRUE(j["layers"][0]["ranks"][1]["tensors"].contains("w2_weight_scale"));
  bool rank_file = false;
  for (const auto& f : j["files"]) rank_file = rank_file || f["file"] == "model-rank1.safetensors";
  EXPECT_TRUE(rank_file) << r.out;
}

// --tp 2 through the binary: one standard index per rank beside the shared one, the same bytes
// for any --threads, and --tp-rank writes that rank's files and index only.
TEST(ConvertCli, TensorParallelRanksGetAnIndexEach) {
  TempDir dir;
  const std::string quark = source_dir() + "/samples/quark-w-mxfp4";
  for (const char* threads : {"1", "2"})
    ASSERT_EQ(run_moepack({"convert", quark, "--target", "cpu-amx", "--tp", "2", "-o", dir.file(std::string("t") + threads), "--threads", threads}).exit_code, 0);
  auto files = all_files(dir.file("t1"));
  EXPECT_EQ(files, all_files(dir.file("t2")));
  for (const char* rank : {"0", "1"}) {
    auto index = nlohmann::json::parse(files.at(std::string("model-rank") + rank + ".safetensors.index.json"));
    EXPECT_EQ(index["weight_map"]["model.layers.0.mlp.experts.w13_weight"], std::string("model-rank") + rank + ".safetensors");
    EXPECT_EQ(index["weight_map"]["model.norm.weight"], "model.safetensors");
  }
  auto shared = nlohmann::json::parse(files.at("model.safetensors.index.json"));
  EXPECT_FALSE(shared["weight_map"].contains("model.layers.0.mlp.experts.w13_weight"));
  EXPECT_FALSE(shared.contains("rank_weight_maps"));
  auto manifest = nlohmann::json::parse(files.at("moepack.json"));
  EXPECT_EQ(manifest["layers"][0]["intermediate_size_scope"], "per_rank");

  ASSERT_EQ(run_moepack({"convert", quark, "--target", "cpu-amx", "--tp", "2", "--tp-rank", "1", "-o", dir.file("r1")}).exit_code, 0);
  EXPECT_TRUE(fs::exists(dir.file("r1/model-rank1.safetensors.index.json")));
  EXPECT_FALSE(fs::exists(dir.file("r1/model-rank0.safetensors.index.json")));
  EXPECT_FALSE(fs::exists(dir.file("r1/model-rank0.safetensors")));
}

// A layer that hits a known kernel defect (lib/oracle/hazards) is converted, as vLLM would run
// it, with one warning on stderr naming the layers; --json keeps stdout one document.
TEST(ConvertCli, HazardIsAWarningAndTheArtifactIsWritten) {
  TempDir dir;
  synth::SampleOptions options;
  options.hidden = 352;
  options.layers = 2;
  synth::write_sample("gpt-oss-mxfp4", dir.file("h352"), options);
  const std::string warning =
      "moepack: warning: 2 layers model.layers.0.mlp.experts .. model.layers.1.mlp.experts: known kernel defect "
      "triton_kernels-3.5.1-sm90-partial-k-tile: ";
  for (bool as_json : {false, true}) {
    SCOPED_TRACE(as_json);
    const std::string out = dir.file(as_json ? "out-json" : "out");
    std::vector<std::string> args = {"convert", dir.file("h352"), "--target", "sm90", "-o", out};
    if (as_json) args.push_back("--json");
    const CommandResult r = run_moepack(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find(warning), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find(warning), r.err.rfind("moepack: warning:")) << "one warning for both layers: " << r.err;
    EXPECT_TRUE(fs::exists(out + "/moepack.json"));
    if (as_json) {
      EXPECT_EQ(nlohmann::json::parse(r.out)["layers"], 2);
    }
  }
  // The shipped sample (hidden 192) and the same checkpoint on SM100 hit nothing.
  const CommandResult clean = run_moepack({"convert", gpt_oss_sample(), "--target", "sm90", "-o", dir.file("clean")});
  ASSERT_EQ(clean.exit_code, 0) << clean.err;
  EXPECT_EQ(clean.err.find("warning"), std::string::npos) << clean.err;
  const CommandResult blackwell = run_moepack({"convert", dir.file("h352"), "--target", "sm100", "-o", dir.file("sm100")});
  ASSERT_EQ(blackwell.exit_code, 0) << blackwell.err;
  EXPECT_EQ(blackwell.err.find("warning"), std::string::npos) << blackwell.err;
}

TEST(ConvertCli, BadFlagsAreUsageErrors) {
  TempDir dir;
  EXPECT_EQ(run_moepack({"convert", gpt_oss_sample(), "--target", "sm999", "-o", dir.file("o")}).exit_code, 2);
  EXPECT_EQ(run_moepack({"convert", gpt_oss_sample(), "--target", "sm90", "-o", dir.file("o"), "--max-shard-size", "5XB"}).exit_code, 2);
  EXPECT_EQ(run_moepack({"convert", gpt_oss_sample(), "--target", "sm90"}).exit_code, 2);
  EXPECT_EQ(run_moepack({"convert", dir.file("missing"), "--target", "sm90", "-o", dir.file("o")}).exit_code, 4);
}

// A conversion big enough to still be running when the signal comes: a real-shape gpt-oss-20b
// layer set (sparse, so it costs no disk), converted with one thread.
TEST(ConvertCli, SignalLeavesNoOutputAndALaterRunSucceeds) {
  TempDir dir;
  std::string src = dir.file("src");
  ASSERT_EQ(run_moepack({"sample", "--family", "gpt-oss-mxfp4", "--real-shape", "gpt-oss-20b", "--sparse", "--layers", "2", "-o", src}).exit_code, 0);
  std::string out = dir.file("out");
  for (int sig : {SIGINT, SIGTERM}) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int devnull = ::open("/dev/null", O_WRONLY);
      dup2(devnull, 1);
      dup2(devnull, 2);
      execl(moepack_binary().c_str(), "moepack", "convert", src.c_str(), "--target", "sm90", "-o", out.c_str(), "--threads", "1",
            "--allow-bad-values", static_cast<char*>(nullptr));
      _exit(127);
    }
    // Wait until the staging directory exists, then interrupt.
    for (int i = 0; i < 2000 && !fs::exists(out + ".tmp"); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    kill(pid, sig);
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      // Finished before the signal arrived: then the artifact must be complete.
      EXPECT_TRUE(fs::exists(out + "/moepack.json"));
      fs::remove_all(out);
    } else {
      EXPECT_TRUE(WIFSIGNALED(status)) << "status " << status;
      if (WIFSIGNALED(status)) {
        EXPECT_EQ(WTERMSIG(status), sig);
      }
      EXPECT_FALSE(fs::exists(out)) << "signal " << sig;
    }
    EXPECT_FALSE(fs::exists(out + ".tmp")) << "signal " << sig;
  }
  CommandResult r = run_moepack({"convert", src, "--target", "sm90", "-o", out, "--allow-bad-values"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(out + "/moepack.json"));
}

}  // namespace
}  // namespace moepack::test
