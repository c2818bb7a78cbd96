// Which storage reads each expert naming, and the gpt-oss loader rules that follow the model
// (model_type `gpt_oss`) rather than the quantization family. Reading itself is checked byte for
// byte by params_test.cpp and real_layouts_test.cpp.
#include <gtest/gtest.h>

#include "checkpoints/fixtures.h"
#include "checkpoints/real_layouts.h"
#include "formats/checkpoints/checkpoint.h"
#include "formats/checkpoints/expert_storage.h"

namespace moepack::test {
namespace {

using ckpt::ExpertNaming;
using ckpt::detail::expert_storage;

TEST(ExpertStorage, PerExpertNamingsShareOneStorageAndEachFusedShapeHasItsOwn) {
  const ckpt::detail::ExpertStorage* per_expert = &ckpt::detail::per_expert_storage();
  for (ExpertNaming n : {ExpertNaming::hf, ExpertNaming::mixtral, ExpertNaming::deepseek_native, ExpertNaming::hf_no_gate, ExpertNaming::per_expert_gate_up})
    EXPECT_EQ(&expert_storage(n), per_expert) << ckpt::naming_name(n);
  EXPECT_EQ(&expert_storage(ExpertNaming::gpt_oss_fused), &ckpt::detail::gpt_oss_fused_storage());
  EXPECT_EQ(&expert_storage(ExpertNaming::fused_3d), &ckpt::detail::fused_3d_storage());
  EXPECT_NE(&ckpt::detail::gpt_oss_fused_storage(), per_expert);
  EXPECT_NE(&ckpt::detail::fused_3d_storage(), per_expert);
  EXPECT_NE(&ckpt::detail::gpt_oss_fused_storage(), &ckpt::detail::fused_3d_storage());
}

ckpt::MoeLayer only_layer(CheckpointBuilder b) {
  b.write();
  ckpt::Checkpoint c = ckpt::open_checkpoint(b.dir());
  EXPECT_EQ(c.layers.size(), 1u);
  return c.layers.at(0);
}

// gpt-oss' own loaders keep w2_bias on tensor-parallel rank 0 whatever quantized the
// checkpoint; the generic FusedMoE loader (every other model) copies it to each rank.
TEST(ExpertStorage, GptOssLoaderRulesFollowTheModelNotTheFamily) {
  TempDir quark, ct, bf16, llama4;
  const ckpt::MoeLayer q = only_layer(quark_gpt_oss_builder(quark.path(), std::nullopt));
  EXPECT_TRUE(q.recipe.w2_bias_first_rank_only);
  EXPECT_EQ(q.recipe.w13_order, ckpt::W13Order::interleaved);  // the quark family's own rule for fused gate_up
  const ckpt::MoeLayer c = only_layer(ct_gpt_oss_builder(ct.path(), /*biases=*/true));
  EXPECT_TRUE(c.recipe.w2_bias_first_rank_only);
  EXPECT_EQ(c.recipe.w13_order, ckpt::W13Order::gate_then_up);  // gate and up stored apart, stacked in halves
  const ckpt::MoeLayer b = only_layer(gpt_oss_bf16_builder(bf16.path()));
  EXPECT_EQ(b.naming, ExpertNaming::fused_3d);
  EXPECT_TRUE(b.recipe.w2_bias_first_rank_only);
  EXPECT_EQ(b.recipe.w13_order, ckpt::W13Order::interleaved);
  const ckpt::MoeLayer l = only_layer(llama4_fp8_builder(llama4.path()));
  EXPECT_EQ(l.naming, ExpertNaming::fused_3d);
  EXPECT_FALSE(l.recipe.w2_bias_first_rank_only);
  EXPECT_EQ(l.recipe.w13_order, ckpt::W13Order::gate_then_up);
}

}  // namespace
}  // namespace moepack::test
