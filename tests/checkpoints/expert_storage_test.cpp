// Which storage reads each expert naming. Reading itself is checked byte for byte by
// params_test.cpp and real_layouts_test.cpp.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace moepack::test
