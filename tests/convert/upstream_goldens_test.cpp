// Conversions against bytes produced by the REAL upstream code, end to end, over every golden file
// of the table in support/upstream_goldens.h.
//
// Each golden script (tests/golden/make_*_goldens.py) loaded checkpoints into one layer per rank
// as vLLM e9d1398d9 allocates and loads it (create_weights and RoutedExperts' weight_loader) and
// ran the quantization method's own process_weights_after_loading for one backend, with vLLM's
// compiled ops where the layout needs them (the Marlin repacks, the x86 CPU packs, DeepGEMM's
// scale packing, CUTLASS W4A8) built unchanged on the device: NVFP4, FP8 and unquantized, WNA16
// (Marlin, TRITON, XPU, MoeWNA16), CUTLASS W4A8 and the x86 CPU families.
// tests/packers/golden/README.md says how, on what, and what was stood in for.
//
// For each layer case ("golden_layer_cases") this test converts the same checkpoint with moepack
// for the same deployment, checks that the oracle picks the same backend (and experts class,
// where the file records it), and that every parameter the layer holds afterwards is in the
// artifact under its role and rank, with vLLM's dtype, storage shape and bytes (whole where the
// golden stores them, by SHA-256 otherwise); what else the artifact may hold is the file's rule
// (LayerCases). Per file, a test checks that it was made by the compiled ops, not a dry run, and
// covers what its row says. The layout cases ("golden_cases") are tests/packers/golden_test.cpp's.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "formats/safetensors/file.h"
#include "support/golden_layers.h"
#include "support/test_support.h"
#include "support/upstream_goldens.h"

namespace moepack::convert {
namespace {
namespace fs = std::filesystem;
using test::golden::golden_metadata;
using test::golden::golden_path;
using test::golden::kUpstreamGoldens;
using test::golden::LayerCase;
using test::golden::LayerCases;
using test::golden::UpstreamGolden;

const std::vector<LayerCase>& all_layer_cases() {
  static const std::vector<LayerCase> cases = [] {
    std::vector<LayerCase> all;
    for (const UpstreamGolden& golden : kUpstreamGoldens) {
      if (golden.layer_cases == LayerCases::none) continue;
      const std::vector<LayerCase> of_file = test::golden::load_layer_cases(golden);
      all.insert(all.end(), of_file.begin(), of_file.end());
    }
    return all;
  }();
  return cases;
}

const UpstreamGolden& row_of(std::string_view file) {
  const auto it = std::find_if(kUpstreamGoldens.begin(), kUpstreamGoldens.end(), [&](const UpstreamGolden& g) { return g.file == file; });
  if (it == kUpstreamGoldens.end()) throw std::runtime_error(std::string(file) + " has no row in support/upstream_goldens.h");
  return *it;
}

std::vector<LayerCase> layer_cases_of(std::string_view file) {
  std::vector<LayerCase> cases;
  for (const LayerCase& c : all_layer_cases())
    if (c.golden.file == file) cases.push_back(c);
  return cases;
}

nlohmann::json provenance_of(std::string_view file) {
  const st::File f(golden_path(row_of(file)));
  const auto& meta = f.header().metadata;
  if (!meta.count("provenance")) throw std::runtime_error(std::string(file) + " has no provenance");
  return nlohmann::json::parse(meta.at("provenance"));
}

class UpstreamLayerGolden : public ::testing::TestWithParam<LayerCase> {};

TEST_P(UpstreamLayerGolden, ConvertsToTheBytesUpstreamHolds) { test::golden::check_layer_case(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Upstream, UpstreamLayerGolden, ::testing::ValuesIn(all_layer_cases()),
                         [](const ::testing::TestParamInfo<LayerCase>& info) { return test::golden::case_name(info.param); });

// A golden file nobody checks, or a row whose file went missing, fails here rather than
// shrinking the set of cases.
TEST(UpstreamGoldens, EveryGoldenFileHasExactlyOneRow) {
  std::map<std::string, int> rows;
  for (const UpstreamGolden& golden : kUpstreamGoldens) ++rows[std::string(golden.file)];
  std::set<std::string> on_disk;
  for (const auto& entry : fs::directory_iterator(test::source_dir() + "/" + std::string(test::golden::kUpstreamGoldenDir)))
    if (entry.path().extension() == ".safetensors") on_disk.insert(entry.path().filename().string());
  for (const std::string& file : on_disk) EXPECT_EQ(rows.count(file) ? rows.at(file) : 0, 1) << file << ": rows of support/upstream_goldens.h naming it";
  for (const auto& [file, count] : rows) EXPECT_TRUE(on_disk.count(file)) << file << " has a row but no file";
}

TEST(UpstreamGoldens, EveryRowsGeneratorExists) {
  for (const UpstreamGolden& golden : kUpstreamGoldens)
    EXPECT_TRUE(fs::is_regular_file(test::source_dir() + "/" + std::string(golden.generator)))
        << golden.file << ": its generator " << golden.generator << " is missing";
}

// A row's checks are the kinds of case its file holds: none is left unchecked, none is missing.
TEST(UpstreamGoldens, EveryRowChecksTheCasesItsFileHolds) {
  for (const UpstreamGolden& golden : kUpstreamGoldens) {
    SCOPED_TRACE(std::string(golden.file));
    const nlohmann::json layout = golden_metadata(golden_path(golden), "golden_cases");
    const nlohmann::json layer = golden_metadata(golden_path(golden), "golden_layer_cases");
    EXPECT_EQ(!layout.is_null() && !layout.empty(), golden.layout_cases) << "layout cases (\"golden_cases\")";
    EXPECT_EQ(!layer.is_null() && !layer.empty(), golden.layer_cases != LayerCases::none) << "layer cases (\"golden_layer_cases\")";
    if (golden.layer_cases != LayerCases::none) {
      EXPECT_EQ(layer_cases_of(golden.file).size(), layer.size()) << "layer cases loaded";
    }
  }
}

TEST(UpstreamGoldenFile, Fp8Bf16HasLayerCasesForEveryBackendWithItsOwnLayout) {
  const auto provenance = provenance_of("golden_fp8_bf16.safetensors");
  EXPECT_EQ(provenance.at("vllm"), "e9d1398d9");
  EXPECT_EQ(provenance.at("flashinfer"), "v0.6.17");
  EXPECT_EQ(provenance.at("aiter"), "v0.1.19");
  EXPECT_TRUE(provenance.at("compat").empty()) << provenance.dump();  // torch 2.x with float8 on CUDA, not a dry run
  EXPECT_GT(provenance.at("deepgemm_kernel_cross_checks").get<int>(), 0);  // DeepGEMM's compiled kernel ran
  ASSERT_TRUE(provenance.contains("marlin_ops")) << provenance.dump();  // vLLM's compiled Marlin repack ran
  EXPECT_EQ(provenance.at("marlin_ops").at("sources").size(), 3u) << provenance.dump();
  // Every backend each family converts to, with its own layout.
  std::map<std::string, int> fp8, bf16;
  for (const LayerCase& c : layer_cases_of("golden_fp8_bf16.safetensors")) {
    const bool unquantized = c.sample.find("bf16") != std::string::npos;
    ++(unquantized ? bf16 : fp8)[c.backend];
  }
  for (const char* b : {"TRITON", "DEEPGEMM", "FLASHINFER_TRTLLM", "FLASHINFER_CUTLASS", "VLLM_CUTLASS", "XPU", "AITER", "MARLIN"})
    EXPECT_GT(fp8[b], 0) << "FP8 " << b << " has no golden layer case";
  for (const char* b : {"TRITON", "FLASHINFER_TRTLLM", "FLASHINFER_CUTLASS", "XPU", "AITER"})
    EXPECT_GT(bf16[b], 0) << "unquantized " << b << " has no golden layer case";
}

TEST(UpstreamGoldenFile, Nvfp4HasLayerCasesForEveryBackendWithItsOwnLayout) {
  const auto provenance = provenance_of("golden_nvfp4.safetensors");
  EXPECT_EQ(provenance.at("vllm"), "e9d1398d9");
  EXPECT_EQ(provenance.at("flashinfer"), "v0.6.17");
  EXPECT_TRUE(provenance.at("compat").empty()) << provenance.dump();  // torch 2.x with float8, not a dry run
  std::map<std::string, int> by_backend;
  for (const LayerCase& c : layer_cases_of("golden_nvfp4.safetensors")) ++by_backend[c.backend];
  for (const char* b : {"FLASHINFER_TRTLLM", "FLASHINFER_CUTLASS", "VLLM_CUTLASS", "MARLIN", "FLASHINFER_CUTEDSL", "FLASHINFER_B12X", "EMULATION"})
    EXPECT_GT(by_backend[b], 0) << b << " has no golden layer case";
}

TEST(UpstreamGoldenFile, W4a8RanTheCompiledCutlassOpsAtBothParallelisms) {
  const auto provenance = provenance_of("golden_w4a8.safetensors");
  EXPECT_EQ(provenance.at("vllm"), "e9d1398d9");
  EXPECT_EQ(provenance.at("cutlass"), "v4.4.2");
  EXPECT_EQ(provenance.at("device"), "cuda");
  EXPECT_TRUE(provenance.at("compat").empty()) << provenance.dump();  // the compiled ops ran, not a dry run
  const auto& ext = provenance.at("ops").at("extensions");
  EXPECT_TRUE(ext.contains("vllm_w4a8_cutlass")) << provenance.dump();
  EXPECT_TRUE(ext.contains("vllm_per_token_fp8_quant")) << provenance.dump();
  std::set<std::string> seen;
  for (const LayerCase& c : layer_cases_of("golden_w4a8.safetensors")) {
    EXPECT_EQ(c.backend, "CUTLASS") << c.name;
    seen.insert("tp" + std::to_string(c.tp) + (c.patches.empty() ? "" : "/patched"));
  }
  for (const char* want : {"tp1", "tp1/patched", "tp2", "tp2/patched"}) EXPECT_TRUE(seen.count(want)) << want << " has no golden layer case";
}

TEST(UpstreamGoldenFile, CpuRanTheCompiledPacksOnEveryFamilyAndBothParallelisms) {
  const auto provenance = provenance_of("golden_cpu.safetensors");
  EXPECT_EQ(provenance.at("vllm"), "e9d1398d9");
  EXPECT_TRUE(provenance.at("compat").empty()) << provenance.dump();  // the compiled ops ran, not a dry run
  EXPECT_EQ(provenance.at("ops").at("sources").size(), 5u) << provenance.dump();
  const auto flags = provenance.at("cpu_flags").get<std::vector<std::string>>();
  for (const char* want : {"avx512_bf16", "avx512_vnni", "amx_bf16", "amx_tile"})
    EXPECT_NE(std::find(flags.begin(), flags.end(), want), flags.end()) << "made on a host without " << want;
  std::set<std::string> seen;
  for (const LayerCase& c : layer_cases_of("golden_cpu.safetensors")) seen.insert(c.method + "/" + c.target + "/tp" + std::to_string(c.tp));
  for (const char* want : {"wna16/cpu-amx/tp1", "wna16/cpu-amx/tp2", "bf16/cpu-amx/tp1", "bf16/cpu-amx/tp2", "bf16/cpu-avx512/tp1",
                           "bf16/cpu-avx512/tp2", "fp8/cpu-amx/tp1", "int8/cpu-amx/tp1", "int8/cpu-amx/tp2",
                           "gpt-oss-mxfp4/cpu-amx/tp1", "gpt-oss-mxfp4/cpu-amx/tp2", "quark-mxfp4/cpu-amx/tp1",
                           "quark-mxfp4/cpu-amx/tp2"})
    EXPECT_TRUE(seen.count(want)) << want << " has no golden layer case";
}

TEST(UpstreamGoldenFile, Wna16RanTheCompiledRepackOnEveryMethodAndBothParallelisms) {
  const auto provenance = provenance_of("golden_wna16.safetensors");
  EXPECT_EQ(provenance.at("vllm"), "e9d1398d9");
  EXPECT_EQ(provenance.at("device"), "cuda");
  EXPECT_TRUE(provenance.at("compat").empty()) << provenance.dump();  // the compiled ops ran, not a dry run
  EXPECT_EQ(provenance.at("ops").at("sources").size(), 3u) << provenance.dump();
  const std::vector<LayerCase> cases = layer_cases_of("golden_wna16.safetensors");
  std::set<std::string> seen;
  for (const LayerCase& c : cases) seen.insert(c.method + "/tp" + std::to_string(c.tp));
  for (const char* want : {"gptq/tp1", "gptq/tp2", "awq/tp1", "awq/tp2", "compressed-tensors/tp1", "compressed-tensors/tp2"})
    EXPECT_TRUE(seen.count(want)) << want << " has no golden layer case";
  // The other backends' layouts, run through the methods' own process_weights_after_loading.
  std::set<std::string> backends;
  for (const LayerCase& c : cases) backends.insert(c.method + "/" + c.backend + "/tp" + std::to_string(c.tp));
  for (const char* want : {"compressed-tensors/TRITON/tp1", "compressed-tensors/TRITON/tp2", "compressed-tensors/XPU/tp1",
                           "compressed-tensors/XPU/tp2", "gptq/XPU/tp1", "gptq/XPU/tp2", "ct-w8a8-int8/TRITON/tp1",
                           "ct-w8a8-int8/TRITON/tp2"})
    EXPECT_TRUE(backends.count(want)) << want << " has no golden layer case";
}

// The MoeWNA16 goldens ran vLLM's own MoeWNA16Method (create_weights, its weight loader wrapper,
// process_weights_after_loading) over both checkpoint layouts, both widths, TP 1, 2 and 4, and
// group sizes the loader repeats (group_size_div_factor 2 and 4).
TEST(UpstreamGoldenFile, MoeWna16RanUpstreamOverBothLayoutsWidthsAndTheGroupRepeat) {
  const auto provenance = provenance_of("golden_moe_wna16.safetensors");
  EXPECT_EQ(provenance.at("vllm"), "e9d1398d9");
  EXPECT_TRUE(provenance.at("compat").empty()) << provenance.dump();
  std::set<std::string> seen;
  std::set<int> factors;
  for (const auto& j : golden_metadata(golden_path(row_of("golden_moe_wna16.safetensors")), "golden_layer_cases")) {
    EXPECT_EQ(j.at("quantization"), "moe_wna16");
    EXPECT_EQ(j.at("backend"), "TRITON");
    seen.insert(j.at("method").get<std::string>() + "/tp" + std::to_string(j.at("tp").get<int>()));
    for (const auto& r : j.at("ranks")) factors.insert(r.at("group_size_div_factor").get<int>());
  }
  for (const char* want : {"moe_wna16/awq/tp1", "moe_wna16/awq/tp2", "moe_wna16/awq/tp4", "moe_wna16/gptq/tp1", "moe_wna16/gptq/tp2", "moe_wna16/gptq/tp4"})
    EXPECT_TRUE(seen.count(want)) << want << " has no golden layer case";
  EXPECT_EQ(factors, (std::set<int>{1, 2, 4}));
  ASSERT_FALSE(layer_cases_of("golden_moe_wna16.safetensors").empty());
}

}  // namespace
}  // namespace moepack::convert
