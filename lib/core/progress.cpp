#include "lib/core/progress.h"

#include <algorithm>
#include <cstdio>
#include <unistd.h>

#include "lib/core/tensor.h"

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

ByteProgress::ByteProgress(bool enabled, uint64_t total_bytes, uint64_t total_units, std::string unit_name, std::chrono::milliseconds min_interval)
    : enabled_(enabled),
      terminal_(::isatty(STDERR_FILENO) != 0),
      total_(total_bytes),
      total_units_(total_units),
      unit_name_(std::move(unit_name)),
      min_interval_(terminal_ ? min_interval : std::max(min_interval, std::chrono::milliseconds(1000))),
      start_(std::chrono::steady_clock::now()) {}

ByteProgress::~ByteProgress() {
  if (enabled_ && line_open_ && terminal_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  }
}

void ByteProgress::set_activity(std::string activity, bool force) {
  activity_ = std::move(activity);
  draw(force);
}

void ByteProgress::add(uint64_t bytes) {
  done_ += bytes;
  draw(false);
}

void ByteProgress::unit_done() {
  ++units_done_;
  draw(false);
}

std::string human_duration(double seconds) {
  if (!(seconds >= 0) || seconds > 359999) return "--:--";
  const auto s = static_cast<unsigned long long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%llu:%02llu:%02llu", s / 3600, s / 60 % 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%llu:%02llu", s / 60, s % 60);
  return buf;
}

std::string ByteProgress::line() const {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = elapsed > 0 ? static_cast<double>(done_) / elapsed : 0.0;
  char head[160];
  std::snprintf(head, sizeof head, "%s %llu/%llu  %s / %s  %3.0f%%  %s/s  ETA %s", unit_name_.c_str(),
                static_cast<unsigned long long>(units_done_), static_cast<unsigned long long>(total_units_), human_bytes(done_).c_str(),
                human_bytes(total_).c_str(), total_ ? 100.0 * static_cast<double>(done_) / static_cast<double>(total_) : 100.0,
                human_bytes(static_cast<uint64_t>(rate)).c_str(),
                rate > 0 && done_ > 0 ? human_duration(static_cast<double>(total_ - std::min(done_, total_)) / rate).c_str() : "--:--");
  std::string out = head;
  if (!activity_.empty()) out += "  " + activity_;
  return out;
}

void ByteProgress::draw(bool force) {
  if (!enabled_ || finished_) return;
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - last_ < min_interval_) return;
  last_ = now;
  const std::string text = line();
  if (terminal_) std::fprintf(stderr, "\r\033[K%s", text.c_str());
  else std::fprintf(stderr, "%s\n", text.c_str());
  std::fflush(stderr);
  line_open_ = true;
}

void ByteProgress::finish(const std::string& summary_prefix, const std::string& extra) {
  if (!enabled_ || finished_) return;
  finished_ = true;
  if (line_open_ && terminal_) std::fprintf(stderr, "\r\033[K");
  line_open_ = false;
  if (!summary_prefix.empty()) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double rate = elapsed > 0 ? static_cast<double>(done_) / elapsed : 0.0;
    std::fprintf(stderr, "%s %s in %.2f s (%s/s)%s%s\n", summary_prefix.c_str(), human_bytes(done_).c_str(), elapsed,
                 human_bytes(static_cast<uint64_t>(rate)).c_str(), extra.empty() ? "" : ", ", extra.c_str());
  }
  std::fflush(stderr);
}

bool progress_wanted(bool quiet, bool forced) {
  if (quiet) return false;
  return forced || ::isatty(STDERR_FILENO);
}

}  // namespace moepack
