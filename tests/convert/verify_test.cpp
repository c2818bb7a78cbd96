// `verify` proves by running: it must fail when the packed weights are wrong even though every
// hash agrees with the manifest, pin byte-stable golden files, and say which layers it could not
// run.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "formats/artifact/golden.h"
#include "formats/artifact/manifest.h"
#include "formats/checkpoints/checkpoint.h"
#include "lib/convert/executor.h"
#include "lib/convert/plan.h"
#include "lib/convert/target.h"
#include "lib/convert/verify.h"
#include "lib/core/error.h"
#include "lib/core/hash.h"
#include "lib/core/mapped_file.h"
#include "support/test_support.h"

namespace moepack::convert {
namespace {
namespace fs = std::filesystem;

std::string sample(const std::string& name) { return test::source_dir() + "/samples/" + name; }

void convert_sample(const std::string& name, const std::string& target, const std::string& out, int tp = 1, int threads = 0) {
  ckpt::Checkpoint ck = ckpt::open_checkpoint(sample(name));
  oracle::Deployment dep = oracle::default_deployment(oracle::parse_target(target));
  dep.parallel.tp = tp;
  ConvertRequest req;
  req.target_json = target_json(dep);
  ExecutorOptions eo;
  eo.threads = threads;
  fs::create_directories(out);  // the executor writes into a staging directory that exists
  execute_plan(build_conversion_plan(ck, decide_layers(ck, dep), req), out, eo);
}

std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// Flips bits of one packed tensor's middle byte and rewrites the manifest's hashes to match, so
// only running the experts (or the source's layout proof) can tell.
void corrupt_consistently(const std::string& dir, const std::string& role) {
  const std::string manifest_path = dir + "/moepack.json";
  artifact::Manifest m = artifact::read_manifest(manifest_path);
  artifact::PackedTensor& t = m.layers[0].ranks[0].tensors.at(role);
  const std::string file = dir + "/" + t.file;
  std::vector<uint8_t> bytes = file_bytes(file);
  {
    st::File f(file);
    const st::TensorInfo* info = f.find(t.name);
    ASSERT_NE(info, nullptr);
    const uint64_t at = f.header().data_start() + info->begin + info->num_bytes() / 2;
    bytes[at] ^= 0x77;
    std::vector<uint8_t> tensor(bytes.begin() + static_cast<std::ptrdiff_t>(f.header().data_start() + info->begin),
                                bytes.begin() + static_cast<std::ptrdiff_t>(f.header().data_start() + info->begin + info->num_bytes()));
    t.xxh3 = xxh3_128_hex(tensor);
  }
  std::ofstream(file, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  for (auto& fe : m.files)
    if (fe.name == t.file) fe.xxh3 = xxh3_128_hex(bytes);
  std::ofstream(manifest_path, std::ios::trunc) << artifact::manifest_text(m);
}

TEST(Verify, WrongPackedWeightsFailEvenWithConsistentHashes) {
  test::TempDir dir;
  const std::string out = dir.file("a");
  convert_sample("gpt-oss-mxfp4", "sm90", out);
  corrupt_consistently(out, "w2_weight");
  VerifyOptions o;
  o.artifact = out;
  VerifyReport hashes_only = verify_artifact(o);
  EXPECT_TRUE(hashes_only.integrity.ok()) << "the manifest was made to agree";
  o.source = sample("gpt-oss-mxfp4");
  VerifyReport r = verify_artifact(o);
  EXPECT_FALSE(r.ok());
  ASSERT_EQ(r.layers.size(), 1u);
  EXPECT_FALSE(r.layers[0].ok);
  EXPECT_GT(r.layers[0].max_rel_error, r.layers[0].tolerance);
  EXPECT_FALSE(r.integrity.ok()) << "the layout proof also sees the slab";
}

TEST(Verify, GoldenFilesAreByteStableAndCatchChanges) {
  test::TempDir dir;
  const std::string a1 = dir.file("a1"), a2 = dir.file("a2");
  convert_sample("quark-w-mxfp4", "sm90", a1, 2, 1);
  convert_sample("quark-w-mxfp4", "sm90", a2, 2, 2);
  VerifyOptions o;
  o.artifact = a1;
  o.tokens = 5;
  o.seed = 42;
  o.write_golden = dir.file("g1.golden");
  ASSERT_TRUE(verify_artifact(o).ok());
  o.artifact = a2;
  o.write_golden = dir.file("g2.golden");
  ASSERT_TRUE(verify_artifact(o).ok());
  EXPECT_EQ(file_bytes(dir.file("g1.golden")), file_bytes(dir.file("g2.golden"))) << "same bytes for any --threads";
  artifact::Golden g = artifact::read_golden(dir.file("g1.golden"));
  EXPECT_EQ(g.seed, 42u);
  EXPECT_EQ(g.tokens, 5u);
  ASSERT_EQ(g.outputs.size(), 1u);
  EXPECT_EQ(g.outputs[0].shape, (std::vector<uint64_t>{5, 128}));
  EXPECT_EQ(g.tensor_hashes.size(), 8u);  // 4 roles x 2 ranks

  VerifyOptions check;
  check.artifact = a1;
  check.golden = dir.file("g1.golden");
  VerifyReport same = verify_artifact(check);
  EXPECT_TRUE(same.ok());
  EXPECT_EQ(same.tokens, 5u) << "the golden file's seed and tokens are used";
  EXPECT_EQ(same.layers[0].compared_with, "golden");

  corrupt_consistently(a1, "w13_weight");
  VerifyReport changed = verify_artifact(check);
  EXPECT_FALSE(changed.ok());
  EXPECT_FALSE(changed.golden_problems.empty()) << "the tensor hash differs from the pinned one";
}

TEST(Verify, WithoutSourceOrGoldenItRunsAndSaysSo) {
  test::TempDir dir;
  convert_sample("quark-w-mxfp6-e3m2", "gfx950", dir.file("a"));
  VerifyOptions o;
  o.artifact = dir.file("a");
  VerifyReport r = verify_artifact(o);
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(r.layers[0].compared_with.empty());
  EXPECT_EQ(r.integrity.expert_slabs_checked, 0u);
}

TEST(Verify, OptionsThatCannotWorkAreUsageErrors) {
  VerifyOptions o;
  o.artifact = "/nonexistent";
  o.golden = "a";
  o.write_golden = "b";
  try {
    verify_artifact(o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::usage);
  }
}

}  // namespace
}  // namespace moepack::convert
