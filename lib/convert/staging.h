// The artifact appears complete or not at all (docs/ARTIFACT.md): everything is written under
// OUT.tmp beside OUT and renamed at the end. A staging directory left by a killed run
// (kill -9) is recognised by its owner file and removed by the next run.
#pragma once

#include <string>

namespace moepack::convert {

class StagingDirectory {
 public:
  // Throws Error(usage) if `final_path` exists and `force` is false, Error(io) if OUT.tmp is
  // held by a live process or cannot be created.
  StagingDirectory(std::string final_path, bool force);
  ~StagingDirectory();  // removes the staging directory unless committed
  StagingDirectory(const StagingDirectory&) = delete;
  StagingDirectory& operator=(const StagingDirectory&) = delete;

  const std::string& path() const { return staging_path_; }
  std::string file(const std::string& name) const { return staging_path_ + "/" + name; }
  // fsyncs the directory, moves it into place (replacing OUT when forced).
  void commit();

 private:
  std::string final_path_;
  std::string staging_path_;
  bool force_;
  bool committed_ = false;
};

inline constexpr const char* kStagingOwnerFile = ".moepack-staging-owner";

}  // namespace moepack::convert
