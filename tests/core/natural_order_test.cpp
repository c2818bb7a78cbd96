#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "lib/core/natural_order.h"

namespace moepack {
namespace {

TEST(NaturalOrder, NumberedNamesSortAsNumbers) {
  std::vector<std::string> names = {"model.layers.10.mlp", "model.layers.2.mlp", "model.layers.1.mlp", "model.layers.11.mlp",
                                    "lm_head.weight", "model.layers.1.self_attn", "model-00002-of-00010", "model-00010-of-00010"};
  std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) { return natural_less(a, b); });
  const std::vector<std::string> expected = {"lm_head.weight",      "model-00002-of-00010", "model-00010-of-00010",
                                             "model.layers.1.mlp",  "model.layers.1.self_attn", "model.layers.2.mlp",
                                             "model.layers.10.mlp", "model.layers.11.mlp"};
  EXPECT_EQ(names, expected);
}

TEST(NaturalOrder, IsAStrictTotalOrder) {
  // Equal as numbers, different as text: still ordered one way only, so a sort is deterministic.
  EXPECT_NE(natural_less("a01", "a1"), natural_less("a1", "a01"));
  EXPECT_FALSE(natural_less("a1", "a1"));
  EXPECT_TRUE(natural_less("a", "a1"));
  EXPECT_FALSE(natural_less("a1", "a"));
  EXPECT_TRUE(natural_less("a9", "a10"));
  EXPECT_TRUE(natural_less("x99999999999999999999999", "x100000000000000000000000"));  // longer than any integer type
}

TEST(ModulePathOrder, LayerIndexesSortAsNumbersAndEverythingElseAsBytes) {
  std::vector<std::string> names = {"model.layers.10.mlp.experts.w2_weight", "model.layers.2.mlp.experts.w13_weight",
                                    "model.layers.10.mlp.experts.w13_weight", "model.layers.2.self_attn.q_proj.weight",
                                    "model.layers.2.mlp.experts.w2_weight", "lm_head.weight", "model.layers.1.mlp.experts.w13_weight",
                                    "model.norm.weight"};
  std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) { return module_path_less(a, b); });
  const std::vector<std::string> expected = {"lm_head.weight",
                                             "model.layers.1.mlp.experts.w13_weight",
                                             "model.layers.2.mlp.experts.w13_weight",
                                             "model.layers.2.mlp.experts.w2_weight",
                                             "model.layers.2.self_attn.q_proj.weight",
                                             "model.layers.10.mlp.experts.w13_weight",
                                             "model.layers.10.mlp.experts.w2_weight",
                                             "model.norm.weight"};
  EXPECT_EQ(names, expected);
}

TEST(ModulePathOrder, WithoutNumericComponentsItIsByteOrder) {
  // No two of these have all-digit components in the same place.
  const std::vector<std::string> names = {"a", "a.b", "a-b", "a.b.c", "a.bc", "a_b", "w13", "w2", "x9y", "x10y", "", ".", "a..b", "a.1x"};
  for (const auto& a : names)
    for (const auto& b : names) EXPECT_EQ(module_path_less(a, b), a < b) << a << " vs " << b;
  EXPECT_TRUE(module_path_less("a.1", "a.1x"));
  EXPECT_TRUE(module_path_less("a.9", "a.10"));
  EXPECT_FALSE(module_path_less("a.10", "a.9"));
  EXPECT_NE(module_path_less("a.01", "a.1"), module_path_less("a.1", "a.01"));  // equal as numbers, still ordered
}

}  // namespace
}  // namespace moepack
