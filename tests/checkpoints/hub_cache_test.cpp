#include <gtest/gtest.h>

#include "formats/checkpoints/hub_cache.h"

namespace moepack::ckpt {
namespace {

TEST(HubCacheIds, ShapesTheHubAccepts) {
  for (const char* id : {"openai/gpt-oss-20b", "org/name@main", "org/name@v1.0", "org/name@refs/pr/1", "Org_1/Name.v2",
                         "org/name@0123456789abcdef0123456789abcdef01234567"})
    EXPECT_TRUE(looks_like_model_id(id)) << id;
  for (const char* not_id : {"gpt2", "/abs/path", "./org/name", "org/name/extra", "org//name", "org/na--me", "org/na..me", "-org/name",
                             "org/name.", "org/name@", "org/name@../x", "org/name@a//b", "org/name@/abs", "org/name@a/./b", "org /name"})
    EXPECT_FALSE(looks_like_model_id(not_id)) << not_id;
}

}  // namespace
}  // namespace moepack::ckpt
