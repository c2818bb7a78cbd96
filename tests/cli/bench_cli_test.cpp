// `moepack bench experts` through the binary: the threads follow the CPUs the process may use
// (here an affinity mask set by taskset), --threads wins, and --json names the level that ran
// and the peer that won. Timings are not asserted: the machine is shared.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace moepack::test {
namespace {
using nlohmann::json;

// The binary run under `taskset -c 0` (an affinity mask of one CPU), stdout and exit code kept.
CommandResult run_pinned_to_one_cpu(const TempDir& dir, const std::vector<std::string>& args) {
  auto quote = [](const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  };
  std::string cmd = "taskset -c 0 " + quote(moepack_binary());
  for (const auto& a : args) cmd += " " + quote(a);
  cmd += " </dev/null >" + quote(dir.file("out")) + " 2>" + quote(dir.file("err"));
  const int status = std::system(cmd.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  const std::vector<uint8_t> out = read_file(dir.file("out")), err = read_file(dir.file("err"));
  r.out.assign(out.begin(), out.end());
  r.err.assign(err.begin(), err.end());
  return r;
}

TEST(BenchCli, ThreadsFollowTheAffinityMaskAndTheFlagWins) {
  if (std::system("taskset -c 0 true >/dev/null 2>&1") != 0) GTEST_SKIP() << "taskset (util-linux) cannot run here";
  TempDir dir;
  const std::string art = dir.file("a");
  ASSERT_EQ(run_moepack({"convert", source_dir() + "/samples/gpt-oss-mxfp4", "--target", "cpu-amx", "-o", art, "-q"}).exit_code, 0);
  CommandResult pinned = run_pinned_to_one_cpu(dir, {"bench", "experts", art, "--tokens", "1,6", "--json"});
  ASSERT_EQ(pinned.exit_code, 0) << pinned.err;
  const json doc = json::parse(pinned.out);
  EXPECT_EQ(doc["machine"]["threads"], 1) << "one CPU allowed, one thread";
  EXPECT_EQ(doc["machine"]["allowed_cpus"], 1);
  EXPECT_TRUE(doc["machine"]["isa"].is_string());
  ASSERT_TRUE(doc["machine"]["kernel_choices"].is_array());
  for (const json& choice : doc["machine"]["kernel_choices"]) EXPECT_TRUE(choice == "vnni" || choice == "avx512f_for_bf16") << choice;
  EXPECT_TRUE(doc["machine"]["last_level_cache_bytes"].is_number());
  EXPECT_TRUE(doc["machine"]["onednn_isa"].is_string() || doc["machine"]["onednn_f32_gflops"].is_null()) << "oneDNN names the set it ran";
  ASSERT_EQ(doc["results"].size(), 2u);
  for (const json& r : doc["results"]) {
    // The first version's keys keep their place and type; the peer's dtype is the faster one.
    for (const char* key : {"tokens", "ms", "weight_bytes", "gbps", "fraction_of_stream", "gflops"}) EXPECT_TRUE(r[key].is_number()) << key;
    // Later additions: the routings the timed runs took in turn, and the experts' bytes they
    // touch together (at least one routing's).
    EXPECT_GE(r["routings"].get<uint64_t>(), 1u);
    EXPECT_GE(r["rotation_bytes"].get<uint64_t>(), r["weight_bytes"].get<uint64_t>());
    if (r["onednn_f32_gflops"].is_null()) {
      EXPECT_TRUE(r["peer_dtype"].is_null());
      continue;
    }
    const double f32 = r["onednn_f32_gflops"], bf16 = r["onednn_bf16_gflops"].is_null() ? 0.0 : r["onednn_bf16_gflops"].get<double>();
    EXPECT_EQ(r["peer_dtype"], bf16 > f32 ? "bf16" : "f32");
    EXPECT_DOUBLE_EQ(r["ratio_to_onednn"].get<double>(), r["gflops"].get<double>() / std::max(f32, bf16));
  }
  const json& shapes = doc["machine"]["onednn_shapes"];
  ASSERT_EQ(shapes.size(), 2u);
  EXPECT_EQ(shapes[0]["k"], shapes[1]["n"]) << "w13 reads the hidden size, w2 writes it";

  CommandResult flag = run_pinned_to_one_cpu(dir, {"bench", "experts", art, "--tokens", "1", "--threads", "3", "--json"});
  ASSERT_EQ(flag.exit_code, 0) << flag.err;
  EXPECT_EQ(json::parse(flag.out)["machine"]["threads"], 3) << "--threads wins over the mask";
}

// A level forced below this machine's best is compared with oneDNN held to that level's tier: an
// AVX2 kernel against AVX2 oneDNN, not against the AVX-512 one this machine would otherwise run.
TEST(BenchCli, AForcedLevelHoldsTheOneDnnPeerToItsTier) {
  TempDir dir;
  const std::string art = dir.file("a");
  ASSERT_EQ(run_moepack({"convert", source_dir() + "/samples/gpt-oss-mxfp4", "--target", "cpu-amx", "-o", art, "-q"}).exit_code, 0);
  struct Restore {
    ~Restore() { unsetenv("MOEPACK_CPU_ISA"); }
  } restore;
  setenv("MOEPACK_CPU_ISA", "avx2", 1);
  CommandResult forced = run_moepack({"bench", "experts", art, "--tokens", "6", "--json"});
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  const json machine = json::parse(forced.out)["machine"];
  if (machine["onednn_isa"].is_null()) GTEST_SKIP() << "this build has no oneDNN";
  if (machine["isa"] == "scalar") GTEST_SKIP() << "this machine runs no AVX2";
  EXPECT_EQ(machine["isa"], "avx2");
  // Held to avx2 below this machine's best; where avx2 is the best level nothing is held, and
  // oneDNN may add AVX-VNNI (avx2_vnni) on an AVX2-only CPU that has it.
  const std::string onednn = machine["onednn_isa"];
  EXPECT_TRUE(onednn == "avx2" || onednn == "avx2_vnni") << onednn;
}

// The choices within a level follow MOEPACK_CPU_VNNI and MOEPACK_CPU_AVX512F_FOR_BF16, and
// report only where they take effect; a value that is not 0 or 1 is a usage error (exit 2) that
// --json reports as such.
TEST(BenchCli, KernelChoicesFollowTheEnvironmentAndBadValuesAreRefused) {
  TempDir dir;
  const std::string art = dir.file("a");
  ASSERT_EQ(run_moepack({"convert", source_dir() + "/samples/gpt-oss-mxfp4", "--target", "cpu-amx", "-o", art, "-q"}).exit_code, 0);
  struct Restore {
    ~Restore() {
      unsetenv("MOEPACK_CPU_ISA");
      unsetenv("MOEPACK_CPU_VNNI");
      unsetenv("MOEPACK_CPU_AVX512F_FOR_BF16");
    }
  } restore;
  auto choices = [&] {
    CommandResult r = run_moepack({"bench", "experts", art, "--tokens", "1", "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(r.out)["machine"];
  };
  setenv("MOEPACK_CPU_ISA", "avx2", 1);
  setenv("MOEPACK_CPU_VNNI", "0", 1);
  json machine = choices();
  if (machine["isa"] != "avx2") GTEST_SKIP() << "this machine runs no AVX2";
  EXPECT_EQ(machine["kernel_choices"], json::array());
  setenv("MOEPACK_CPU_AVX512F_FOR_BF16", "1", 1);
  EXPECT_EQ(choices()["kernel_choices"], json::array()) << "the stand-in takes effect at the BF16 levels only";
  setenv("MOEPACK_CPU_ISA", "avx512_bf16", 1);
  machine = choices();
  if (machine["isa"] == "avx512_bf16") {
    EXPECT_EQ(machine["kernel_choices"], json::array({"avx512f_for_bf16"}));
  }
  setenv("MOEPACK_CPU_VNNI", "yes", 1);
  CommandResult bad = run_moepack({"bench", "experts", art, "--tokens", "1", "--json"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.out.find("MOEPACK_CPU_VNNI=yes is neither 0 nor 1"), std::string::npos) << bad.out;
}

}  // namespace
}  // namespace moepack::test
