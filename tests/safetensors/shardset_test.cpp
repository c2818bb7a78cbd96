// st::File views and st::ShardSet over single files, plain directories and sharded checkpoints
// with model.safetensors.index.json (checkpoint-formats.md 2): what is read, what is reported,
// and a file changed under its mapping giving an I/O error instead of SIGBUS.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "formats/safetensors/file.h"
#include "safetensors/malformed_corpus.h"
#include "support/test_support.h"

namespace moepack::st {
namespace {
namespace fs = std::filesystem;
using test::corpus::st_bytes;

const std::string kShard1 = "model-00001-of-00002.safetensors";
const std::string kShard2 = "model-00002-of-00002.safetensors";
const std::string kIndex = "model.safetensors.index.json";

void write_fixture(const test::TempDir& dir) {
  for (const auto& [rel, bytes] : test::corpus::index_fixture_shards()) test::write_file(dir.file(rel), bytes);
}

template <class Fn>
std::string error_of(Fn fn, ErrorKind kind) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(ShardSet, SingleFile) {
  test::TempDir dir;
  write_fixture(dir);
  ShardSet set(dir.file(kShard2));
  EXPECT_FALSE(set.is_directory());
  EXPECT_FALSE(set.has_index());
  EXPECT_EQ(set.root(), dir.path());
  EXPECT_EQ(set.names(), std::vector<std::string>{"b"});
  EXPECT_EQ(set.find("b")->data().size(), 4u);
  EXPECT_FALSE(set.find("a").has_value());
}

TEST(ShardSet, DirectoryWithoutIndexReadsEverySafetensorsFile) {
  test::TempDir dir;
  write_fixture(dir);
  test::write_text(dir.file("config.json"), "{}");
  test::write_text(dir.file("pytorch_model.bin"), "not safetensors");
  fs::create_directory(dir.file("sub.safetensors"));  // a directory with the extension is skipped
  ShardSet set(dir.path());
  EXPECT_TRUE(set.is_directory());
  EXPECT_FALSE(set.has_index());
  ASSERT_EQ(set.files().size(), 2u);
  EXPECT_EQ(fs::path(set.files()[0]->path()).filename(), kShard1);
  EXPECT_EQ(set.names(), (std::vector<std::string>{"a", "b"}));
}

TEST(ShardSet, IndexDecidesWhatIsRead) {
  test::TempDir dir;
  write_fixture(dir);
  // A stray file the index does not name is never opened, even when it is malformed.
  test::write_file(dir.file("consolidated.safetensors"), st_bytes("{", 0));
  // A shard holding a tensor the index does not know: reported, not fatal.
  test::write_file(dir.file(kShard2), st_bytes(R"({"b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"extra":{"dtype":"U8","shape":[1],"data_offsets":[4,5]}})", 5));
  test::write_text(dir.file(kIndex), test::corpus::valid_index_texts()[0]);
  ShardSet set(dir.path());
  EXPECT_TRUE(set.has_index());
  EXPECT_EQ(set.files().size(), 2u);
  EXPECT_EQ(set.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(set.unindexed(), std::vector<std::string>{"extra"});
  EXPECT_EQ(fs::path(set.find("b")->file->path()).filename(), kShard2);
}

TEST(ShardIndex, Parse) {
  test::TempDir dir;
  test::write_text(dir.file(kIndex), R"({"metadata":{"total_size":5,"total_parameters":5},"weight_map":{"b":")" + kShard2 + R"(","a":")" + kShard1 +
                                         R"(","c":")" + kShard1 + R"("}})");
  ShardIndex idx = parse_shard_index(dir.file(kIndex));
  EXPECT_EQ(idx.shard_names, (std::vector<std::string>{kShard1, kShard2}));
  EXPECT_EQ(idx.weight_map.at("c"), kShard1);
  EXPECT_TRUE(idx.has_total_size);
  EXPECT_EQ(idx.total_size, 5u);
  test::write_text(dir.file(kIndex), R"({"metadata":{"total_size":-1},"weight_map":{}})");
  EXPECT_FALSE(parse_shard_index(dir.file(kIndex)).has_total_size);  // informational only
}

// The index spells a shard's name; two spellings of one file ("x" and "./x") are two shards
// as far as the index goes, and each tensor belongs to the spelling the index gives it.
TEST(ShardSet, TensorsBelongToTheShardAsTheIndexSpellsIt) {
  test::TempDir dir;
  test::write_file(dir.file("x.safetensors"), st_bytes(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})", 2));
  test::write_text(dir.file(kIndex), R"({"weight_map":{"a":"x.safetensors","b":"./x.safetensors"}})");
  ShardSet set(dir.path());
  EXPECT_EQ(set.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(set.find("b")->file->path(), (fs::path(dir.path()) / "./x.safetensors").string());
}

TEST(ShardSet, NulInAShardNameIsRefused) {
  test::TempDir dir;
  write_fixture(dir);
  test::write_text(dir.file(kIndex), R"({"weight_map":{"a":")" + kShard1 + R"(\u0000.bin"}})");
  std::string msg = error_of([&] { ShardSet set(dir.path()); }, ErrorKind::bad_input);
  EXPECT_NE(msg.find("NUL"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir.file(kIndex)), std::string::npos) << msg;
}

TEST(ShardSet, FifosAreRefusedWithoutBlocking) {
  test::TempDir dir;
  write_fixture(dir);
  ASSERT_EQ(::mkfifo(dir.file(kIndex).c_str(), 0600), 0);
  std::string msg = error_of([&] { ShardSet set(dir.path()); }, ErrorKind::bad_input);
  EXPECT_NE(msg.find(dir.file(kIndex)), std::string::npos) << msg;

  test::TempDir dir2;
  write_fixture(dir2);
  fs::remove(dir2.file(kShard2));
  ASSERT_EQ(::mkfifo(dir2.file(kShard2).c_str(), 0600), 0);
  test::write_text(dir2.file(kIndex), test::corpus::valid_index_texts()[0]);
  msg = error_of([&] { ShardSet set(dir2.path()); }, ErrorKind::bad_input);
  EXPECT_NE(msg.find(dir2.file(kShard2)), std::string::npos) << msg;
  EXPECT_NO_THROW(ShardSet set(dir2.file(kShard1)));
}

TEST(ShardSet, MissingPath) {
  test::TempDir dir;
  std::string msg = error_of([&] { ShardSet set(dir.file("nope")); }, ErrorKind::bad_input);
  EXPECT_NE(msg.find(dir.file("nope")), std::string::npos);
}

// A shard truncated (or rewritten) after it was opened: a view into the vanished region would
// SIGBUS on first touch. data() must refuse with an I/O error naming the file instead.
TEST(File, ChangedAfterOpenIsAnIoErrorNotSigbus) {
  test::TempDir dir;
  const std::string path = dir.file("shard.safetensors");
  test::write_file(path, st_bytes(R"({"w":{"dtype":"U8","shape":[65536],"data_offsets":[0,65536]}})", 65536));
  File f(path);
  const TensorInfo* t = f.find("w");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(f.data(*t).size(), 65536u);
  ASSERT_EQ(::truncate(path.c_str(), 100), 0);
  std::string msg = error_of([&] { (void)f.data(*t); }, ErrorKind::io);
  EXPECT_NE(msg.find(path), std::string::npos) << msg;

  // The same through a ShardSet's TensorRef, on a fresh copy.
  test::write_file(path, st_bytes(R"({"w":{"dtype":"U8","shape":[65536],"data_offsets":[0,65536]}})", 65536));
  ShardSet set(dir.path());
  ASSERT_EQ(::truncate(path.c_str(), 50), 0);
  msg = error_of([&] { (void)set.find("w")->data(); }, ErrorKind::io);
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
}

// The checked read that convert uses for source data: a pread that finds the file shorter than
// at open reports an I/O error naming it (no window between a check and a load, as a mapping
// has). Bytes read before the truncation are the file's bytes.
TEST(File, CheckedReadOfATruncatedShardIsAnIoError) {
  test::TempDir dir;
  const std::string path = dir.file("shard.safetensors");
  std::vector<uint8_t> bytes = st_bytes(R"({"w":{"dtype":"U8","shape":[65536],"data_offsets":[0,65536]}})", 65536);
  const size_t data_start = bytes.size() - 65536;
  for (size_t i = 0; i < 65536; ++i) bytes[data_start + i] = static_cast<uint8_t>(i * 7);
  test::write_file(path, bytes);
  ShardSet set(dir.path());
  auto ref = set.find("w");
  ASSERT_TRUE(ref);
  std::vector<uint8_t> part(16);
  ref->read(1000, part);
  for (size_t i = 0; i < part.size(); ++i) EXPECT_EQ(part[i], static_cast<uint8_t>((1000 + i) * 7));
  EXPECT_EQ(ref->read_all().size(), 65536u);
  // Reading past the tensor is a logic error, whatever the file holds.
  std::vector<uint8_t> too_long(17);
  (void)error_of([&] { ref->read(65520, too_long); }, ErrorKind::internal);

  ASSERT_EQ(::truncate(path.c_str(), 30000), 0);  // cut in the middle of the data region
  std::string msg = error_of([&] { (void)ref->read_all(); }, ErrorKind::io);
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("changed while it was being read"), std::string::npos) << msg;
  ref->read(1000, part);  // still inside the file: fine
  EXPECT_EQ(part[0], static_cast<uint8_t>(1000 * 7));
}

}  // namespace
}  // namespace moepack::st
