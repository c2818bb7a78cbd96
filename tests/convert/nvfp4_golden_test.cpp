// NVFP4 conversions against bytes produced by the REAL upstream Python code, end to end.
//
// tests/golden/make_nvfp4_goldens.py loaded the repository's NVFP4 samples (some with seeded
// adversarial scales patched in) into one layer per rank (TP 1 or 2, EP 2) as vLLM e9d1398d9
// allocates and loads it, and ran
// the quantization method's own process_weights_after_loading (ModelOptNvFp4FusedMoE or
// CompressedTensorsW4A4Nvfp4MoEMethod) for one NVFP4 backend: convert_to_nvfp4_moe_kernel_format
// with every helper it calls (FlashInfer 0.6.17's pure-Python shuffles), make_nvfp4_moe_quant_config
// and the experts class's own process_weights_after_loading (input-scale folds, g1_scale_c, the
// SwiGLU clamp fold, the b12x bake-in). tests/packers/golden/README.md says how, on what, and
// what was stood in for.
//
// For each such case ("golden_layer_cases" in golden_nvfp4.safetensors) this test converts the
// same checkpoint with moepack for the same deployment and checks that the oracle picks the
// same backend and that every tensor vLLM's kernels then read is in the artifact, under its role
// and rank, with vLLM's dtype, shape and bytes: compared whole where the golden stores them (scalars and the
// block scales whose values vLLM rewrites) and by SHA-256 of the bytes otherwise.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "formats/safetensors/file.h"
#include "support/golden_layers.h"
#include "support/test_support.h"

namespace moepack::convert {
namespace {
using test::golden::LayerCase;

std::string golden_file() { return test::source_dir() + "/tests/packers/golden/golden_nvfp4.safetensors"; }

const std::vector<LayerCase>& all_cases() {
  static const std::vector<LayerCase> cases = test::golden::load_layer_cases(golden_file());
  return cases;
}

class Nvfp4Golden : public ::testing::TestWithParam<LayerCase> {};

TEST_P(Nvfp4Golden, ConvertsToTheBytesUpstreamHolds) {
  test::golden::check_layer_case(GetParam(), golden_file(), "tests/golden/make_nvfp4_goldens.py");
}

INSTANTIATE_TEST_SUITE_P(UpstreamNvfp4, Nvfp4Golden, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<LayerCase>& info) { return test::golden::case_name(info.param); });

TEST(Nvfp4GoldenFile, HasLayerCasesForEveryBackendWithItsOwnLayout) {
  const st::File f(golden_file());
  const auto& meta = f.header().metadata;
  ASSERT_TRUE(meta.count("provenance"));
  const auto provenance = nlohmann::json::parse(meta.at("provenance"));
  EXPECT_EQ(provenance.at("vllm"), "e9d1398d9");
  EXPECT_EQ(provenance.at("flashinfer"), "v0.6.17");
  EXPECT_TRUE(provenance.at("compat").empty()) << provenance.dump();  // torch 2.x with float8, not a dry run
  std::map<std::string, int> by_backend;
  for (const LayerCase& c : all_cases()) ++by_backend[c.backend];
  for (const char* b : {"FLASHINFER_TRTLLM", "FLASHINFER_CUTLASS", "VLLM_CUTLASS", "MARLIN", "FLASHINFER_CUTEDSL", "FLASHINFER_B12X", "EMULATION"})
    EXPECT_GT(by_backend[b], 0) << b << " has no golden layer case";
}

}  // namespace
}  // namespace moepack::convert
