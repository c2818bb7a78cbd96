#include "lib/core/progress.h"

#include <cstdio>
#include <unistd.h>

namespace moepack {

Progress::Progress(bool enabled, std::chrono::milliseconds min_interval) : enabled_(enabled), min_interval_(min_interval) {}

Progress::~Progress() { finish(); }

void Progress::update(const std::string& label, uint64_t done, uint64_t total, const char* unit) {
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  if (line_open_ && done != total && now - last_ < min_interval_) return;
  last_ = now;
  std::fprintf(stderr, "\r\033[K%s: %llu/%llu%s", label.c_str(), static_cast<unsigned long long>(done),
               static_cast<unsigned long long>(total), unit);
  std::fflush(stderr);
  line_open_ = true;
}

void Progress::finish() {
  if (!enabled_ || !line_open_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  line_open_ = false;
}

bool progress_wanted(bool quiet, bool forced) {
  if (quiet) return false;
  return forced || ::isatty(STDERR_FILENO);
}

}  // namespace moepack
