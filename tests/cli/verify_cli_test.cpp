// `moepack verify` through the binary: exit codes, the text and JSON reports, golden files.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace moepack::test {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

TEST(VerifyCli, ConvertedSamplesVerifyForAGpuAndTheCpuTarget) {
  TempDir dir;
  const std::string src = source_dir() + "/samples/gpt-oss-mxfp4";
  for (const char* target : {"sm90", "cpu-amx"}) {
    SCOPED_TRACE(target);
    const std::string out = dir.file(std::string("a.") + target);
    ASSERT_EQ(run_moepack({"convert", src, "--target", target, "-o", out, "-q"}).exit_code, 0);
    CommandResult r = run_moepack({"verify", out, "--source", src});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("ok   model.layers.0.mlp.experts"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("expert slabs equal to their layout's packing of the source"), std::string::npos) << r.out;
    CommandResult j = run_moepack({"verify", out, "--source", src, "--json", "--tokens", "3"});
    ASSERT_EQ(j.exit_code, 0) << j.err;
    json doc = json::parse(j.out);
    EXPECT_TRUE(doc["ok"].get<bool>());
    EXPECT_EQ(doc["tokens"], 3);
    EXPECT_EQ(doc["layers"][0]["compared_with"], "source");
    EXPECT_LE(doc["layers"][0]["max_rel_error"].get<double>(), doc["layers"][0]["tolerance"].get<double>());
  }
}

// MOEPACK_CPU_ISA starts the fast CPU experts' ordered list at the level it names (the portable
// one runs everywhere); an unknown name is a usage error that lists the levels.
TEST(VerifyCli, CpuIsaEnvironmentStartsTheKernelList) {
  TempDir dir;
  const std::string src = source_dir() + "/samples/gpt-oss-mxfp4", out = dir.file("a");
  ASSERT_EQ(run_moepack({"convert", src, "--target", "cpu-amx", "-o", out, "-q"}).exit_code, 0);
  struct Restore {
    ~Restore() { unsetenv("MOEPACK_CPU_ISA"); }
  } restore;
  setenv("MOEPACK_CPU_ISA", "scalar", 1);
  CommandResult r = run_moepack({"verify", out, "--source", src, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["layers"][0]["fast_cpu"]["isa"], "scalar");
  setenv("MOEPACK_CPU_ISA", "avx512", 1);
  CommandResult bad = run_moepack({"verify", out, "--source", src});
  EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
  EXPECT_NE(bad.err.find("MOEPACK_CPU_ISA=avx512 is not one of the CPU kernels' instruction sets (amx_bf16, avx512_bf16, avx2, scalar)"), std::string::npos)
      << bad.err;
}

TEST(VerifyCli, TamperedArtifactIsExitFiveAndGoldenRoundTrip) {
  TempDir dir;
  const std::string src = source_dir() + "/samples/quark-w-mxfp4";
  const std::string out = dir.file("a");
  ASSERT_EQ(run_moepack({"convert", src, "--target", "gfx950", "-o", out, "-q"}).exit_code, 0);
  ASSERT_EQ(run_moepack({"verify", out, "--write-golden", dir.file("g")}).exit_code, 0);
  CommandResult again = run_moepack({"verify", out, "--golden", dir.file("g"), "--json"});
  EXPECT_EQ(again.exit_code, 0) << again.out;
  EXPECT_EQ(json::parse(again.out)["layers"][0]["compared_with"], "golden");
  // One flipped byte in the packed data: the hashes no longer agree, exit 5.
  const std::string file = out + "/model.safetensors";
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(0, std::ios::end);
  const auto size = static_cast<std::streamoff>(f.tellg());
  f.seekg(size - 100);
  char c = 0;
  f.read(&c, 1);
  f.seekp(size - 100);
  c = static_cast<char>(c ^ 0x5A);
  f.write(&c, 1);
  f.close();
  CommandResult bad = run_moepack({"verify", out, "--golden", dir.file("g"), "--json"});
  EXPECT_EQ(bad.exit_code, 5) << bad.out;
  EXPECT_NE(bad.err.find("moepack: error: verification failed"), std::string::npos) << bad.err;
  json doc = json::parse(bad.out);
  EXPECT_FALSE(doc["ok"].get<bool>());
  EXPECT_FALSE(doc["integrity"]["problems"].empty());
}

TEST(VerifyCli, UsageAndBadInput) {
  TempDir dir;
  CommandResult both = run_moepack({"verify", dir.path(), "--golden", "a", "--write-golden", "b"});
  EXPECT_EQ(both.exit_code, 2) << both.err;
  CommandResult missing = run_moepack({"verify", dir.path(), "--json"});
  EXPECT_EQ(missing.exit_code, 4) << missing.err;
  EXPECT_EQ(json::parse(missing.out)["error"]["kind"], "bad_input");
}

}  // namespace
}  // namespace moepack::test
