// The bytes of one output file, appended in order: for large files, from a few buffers that a
// background thread writes while the caller fills the next one, with the file's write-back
// started as each buffer lands, the pages a little behind it waited for and let go, and the
// device flushed every 64 MiB by a second thread.
//
// Why this way (measured on the 848 MB expert-only gpt-oss-20b checkpoint, 2-vCPU VM, ext4 on
// virtio; convert sm90 against `cp -r` + `sync`, 6-7 interleaved rounds, medians):
//   * O_DIRECT writes (this sink until 2026-12): 1.14 s against 0.74 s. Each direct write lands
//     in the host's cache quickly, but the final fsync then waits 0.25-0.5 s for all of it, and
//     a raw O_DIRECT writer (4 MiB at queue depth 1-8, or 64 MiB writes) reached the same
//     0.8-1.0 GB/s, where the page cache's write-back ran at 1.4 GB/s.
//   * page-cache writes left to the kernel until the final fsync: 1.3-2.6 s (dirty-page
//     throttling and one long write-back at the end).
//   * page-cache writes whose write-back starts per buffer (sync_file_range WRITE), with the
//     range kWriteBehind bytes back waited for and dropped from the cache: 0.90-0.92 s. The
//     device is busy from the first buffer on, the final fsync finds little left, and the
//     output occupies at most about kWriteBehind bytes of page cache, whatever the file size
//     (so converting a model larger than memory does not evict its source). 32 MiB behind gave
//     0.95 s, 64-128 MiB 0.92, 256 MiB 1.06.
//   * the same, with the file fdatasync'ed every kFlushEvery bytes by a thread of its own while
//     the writes go on: 0.73 s against cp + sync's 0.76 s (cpu-amx: 0.68 against 0.70). The
//     device caches what it is given and writes it out at a flush; one final flush waited
//     0.33-0.5 s after the last write, and flushing along the way overlaps that with the work.
// On a whole real-shape gpt-oss-20b (13.8 GB written) every variant took 10.4-11 s.
//
// Not thread-safe: one caller appends (the converter's serial write stage).
#pragma once

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
  // Files at least this large are written by the background thread; smaller ones by the caller.
  static constexpr uint64_t kBackgroundThreshold = 64ull << 20;
  // How far behind the newest write the written pages are waited for and let go.
  static constexpr uint64_t kWriteBehind = 128ull << 20;
  // Every this many bytes the file is fdatasync'ed by a thread of its own, while the writes go on.
  static constexpr uint64_t kFlushEvery = 64ull << 20;

  // `fd`: the file, opened for writing and empty (owned by the caller, who closes it after
  // finish() and makes it durable); `path` names it in messages.
  SequentialSink(int fd, std::string path, uint64_t expected_bytes, uint64_t background_threshold = kBackgroundThreshold);
  ~SequentialSink();
  SequentialSink(const SequentialSink&) = delete;
  SequentialSink& operator=(const SequentialSink&) = delete;

  // Throws Error(io) naming the file (disk full, a failed background write, ...).
  void append(std::span<const uint8_t> bytes);
  // Writes what is buffered and waits for the background writes.
  void finish();
  // Whether a background thread writes the bytes.
  bool background() const { return !buffers_.empty(); }
  uint64_t bytes_appended() const { return appended_; }

 private:
  struct Job {
    size_t buffer;    // index into buffers_
    size_t size;      // bytes to write from it
    uint64_t offset;  // where they go in the file
  };
  uint8_t* buffer(size_t i) const { return buffers_[i].get(); }
  void submit(size_t size);
  void take_free_buffer();
  void io_loop();
  void flush_loop();
  void write_job(const Job& job);
  void throw_if_failed();
  void stop_io();

  int fd_;
  std::string path_;
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
  bool flush_wanted_ = false;  // the I/O thread passed a kFlushEvery boundary since the last flush
  std::exception_ptr failure_;  // the first failed write's Error, rethrown to the caller
  std::thread io_;
  std::thread flusher_;
};

}  // namespace moepack
