// The tensor-parallel artifact as a stock reader sees it: with --tp 2 every rank has a standard
// model-rankR.safetensors.index.json naming every tensor it loads, each in the file named, with
// the dtype and shape the manifest (packed) or the source (copied) gives; the ranks' slices
// differ; the manifest says its sizes are per rank; the bytes do not depend on the thread count;
// and one rank keeps the layout it had before (no rank files, no rank index, no scope key).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

#include "formats/artifact/manifest.h"
#include "formats/checkpoints/checkpoint.h"
#include "formats/safetensors/file.h"
#include "lib/runtime/artifact_check.h"
#include "lib/convert/executor.h"
#include "lib/convert/plan.h"
#include "lib/convert/target.h"
#include "support/test_support.h"

namespace moepack::convert {
namespace {
using runtime::check_artifact;
using runtime::ArtifactCheck;
namespace fs = std::filesystem;

struct TpCase {
  std::string sample;
  std::string target;
  uint64_t max_shard_bytes;  // small values split both the shared and the per-rank files
};

void PrintTo(const TpCase& c, std::ostream* os) { *os << c.sample << " on " << c.target << ", shards of " << c.max_shard_bytes; }

std::string sample_path(const std::string& name) { return test::source_dir() + "/samples/" + name; }

struct Converted {
  artifact::Manifest manifest;
  std::set<std::string> copied_tensors;  // the non-expert tensors, passed through unchanged
};

Converted convert(const TpCase& c, int tp, int threads, const std::string& out) {
  oracle::Deployment deployment = oracle::default_deployment(oracle::parse_target(c.target));
  deployment.parallel.tp = tp;
  ckpt::Checkpoint checkpoint = ckpt::open_checkpoint(sample_path(c.sample));
  ConvertRequest request;
  request.target_json = target_json(deployment);
  ConversionPlan plan = build_conversion_plan(checkpoint, decide_layers(checkpoint, deployment), request);
  ExecutorOptions options;
  options.threads = threads;
  options.max_shard_bytes = c.max_shard_bytes;
  Converted result;
  result.manifest = execute_plan(plan, out, options);
  for (const auto& p : plan.pass_through) result.copied_tensors.insert(p.name);
  return result;
}

class TensorParallelLayout : public ::testing::TestWithParam<TpCase> {};

TEST_P(TensorParallelLayout, EveryRankIndexIsACompleteStandardView) {
  const TpCase& c = GetParam();
  test::TempDir out;
  Converted converted = convert(c, 2, 2, out.path());
  const artifact::Manifest& m = converted.manifest;
  ASSERT_FALSE(m.layers.empty());
  st::ShardSet source(sample_path(c.sample));
  ckpt::Checkpoint checkpoint = ckpt::open_checkpoint(sample_path(c.sample));

  std::map<std::string, std::unique_ptr<st::File>> opened;
  auto file = [&](const std::string& name) -> const st::File& {
    auto& slot = opened[name];
    if (!slot) slot = std::make_unique<st::File>(out.file(name));
    return *slot;
  };

  // The shared index holds exactly the copied tensors; nothing in it is per rank.
  st::ShardIndex shared = st::parse_shard_index(out.file(kIndexFileName));
  std::set<std::string> shared_names;
  for (const auto& [name, shard] : shared.weight_map) shared_names.insert(name);
  EXPECT_EQ(shared_names, converted.copied_tensors);

  for (int rank : {0, 1}) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    st::ShardIndex view = st::parse_shard_index(out.file(rank_index_file_name(rank)));
    // What the manifest says this rank holds: name -> (file, dtype, shape).
    std::map<std::string, const artifact::PackedTensor*> packed;
    for (const auto& layer : m.layers)
      for (const auto& r : layer.ranks)
        if (r.rank == rank)
          for (const auto& [role, t] : r.tensors) packed[t.name] = &t;
    ASSERT_FALSE(packed.empty());
    EXPECT_EQ(view.weight_map.size(), converted.copied_tensors.size() + packed.size());

    uint64_t listed_bytes = 0;
    for (const auto& [name, shard] : view.weight_map) {
      SCOPED_TRACE(name + " in " + shard);
      ASSERT_EQ(shard.find('/'), std::string::npos);  // a plain name beside the index, as HF readers require
      ASSERT_TRUE(fs::exists(out.file(shard)));
      const st::TensorInfo* info = file(shard).find(name);
      ASSERT_NE(info, nullptr);
      listed_bytes += info->num_bytes();
      if (auto it = packed.find(name); it != packed.end()) {
        EXPECT_EQ(shard, it->second->file);
        EXPECT_EQ(std::string(dtype_name(info->dtype)), it->second->dtype);
        EXPECT_EQ(info->shape, it->second->shape);
      } else {
        ASSERT_TRUE(converted.copied_tensors.count(name));
        EXPECT_EQ(shard, shared.weight_map.at(name));
        auto original = source.find(name);
        ASSERT_TRUE(original.has_value());
        EXPECT_EQ(info->dtype, original->info->dtype);
        EXPECT_EQ(info->shape, original->info->shape);
      }
    }
    EXPECT_EQ(view.total_size, listed_bytes);
  }

  // Tensor parallelism slices every expert: the ranks' packed bytes differ, their shapes do not,
  // and the sizes the manifest gives are one rank's.
  for (const auto& layer : m.layers) {
    SCOPED_TRACE(layer.prefix);
    ASSERT_EQ(layer.ranks.size(), 2u);
    EXPECT_EQ(layer.intermediate_size_scope.value_or(""), artifact::kPerRankScope);
    const ckpt::MoeLayer* source_layer = checkpoint.find_layer(layer.prefix);
    ASSERT_NE(source_layer, nullptr);
    EXPECT_EQ(layer.intermediate_size * 2, source_layer->intermediate_size);
    for (const std::string role : {"w13_weight", "w2_weight"}) {
      const artifact::PackedTensor& t0 = layer.ranks[0].tensors.at(role);
      const artifact::PackedTensor& t1 = layer.ranks[1].tensors.at(role);
      EXPECT_EQ(t0.name, t1.name);
      EXPECT_NE(t0.file, t1.file);
      EXPECT_EQ(t0.shape, t1.shape);
      EXPECT_NE(t0.xxh3, t1.xxh3) << role;
      auto b0 = file(t0.file).data(*file(t0.file).find(t0.name));
      auto b1 = file(t1.file).data(*file(t1.file).find(t1.name));
      EXPECT_FALSE(std::equal(b0.begin(), b0.end(), b1.begin(), b1.end())) << role;
    }
  }

  ArtifactCheck check = check_artifact(out.path(), sample_path(c.sample));
  for (const auto& p : check.problems) ADD_FAILURE() << p;
  EXPECT_EQ(check.files_checked, m.files.size());
}

TEST_P(TensorParallelLayout, SameBytesForAnyThreadCount) {
  const TpCase& c = GetParam();
  test::TempDir one, two;
  convert(c, 2, 1, one.path());
  convert(c, 2, 2, two.path());
  auto a = test::all_files(one.path());
  EXPECT_TRUE(a.count(rank_index_file_name(1)));
  EXPECT_EQ(a, test::all_files(two.path()));
}

TEST_P(TensorParallelLayout, OneRankKeepsThePlainLayout) {
  const TpCase& c = GetParam();
  test::TempDir out;
  Converted converted = convert(c, 1, 2, out.path());
  for (const auto& [name, bytes] : test::all_files(out.path())) EXPECT_EQ(name.find("rank"), std::string::npos) << name;
  for (const auto& layer : converted.manifest.layers) EXPECT_FALSE(layer.intermediate_size_scope.has_value());
  auto manifest = test::read_file(out.file(artifact::kManifestFileName));
  EXPECT_EQ(std::string(manifest.begin(), manifest.end()).find("intermediate_size_scope"), std::string::npos);
  ArtifactCheck check = check_artifact(out.path(), sample_path(c.sample));
  for (const auto& p : check.problems) ADD_FAILURE() << p;
}

// gpt-oss (fused experts, TRITON swizzle on SM90) and a per-expert Quark checkpoint (the CPU
// backend's AMX packing), each in one file per group and split into many.
INSTANTIATE_TEST_SUITE_P(Samples, TensorParallelLayout,
                         ::testing::Values(TpCase{"gpt-oss-mxfp4", "sm90", 5'000'000'000}, TpCase{"gpt-oss-mxfp4", "sm90", 20'000},
                                           TpCase{"quark-w-mxfp4", "cpu-amx", 5'000'000'000}, TpCase{"quark-w-mxfp4", "cpu-amx", 8'000}),
                         [](const ::testing::TestParamInfo<TpCase>& info) {
                           std::string n = info.param.sample + "_" + info.param.target + "_" + std::to_string(info.param.max_shard_bytes);
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

// The checker notices a rank index that disagrees with the manifest or names a missing tensor.
TEST(TensorParallelLayoutCheck, ABrokenRankIndexIsAProblem) {
  test::TempDir out;
  TpCase c{"gpt-oss-mxfp4", "sm90", 5'000'000'000};
  convert(c, 2, 1, out.path());
  // Point rank 1's w13_weight at rank 0's file (the file hash check objects too; this looks
  // for the index check's own line).
  const std::string index_path = out.file(rank_index_file_name(1));
  auto bytes = test::read_file(index_path);
  std::string text(bytes.begin(), bytes.end());
  const std::string from = "\"model.layers.0.mlp.experts.w13_weight\": \"model-rank1.safetensors\"";
  ASSERT_NE(text.find(from), std::string::npos) << text;
  text.replace(text.find(from), from.size(), "\"model.layers.0.mlp.experts.w13_weight\": \"model-rank0.safetensors\"");
  test::write_text(index_path, text);
  ArtifactCheck check = check_artifact(out.path(), sample_path(c.sample));
  bool named = false;
  for (const auto& p : check.problems)
    named = named || (p.find(rank_index_file_name(1) + ": does not map `model.layers.0.mlp.experts.w13_weight`") != std::string::npos);
  EXPECT_TRUE(named);
}

}  // namespace
}  // namespace moepack::convert
