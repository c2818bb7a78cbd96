// The streaming executor on hand-made plans: file layout, sharding, hashes, copy-through,
// determinism across thread counts, and the staging directory's all-or-nothing behaviour.
#include <gtest/gtest.h>

#include <filesystem>

#include "formats/artifact/manifest.h"
#include "formats/safetensors/file.h"
#include "formats/safetensors/writer.h"
#include "lib/convert/executor.h"
#include "lib/convert/staging.h"
#include "lib/core/cancel.h"
#include "lib/core/error.h"
#include "lib/core/hash.h"
#include "support/test_support.h"

namespace moepack::convert {
namespace {
namespace fs = std::filesystem;

// A source directory with one shard holding two small non-expert tensors and a config file.
void make_source(const std::string& dir) {
  st::Writer w(dir + "/model.safetensors",
               {{"model.embed_tokens.weight", DType::BF16, {4, 3}}, {"model.norm.weight", DType::F32, {3}}});
  std::vector<uint8_t> embed(24), norm(12);
  for (size_t i = 0; i < embed.size(); ++i) embed[i] = static_cast<uint8_t>(i * 7);
  for (size_t i = 0; i < norm.size(); ++i) norm[i] = static_cast<uint8_t>(200 + i);
  w.write(embed);
  w.write(norm);
  w.commit();
  test::write_text(dir + "/config.json", R"({"model_type":"toy"})");
  fs::create_directories(dir + "/extra");
  test::write_text(dir + "/extra/notes.txt", "kept byte for byte\n");
}

// A packed tensor whose expert e slab is bytes (e * 31 + i) — enough to see order and content.
PackedTensorPlan toy_packed(const std::string& prefix, const std::string& role, uint64_t experts, uint64_t slab) {
  PackedTensorPlan t;
  t.role = role;
  t.name = prefix + "." + role;
  t.dtype = DType::U8;
  t.shape = {experts, slab};
  t.layout = "toy.identity";
  t.num_experts = experts;
  t.slab_bytes = slab;
  t.produce = [](uint64_t e, std::span<uint8_t> out) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(e * 31 + i);
  };
  return t;
}

ConversionPlan toy_plan(const st::ShardSet& source, const std::string& root, int tp) {
  ConversionPlan p;
  p.source_root = root;
  p.source_scheme = "toy";
  p.source_files = {root + "/model.safetensors"};
  p.copied_files = {"config.json", "extra/notes.txt"};
  for (const auto& name : source.names()) p.pass_through.push_back({name, *source.find(name)});
  LayerPlan l;
  l.manifest.prefix = "model.layers.0.mlp.experts";
  l.manifest.family = "mxfp4";
  l.manifest.backend = "TOY";
  l.manifest.num_experts = 5;
  for (int r = 0; r < tp; ++r) {
    RankPlan rp;
    rp.rank = r;
    rp.tensors.push_back(toy_packed(l.manifest.prefix, "w13_weight", 5, 1000 + static_cast<uint64_t>(r)));
    rp.tensors.push_back(toy_packed(l.manifest.prefix, "w2_weight", 5, 300));
    l.ranks.push_back(rp);
  }
  p.layers.push_back(l);
  p.tp_size = tp;
  p.target = {{"device", "toy"}, {"tp_size", tp}};
  return p;
}

TEST(Executor, WritesPackedAndPassThroughTensorsWithManifest) {
  test::TempDir src, out;
  make_source(src.path());
  st::ShardSet source(src.path());
  ConversionPlan plan = toy_plan(source, src.path(), 1);
  ExecutorOptions opt;
  opt.threads = 2;
  artifact::Manifest m = execute_plan(plan, out.path(), opt);

  st::ShardSet artifact_set(out.path() + "/model.safetensors");
  auto w13 = artifact_set.find("model.layers.0.mlp.experts.w13_weight");
  ASSERT_TRUE(w13.has_value());
  auto bytes = w13->data();
  ASSERT_EQ(bytes.size(), 5000u);
  EXPECT_EQ(bytes[2 * 1000 + 3], static_cast<uint8_t>(2 * 31 + 3));  // expert 2, byte 3
  EXPECT_EQ(xxh3_128_hex(bytes), m.layers[0].ranks[0].tensors.at("w13_weight").xxh3);
  // Non-expert tensors are copied unchanged.
  auto norm = artifact_set.find("model.norm.weight");
  ASSERT_TRUE(norm.has_value());
  auto src_norm = source.find("model.norm.weight")->data();
  EXPECT_TRUE(std::equal(src_norm.begin(), src_norm.end(), norm->data().begin(), norm->data().end()));
  // Other files byte for byte, the manifest lists every file with its hash.
  EXPECT_EQ(test::read_file(out.file("extra/notes.txt")), test::read_file(src.file("extra/notes.txt")));
  ASSERT_EQ(m.files.size(), 3u);
  for (const auto& f : m.files) EXPECT_EQ(f.xxh3, xxh3_128_hex(test::read_file(out.file(f.name)))) << f.name;
  EXPECT_EQ(m.source_files.size(), 1u);
  EXPECT_EQ(m.source_fingerprint.rfind("xxh3-128:", 0), 0u);
  artifact::Manifest back = artifact::read_manifest(out.file("moepack.json"));
  EXPECT_EQ(artifact::manifest_text(back), artifact::manifest_text(m));
}

// The source identity is the XXH3-128 of each whole shard, whether the copied tensors' ranges
// are hashed by the copy (a plan with the source's mappings) or read again (one without).
TEST(Executor, SourceHashIsTheWholeShardsHashEitherWay) {
  test::TempDir src;
  make_source(src.path());
  st::ShardSet source(src.path());
  const std::string want = xxh3_128_hex(test::read_file(src.file("model.safetensors")));
  std::string fingerprint;
  for (bool with_mappings : {false, true}) {
    test::TempDir out;
    ConversionPlan plan = toy_plan(source, src.path(), 1);
    if (with_mappings)
      for (const auto& f : source.files()) plan.source_mappings.push_back(f.get());
    artifact::Manifest m = execute_plan(plan, out.path(), {});
    ASSERT_EQ(m.source_files.size(), 1u);
    EXPECT_EQ(m.source_files[0].name, "model.safetensors");
    EXPECT_EQ(m.source_files[0].bytes, fs::file_size(src.file("model.safetensors")));
    EXPECT_EQ(m.source_files[0].xxh3, want) << (with_mappings ? "with" : "without") << " mappings";
    if (fingerprint.empty()) fingerprint = m.source_fingerprint;
    EXPECT_EQ(m.source_fingerprint, fingerprint);
  }
}

TEST(Executor, SameBytesForAnyThreadCount) {
  test::TempDir src;
  make_source(src.path());
  st::ShardSet source(src.path());
  std::string first;
  for (int threads : {1, 2, 5}) {
    test::TempDir out;
    ExecutorOptions opt;
    opt.threads = threads;
    execute_plan(toy_plan(source, src.path(), 1), out.path(), opt);
    std::string text = artifact::manifest_text(artifact::read_manifest(out.file("moepack.json")));
    if (first.empty()) first = text;
    EXPECT_EQ(text, first) << threads << " threads";
  }
}

TEST(Executor, ShardsBySizeAndWritesAnIndex) {
  test::TempDir src, out;
  make_source(src.path());
  st::ShardSet source(src.path());
  ExecutorOptions opt;
  opt.max_shard_bytes = 2000;  // w13 (5000 bytes) alone, the rest together
  auto shards = assign_shards(toy_plan(source, src.path(), 1), opt.max_shard_bytes);
  ASSERT_GE(shards.size(), 2u);
  for (const auto& s : shards) EXPECT_TRUE(s.data_bytes <= 2000 || s.tensor_names.size() == 1) << s.file_name;
  execute_plan(toy_plan(source, src.path(), 1), out.path(), opt);
  st::ShardSet reread(out.path());  // goes through model.safetensors.index.json
  EXPECT_TRUE(reread.has_index());
  EXPECT_TRUE(reread.find("model.layers.0.mlp.experts.w2_weight").has_value());
  EXPECT_TRUE(reread.find("model.embed_tokens.weight").has_value());
}

TEST(Executor, TensorParallelRanksGetTheirOwnFiles) {
  test::TempDir src, out;
  make_source(src.path());
  st::ShardSet source(src.path());
  artifact::Manifest m = execute_plan(toy_plan(source, src.path(), 2), out.path(), ExecutorOptions{});
  ASSERT_EQ(m.layers[0].ranks.size(), 2u);
  EXPECT_EQ(m.layers[0].ranks[1].tensors.at("w13_weight").file, "model-rank1.safetensors");
  st::File rank1(out.file("model-rank1.safetensors"));
  EXPECT_EQ(rank1.find("model.layers.0.mlp.experts.w13_weight")->num_bytes(), 5u * 1001u);
  // The shared index lists what every rank loads alike; each rank's own index is its complete
  // view, with the packed tensors' common names mapped to that rank's file.
  st::ShardIndex shared = st::parse_shard_index(out.file("model.safetensors.index.json"));
  EXPECT_EQ(shared.weight_map.count("model.layers.0.mlp.experts.w13_weight"), 0u);
  EXPECT_EQ(shared.weight_map.at("model.norm.weight"), "model.safetensors");
  EXPECT_EQ(shared.total_size, 24u + 12u);
  for (int rank : {0, 1}) {
    st::ShardIndex view = st::parse_shard_index(out.file(rank_index_file_name(rank)));
    const std::string own = "model-rank" + std::to_string(rank) + ".safetensors";
    EXPECT_EQ(view.weight_map.at("model.layers.0.mlp.experts.w13_weight"), own);
    EXPECT_EQ(view.weight_map.at("model.layers.0.mlp.experts.w2_weight"), own);
    EXPECT_EQ(view.weight_map.at("model.norm.weight"), "model.safetensors");
    EXPECT_EQ(view.weight_map.size(), 4u);
    EXPECT_EQ(view.total_size, 24u + 12u + 5u * (1000u + static_cast<uint64_t>(rank)) + 5u * 300u);
  }
  EXPECT_EQ(rank_index_file_name(1), "model-rank1.safetensors.index.json");
  // The manifest lists and hashes the indexes like every other file.
  size_t indexes = 0;
  for (const auto& f : m.files) indexes += f.name.ends_with(".safetensors.index.json");
  EXPECT_EQ(indexes, 3u);
}

TEST(Executor, OneRankWritesNoRankIndex) {
  test::TempDir src, out;
  make_source(src.path());
  st::ShardSet source(src.path());
  ExecutorOptions opt;
  opt.max_shard_bytes = 2000;  // several files, so the standard index is written
  execute_plan(toy_plan(source, src.path(), 1), out.path(), opt);
  EXPECT_FALSE(fs::exists(out.file(rank_index_file_name(0))));
  st::ShardIndex index = st::parse_shard_index(out.file("model.safetensors.index.json"));
  EXPECT_EQ(index.weight_map.size(), 4u);  // everything, packed tensors included
  EXPECT_EQ(index.total_size, 24u + 12u + 5000u + 1500u);
}

TEST(Executor, APackedNameThatIsAlsoSharedIsRefused) {
  // A rank's index could not hold both tensors: refused before anything is written.
  test::TempDir src, out;
  make_source(src.path());
  st::ShardSet source(src.path());
  ConversionPlan plan = toy_plan(source, src.path(), 2);
  plan.layers[0].ranks[1].tensors[1].name = "model.norm.weight";
  EXPECT_THROW(execute_plan(plan, out.path(), ExecutorOptions{}), Error);
  EXPECT_FALSE(fs::exists(out.file("model.safetensors")));
}

TEST(Staging, ExistingOutputNeedsForce) {
  test::TempDir dir;
  std::string out = dir.file("OUT");
  fs::create_directories(out);
  try {
    StagingDirectory s(out, false);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_NE(std::string(e.what()).find("--force"), std::string::npos);
  }
  {
    StagingDirectory s(out, true);
    test::write_text(s.file("a.txt"), "new");
    s.commit();
  }
  EXPECT_TRUE(fs::exists(out + "/a.txt"));
  EXPECT_FALSE(fs::exists(out + ".tmp"));
  EXPECT_FALSE(fs::exists(out + "/" + kStagingOwnerFile));
}

TEST(Staging, UncommittedLeavesNothingAndStaleLeftoversAreCleaned) {
  test::TempDir dir;
  std::string out = dir.file("OUT");
  {
    StagingDirectory s(out, false);
    test::write_text(s.file("partial"), "x");
  }
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out + ".tmp"));
  // A kill -9 leaves OUT.tmp with the dead owner's pid: the next run takes it over.
  fs::create_directories(out + ".tmp");
  test::write_text(out + ".tmp/" + kStagingOwnerFile, "999999999\n");
  test::write_text(out + ".tmp/junk", "x");
  StagingDirectory s(out, false);
  EXPECT_FALSE(fs::exists(out + ".tmp/junk"));
}

TEST(Executor, CancellationStopsBetweenExperts) {
  test::TempDir src, out;
  make_source(src.path());
  st::ShardSet source(src.path());
  ConversionPlan plan = toy_plan(source, src.path(), 1);
  plan.layers[0].ranks[0].tensors[0].produce = [](uint64_t, std::span<uint8_t>) { request_cancel(15); };
  EXPECT_THROW(execute_plan(plan, out.path(), ExecutorOptions{}), Cancelled);
  reset_cancel();
}

}  // namespace
}  // namespace moepack::convert
