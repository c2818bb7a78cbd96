// FP8 and unquantized (BF16/FP16) conversions against bytes produced by the REAL upstream code,
// end to end.
//
// tests/golden/make_fp8_goldens.py loaded the repository's FP8 and BF16 samples (some with seeded
// adversarial scales patched in) into one layer per rank (TP 1 or 2, EP 2) as vLLM e9d1398d9
// allocates and loads it, and ran the quantization method's own process_weights_after_loading
// (Fp8MoEMethod, CompressedTensorsW8A8Fp8MoEMethod, ModelOptFp8MoEMethod, ModelOptMxFp8FusedMoE,
// UnquantizedFusedMoEMethod) for one backend: the per-tensor requantization of w13, the input-scale
// maximum, convert_to_fp8_moe_kernel_format / convert_to_unquantized_kernel_format whole (DeepGEMM's
// UE8M0 requantization and packed scales, FlashInfer 0.6.17's shuffles and swaps, XPU transposes,
// AITER v0.1.19's shuffle_weight, Marlin's preparations over vLLM's compiled gptq_marlin_repack) and
// make_fp8_moe_quant_config. tests/packers/golden/README.md says
// how, on what, and what was stood in for.
//
// For each case ("golden_layer_cases" in golden_fp8_bf16.safetensors) this test converts the same
// checkpoint with moepack for the same deployment, checks that the oracle picks the same backend,
// and that every parameter the layer holds afterwards is in the artifact under its role and rank,
// with vLLM's dtype, storage shape and bytes (whole for small tensors, by SHA-256 otherwise).
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

std::string golden_file() { return test::source_dir() + "/tests/packers/golden/golden_fp8_bf16.safetensors"; }

const std::vector<LayerCase>& all_cases() {
  static const std::vector<LayerCase> cases = test::golden::load_layer_cases(golden_file());
  return cases;
}

class Fp8Bf16Golden : public ::testing::TestWithParam<LayerCase> {};

TEST_P(Fp8Bf16Golden, ConvertsToTheBytesUpstreamHolds) {
  test::golden::check_layer_case(GetParam(), golden_file(), "tests/golden/make_fp8_goldens.py");
}

INSTANTIATE_TEST_SUITE_P(UpstreamFp8Bf16, Fp8Bf16Golden, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<LayerCase>& info) { return test::golden::case_name(info.param); });

TEST(Fp8Bf16GoldenFile, HasLayerCasesForEveryBackendWithItsOwnLayout) {
  const st::File f(golden_file());
  const auto& meta = f.header().metadata;
  ASSERT_TRUE(meta.count("provenance"));
  const auto provenance = nlohmann::json::parse(meta.at("provenance"));
  EXPECT_EQ(provenance.at("vllm"), "e9d1398d9");
  EXPECT_EQ(provenance.at("flashinfer"), "v0.6.17");
  EXPECT_EQ(provenance.at("aiter"), "v0.1.19");
  EXPECT_TRUE(provenance.at("compat").empty()) << provenance.dump();  // torch 2.x with float8 on CUDA, not a dry run
  EXPECT_GT(provenance.at("deepgemm_kernel_cross_checks").get<int>(), 0);  // DeepGEMM's compiled kernel ran
  ASSERT_TRUE(provenance.contains("marlin_ops")) << provenance.dump();  // vLLM's compiled Marlin repack ran
  EXPECT_EQ(provenance.at("marlin_ops").at("sources").size(), 3u) << provenance.dump();
  // Every backend each family converts to, with its own layout.
  std::map<std::string, int> fp8, bf16;
  for (const LayerCase& c : all_cases()) {
    const bool unquantized = c.sample.find("bf16") != std::string::npos;
    ++(unquantized ? bf16 : fp8)[c.backend];
  }
  for (const char* b : {"TRITON", "DEEPGEMM", "FLASHINFER_TRTLLM", "FLASHINFER_CUTLASS", "VLLM_CUTLASS", "XPU", "AITER", "MARLIN"})
    EXPECT_GT(fp8[b], 0) << "FP8 " << b << " has no golden layer case";
  for (const char* b : {"TRITON", "FLASHINFER_TRTLLM", "FLASHINFER_CUTLASS", "XPU", "AITER"})
    EXPECT_GT(bf16[b], 0) << "unquantized " << b << " has no golden layer case";
}

}  // namespace
}  // namespace moepack::convert
