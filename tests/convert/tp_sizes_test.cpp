// Tensor-parallel sizes past 2 (issue 20): the cases a sweep of every sample over TP 3 to 16 found
// crashing, failing with an internal error, or converting into artifacts that failed `verify`.
// every_target_test pins the outcome of every sample and target at TP 4, 8 and 16; these pin the
// reasons.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "formats/checkpoints/checkpoint.h"
#include "lib/convert/executor.h"
#include "lib/convert/plan.h"
#include "lib/convert/target.h"
#include "lib/core/error.h"
#include "lib/oracle/device.h"
#include "support/artifacts.h"
#include "support/test_support.h"

namespace moepack::convert {
namespace {
namespace fs = std::filesystem;

void convert_sample(const std::string& sample, const std::string& target, int tp, bool ep, const std::string& out) {
  oracle::Deployment dep = oracle::default_deployment(oracle::parse_target(target));
  dep.parallel.tp = tp;
  dep.parallel.enable_expert_parallel = ep;
  ckpt::Checkpoint ck = ckpt::open_checkpoint(test::source_dir() + "/samples/" + sample);
  ConvertRequest req;
  req.target_json = target_json(dep);
  ConversionPlan plan = build_conversion_plan(ck, decide_layers(ck, dep), req);
  execute_plan(plan, out, ExecutorOptions{});
}

// gpt-oss BF16 (I = 192) loads ceil(I / tp) interleaved rows per rank; the 32-block rule of the
// MXFP4 loader overran the 48-row parameter at TP 4 (heap corruption) and crashed at 8 and 16.
TEST(TensorParallelSizes, GptOssBf16ConvertsAndVerifiesAtEveryTpThatDividesI) {
  for (const char* target : {"sm90", "gfx950"})
    for (int tp : {3, 4, 6, 8, 16}) {
      SCOPED_TRACE(std::string(target) + " tp" + std::to_string(tp));
      test::TempDir out;
      convert_sample("gpt-oss-bf16", target, tp, false, out.path());
      test::expect_verified_against_source(out.path(), test::source_dir() + "/samples/gpt-oss-bf16", 4);
    }
}

// MX formats sharded by the generic loader: at TP 8 the samples' 128 leaves 16 per rank, half a
// 32-element block, and vLLM loads 4 // 8 = 0 of w2's scale groups per rank. Before: converted,
// then verify failed (rel 1) on every backend. gpt-oss' MXFP4 loader (whole blocks) is not
// affected: its sample converts at TP 8.
TEST(TensorParallelSizes, MxBlockSplitByTheRankIsRefusedWithVllmsReason) {
  struct Case {
    const char* sample;
    const char* target;
    const char* family;
  };
  for (const Case& c : {Case{"quark-w-mxfp4", "sm90", "mxfp4"}, Case{"quark-w-mxfp4-a-fp8", "gfx950", "mxfp4"}, Case{"quark-w-mxfp6-e3m2", "sm80", "mxfp4"},
                        Case{"deepseek-v4-mxfp4", "sm100", "mxfp4"}, Case{"modelopt-mxfp8", "sm90", "mxfp8"}}) {
    SCOPED_TRACE(std::string(c.sample) + " " + c.target);
    test::TempDir dir;
    try {
      convert_sample(c.sample, c.target, 8, false, dir.path() + "/out");
      ADD_FAILURE() << "converted";
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 3) << e.what();
      const std::string why = "the per-rank intermediate size 16 is not a multiple of the 32-element " + std::string(c.family) + " scale group";
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("16 // 32 = 0 group(s) per row"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(dir.path() + "/out"));
    // Expert parallelism keeps whole experts: nothing is split, and the same sample converts.
    if (std::string(c.target) == "sm90") {
      test::TempDir ep;
      convert_sample(c.sample, c.target, 2, true, ep.path());
      test::expect_verified_against_source(ep.path(), test::source_dir() + "/samples/" + c.sample, 4);
    }
  }
  test::TempDir out;
  convert_sample("gpt-oss-mxfp4", "sm90", 8, false, out.path());
  test::expect_verified_against_source(out.path(), test::source_dir() + "/samples/gpt-oss-mxfp4", 4);
}

}  // namespace
}  // namespace moepack::convert
