// A read-only memory map of a whole file. Tensor views point into it, zero-copy.
// A file that shrinks after it was mapped turns a read past its new end into SIGBUS, and no
// check before the access closes that race (the file can shrink between the check and the
// load). So the mapping is only for files this process trusts not to change (its own output,
// test fixtures); data of a source that a stranger may truncate is read with `read_at`, a
// checked pread that reports a short file as Error(io) naming it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace moepack {

class MappedFile {
 public:
  MappedFile() = default;
  explicit MappedFile(const std::string& path);  // throws Error(io) / Error(bad_input)
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  std::span<const uint8_t> bytes() const { return {data_, static_cast<size_t>(size_)}; }
  // Throws Error(io) naming the file when its size or modification time changed since open.
  void check_unchanged() const;
  // Copies dst.size() bytes from `offset` with pread. A range past the size seen at open is a
  // logic error (Error(internal)); a file that has shrunk since open, or a failing read, is
  // Error(io) naming the file. Safe to call from several threads at once.
  void read_at(uint64_t offset, std::span<uint8_t> dst) const;
  // Drops this process's references to the pages read so far (they stay in the page cache).
  // Streaming readers call it after each tensor so that resident memory stays bounded by what
  // is in flight, not by how much of the file was read.
  void drop_resident_pages() const;
  // The same for the whole pages inside `region` (a span of bytes()).
  void drop_resident_pages(std::span<const uint8_t> region) const;

 private:
  void release() noexcept;
  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  int64_t mtime_ns_ = 0;
  int fd_ = -1;
};

}  // namespace moepack
