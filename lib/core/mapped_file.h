// A read-only memory map of a whole file. Tensor views point into it, zero-copy.
// A file that shrinks after it was mapped would turn a read past its new end into SIGBUS, so
// readers that stream large regions call `check_unchanged()` before touching them (the size and
// mtime seen at open must still hold).
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
