#include "formats/safetensors/writer.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <fstream>
#include <set>
#include <unistd.h>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/safetensors/header.h"
#include "lib/core/error.h"
#include "lib/core/file_io.h"

namespace moepack::st {
namespace {

std::string quoted(const std::string& s) {
  // nlohmann's escaping (ensure_ascii off) matches serde_json's: \" \\ \b \f \n \r \t, other
  // control characters as \u00xx, everything else raw UTF-8.
  try {
    return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
  } catch (const nlohmann::json::exception&) {
    // Names and metadata come from validated inputs; invalid UTF-8 here is a caller's bug, and
    // it must surface as our Error, not as a library exception.
    throw_internal("writer: a tensor name or metadata string is not valid UTF-8");
  }
}

// Pieces in which a buffer is hashed (twice, for a packed tensor) and written: small enough to
// stay in the L2 cache between the passes, large enough that syscalls cost nothing beside them.
constexpr size_t kWritePiece = 256u << 10;
// Chunks written with one call, each hashed in kWritePiece steps first (it stays in L2 meanwhile).
constexpr size_t kWriteChunk = 1u << 20;

void put_le64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

}  // namespace

void sort_like_reference_writer(std::vector<TensorSpec>& tensors) {
  std::stable_sort(tensors.begin(), tensors.end(), [](const TensorSpec& a, const TensorSpec& b) {
    if (a.dtype != b.dtype) return a.dtype > b.dtype;
    return a.name < b.name;
  });
}

std::vector<uint8_t> build_header(const std::vector<TensorSpec>& tensors, const std::map<std::string, std::string>& metadata,
                                  const std::string& path) {
  std::string text = "{";
  bool first = true;
  if (!metadata.empty()) {
    text += "\"__metadata__\":{";
    bool mfirst = true;
    for (const auto& [k, v] : metadata) {
      if (!mfirst) text += ',';
      mfirst = false;
      text += quoted(k) + ":" + quoted(v);
    }
    text += "}";
    first = false;
  }
  std::set<std::string_view> seen;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    if (t.name == "__metadata__") throw_internal("writer: a tensor cannot be named __metadata__");
    if (!seen.insert(t.name).second) throw_internal("writer: duplicate tensor name `" + t.name + "` for " + path);
    uint64_t bytes = tensor_byte_size(t.dtype, t.shape, path, t.name);
    if (!first) text += ',';
    first = false;
    text += quoted(t.name) + ":{\"dtype\":\"" + std::string(dtype_name(t.dtype)) + "\",\"shape\":[";
    for (size_t i = 0; i < t.shape.size(); ++i) text += (i ? "," : "") + std::to_string(t.shape[i]);
    uint64_t end;
    if (__builtin_add_overflow(offset, bytes, &end)) throw_internal("writer: data region size overflows for " + path);
    text += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(end) + "]}";
    offset = end;
  }
  text += "}";
  while (text.size() % 8 != 0) text += ' ';
  if (text.size() > kMaxHeaderBytes) throw Error(ErrorKind::bad_input, path + ": safetensors: header too large to write (" + std::to_string(text.size()) + " bytes)");
  std::vector<uint8_t> out(8 + text.size());
  put_le64(out.data(), text.size());
  std::copy(text.begin(), text.end(), out.begin() + 8);
  // Never write what our reader would reject: validate against the final file size.
  parse_header_prefix(out, out.size() + offset, path);
  return out;
}

Writer::Writer(std::string path, std::vector<TensorSpec> tensors, std::map<std::string, std::string> metadata, Durability durability)
    : path_(std::move(path)), partial_path_(path_ + ".partial"), tensors_(std::move(tensors)), durability_(durability) {
  std::vector<uint8_t> header = build_header(tensors_, metadata, path_);
  for (const auto& t : tensors_) sizes_.push_back(tensor_byte_size(t.dtype, t.shape, path_, t.name));
  fd_ = ::open(partial_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw_io(partial_path_, "cannot create", errno);
  uint64_t file_bytes = header.size();
  for (uint64_t n : sizes_) file_bytes += n;
  sink_ = std::make_unique<SequentialSink>(fd_, partial_path_, file_bytes);
  write_raw(header, {});
  while (current_ < sizes_.size() && sizes_[current_] == 0) ++current_;
}

Writer::~Writer() {
  sink_.reset();  // stops its background writes before the file goes
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(partial_path_.c_str());
}

void Writer::write_raw(std::span<const uint8_t> bytes, const Feed& also) {
  while (!bytes.empty()) {
    // The hashes take the chunk in L2-sized steps, then one write of the whole chunk.
    const std::span<const uint8_t> chunk = bytes.first(std::min(bytes.size(), kWriteChunk));
    for (size_t at = 0; at < chunk.size(); at += kWritePiece) {
      const std::span<const uint8_t> piece = chunk.subspan(at, std::min(kWritePiece, chunk.size() - at));
      if (also) also(piece);
      file_hash_.update(piece);
    }
    sink_->append(chunk);
    total_bytes_ += chunk.size();
    bytes = bytes.subspan(chunk.size());
  }
}

uint64_t Writer::room() const {
  if (current_ >= tensors_.size()) throw_internal("writer: more bytes than the header declares for " + path_);
  return sizes_[current_] - written_in_current_;
}

void Writer::advance(uint64_t n) {
  written_in_current_ += n;
  if (written_in_current_ == sizes_[current_]) {
    ++current_;
    written_in_current_ = 0;
    while (current_ < sizes_.size() && sizes_[current_] == 0) ++current_;
  }
}

void Writer::write(std::span<const uint8_t> bytes, Xxh3Stream* also) {
  if (!also) return write_fed(bytes, {});
  write_fed(bytes, [also](std::span<const uint8_t> piece) { also->update(piece); });
}

void Writer::write_fed(std::span<const uint8_t> bytes, const Feed& also) {
  while (!bytes.empty()) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(room(), bytes.size()));
    write_raw(bytes.first(n), also);
    bytes = bytes.subspan(n);
    advance(n);
  }
}

void Writer::commit() {
  if (current_ != tensors_.size())
    throw_internal("writer: tensor `" + tensors_[current_].name + "` of " + path_ + " was not fully written");
  sink_->finish();
  if (durability_ == Durability::now) {
    if (::fsync(fd_) != 0) throw_io(partial_path_, "fsync failed", errno);
  } else {
    // Start writing the pages back now; whoever deferred the durability waits for them later.
    // Advisory: a filesystem without it still gets the caller's fsync.
    (void)::sync_file_range(fd_, 0, 0, SYNC_FILE_RANGE_WRITE);
  }
  if (::close(fd_) != 0) {
    fd_ = -1;
    throw_io(partial_path_, "close failed", errno);
  }
  fd_ = -1;
  if (::rename(partial_path_.c_str(), path_.c_str()) != 0) throw_io(path_, "cannot rename into place", errno);
  committed_ = true;
  file_xxh3_ = file_hash_.hex();
}

std::string shard_index_text(const std::map<std::string, std::string>& weight_map, uint64_t total_size) {
  const nlohmann::ordered_json index = {{"metadata", {{"total_size", total_size}}}, {"weight_map", weight_map}};
  return index.dump(2) + "\n";
}

void write_shard_index(const std::string& path, const std::map<std::string, std::string>& weight_map, uint64_t total_size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << shard_index_text(weight_map, total_size);
  out.close();
  if (!out) throw_io(path, "write failed", errno);
}

}  // namespace moepack::st
