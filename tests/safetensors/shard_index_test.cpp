// The sharded index as written (convert's artifact indexes, sample's checkpoints): Hugging Face's
// text, and read back by our own index parser.
#include <gtest/gtest.h>

#include "formats/safetensors/file.h"
#include "formats/safetensors/writer.h"
#include "support/test_support.h"

namespace moepack::st {
namespace {

TEST(ShardIndex, TextAsHuggingFaceWritesIt) {
  const std::map<std::string, std::string> weight_map = {{"b.weight", "model-00002-of-00002.safetensors"},
                                                         {"a.weight", "model-00001-of-00002.safetensors"}};
  EXPECT_EQ(shard_index_text(weight_map, 4096),
            "{\n"
            "  \"metadata\": {\n"
            "    \"total_size\": 4096\n"
            "  },\n"
            "  \"weight_map\": {\n"
            "    \"a.weight\": \"model-00001-of-00002.safetensors\",\n"
            "    \"b.weight\": \"model-00002-of-00002.safetensors\"\n"
            "  }\n"
            "}\n");
}

TEST(ShardIndex, WrittenFileParsesBack) {
  test::TempDir dir;
  const std::string path = dir.file("model.safetensors.index.json");
  write_shard_index(path, {{"x", "model-00001-of-00001.safetensors"}}, 12);
  const ShardIndex index = parse_shard_index(path);
  ASSERT_EQ(index.weight_map.size(), 1u);
  EXPECT_EQ(index.weight_map.at("x"), "model-00001-of-00001.safetensors");
  EXPECT_TRUE(index.has_total_size);
  EXPECT_EQ(index.total_size, 12u);
}

}  // namespace
}  // namespace moepack::st
