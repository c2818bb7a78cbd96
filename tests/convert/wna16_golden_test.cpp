// Integer weight-only (WNA16) Marlin conversions against bytes produced by the REAL upstream
// code, vLLM's compiled CUDA repack included, end to end.
//
// tests/golden/make_wna16_goldens.py built vLLM e9d1398d9's gptq_marlin_repack.cu and
// awq_marlin_repack.cu (unchanged) on an SM90 GPU, loaded GPTQ, AWQ and compressed-tensors
// checkpoints into one layer per tensor-parallel rank through the quantization method's own
// create_weights and RoutedExperts' own weight_loader, and ran the method's
// process_weights_after_loading for the MARLIN backend (convert_to_wna16_moe_kernel_format:
// padding, act-order sort, the compiled repack, scale and zero-point permutations), and handed
// compressed-tensors FP8 experts to prepare_fp8_moe_layer_for_marlin (the "partial" cases).
// tests/packers/golden/README.md says how, on what, and what was stood in for.
//
// Beyond Marlin, it ran the same methods for the TRITON and XPU backends (the transposes and
// uint8 views of convert_to_wna16_moe_kernel_format, _process_weights_xpu) and
// CompressedTensorsW8A8Int8MoEMethod on TRITON.
//
// For each case ("golden_layer_cases" in golden_wna16.safetensors) this test converts the same
// checkpoint (a repository sample, or a synthetic one stored in the golden file) with moepack for
// the same deployment, checks that the oracle picks the case's backend, and that every tensor vLLM's layer
// then holds for the kernel is in the artifact under its role and rank with vLLM's dtype, shape
// and bytes: compared whole where the golden stores them, by SHA-256 otherwise.
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

std::string golden_file() { return test::source_dir() + "/tests/packers/golden/golden_wna16.safetensors"; }
// MoeWNA16 (--quantization moe_wna16) on TRITON: tests/golden/make_moe_wna16_goldens.py, the same schema.
std::string moe_wna16_golden_file() { return test::source_dir() + "/tests/packers/golden/golden_moe_wna16.safetensors"; }

struct LayerCase {
  std::string file;  // the golden file holding the case
  std::string name, sample, checkpoint, sha256, target, moe_backend, model_dtype, backend, method;
  std::string quantization;  // --quantization ("" = the checkpoint's own)
  int tp = 1;
  bool ep = false;
  bool partial = false;  // only some of the layer's tensors were made by upstream (FP8: the Marlin preparation)
  std::vector<std::string> notes;
  std::vector<std::vector<Output>> ranks;  // per rank, what vLLM holds
};

void PrintTo(const LayerCase& c, std::ostream* os) { *os << c.name; }

std::vector<LayerCase> load_cases(const std::string& file) {
  std::vector<LayerCase> cases;
  // Empty when the file is missing or unreadable: Wna16GoldenFile reports it.
  for (const auto& j : test::golden::golden_metadata(file, "golden_layer_cases")) {
    LayerCase c;
    c.file = file;
    c.quantization = j.value("quantization", "");
    c.name = j.at("name");
    c.sample = j.at("sample");
    c.checkpoint = j.at("checkpoint");
    c.sha256 = j.at("sha256");
    c.target = j.at("target");
    c.moe_backend = j.at("moe_backend");
    c.model_dtype = j.at("model_dtype");
    c.backend = j.at("backend");
    c.method = j.at("method");
    c.tp = j.at("tp");
    c.ep = j.at("ep");
    c.notes = j.at("notes").get<std::vector<std::string>>();
    c.partial = j.value("partial", false);
    for (const auto& r : j.at("ranks")) {
      if (r.at("rank").get<size_t>() != c.ranks.size()) throw std::runtime_error(c.name + ": ranks out of order");
      c.ranks.push_back(test::golden::outputs_from_json(r.at("outputs")));
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

const std::vector<LayerCase>& all_cases() {
  static const std::vector<LayerCase> cases = load_cases(golden_file());
  return cases;
}

const std::vector<LayerCase>& moe_wna16_cases() {
  static const std::vector<LayerCase> cases = load_cases(moe_wna16_golden_file());
  return cases;
}

// One rank's tensors against what vLLM holds on that rank.
void check_rank(const std::string& out, const st::File& golden, const std::map<std::string, artifact::PackedTensor>& tensors,
                const std::vector<Output>& outputs, bool partial) {
  for (const Output& o : outputs) test::golden::check_output(out, golden, tensors, o);
  // The artifact holds nothing the kernel reads that vLLM does not hold: every other role of
  // the artifact is one vLLM keeps outside the recorded list (CompressedTensors' weight_shape).
  if (partial) return;
  for (const auto& entry : tensors) {
    const std::string& role = entry.first;
    if (std::none_of(outputs.begin(), outputs.end(), [&](const Output& o) { return o.role == role; })) {
      EXPECT_NE(role.find("weight_shape"), std::string::npos) << "the artifact has " << role << ", which vLLM's Marlin layer does not hold";
    }
  }
}

class Wna16Golden : public ::testing::TestWithParam<LayerCase> {};

TEST_P(Wna16Golden, ConvertsToTheBytesUpstreamHolds) {
  const LayerCase& c = GetParam();
  for (const std::string& note : c.notes) RecordProperty("upstream_note", note);
  const st::File golden(c.file);
  test::TempDir dir;
  const std::string ckpt_dir = test::golden::write_checkpoint(c.sample, c.checkpoint, golden, dir.path());
  ASSERT_EQ(test::golden::checkpoint_sha256(ckpt_dir), c.sha256)
      << (c.sample.empty() ? "the stored checkpoint is damaged"
                           : "samples/" + c.sample + " changed since the goldens were made: rerun the script that made " + c.file);
  const std::string out = dir.path() + "/out";
  const artifact::Manifest m = test::golden::convert_for(ckpt_dir, {c.target, c.moe_backend, c.model_dtype, c.tp, c.ep, {}, c.quantization}, out);
  ASSERT_EQ(m.layers.size(), 1u);
  ASSERT_EQ(m.layers[0].backend, c.backend);
  ASSERT_EQ(m.layers[0].ranks.size(), c.ranks.size());
  for (size_t rank = 0; rank < c.ranks.size(); ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    ASSERT_EQ(m.layers[0].ranks[rank].rank, static_cast<int>(rank));
    check_rank(out, golden, m.layers[0].ranks[rank].tensors, c.ranks[rank], c.partial);
  }
}

INSTANTIATE_TEST_SUITE_P(UpstreamWna16, Wna16Golden, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<LayerCase>& info) { return test::golden::case_name(info.param); });
INSTANTIATE_TEST_SUITE_P(UpstreamMoeWna16, Wna16Golden, ::testing::ValuesIn(moe_wna16_cases()),
                         [](const ::testing::TestParamInfo<LayerCase>& info) { return test::golden::case_name(info.param); });

TEST(Wna16GoldenFile, RanTheCompiledRepackOnEveryMethodAndBothParallelisms) {
  const st::File f(golden_file());
  const auto& meta = f.header().metadata;
  ASSERT_TRUE(meta.count("provenance"));
  const auto provenance = nlohmann::json::parse(meta.at("provenance"));
  EXPECT_EQ(provenance.at("vllm"), "e9d1398d9");
  EXPECT_EQ(provenance.at("device"), "cuda");
  EXPECT_TRUE(provenance.at("compat").empty()) << provenance.dump();  // the compiled ops ran, not a dry run
  EXPECT_EQ(provenance.at("ops").at("sources").size(), 3u) << provenance.dump();
  std::set<std::string> seen;
  for (const LayerCase& c : all_cases()) seen.insert(c.method + "/tp" + std::to_string(c.tp));
  for (const char* want : {"gptq/tp1", "gptq/tp2", "awq/tp1", "awq/tp2", "compressed-tensors/tp1", "compressed-tensors/tp2"})
    EXPECT_TRUE(seen.count(want)) << want << " has no golden layer case";
  // The other backends' layouts, run through the methods' own process_weights_after_loading.
  std::set<std::string> backends;
  for (const LayerCase& c : all_cases()) backends.insert(c.method + "/" + c.backend + "/tp" + std::to_string(c.tp));
  for (const char* want : {"compressed-tensors/TRITON/tp1", "compressed-tensors/TRITON/tp2", "compressed-tensors/XPU/tp1",
                           "compressed-tensors/XPU/tp2", "gptq/XPU/tp1", "gptq/XPU/tp2", "ct-w8a8-int8/TRITON/tp1",
                           "ct-w8a8-int8/TRITON/tp2"})
    EXPECT_TRUE(backends.count(want)) << want << " has no golden layer case";
}

// The MoeWNA16 goldens ran vLLM's own MoeWNA16Method (create_weights, its weight loader wrapper,
// process_weights_after_loading) over both checkpoint layouts, both widths, TP 1, 2 and 4, and
// group sizes the loader repeats (group_size_div_factor 2 and 4).
TEST(Wna16GoldenFile, MoeWna16RanUpstreamOverBothLayoutsWidthsAndTheGroupRepeat) {
  const st::File f(moe_wna16_golden_file());
  const auto provenance = nlohmann::json::parse(f.header().metadata.at("provenance"));
  EXPECT_EQ(provenance.at("vllm"), "e9d1398d9");
  EXPECT_TRUE(provenance.at("compat").empty()) << provenance.dump();
  std::set<std::string> seen;
  std::set<int> factors;
  for (const auto& j : test::golden::golden_metadata(moe_wna16_golden_file(), "golden_layer_cases")) {
    EXPECT_EQ(j.at("quantization"), "moe_wna16");
    EXPECT_EQ(j.at("backend"), "TRITON");
    seen.insert(j.at("method").get<std::string>() + "/tp" + std::to_string(j.at("tp").get<int>()));
    for (const auto& r : j.at("ranks")) factors.insert(r.at("group_size_div_factor").get<int>());
  }
  for (const char* want : {"moe_wna16/awq/tp1", "moe_wna16/awq/tp2", "moe_wna16/awq/tp4", "moe_wna16/gptq/tp1", "moe_wna16/gptq/tp2", "moe_wna16/gptq/tp4"})
    EXPECT_TRUE(seen.count(want)) << want << " has no golden layer case";
  EXPECT_EQ(factors, (std::set<int>{1, 2, 4}));
  ASSERT_FALSE(moe_wna16_cases().empty());
}

}  // namespace
}  // namespace moepack::convert
