// The reader's load refusal (ckpt::LayerQuant::unsupported): `plan` reports it as the layer's
// decision, `convert` refuses the layer with it, whatever the oracle chose.
#include <gtest/gtest.h>

#include "lib/convert/plan.h"

namespace moepack::convert {
namespace {

oracle::Decision chosen_backend() {
  oracle::Decision d;
  d.prefix = "model.layers.0.mlp.experts";
  d.backend = "TRITON";
  d.experts_class = "OAITritonMxfp4ExpertsMonolithic";
  d.tensor_layouts = {{"w13_weight", "triton_kernels.HopperMXValue(mx_axis=1,v3.5.1)"}};
  return d;
}

TEST(LoadRefusal, NoneWhenTheReaderLoadsTheLayer) {
  ckpt::MoeLayer layer;
  EXPECT_FALSE(load_refusal(layer));
  const LayerDecision ld{&layer, {}, chosen_backend()};
  const oracle::Decision reported = reported_decision(ld);
  EXPECT_TRUE(reported.ok());
  EXPECT_EQ(reported.backend, "TRITON");
  EXPECT_EQ(reported.tensor_layouts.size(), 1u);
}

TEST(LoadRefusal, ReplacesTheOraclesChoiceWithVllmsValueError) {
  ckpt::MoeLayer layer;
  layer.quant.unsupported = "AutoAWQMoEMethod only supports 4bit now";
  const auto refusal = load_refusal(layer);
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->type, "ValueError");
  EXPECT_EQ(refusal->message, "AutoAWQMoEMethod only supports 4bit now");

  const oracle::Decision reported = reported_decision({&layer, {}, chosen_backend()});
  ASSERT_TRUE(reported.error);
  EXPECT_EQ(reported.error->type, "ValueError");
  EXPECT_EQ(reported.error->message, layer.quant.unsupported);
  EXPECT_FALSE(reported.backend);
  EXPECT_FALSE(reported.experts_class);
  EXPECT_TRUE(reported.tensor_layouts.empty());
}

TEST(LoadRefusal, KeepsTheOraclesOwnError) {
  ckpt::MoeLayer layer;
  layer.quant.unsupported = "AutoAWQMoEMethod only supports 4bit now";
  oracle::Decision refused = chosen_backend();
  refused.backend.reset();
  refused.error = oracle::DecisionError{"NotImplementedError", "No MXFP4 MoE backend supports the deployment configuration."};
  const oracle::Decision reported = reported_decision({&layer, {}, refused});
  ASSERT_TRUE(reported.error);
  EXPECT_EQ(reported.error->type, "NotImplementedError");
}

}  // namespace
}  // namespace moepack::convert
