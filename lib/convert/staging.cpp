#include "lib/convert/staging.h"

#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "lib/core/error.h"

namespace moepack::convert {
namespace fs = std::filesystem;
namespace {

bool process_alive(pid_t pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

// Makes a directory's entries (or, `directory` false, a file's bytes) durable.
void fsync_path(const std::string& path, bool directory = true) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (directory ? O_DIRECTORY : 0));
  if (fd < 0) throw_io(path, directory ? "cannot open directory to sync it" : "cannot open to fsync", errno);
  int rc = ::fsync(fd);
  int e = errno;
  ::close(fd);
  if (rc != 0) throw_io(path, "fsync failed", e);
}

}  // namespace

StagingDirectory::StagingDirectory(std::string final_path, bool force)
    : final_path_(std::move(final_path)), force_(force) {
  while (final_path_.size() > 1 && final_path_.back() == '/') final_path_.pop_back();
  staging_path_ = final_path_ + ".tmp";
  std::error_code ec;
  if (fs::exists(final_path_, ec) && !force_)
    throw Error(ErrorKind::usage, final_path_ + ": output already exists (pass --force to replace it)");
  if (fs::exists(staging_path_, ec)) {
    // A previous run's leftovers: remove them only if the process that made them is gone.
    std::ifstream owner(staging_path_ + "/" + kStagingOwnerFile);
    pid_t pid = 0;
    if (owner >> pid && process_alive(pid) && pid != ::getpid())
      throw Error(ErrorKind::io, staging_path_ + ": another moepack process (pid " + std::to_string(pid) + ") is writing here");
    if (!owner.is_open() && !fs::is_empty(staging_path_, ec))
      throw Error(ErrorKind::io, staging_path_ + ": exists and was not made by moepack; remove it or choose another output");
    fs::remove_all(staging_path_, ec);
    if (ec) throw_io(staging_path_, "cannot remove a stale staging directory: " + ec.message(), 0);
  }
  if (!fs::create_directories(staging_path_, ec) || ec) throw_io(staging_path_, "cannot create: " + ec.message(), 0);
  std::ofstream owner(staging_path_ + "/" + kStagingOwnerFile);
  owner << ::getpid() << "\n";
  if (!owner.flush()) throw_io(staging_path_, "cannot write the owner file", errno);
}

StagingDirectory::~StagingDirectory() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(staging_path_, ec);
}

void StagingDirectory::commit() {
  std::error_code ec;
  fs::remove(staging_path_ + "/" + kStagingOwnerFile, ec);
  // The shards were written with deferred durability (their write-back started as each was
  // committed): every file is on disk before the directory that names them moves into place.
  for (const auto& entry : fs::recursive_directory_iterator(staging_path_, ec)) {
    if (entry.is_regular_file()) fsync_path(entry.path().string(), false);
  }
  if (ec) throw_io(staging_path_, "cannot list: " + ec.message(), 0);
  fsync_path(staging_path_);
  std::string parent = fs::path(final_path_).parent_path().string();
  if (parent.empty()) parent = ".";
  if (fs::exists(final_path_, ec)) {
    // Forced replacement: move the old output aside first so a failure never leaves neither.
    std::string old = final_path_ + ".old";
    fs::remove_all(old, ec);
    fs::rename(final_path_, old, ec);
    if (ec) throw_io(final_path_, "cannot move the existing output aside: " + ec.message(), 0);
    fs::rename(staging_path_, final_path_, ec);
    if (ec) {
      std::error_code ignored;
      fs::rename(old, final_path_, ignored);
      throw_io(final_path_, "cannot move the new output into place: " + ec.message(), 0);
    }
    fs::remove_all(old, ec);
  } else {
    fs::rename(staging_path_, final_path_, ec);
    if (ec) throw_io(final_path_, "cannot move the output into place: " + ec.message(), 0);
  }
  fsync_path(parent);
  committed_ = true;
}

}  // namespace moepack::convert
