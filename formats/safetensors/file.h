// A validated, memory-mapped safetensors file, and a set of them (a checkpoint directory,
// sharded or not). Tensor data are zero-copy views into the mapping.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "formats/safetensors/header.h"
#include "lib/core/mapped_file.h"

namespace moepack::st {

class File {
 public:
  explicit File(const std::string& path);  // maps and validates every header rule
  const std::string& path() const { return map_.path(); }
  const Header& header() const { return header_; }
  uint64_t file_size() const { return map_.size(); }
  const TensorInfo* find(std::string_view name) const;
  // The tensor's bytes. Before handing out a view of a region it may touch for the first time,
  // the mapping is checked against the file on disk (a shrunk file would fault).
  // Zero-copy view into the mapping: only for files that cannot change under this process (its
  // own output, fixtures). A source checkpoint is read with `read`, which never faults.
  std::span<const uint8_t> data(const TensorInfo& t) const;
  // Checked copy of dst.size() bytes starting `offset` bytes into tensor `t` (see MappedFile::read_at).
  void read(const TensorInfo& t, uint64_t offset, std::span<uint8_t> dst) const;
  std::vector<uint8_t> read_all(const TensorInfo& t) const;
  const MappedFile& mapping() const { return map_; }
  void drop_resident_pages() const { map_.drop_resident_pages(); }
  void drop_resident_pages(std::span<const uint8_t> region) const { map_.drop_resident_pages(region); }

 private:
  MappedFile map_;
  Header header_;
  std::unordered_map<std::string_view, size_t> by_name_;
};

struct TensorRef {
  const File* file = nullptr;
  const TensorInfo* info = nullptr;
  std::span<const uint8_t> data() const { return file->data(*info); }
  void read(uint64_t offset, std::span<uint8_t> dst) const { file->read(*info, offset, dst); }
  std::vector<uint8_t> read_all() const { return file->read_all(*info); }
};

// model.safetensors.index.json, validated.
struct ShardIndex {
  std::unordered_map<std::string, std::string> weight_map;  // tensor name -> shard file name
  std::vector<std::string> shard_names;                     // distinct, sorted
  bool has_total_size = false;
  uint64_t total_size = 0;
};
ShardIndex parse_shard_index(const std::string& path);

// Every safetensors file of a checkpoint. A directory with an index reads exactly the shards it
// names (as vLLM does); without one, every *.safetensors file in it. A single file is a set of one.
class ShardSet {
 public:
  explicit ShardSet(const std::string& path);
  const std::string& root() const { return root_; }        // the directory (or the file's directory)
  bool is_directory() const { return is_directory_; }
  bool has_index() const { return has_index_; }
  const std::vector<std::unique_ptr<File>>& files() const { return files_; }
  std::optional<TensorRef> find(std::string_view name) const;
  // All tensor names, sorted.
  std::vector<std::string> names() const;
  size_t tensor_count() const { return by_name_.size(); }
  // Tensors present in a shard but absent from the index (reported, not fatal).
  const std::vector<std::string>& unindexed() const { return unindexed_; }

 private:
  std::string root_;
  bool is_directory_ = false;
  bool has_index_ = false;
  std::vector<std::unique_ptr<File>> files_;
  // Keys view the names inside each File's header, which live as long as the set.
  std::unordered_map<std::string_view, TensorRef> by_name_;
  std::vector<std::string> unindexed_;
};

}  // namespace moepack::st
