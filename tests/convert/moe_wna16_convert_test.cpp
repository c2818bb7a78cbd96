// --quantization moe_wna16 on the GPTQ and AutoAWQ samples (sm90, TRITON / TritonWNA16Experts):
// the artifact holds the parameters vLLM's MoeWNA16Method holds (names, dtypes, shapes: its
// loader's N-first uint8 weights, model-dtype scales with group_size_div_factor repeats, GPTQ's
// empty (0,) int32 qzeros and g_idx), every slab unpacks to the loaded source, and every layer run
// from the artifact matches the source's reference. The bytes themselves are pinned against
// vLLM's own code by upstream_goldens_test.cpp (golden_moe_wna16.safetensors).
#include <gtest/gtest.h>

#include <filesystem>

#include "formats/checkpoints/checkpoint.h"
#include "lib/convert/executor.h"
#include "lib/convert/plan.h"
#include "lib/convert/target.h"
#include "support/artifacts.h"
#include "support/test_support.h"

namespace moepack::convert {
namespace {

struct Case {
  std::string sample;
  int tp;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.sample << " tp" << c.tp; }

artifact::Manifest convert_moe_wna16(const std::string& source, int tp, const std::string& out) {
  oracle::Deployment dep = oracle::default_deployment(oracle::parse_target("sm90"));
  dep.quantization = "moe_wna16";
  dep.parallel.tp = tp;
  ckpt::Checkpoint ck = ckpt::open_checkpoint(source);
  ConvertRequest req;
  req.target_json = target_json(dep);
  const ConversionPlan plan = build_conversion_plan(ck, decide_layers(ck, dep), req);
  std::filesystem::create_directories(out);
  return execute_plan(plan, out, ExecutorOptions{});
}

class MoeWna16Samples : public ::testing::TestWithParam<Case> {};

TEST_P(MoeWna16Samples, HoldsWhatMoeWna16MethodHoldsAndVerifies) {
  const Case& c = GetParam();
  const std::string source = test::source_dir() + "/samples/" + c.sample;
  test::TempDir dir;
  const std::string out = dir.path() + "/out";
  const artifact::Manifest m = convert_moe_wna16(source, c.tp, out);
  ASSERT_EQ(m.layers.size(), 1u);
  const artifact::Layer& layer = m.layers[0];
  EXPECT_EQ(layer.backend, "TRITON");
  EXPECT_EQ(layer.experts_class, "TritonWNA16Experts");
  ASSERT_EQ(layer.ranks.size(), static_cast<size_t>(c.tp));
  // Every sample: 4 or 2 experts, H = I = 128, groups of 128; per rank I / tp, and the group
  // size halves until it divides I / tp (group_size_div_factor = tp).
  const bool awq = c.sample.rfind("awq", 0) == 0;
  const uint64_t bits = c.sample == "gptq-int8" ? 8 : 4, E = layer.num_experts, H = 128, I = 128 / static_cast<uint64_t>(c.tp);
  const uint64_t groups_h = static_cast<uint64_t>(c.tp), groups_i = 1;  // H / (128 / tp), I / (128 / tp)
  for (const auto& rank : layer.ranks) {
    SCOPED_TRACE("rank " + std::to_string(rank.rank));
    const auto& t = rank.tensors;
    ASSERT_TRUE(t.count("w13_qweight") && t.count("w2_qweight") && t.count("w13_scales") && t.count("w2_scales"));
    EXPECT_EQ(t.at("w13_qweight").dtype, "U8");
    EXPECT_EQ(t.at("w13_qweight").shape, (std::vector<uint64_t>{E, 2 * I, H * bits / 8}));
    EXPECT_EQ(t.at("w2_qweight").shape, (std::vector<uint64_t>{E, H, I * bits / 8}));
    EXPECT_EQ(t.at("w13_scales").dtype, "BF16");
    EXPECT_EQ(t.at("w13_scales").shape, (std::vector<uint64_t>{E, 2 * I, groups_h}));
    EXPECT_EQ(t.at("w2_scales").shape, (std::vector<uint64_t>{E, H, groups_i}));
    if (awq) {
      EXPECT_EQ(t.at("w13_qzeros").dtype, "U8");
      EXPECT_EQ(t.at("w13_qzeros").shape, (std::vector<uint64_t>{E, I, groups_h}));
      EXPECT_EQ(t.at("w2_qzeros").shape, (std::vector<uint64_t>{E, H / 2, groups_i}));
      EXPECT_EQ(t.size(), 6u);
    } else {
      // has_zp is false: the loader never loads qzeros or g_idx; create_weights' (0,) int32 stay.
      for (const char* role : {"w13_qzeros", "w2_qzeros", "w13_g_idx", "w2_g_idx"}) {
        ASSERT_TRUE(t.count(role)) << role;
        EXPECT_EQ(t.at(role).dtype, "I32") << role;
        EXPECT_EQ(t.at(role).shape, (std::vector<uint64_t>{0})) << role;
      }
      EXPECT_EQ(t.size(), 8u);
    }
  }
  test::expect_checked_against_source(out, source);
  test::expect_verified_against_source(out, source, 4);
}

INSTANTIATE_TEST_SUITE_P(Samples, MoeWna16Samples,
                         ::testing::Values(Case{"awq-int4", 1}, Case{"awq-int4", 2}, Case{"awq-int4", 4}, Case{"gptq-int4", 1}, Case{"gptq-int4", 2},
                                           Case{"gptq-int4", 4}, Case{"gptq-int8", 1}, Case{"gptq-int8", 2}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string n = info.param.sample + "_tp" + std::to_string(info.param.tp);
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace moepack::convert
