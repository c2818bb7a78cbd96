// `verify` proves by running: it must fail when the packed weights are wrong even though every
// hash agrees with the manifest, pin byte-stable golden files, and say which layers it could not
// run.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <fstream>

#include <nlohmann/json.hpp>

#include "formats/artifact/golden.h"
#include "formats/artifact/manifest.h"
#include "formats/checkpoints/checkpoint.h"
#include "lib/convert/executor.h"
#include "lib/convert/plan.h"
#include "lib/convert/target.h"
#include "lib/runtime/verify.h"
#include "lib/core/error.h"
#include "lib/core/hash.h"
#include "lib/core/mapped_file.h"
#include "lib/synth/synth.h"
#include "packers/registry.h"
#include "support/artifacts.h"
#include "support/test_support.h"

namespace moepack::runtime {
namespace {
namespace fs = std::filesystem;

std::string sample(const std::string& name) { return test::source_dir() + "/samples/" + name; }

using test::convert_checkpoint;

void convert_sample(const std::string& name, const std::string& target, const std::string& out, int tp = 1, int threads = 0) {
  convert_checkpoint(sample(name), target, out, tp, threads);
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

// A slab whose values are right but whose padding is not what the layout writes: the hashes
// were made to agree and the emulation never reads padding, so only the source check (which
// packs the source again and compares every byte) can see it.
TEST(Verify, PaddingChangedConsistentlyIsFoundAgainstTheSource) {
  test::TempDir dir;
  const std::string out = dir.file("a");
  convert_sample("gpt-oss-mxfp4", "sm90", out);
  const std::string manifest_path = out + "/moepack.json";
  artifact::Manifest m = artifact::read_manifest(manifest_path);
  artifact::PackedTensor& t = m.layers[0].ranks[0].tensors.at("w2_weight_scale");
  const std::string file = out + "/" + t.file;
  std::vector<uint8_t> bytes = file_bytes(file);
  uint64_t begin = 0, length = 0;
  {
    st::File f(file);
    const st::TensorInfo* info = f.find(t.name);
    ASSERT_NE(info, nullptr);
    begin = f.header().data_start() + info->begin;
    length = info->num_bytes();
  }
  // The last byte of expert 0's slab that its unpack never reads (HopperMXScale pads the scale
  // groups to 4 per row and the rows to the warp tiles: [192, 6] is stored as [8, 256]).
  const uint64_t slab = length / m.layers[0].num_experts;
  auto layout = packers::make_layout(t.layout);
  auto unpacked = [&](const std::vector<uint8_t>& all) {
    OwnedTensor c(*dtype_from_name(t.canonical_dtype), t.canonical_shape);
    layout->unpack(std::span<const uint8_t>(all).subspan(static_cast<size_t>(begin), static_cast<size_t>(slab)), c);
    return c.bytes;
  };
  const std::vector<uint8_t> original = unpacked(bytes);
  std::optional<uint64_t> padding;
  for (uint64_t i = slab; i-- > 0 && !padding;) {
    bytes[begin + i] ^= 0x11;
    if (unpacked(bytes) == original) padding = i;
    else bytes[begin + i] ^= 0x11;
  }
  ASSERT_TRUE(padding) << "the sample's w2 scale slab has no padding to change";
  t.xxh3 = xxh3_128_hex(std::span<const uint8_t>(bytes).subspan(static_cast<size_t>(begin), static_cast<size_t>(length)));
  std::ofstream(file, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  for (auto& fe : m.files)
    if (fe.name == t.file) fe.xxh3 = xxh3_128_hex(bytes);
  std::ofstream(manifest_path, std::ios::trunc) << artifact::manifest_text(m);

  VerifyOptions o;
  o.artifact = out;
  EXPECT_TRUE(verify_artifact(o).ok()) << "without the source, nothing reads the padding";
  o.source = sample("gpt-oss-mxfp4");
  VerifyReport r = verify_artifact(o);
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(r.layers[0].ok) << "the values are right";
  ASSERT_EQ(r.integrity.problems.size(), 1u);
  EXPECT_NE(r.integrity.problems[0].find("w2_weight_scale (rank 0): expert 0 unpacks to the source's bytes, but its padding differs from what the layout writes (first at packed byte " +
                                          std::to_string(*padding) + ")"),
            std::string::npos)
      << r.integrity.problems[0];
}

TEST(Verify, SampledLayersSpreadEvenlyWithFirstAndLast) {
  EXPECT_EQ(sampled_layers(24, 4), (std::vector<size_t>{0, 8, 15, 23}));
  EXPECT_EQ(sampled_layers(24, 2), (std::vector<size_t>{0, 23}));
  EXPECT_EQ(sampled_layers(24, 1), (std::vector<size_t>{0}));
  EXPECT_EQ(sampled_layers(5, 4), (std::vector<size_t>{0, 1, 3, 4}));
  EXPECT_EQ(sampled_layers(3, 7), (std::vector<size_t>{0, 1, 2}));
  for (size_t total : {2u, 3u, 10u, 61u, 94u})
    for (uint64_t count = 1; count <= total; ++count) {
      const std::vector<size_t> s = sampled_layers(total, count);
      ASSERT_EQ(s.size(), count);
      EXPECT_TRUE(std::is_sorted(s.begin(), s.end()) && std::adjacent_find(s.begin(), s.end()) == s.end()) << total << " " << count;
      EXPECT_EQ(s.front(), 0u);
      if (count > 1) {
        EXPECT_EQ(s.back(), total - 1);
      }
    }
}

// Quick mode on a 5-layer model: 2 layers checked and run, all tensors hashed; the golden file of
// a full run still agrees (the layers not run are not expected to have outputs), a tampered
// tensor in a layer not run is still found by its hash, and the report is the same for any
// thread count.
TEST(Verify, QuickModeRunsASpreadOfLayersAndStillHashesEveryTensor) {
  test::TempDir dir;
  synth::SampleOptions so;
  so.layers = 5;
  so.seed = 11;
  synth::write_sample("gpt-oss-mxfp4", dir.file("src"), so);
  const std::string out = dir.file("a");
  convert_checkpoint(dir.file("src"), "sm90", out);

  VerifyOptions full;
  full.artifact = out;
  full.source = dir.file("src");
  full.write_golden = dir.file("full.golden");
  VerifyReport all = verify_artifact(full);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all.layers_run, 5u);

  VerifyOptions quick;
  quick.artifact = out;
  quick.source = dir.file("src");
  quick.sample_layers = 2;
  quick.golden = dir.file("full.golden");
  for (int threads : {1, 3}) {
    quick.threads = threads;
    VerifyReport r = verify_artifact(quick);
    EXPECT_TRUE(r.ok()) << (r.golden_problems.empty() ? "" : r.golden_problems[0]);
    EXPECT_EQ(r.layers_run, 2u);
    ASSERT_EQ(r.layers.size(), 5u);
    for (size_t i = 0; i < 5; ++i) {
      EXPECT_EQ(r.layers[i].run, i == 0 || i == 4) << i;
      if (r.layers[i].run) {
        EXPECT_EQ(r.layers[i].compared_with, "source+golden");
        EXPECT_EQ(r.layers[i].max_abs_error, all.layers[i].max_abs_error) << "the same run as the full one";
      } else {
        EXPECT_NE(r.layers[i].note.find("not run: quick mode (--layers 2 of 5)"), std::string::npos) << r.layers[i].note;
      }
    }
    EXPECT_EQ(r.integrity.tensors_checked, all.integrity.tensors_checked) << "every tensor is hashed";
    EXPECT_EQ(r.integrity.expert_slabs_checked * 5, all.integrity.expert_slabs_checked * 2) << "the source check covers the layers run";
  }

  // A tensor of layer 2 (not run) changed without a consistent manifest: its hash says so.
  const artifact::Manifest m = artifact::read_manifest(out + "/moepack.json");
  const artifact::PackedTensor& t = m.layers[2].ranks[0].tensors.at("w13_weight");
  std::vector<uint8_t> bytes = file_bytes(out + "/" + t.file);
  {
    st::File f(out + "/" + t.file);
    bytes[f.header().data_start() + f.find(t.name)->begin] ^= 0x01;
  }
  std::ofstream(out + "/" + t.file, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  quick.golden.reset();
  VerifyReport tampered = verify_artifact(quick);
  EXPECT_FALSE(tampered.ok());
  bool named = false;
  for (const auto& p : tampered.integrity.problems) named = named || p.find(t.name + " (rank 0): XXH3-128 differs from the manifest") != std::string::npos;
  EXPECT_TRUE(named);
}

TEST(Verify, TheReportIsTheSameForAnyThreadCount) {
  test::TempDir dir;
  const std::string out = dir.file("a");
  convert_sample("modelopt-nvfp4", "sm100", out, 2);
  VerifyOptions o;
  o.artifact = out;
  o.source = sample("modelopt-nvfp4");
  o.tokens = 13;
  std::vector<std::vector<uint8_t>> goldens;
  std::vector<VerifyReport> reports;
  for (int threads : {1, 2, 5}) {
    o.threads = threads;
    o.write_golden = dir.file("g" + std::to_string(threads));
    reports.push_back(verify_artifact(o));
    goldens.push_back(file_bytes(*o.write_golden));
  }
  for (size_t i = 1; i < reports.size(); ++i) {
    EXPECT_EQ(goldens[i], goldens[0]) << "outputs pinned bit for bit";
    EXPECT_EQ(reports[i].integrity.problems, reports[0].integrity.problems);
    EXPECT_EQ(reports[i].integrity.expert_slabs_checked, reports[0].integrity.expert_slabs_checked);
    ASSERT_EQ(reports[i].layers.size(), reports[0].layers.size());
    for (size_t l = 0; l < reports[0].layers.size(); ++l) EXPECT_EQ(reports[i].layers[l].max_abs_error, reports[0].layers[l].max_abs_error);
  }
  EXPECT_TRUE(reports[0].ok());
}

// Weights whose pre-activations are large and cancel (every E8M0 scale of a gpt-oss sample
// raised 2^8, as random checkpoints have them) amplify any error of the hidden states: verify
// feeds BF16 hidden states, as a BF16 model's MoE layer gets them, so the fast CPU experts'
// BF16 input is exact and what remains is their own rounding (the activation between w13 and
// w2). With float hidden states rounded inside the experts, this layer was 2e-2 off.
TEST(Verify, FastCpuExpertsPassOnWeightsWithLargePreActivations) {
  test::TempDir dir;
  const std::string src = dir.file("src"), out = dir.file("a");
  fs::copy(sample("gpt-oss-mxfp4"), src, fs::copy_options::recursive);
  for (const auto& entry : fs::directory_iterator(src)) {
    if (entry.path().extension() != ".safetensors") continue;
    std::vector<uint8_t> bytes = file_bytes(entry.path().string());
    {
      st::File f(entry.path().string());
      for (const auto& info : f.header().tensors) {
        if (info.name.find("_scales") == std::string::npos) continue;
        const uint64_t begin = f.header().data_start() + info.begin;
        for (uint64_t i = begin; i < begin + info.num_bytes(); ++i) bytes[i] = static_cast<uint8_t>(std::min(bytes[i] + 8, 254));
      }
    }
    std::ofstream(entry.path(), std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  convert_checkpoint(src, "cpu-amx", out);
  VerifyOptions o;
  o.artifact = out;
  o.source = src;
  o.tokens = 16;
  const VerifyReport r = verify_artifact(o);
  ASSERT_FALSE(r.layers.empty());
  for (const auto& l : r.layers) {
    EXPECT_TRUE(l.ok) << l.prefix << ": " << l.note;
    EXPECT_FALSE(l.fast_cpu_isa.empty()) << "the fast CPU experts ran";
    EXPECT_LT(l.fast_max_rel_error, 2e-3) << l.prefix;
  }
}

}  // namespace
}  // namespace moepack::runtime
