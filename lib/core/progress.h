// Progress on stderr, as docs/CLI.md says: only when stderr is a terminal (or --progress), never
// with --quiet, rate-limited so that a fast loop does not flood the terminal.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace moepack {

class Progress {
 public:
  // enabled: the CLI's decision (terminal, --progress, --quiet).
  explicit Progress(bool enabled, std::chrono::milliseconds min_interval = std::chrono::milliseconds(200));
  ~Progress();
  // Shows "label: done/total unit" when at least min_interval passed since the last line.
  void update(const std::string& label, uint64_t done, uint64_t total, const char* unit = "");
  void finish();  // clears the line
  bool enabled() const { return enabled_; }

 private:
  bool enabled_;
  std::chrono::milliseconds min_interval_;
  std::chrono::steady_clock::time_point last_{};
  bool line_open_ = false;
};

// Whether progress should be shown for this process: stderr is a TTY unless forced or quiet.
bool progress_wanted(bool quiet, bool forced);

}  // namespace moepack
