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

// The progress of a long job over a known number of bytes, as zstd, pv and rsync's progress2
// show it: bytes done/total, percent, rate, ETA and what is being done now, on one line that is
// redrawn in place on a terminal (at most every min_interval) and, when stderr is not a terminal
// (--progress into a log), written as whole lines at most once a second. finish() ends it with
// a summary line. Called from one thread at a time.
class ByteProgress {
 public:
  ByteProgress(bool enabled, uint64_t total_bytes, uint64_t total_units, std::string unit_name,
               std::chrono::milliseconds min_interval = std::chrono::milliseconds(200));
  ~ByteProgress();
  ByteProgress(const ByteProgress&) = delete;
  ByteProgress& operator=(const ByteProgress&) = delete;
  // What is being done now (shown at the end of the line); `force` draws the line at once.
  void set_activity(std::string activity, bool force = false);
  void add(uint64_t bytes);
  void unit_done();  // one more of total_units (layers) complete
  // Clears the line and writes "<summary_prefix> <GB> in <s> s (<GB/s>), <extra>"; nothing when
  // disabled or when `summary_prefix` is empty.
  void finish(const std::string& summary_prefix = "", const std::string& extra = "");
  uint64_t done() const { return done_; }
  // The line as it would be drawn now (tests; also what draw() prints).
  std::string line() const;

 private:
  void draw(bool force);
  bool enabled_;
  bool terminal_;
  uint64_t total_;
  uint64_t total_units_;
  std::string unit_name_;
  std::chrono::milliseconds min_interval_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_{};
  uint64_t done_ = 0;
  uint64_t units_done_ = 0;
  std::string activity_;
  bool line_open_ = false;
  bool finished_ = false;
};

// "0:07", "12:03", "1:02:03".
std::string human_duration(double seconds);

// Whether progress should be shown for this process: stderr is a TTY unless forced or quiet.
bool progress_wanted(bool quiet, bool forced);

}  // namespace moepack
