// Streaming safetensors writer. The header is computed up front from the tensor list, then each
// tensor's bytes are appended in that order (in as many chunks as the caller likes): the whole
// model is never in memory. Output goes to PATH.partial, is fsynced and renamed to PATH on
// commit(); a writer destroyed before commit() removes its partial file.
//
// Header text follows the reference writer (huggingface/safetensors : tensor.rs `prepare`):
// `__metadata__` first, compact JSON, padded with spaces to a multiple of 8 bytes. Before a byte
// is written the header is run through our own reader's validation, so the writer can never
// produce a file the reader rejects.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "lib/core/dtype.h"
#include "lib/core/hash.h"
#include "lib/core/sequential_sink.h"

namespace moepack::st {

struct TensorSpec {
  std::string name;
  DType dtype = DType::U8;
  std::vector<uint64_t> shape;
};

// The reference writer's order: dtype descending in enum order, then name ascending.
void sort_like_reference_writer(std::vector<TensorSpec>& tensors);

// The header bytes (8-byte prefix + padded JSON) for these tensors in this order.
std::vector<uint8_t> build_header(const std::vector<TensorSpec>& tensors, const std::map<std::string, std::string>& metadata,
                                  const std::string& path_for_messages);

// When commit() makes the file durable. `now`: fsync before the rename (a file that stands alone).
// `deferred`: commit() only starts the write-back and renames; the caller fsyncs the file later,
// before anything points at it (convert fsyncs every file of its staging directory once, before
// the directory is renamed into place), so writing the next file overlaps this one's write-back.
enum class Durability { now, deferred };

class Writer {
 public:
  Writer(std::string path, std::vector<TensorSpec> tensors, std::map<std::string, std::string> metadata = {},
         Durability durability = Durability::now);
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // Appends bytes of the current tensor (moving on to the next one when it is full). `also`,
  // when given, is fed the same bytes: the file hash, `also` and the write take the bytes in
  // pieces small enough to stay in cache, so the caller's buffer is read from memory once.
  void write(std::span<const uint8_t> bytes, Xxh3Stream* also = nullptr);
  // The same with a function as the extra consumer (pieces in order, each while it is in cache):
  // the caller's hash of the source bytes it copies.
  using Feed = std::function<void(std::span<const uint8_t>)>;
  void write_fed(std::span<const uint8_t> bytes, const Feed& also);
  // Checks that every tensor got exactly its bytes, fsyncs (or, deferred, starts the write-back)
  // and renames into place.
  void commit();
  uint64_t total_bytes() const { return total_bytes_; }
  // XXH3-128 of every byte of the file (header included), valid after commit().
  const std::string& file_xxh3() const { return file_xxh3_; }
  const std::string& path() const { return path_; }

 private:
  void write_raw(std::span<const uint8_t> bytes, const Feed& also);
  // Moves the tensor cursor past `n` bytes just added to the file (n fits in the current tensor).
  void advance(uint64_t n);
  // Bytes the current tensor can still take; throws when every tensor is full.
  uint64_t room() const;
  std::string path_;
  std::string partial_path_;
  std::vector<TensorSpec> tensors_;
  std::vector<uint64_t> sizes_;
  size_t current_ = 0;
  uint64_t written_in_current_ = 0;
  uint64_t total_bytes_ = 0;
  int fd_ = -1;
  // Large files go to the device directly (lib/core/sequential_sink.h), others through the page cache.
  std::unique_ptr<SequentialSink> sink_;
  Durability durability_ = Durability::now;
  bool committed_ = false;
  Xxh3Stream file_hash_;
  std::string file_xxh3_;
};

// The text of a sharded checkpoint's index as Hugging Face writes one
// (model.safetensors.index.json): {"metadata": {"total_size": N}, "weight_map": {tensor: file}},
// names sorted, two-space indent, a final newline. total_size counts the bytes of the tensors
// listed; file.h's parse_shard_index reads it back.
std::string shard_index_text(const std::map<std::string, std::string>& weight_map, uint64_t total_size);

// Writes shard_index_text to `path`; Error(io) when the write fails.
void write_shard_index(const std::string& path, const std::map<std::string, std::string>& weight_map, uint64_t total_size);

}  // namespace moepack::st
