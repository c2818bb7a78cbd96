// CUTLASS W4A8 (int4 weights, FP8 activations) on SM90 against bytes produced by the REAL upstream
// code, end to end.
//
// tests/golden/make_w4a8_goldens.py built vLLM e9d1398d9's cutlass_w4a8 entry files (unchanged,
// against CUTLASS v4.4.2) and its per-token FP8 quantization kernel (w8a8/fp8/common.cu) on an
// SM90 GPU, loaded samples/ct-w4a8-fp8 (as shipped, and with seeded adversarial group scales
// patched in) through CompressedTensorsW4A8Fp8MoEMethod's create_weights and RoutedExperts'
// weight_loader, and ran its process_weights_after_loading with QuantFP8's CUDA kernel, as vLLM
// runs it with TORCH_COMPILE_DISABLE=1: encode_and_reorder_int4b, the FP8 group scales and
// cutlass_pack_scale_fp8, the channel scales. tests/packers/golden/README.md says how and what
// was stood in for.
//
// For each case this test converts the same checkpoint with moepack for the same deployment
// (sm90, --env TORCH_COMPILE_DISABLE=1, TP 1 or TP 2 with expert parallelism), checks the
// backend, and compares every parameter the layer holds afterwards by role and rank.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "formats/safetensors/file.h"
#include "support/golden_layers.h"
#include "support/test_support.h"

namespace moepack::convert {
namespace {
using test::golden::LayerCase;

std::string golden_file() { return test::source_dir() + "/tests/packers/golden/golden_w4a8.safetensors"; }

const std::vector<LayerCase>& all_cases() {
  static const std::vector<LayerCase> cases = test::golden::load_layer_cases(golden_file());
  return cases;
}

class W4a8Golden : public ::testing::TestWithParam<LayerCase> {};

TEST_P(W4a8Golden, ConvertsToTheBytesUpstreamHolds) {
  test::golden::check_layer_case(GetParam(), golden_file(), "tests/golden/make_w4a8_goldens.py");
}

INSTANTIATE_TEST_SUITE_P(UpstreamW4a8, W4a8Golden, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<LayerCase>& info) { return test::golden::case_name(info.param); });

TEST(W4a8GoldenFile, RanTheCompiledCutlassOpsAtBothParallelisms) {
  const st::File f(golden_file());
  const auto& meta = f.header().metadata;
  ASSERT_TRUE(meta.count("provenance"));
  const auto provenance = nlohmann::json::parse(meta.at("provenance"));
  EXPECT_EQ(provenance.at("vllm"), "e9d1398d9");
  EXPECT_EQ(provenance.at("cutlass"), "v4.4.2");
  EXPECT_EQ(provenance.at("device"), "cuda");
  EXPECT_TRUE(provenance.at("compat").empty()) << provenance.dump();  // the compiled ops ran, not a dry run
  const auto& ext = provenance.at("ops").at("extensions");
  EXPECT_TRUE(ext.contains("vllm_w4a8_cutlass")) << provenance.dump();
  EXPECT_TRUE(ext.contains("vllm_per_token_fp8_quant")) << provenance.dump();
  std::set<std::string> seen;
  for (const LayerCase& c : all_cases()) {
    EXPECT_EQ(c.backend, "CUTLASS") << c.name;
    seen.insert("tp" + std::to_string(c.tp) + (c.patches.empty() ? "" : "/patched"));
  }
  for (const char* want : {"tp1", "tp1/patched", "tp2", "tp2/patched"}) EXPECT_TRUE(seen.count(want)) << want << " has no golden layer case";
}

}  // namespace
}  // namespace moepack::convert
