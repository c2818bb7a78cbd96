// x86 CPU MoE conversions (targets cpu-amx and cpu-avx512) against bytes produced by the REAL
// upstream code, vLLM's compiled CPU weight packs included, end to end.
//
// tests/golden/make_cpu_goldens.py compiled vLLM e9d1398d9's csrc/cpu/sgl-kernels/gemm.cpp
// (convert_weight_packed, convert_scale_packed), gemm_int4.cpp (convert_weight_packed_scale_zp)
// and csrc/cpu/cpu_fused_moe.cpp (prepack_moe_weight) unchanged with the flags of vLLM's
// AVX512+AMX extension, on an AMX host, and ran vLLM's own Python over the repository's samples
// and seeded synthetic checkpoints: INT4 W4A16 (GPTQ, AWQ, compressed-tensors) and unquantized
// BF16 through create_weights, RoutedExperts.weight_loader and the CPU
// process_weights_after_loading whole; FP8 block, INT8 W8A8 and MXFP4 in part (stand-in
// parameters loaded by the real loader, then the upstream preparation run whole: the cases
// marked "partial"). tests/packers/golden/README.md says how, on what, and what was stood in for.
//
// For each case ("golden_layer_cases" in golden_cpu.safetensors) this test converts the same
// checkpoint with moepack for the same target and parallelism, checks that the oracle picks the
// CPU backend with vLLM's experts class, and that every tensor vLLM's layer then holds for the
// kernel is in the artifact under its role and rank with vLLM's dtype, shape and bytes: compared
// whole where the golden stores them, by SHA-256 otherwise. For whole cases the artifact holds
// nothing else.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "support/golden_layers.h"

namespace moepack::convert {
namespace {
using test::golden::Output;

std::string golden_file() { return test::source_dir() + "/tests/packers/golden/golden_cpu.safetensors"; }

struct RankCase {
  std::vector<Output> outputs;   // what vLLM holds
  std::vector<std::string> empty;  // parameters vLLM holds with no elements
};

struct LayerCase {
  std::string name, sample, checkpoint, sha256, target, backend, experts_class, method;
  int tp = 1;
  bool partial = false;  // only some of the layer's tensors were made by upstream
  std::vector<RankCase> ranks;
};

void PrintTo(const LayerCase& c, std::ostream* os) { *os << c.name; }

std::vector<LayerCase> load_cases() {
  std::vector<LayerCase> cases;
  // Empty when the file is missing or unreadable: CpuGoldenFile reports it.
  for (const auto& j : test::golden::golden_metadata(golden_file(), "golden_layer_cases")) {
    LayerCase c;
    c.name = j.at("name");
    c.sample = j.at("sample");
    c.checkpoint = j.at("checkpoint");
    c.sha256 = j.at("sha256");
    c.target = j.at("target");
    c.backend = j.at("backend");
    c.experts_class = j.at("experts_class");
    c.method = j.at("method");
    c.tp = j.at("tp");
    c.partial = j.at("partial");
    for (const auto& r : j.at("ranks")) {
      if (r.at("rank").get<size_t>() != c.ranks.size()) throw std::runtime_error(c.name + ": ranks out of order");
      RankCase rank;
      rank.outputs = test::golden::outputs_from_json(r.at("outputs"));
      rank.empty = r.at("empty").get<std::vector<std::string>>();
      c.ranks.push_back(std::move(rank));
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

const std::vector<LayerCase>& all_cases() {
  static const std::vector<LayerCase> cases = load_cases();
  return cases;
}

// One rank's tensors against what vLLM holds on that rank.
void check_rank(const std::string& out, const st::File& golden, const std::map<std::string, artifact::PackedTensor>& tensors,
                const RankCase& rank, bool partial) {
  for (const Output& o : rank.outputs) test::golden::check_output(out, golden, tensors, o);
  // What vLLM holds with no elements (AutoGPTQ's sort indices on CPU) the artifact leaves out.
  for (const std::string& role : rank.empty) EXPECT_EQ(tensors.count(role), 0u) << role << " is empty in vLLM's layer";
  // A whole case: the artifact holds nothing the kernel reads that vLLM does not hold.
  if (partial) return;
  for (const auto& entry : tensors) {
    const std::string& role = entry.first;
    EXPECT_TRUE(std::any_of(rank.outputs.begin(), rank.outputs.end(), [&](const Output& o) { return o.role == role; }))
        << "the artifact has " << role << ", which vLLM's layer does not hold after process_weights_after_loading";
  }
}

class CpuGolden : public ::testing::TestWithParam<LayerCase> {};

TEST_P(CpuGolden, ConvertsToTheBytesUpstreamHolds) {
  const LayerCase& c = GetParam();
  const st::File golden(golden_file());
  test::TempDir dir;
  const std::string ckpt_dir = test::golden::write_checkpoint(c.sample, c.checkpoint, golden, dir.path());
  ASSERT_EQ(test::golden::checkpoint_sha256(ckpt_dir), c.sha256)
      << (c.sample.empty() ? "the stored checkpoint is damaged"
                           : "samples/" + c.sample + " changed since the goldens were made: rerun tests/golden/make_cpu_goldens.py");
  const std::string out = dir.path() + "/out";
  const artifact::Manifest m = test::golden::convert_for(ckpt_dir, {c.target, "", "", c.tp, false, {}, ""}, out);
  ASSERT_EQ(m.layers.size(), 1u);
  ASSERT_EQ(m.layers[0].backend, c.backend);
  EXPECT_EQ(m.layers[0].experts_class, c.experts_class);
  ASSERT_EQ(m.layers[0].ranks.size(), c.ranks.size());
  for (size_t rank = 0; rank < c.ranks.size(); ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    ASSERT_EQ(m.layers[0].ranks[rank].rank, static_cast<int>(rank));
    check_rank(out, golden, m.layers[0].ranks[rank].tensors, c.ranks[rank], c.partial);
  }
}

INSTANTIATE_TEST_SUITE_P(UpstreamCpu, CpuGolden, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<LayerCase>& info) { return test::golden::case_name(info.param); });

TEST(CpuGoldenFile, RanTheCompiledPacksOnEveryFamilyAndBothParallelisms) {
  const st::File f(golden_file());
  const auto& meta = f.header().metadata;
  ASSERT_TRUE(meta.count("provenance"));
  const auto provenance = nlohmann::json::parse(meta.at("provenance"));
  EXPECT_EQ(provenance.at("vllm"), "e9d1398d9");
  EXPECT_TRUE(provenance.at("compat").empty()) << provenance.dump();  // the compiled ops ran, not a dry run
  EXPECT_EQ(provenance.at("ops").at("sources").size(), 5u) << provenance.dump();
  const auto flags = provenance.at("cpu_flags").get<std::vector<std::string>>();
  for (const char* want : {"avx512_bf16", "avx512_vnni", "amx_bf16", "amx_tile"})
    EXPECT_NE(std::find(flags.begin(), flags.end(), want), flags.end()) << "made on a host without " << want;
  std::set<std::string> seen;
  for (const LayerCase& c : all_cases()) seen.insert(c.method + "/" + c.target + "/tp" + std::to_string(c.tp));
  for (const char* want : {"wna16/cpu-amx/tp1", "wna16/cpu-amx/tp2", "bf16/cpu-amx/tp1", "bf16/cpu-amx/tp2", "bf16/cpu-avx512/tp1",
                           "bf16/cpu-avx512/tp2", "fp8/cpu-amx/tp1", "int8/cpu-amx/tp1", "int8/cpu-amx/tp2",
                           "gpt-oss-mxfp4/cpu-amx/tp1", "gpt-oss-mxfp4/cpu-amx/tp2", "quark-mxfp4/cpu-amx/tp1",
                           "quark-mxfp4/cpu-amx/tp2"})
    EXPECT_TRUE(seen.count(want)) << want << " has no golden layer case";
}

}  // namespace
}  // namespace moepack::convert
