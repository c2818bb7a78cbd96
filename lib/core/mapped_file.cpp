#include "lib/core/mapped_file.h"

#include <cerrno>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/core/error.h"

namespace moepack {
namespace {
int64_t mtime_ns(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}
}  // namespace

MappedFile::MappedFile(const std::string& path) : path_(path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever; the
  // regular-file check below then refuses it. It changes nothing for a regular file.
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) throw_io(path, "cannot open", errno);
  struct stat st{};
  if (::fstat(fd_, &st) != 0) {
    int e = errno;
    release();
    throw_io(path, "cannot stat", e);
  }
  if (!S_ISREG(st.st_mode)) {
    release();
    throw_bad_input(path, "", "not a regular file");
  }
  size_ = static_cast<uint64_t>(st.st_size);
  mtime_ns_ = mtime_ns(st);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, static_cast<size_t>(size_), PROT_READ, MAP_PRIVATE, fd_, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      release();
      throw_io(path, "cannot map", e);
    }
    data_ = static_cast<const uint8_t*>(p);
  }
}

MappedFile::~MappedFile() { release(); }

MappedFile::MappedFile(MappedFile&& o) noexcept
    : path_(std::move(o.path_)), data_(o.data_), size_(o.size_), mtime_ns_(o.mtime_ns_), fd_(o.fd_) {
  o.data_ = nullptr;
  o.size_ = 0;
  o.fd_ = -1;
}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    data_ = o.data_;
    size_ = o.size_;
    mtime_ns_ = o.mtime_ns_;
    fd_ = o.fd_;
    o.data_ = nullptr;
    o.size_ = 0;
    o.fd_ = -1;
  }
  return *this;
}

void MappedFile::release() noexcept {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), static_cast<size_t>(size_));
  if (fd_ >= 0) ::close(fd_);
  data_ = nullptr;
  fd_ = -1;
}

void MappedFile::check_unchanged() const {
  if (fd_ < 0) return;
  struct stat st{};
  if (::fstat(fd_, &st) != 0) throw_io(path_, "cannot stat", errno);
  if (static_cast<uint64_t>(st.st_size) != size_ || mtime_ns(st) != mtime_ns_)
    throw Error(ErrorKind::io, path_ + ": the file changed while it was being read (size " +
                                   std::to_string(size_) + " at open, " + std::to_string(st.st_size) + " now)");
}

void MappedFile::read_at(uint64_t offset, std::span<uint8_t> dst) const {
  if (offset > size_ || dst.size() > size_ - offset)
    throw Error(ErrorKind::internal, path_ + ": read of " + std::to_string(dst.size()) + " bytes at offset " + std::to_string(offset) +
                                         " is outside the file (" + std::to_string(size_) + " bytes)");
  size_t got = 0;
  while (got < dst.size()) {
    ssize_t n = ::pread(fd_, dst.data() + got, dst.size() - got, static_cast<off_t>(offset + got));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_io(path_, "cannot read", errno);
    }
    if (n == 0) {
      check_unchanged();  // names the new size when the file shrank
      throw Error(ErrorKind::io, path_ + ": the file ended early: " + std::to_string(dst.size()) + " bytes wanted at offset " +
                                     std::to_string(offset) + ", only " + std::to_string(got) + " there");
    }
    got += static_cast<size_t>(n);
  }
}

void MappedFile::drop_resident_pages() const {
  // MADV_DONTNEED on a private read-only file mapping only unmaps the pages: the next access
  // faults them back in from the page cache, with the same bytes.
  if (data_ && size_ > 0) ::madvise(const_cast<uint8_t*>(data_), static_cast<size_t>(size_), MADV_DONTNEED);
}

void MappedFile::drop_resident_pages(std::span<const uint8_t> region) const {
  if (!data_ || region.empty()) return;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  uintptr_t begin = reinterpret_cast<uintptr_t>(region.data());
  uintptr_t end = begin + region.size();
  const uintptr_t lo = reinterpret_cast<uintptr_t>(data_), hi = lo + static_cast<uintptr_t>(size_);
  if (begin < lo || end > hi) return;
  begin = (begin + page - 1) / page * page;  // whole pages only: neighbours may still be in use
  end = end / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace moepack
