// Scratch files for fuzz targets whose entry point takes a path. Created once per process and
// rewritten per input: an in-memory file (memfd) opened through /proc/self/fd, and a directory
// on tmpfs (/dev/shm when present), so a run of millions of inputs never touches a disk.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace moepack::fuzz {

// A file in memory whose contents are replaced by `set()`. `path()` names it for readers that
// take a path; each open() through it sees the current contents.
class MemFile {
 public:
  explicit MemFile(const char* name) : fd_(::memfd_create(name, MFD_CLOEXEC)) {
    if (fd_ < 0) throw std::runtime_error("memfd_create failed");
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { ::close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;

  const std::string& path() const { return path_; }
  void set(const uint8_t* data, size_t size) {
    if (::ftruncate(fd_, 0) != 0) throw std::runtime_error("ftruncate failed");
    size_t done = 0;
    while (done < size) {
      ssize_t n = ::pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      if (n <= 0) throw std::runtime_error("pwrite failed");
      done += static_cast<size_t>(n);
    }
  }

 private:
  int fd_;
  std::string path_;
};

// A directory removed at destruction; on tmpfs when the machine has one.
class ScratchDir {
 public:
  ScratchDir() {
    std::string base = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path().string();
    std::string tmpl = base + "/moepack-fuzz-XXXXXX";
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  void write(const std::string& name, const uint8_t* data, size_t size) const {
    std::ofstream out(file(name), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!out) throw std::runtime_error("cannot write " + file(name));
  }
  void write(const std::string& name, const std::vector<uint8_t>& bytes) const { write(name, bytes.data(), bytes.size()); }

 private:
  std::string path_;
};

}  // namespace moepack::fuzz
