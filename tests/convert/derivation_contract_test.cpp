// Every row of lib/convert/derivation_registry, walked as tests/packers/layout_contract_test.cpp
// walks every packer: a head names one row of its kind, the row's example id resolves through the
// lookups the planner, the check and the runtime use to an object named exactly that id, a
// derivation reads back through a registered packer, and an id of a known head with arguments
// the family does not know is refused (no object), never taken for another.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>

#include "formats/checkpoints/checkpoint.h"
#include "lib/convert/derivation_registry.h"
#include "lib/convert/derivations.h"
#include "lib/convert/reductions.h"
#include "lib/core/error.h"
#include "lib/core/layout_ids.h"
#include "packers/registry.h"
#include "support/test_support.h"

namespace moepack::convert {
namespace {
namespace fs = std::filesystem;

std::string kind_name(ComputationKind k) {
  return k == ComputationKind::derivation ? "derivation" : k == ComputationKind::reduction ? "reduction" : "value stage";
}

TEST(DerivationRegistry, RowsAreWellFormedAndHeadsUniquePerKind) {
  std::set<std::pair<ComputationKind, std::string>> seen;
  ASSERT_GE(computation_table().size(), 25u);
  for (const ComputationRow& row : computation_table()) {
    SCOPED_TRACE(std::string(row.head));
    EXPECT_TRUE(seen.insert({row.kind, std::string(row.head)}).second) << "two " << kind_name(row.kind) << " rows for one head";
    EXPECT_EQ(layout_id::head_of(row.example()), row.head);
    EXPECT_TRUE(fs::exists(test::source_dir() + "/" + std::string(row.defined_in))) << row.defined_in;
    EXPECT_EQ(row.derive != nullptr, row.kind == ComputationKind::derivation);
    EXPECT_EQ(row.read_back != nullptr, row.kind == ComputationKind::derivation);
    EXPECT_EQ(row.reduce != nullptr, row.kind == ComputationKind::reduction);
    EXPECT_EQ(row.stage != nullptr, row.kind == ComputationKind::value_stage);
    EXPECT_EQ(find_computation(row.kind, row.example()), &row);
    // No packer of the same id: a layout id names one thing.
    EXPECT_EQ(packers::find_layout(row.example()), nullptr);
  }
}

TEST(DerivationRegistry, ReductionsAndStagesResolveTheirExamplesAndRefuseUnknownArguments) {
  for (const ComputationRow& row : computation_table()) {
    if (row.kind == ComputationKind::derivation) continue;
    SCOPED_TRACE(std::string(row.example()));
    const std::string bogus = std::string(row.head) + "(no_such_argument=1)";
    if (row.kind == ComputationKind::reduction) {
      const LayerReduction* r = find_reduction(row.example());
      ASSERT_NE(r, nullptr);
      EXPECT_EQ(r->name(), row.example());
      EXPECT_EQ(find_value_stage(row.example()), nullptr);
      EXPECT_EQ(find_reduction(bogus), nullptr);
    } else {
      const ValueStage* s = find_value_stage(row.example());
      ASSERT_NE(s, nullptr);
      EXPECT_EQ(s->name(), row.example());
      EXPECT_EQ(find_reduction(row.example()), nullptr);
      EXPECT_EQ(find_value_stage(bogus), nullptr);
    }
  }
}

// A derivation is built for a real layer (act-order and CPU INT4 read the layer's params) and
// read back through the packer it ends in.
TEST(DerivationRegistry, DerivationsBuildForTheirSampleAndReadBackThroughAPacker) {
  for (const ComputationRow& row : computation_table()) {
    if (row.kind != ComputationKind::derivation) continue;
    SCOPED_TRACE(std::string(row.example()));
    const ckpt::Checkpoint checkpoint = ckpt::open_checkpoint(test::source_dir() + "/samples/" + std::string(row.example_sample));
    ASSERT_FALSE(checkpoint.layers.empty());
    const ckpt::MoeLayer& layer = checkpoint.layers.front();
    std::set<std::string> available;
    for (const auto& p : layer.params) available.insert(p.name);
    const std::string id(row.example()), role(row.example_role);
    auto derivation = make_expert_derivation(role, id, available, layer);
    ASSERT_NE(derivation, nullptr);
    EXPECT_EQ(derivation->name(), id);
    for (const std::string& input : derivation->inputs()) EXPECT_TRUE(available.count(input)) << input;
    const DerivedLayout back = derived_layout(id);
    EXPECT_NE(back.kind, DerivedKind::none);
    if (back.kind == DerivedKind::through_inner || back.kind == DerivedKind::act_order_weight) {
      EXPECT_NO_THROW(packers::make_layout(back.inner)) << back.inner;
    }
    // Not a derivation: a packer id, a reduction's, nothing at all.
    EXPECT_EQ(derived_layout("vllm.unchanged").kind, DerivedKind::none);
    EXPECT_EQ(make_expert_derivation(role, "vllm.unchanged", available, layer), nullptr);
  }
  EXPECT_EQ(derived_layout("vllm.max_over_experts(f32)").kind, DerivedKind::none);
}

}  // namespace
}  // namespace moepack::convert
