// The seam between checkpoint readers and the oracle: a reader reports the quantization method
// and what it saw, and the oracle alone resolves the MoE method class it selects with. The
// reader's own class (MethodChoice::moe_method) is kept for `inspect` to display, so it must
// name the class the oracle resolves: checked here for every layer of every shipped sample, on
// SM90 (where compressed-tensors W4A8 takes its FP8 method) and on a device where it does not.
#include <gtest/gtest.h>

#include <filesystem>

#include "formats/checkpoints/checkpoint.h"
#include "lib/convert/plan.h"
#include "support/test_support.h"

namespace moepack::convert {
namespace {
namespace fs = std::filesystem;

TEST(MethodClassSeam, ReadersPassNoClassAndTheOracleResolvesTheOneTheyDisplay) {
  int layers_checked = 0;
  for (const auto& entry : fs::directory_iterator(test::source_dir() + "/samples")) {
    if (!fs::exists(entry.path() / "config.json")) continue;
    const ckpt::Checkpoint checkpoint = ckpt::open_checkpoint(entry.path().string());
    for (const char* target : {"sm90", "sm100"}) {
      const oracle::Deployment deployment = oracle::default_deployment(oracle::parse_target(target));
      for (const ckpt::MoeLayer& layer : checkpoint.layers) {
        SCOPED_TRACE(entry.path().filename().string() + " " + layer.prefix + " on " + target);
        const oracle::MoeLayerQuery query = query_from_checkpoint(checkpoint, layer, deployment);
        EXPECT_EQ(query.method_class, "");
        const ckpt::MethodChoice& shown =
            layer.quant.on_sm90 && deployment.device.is_device_capability(90) ? *layer.quant.on_sm90 : layer.quant.method;
        EXPECT_EQ(oracle::decide(query, deployment).method_class, shown.moe_method);
        // No family name crosses the seam either: the oracle's family from the keys is the one
        // the reader displays (its fp6 schemes run through the MXFP4 method).
        EXPECT_EQ(oracle::family_name(query.family), shown.oracle_family == "mxfp6" ? "mxfp4" : (shown.oracle_family.empty() ? "unquantized" : shown.oracle_family));
        ++layers_checked;
      }
    }
  }
  EXPECT_GT(layers_checked, 50);
}

}  // namespace
}  // namespace moepack::convert
