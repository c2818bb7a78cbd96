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
  EXPECT_NE(bad.err.find("MOEPACK_CPU_ISA=avx512 is not one of the CPU kernels' instruction sets (amx_bf16, avx512_bf16, avx512f, avx2, scalar)"), std::string::npos)
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

// Quick mode through the binary, as a CI job on a big model would use it: a 4-layer model, 2
// layers run (the first and the last), everything hashed, the text and the JSON saying so; the
// same JSON for any --threads; --layers 0 and a progress line forced into a log.
TEST(VerifyCli, QuickModeSaysWhatRanAndWhatWasOnlyHashed) {
  TempDir dir;
  const std::string src = dir.file("src"), out = dir.file("a");
  ASSERT_EQ(run_moepack({"sample", "--family", "gpt-oss-mxfp4", "--layers", "4", "-o", src}).exit_code, 0);
  ASSERT_EQ(run_moepack({"convert", src, "--target", "sm90", "-o", out, "-q"}).exit_code, 0);
  CommandResult text = run_moepack({"verify", out, "--source", src, "--layers", "2"});
  ASSERT_EQ(text.exit_code, 0) << text.out << text.err;
  EXPECT_NE(text.out.find("quick mode 2 of 4 MoE layers checked against the source and run; the others only hashed"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("ok   model.layers.0.mlp.experts"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("ok   model.layers.3.mlp.experts"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("model.layers.1.mlp.experts"), std::string::npos) << text.out;
  std::string first;
  for (const char* threads : {"1", "2", "5"}) {
    CommandResult j = run_moepack({"verify", out, "--source", src, "--layers", "2", "--threads", threads, "--json"});
    ASSERT_EQ(j.exit_code, 0) << j.err;
    if (first.empty()) first = j.out;
    EXPECT_EQ(j.out, first) << "--threads " << threads;
  }
  json doc = json::parse(first);
  EXPECT_EQ(doc["layers_run"], 2);
  EXPECT_EQ(doc["layers_total"], 4);
  ASSERT_EQ(doc["layers"].size(), 4u);
  EXPECT_EQ(doc["layers"][0]["run"], true);
  EXPECT_EQ(doc["layers"][1]["run"], false);
  EXPECT_EQ(doc["layers"][1]["compared_with"], nullptr);
  EXPECT_NE(doc["layers"][1]["note"].get<std::string>().find("not run: quick mode"), std::string::npos);
  EXPECT_EQ(doc["integrity"]["tensors_checked"], 4 * 6) << "every layer's tensors hashed";

  CommandResult zero = run_moepack({"verify", out, "--layers", "0", "--json"});
  EXPECT_EQ(zero.exit_code, 2) << zero.out << zero.err;
  EXPECT_EQ(json::parse(zero.out)["error"]["kind"], "usage") << zero.out;

  // A value the flag parser itself refuses is the same usage error, in JSON too.
  CommandResult unparsable = run_moepack({"verify", out, "--tokens", "many", "--json"});
  EXPECT_EQ(unparsable.exit_code, 2);
  EXPECT_EQ(json::parse(unparsable.out)["error"]["kind"], "usage") << unparsable.out;
  EXPECT_NE(unparsable.err.find("moepack: error: Could not convert: --tokens = many (see moepack verify --help)"), std::string::npos) << unparsable.err;

  // A count flag says what it wants, for a word as for a number out of its range.
  CommandResult word = run_moepack({"verify", out, "--layers", "abc", "--json"});
  EXPECT_EQ(word.exit_code, 2);
  EXPECT_EQ(json::parse(word.out)["error"]["kind"], "usage") << word.out;
  EXPECT_NE(word.err.find("--layers: `abc` is not a whole number from 1 to 4294967296"), std::string::npos) << word.err;
  CommandResult negative = run_moepack({"verify", out, "--threads", "-1"});
  EXPECT_EQ(negative.exit_code, 2);
  EXPECT_NE(negative.err.find("--threads: `-1` is not a whole number from 0 to 65536"), std::string::npos) << negative.err;

  CommandResult logged = run_moepack({"verify", out, "--source", src, "--progress"});
  ASSERT_EQ(logged.exit_code, 0) << logged.err;
  EXPECT_NE(logged.err.find("layer 0/4"), std::string::npos) << logged.err;
  EXPECT_NE(logged.err.find("against the source"), std::string::npos) << logged.err;
}

}  // namespace
}  // namespace moepack::test
