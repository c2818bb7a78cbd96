// model.safetensors.index.json from a stranger: parse_shard_index on the bytes, then a whole
// st::ShardSet over a directory holding two valid shards and the fuzzed index, so shard names
// that escape the directory, name the index itself, a directory, or nothing at all are tried
// against the real opening code. The shards are written once; only the index changes.
// fuzz-links: moepack_safetensors
#include <filesystem>

#include "formats/safetensors/file.h"
#include "fuzz/fuzz_scratch.h"
#include "fuzz/fuzz_target.h"

namespace {

// Shard names and contents match the seeds (tests/safetensors/malformed_corpus.cpp), so the
// fuzzer starts from indexes that open.
const moepack::fuzz::ScratchDir& checkpoint_dir() {
  static moepack::fuzz::ScratchDir dir;
  static bool written = [] {
    auto shard = [](const std::string& header, size_t data) {
      std::vector<uint8_t> out;
      for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(header.size() >> (8 * i)));
      out.insert(out.end(), header.begin(), header.end());
      out.insert(out.end(), data, 0x5A);
      return out;
    };
    dir.write("model-00001-of-00002.safetensors", shard(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1));
    dir.write("model-00002-of-00002.safetensors", shard(R"({"b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", 4));
    std::filesystem::create_directory(dir.file("subdir"));
    return true;
  }();
  (void)written;
  return dir;
}

}  // namespace

MOEPACK_FUZZ_TARGET(st_index) {
  using namespace moepack;
  const fuzz::ScratchDir& dir = checkpoint_dir();
  const std::string index_path = dir.file("model.safetensors.index.json");
  dir.write("model.safetensors.index.json", data, size);
  std::string error;
  st::ShardIndex index;
  if (!fuzz::expect_input_error([&] { index = st::parse_shard_index(index_path); }, &error)) {
    MOEPACK_FUZZ_CHECK(error.find(index_path) != std::string::npos, "message does not name the index: " + error);
    return;
  }
  for (const auto& [tensor, shard] : index.weight_map) {
    std::filesystem::path p(shard);
    MOEPACK_FUZZ_CHECK(!shard.empty() && p.is_relative() && shard.find('\0') == std::string::npos, "unusable shard name accepted: " + shard);
    for (const auto& part : p) MOEPACK_FUZZ_CHECK(part != "..", "shard name leaving the directory accepted: " + shard);
  }
  bool ok = fuzz::expect_input_error(
      [&] {
        st::ShardSet set(dir.path());
        for (const auto& [tensor, shard] : index.weight_map) {
          auto ref = set.find(tensor);
          MOEPACK_FUZZ_CHECK(ref.has_value(), "indexed tensor missing from the set: " + tensor);
          MOEPACK_FUZZ_CHECK(ref->file->path() == (std::filesystem::path(dir.path()) / shard).string(), "tensor read from another shard: " + tensor);
        }
      },
      &error);
  if (!ok) MOEPACK_FUZZ_CHECK(error.find(dir.path()) != std::string::npos, "message does not name a file of the checkpoint: " + error);
}
