#include "lib/core/mapped_file.h"

#include <cerrno>
#include <cstdint>
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

// Why the mapping starts on a 2 MiB boundary: the kernel maps a file's page-cache folios of
// 2 MiB with one page-table entry each (PMD) only where the virtual address and the file offset
// agree modulo 2 MiB, and MADV_HUGEPAGE asks its fault readahead for such folios (ext4 and xfs
// on Linux 6.x keep them). With 4 KiB entries a pass over the experts' weights walks the page
// tables every 4 KiB and the hardware prefetchers stop at each page's end: the decode kernels,
// bound by the bytes they stream, read a mapped artifact 10-20% slower than the same bytes in
// huge pages (measured on Zen 5, `bench experts` at one token). Elsewhere (a filesystem without
// large folios, THP off) the advice is ignored and the mapping behaves as a plain one.
void* map_huge_aligned(int fd, size_t size) {
  constexpr size_t kHuge = size_t{2} << 20;
  if (size < kHuge) return ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  // Reserve room for an aligned start, map the file over it, give the rest back.
  void* reserved = ::mmap(nullptr, size + kHuge, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reserved == MAP_FAILED) return ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const uintptr_t base = reinterpret_cast<uintptr_t>(reserved);
  const uintptr_t start = (base + kHuge - 1) & ~(uintptr_t{kHuge} - 1);
  void* p = ::mmap(reinterpret_cast<void*>(start), size, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0);
  if (p == MAP_FAILED) {
    const int e = errno;
    ::munmap(reserved, size + kHuge);
    errno = e;
    return MAP_FAILED;
  }
  if (start > base) ::munmap(reserved, start - base);
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t end = start + (size + page - 1) / page * page;
  if (base + size + kHuge > end) ::munmap(reinterpret_cast<void*>(end), base + size + kHuge - end);
  ::madvise(p, size, MADV_HUGEPAGE);  // advice only: refused on kernels without THP
  return p;
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
    void* p = map_huge_aligned(fd_, static_cast<size_t>(size_));
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
