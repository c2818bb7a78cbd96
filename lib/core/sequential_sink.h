// The bytes of one output file, appended in order, written either through the page cache or,
// for large files, with O_DIRECT from a few aligned buffers that a background thread writes
// while the caller fills the next one.
//
// Why: writing into the page cache costs the kernel a copy into freshly allocated pages, and on
// this project's machines (VMs whose guest pages are backed on first touch) that copy ran at
// ~1.5 GB/s, 54% of a conversion's samples in perf (copy_folio_from_iter_atomic), and the
// write-back of those dirty pages then competes with the conversion for the cores. A direct
// write takes the buffer to the device without either: dd measured 1.6-1.8 GB/s direct against
// 0.4-0.8 GB/s buffered + fsync for the same 4.3 GB here. The output then is not left in the
// page cache, which for checkpoints larger than memory it could not be anyway.
//
// Direct I/O needs buffers, offsets and lengths aligned to the device's block: the buffers are
// 4096-aligned and written whole; the last one is padded with zeros to the block and the file
// is cut back to its length with ftruncate. A filesystem that refuses O_DIRECT (tmpfs, some
// network filesystems) either fails the open or the first write with EINVAL: the sink then
// writes the same bytes through the page cache, so the file is the same either way.
//
// Not thread-safe: one caller appends (the converter's serial write stage).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace moepack {

class SequentialSink {
 public:
  // Files at least this large are written directly.
  static constexpr uint64_t kDirectThreshold = 64ull << 20;

  // `fd`: the file, opened for writing and empty (owned by the caller, who closes it after
  // finish()); `path` names it in messages and is reopened with O_DIRECT when `expected_bytes`
  // reaches `direct_threshold`.
  SequentialSink(int fd, std::string path, uint64_t expected_bytes, uint64_t direct_threshold = kDirectThreshold);
  ~SequentialSink();
  SequentialSink(const SequentialSink&) = delete;
  SequentialSink& operator=(const SequentialSink&) = delete;

  // Throws Error(io) naming the file (disk full, a failed background write, ...).
  void append(std::span<const uint8_t> bytes);
  // Writes what is buffered, waits for the background writes and sets the file's exact length.
  void finish();
  // Whether the bytes went (or are going) to the device directly.
  bool direct() const { return direct_fd_ >= 0 && !fell_back_.load(); }
  uint64_t bytes_appended() const { return appended_; }

 private:
  struct Job {
    size_t buffer;    // index into buffers_
    size_t size;      // bytes to write from it (whole blocks)
    uint64_t offset;  // where they go in the file
  };
  uint8_t* buffer(size_t i) const { return buffers_[i].get(); }
  void submit(size_t size);
  void take_free_buffer();
  void io_loop();
  void write_job(const Job& job);
  void throw_if_failed();
  void stop_io();

  int fd_;
  std::string path_;
  int direct_fd_ = -1;
  uint64_t appended_ = 0;
  uint64_t submitted_ = 0;
  bool finished_ = false;

  struct FreeAligned {
    void operator()(uint8_t* p) const;
  };
  std::vector<std::unique_ptr<uint8_t, FreeAligned>> buffers_;
  size_t current_ = 0;  // the buffer being filled
  size_t filled_ = 0;

  // Shared with the I/O thread.
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Job> queue_;
  std::vector<size_t> free_;
  bool busy_ = false;  // the I/O thread is writing a job
  bool stop_ = false;
  std::exception_ptr failure_;  // the first failed write's Error, rethrown to the caller
  std::atomic<bool> fell_back_{false};
  std::thread io_;
};

}  // namespace moepack
