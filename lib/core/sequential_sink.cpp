#include "lib/core/sequential_sink.h"

#include <mutex>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

#include "lib/core/error.h"
#include "lib/core/file_io.h"

namespace moepack {
namespace {

// Each background write: large enough for the device to stream, small enough that three of them
// add little to a conversion's memory.
constexpr size_t kBufferBytes = 4u << 20;
constexpr size_t kBuffers = 3;
// Whole pages: the kernel copies them into the page cache a page at a time.
constexpr size_t kBufferAlignment = 4096;

// A failed write, write-back or flush of `path` with errno `e`, as the writer reports it.
[[noreturn]] void throw_write_failure(const std::string& path, int e) {
  throw_io(path, e == ENOSPC ? "disk full while writing" : (e == EFBIG ? "file size limit reached while writing" : "write failed"), e);
}

// Background-write buffers outlive their sink: one output file after another (a sharded artifact,
// several artifacts side by side) reuses the same few, instead of each file's buffers being
// freed into the heap and new ones taken beside them. Freed at exit.
struct BufferPool {
  std::mutex mutex;
  std::vector<uint8_t*> buffers;
  ~BufferPool() {
    for (uint8_t* p : buffers) std::free(p);
  }
};

BufferPool& buffer_pool() {
  static BufferPool pool;
  return pool;
}

uint8_t* take_buffer() {
  BufferPool& pool = buffer_pool();
  {
    std::lock_guard lock(pool.mutex);
    if (!pool.buffers.empty()) {
      uint8_t* p = pool.buffers.back();
      pool.buffers.pop_back();
      return p;
    }
  }
  return static_cast<uint8_t*>(std::aligned_alloc(kBufferAlignment, kBufferBytes));
}

}  // namespace

void SequentialSink::FreeAligned::operator()(uint8_t* p) const {
  BufferPool& pool = buffer_pool();
  std::lock_guard lock(pool.mutex);
  pool.buffers.push_back(p);
}

SequentialSink::SequentialSink(int fd, std::string path, uint64_t expected_bytes, uint64_t background_threshold)
    : fd_(fd), path_(std::move(path)) {
  if (expected_bytes < background_threshold) return;
  for (size_t i = 0; i < kBuffers; ++i) {
    uint8_t* p = take_buffer();
    if (!p) throw_io(path_, "cannot allocate the write buffers", ENOMEM);
    buffers_.emplace_back(p);
    if (i > 0) free_.push_back(i);
  }
  io_ = std::thread([this] { io_loop(); });
  flusher_ = std::thread([this] { flush_loop(); });
}

SequentialSink::~SequentialSink() { stop_io(); }

void SequentialSink::stop_io() {
  if (!io_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  io_.join();
  flusher_.join();
}

void SequentialSink::append(std::span<const uint8_t> bytes) {
  if (finished_) throw_internal("sequential sink: append after finish for " + path_);
  appended_ += bytes.size();
  if (buffers_.empty()) return write_all(fd_, bytes, path_);
  while (!bytes.empty()) {
    const size_t n = std::min(bytes.size(), kBufferBytes - filled_);
    std::memcpy(buffer(current_) + filled_, bytes.data(), n);
    filled_ += n;
    bytes = bytes.subspan(n);
    if (filled_ == kBufferBytes) {
      submit(kBufferBytes);
      take_free_buffer();
    }
  }
}

void SequentialSink::finish() {
  if (finished_) return;
  finished_ = true;
  if (buffers_.empty()) return;
  if (filled_ > 0) submit(filled_);
  {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return (queue_.empty() && !busy_) || failure_; });
  }
  stop_io();
  throw_if_failed();
}

void SequentialSink::submit(size_t size) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back({current_, size, submitted_});
  }
  changed_.notify_all();
  submitted_ += size;
  filled_ = 0;
}

void SequentialSink::take_free_buffer() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !free_.empty() || failure_; });
  if (failure_) std::rethrow_exception(failure_);
  current_ = free_.back();
  free_.pop_back();
}

void SequentialSink::throw_if_failed() {
  std::lock_guard lock(mutex_);
  if (failure_) std::rethrow_exception(failure_);
}

void SequentialSink::io_loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopped with nothing left
      job = queue_.front();
      queue_.pop_front();
      busy_ = true;
    }
    std::exception_ptr failed;
    try {
      write_job(job);
    } catch (...) {
      failed = std::current_exception();
    }
    {
      std::lock_guard lock(mutex_);
      busy_ = false;
      free_.push_back(job.buffer);
      if (failed && !failure_) failure_ = failed;
      flush_wanted_ = flush_wanted_ || job.offset / kFlushEvery != (job.offset + job.size) / kFlushEvery;
    }
    changed_.notify_all();
  }
}

// Why flush while writing: the device behind this project's VMs caches what it is given and
// writes it out at a flush. Left to the final fsync, that flush took 0.33-0.5 s after the last
// write of an 848 MB file; flushed every 64 MiB from this thread, most of it overlaps the
// conversion (7 interleaved rounds, medians: 1.00 s -> 0.73 s, cp + sync 0.76 s). The flush runs
// beside the writes, not between them, so the writer never waits for it. Only EIO and ENOSPC
// are errors here (a device file or tmpfs may refuse the call); the caller's fsync still makes
// the whole file durable.
void SequentialSink::flush_loop() {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stop_ || flush_wanted_; });
      if (!flush_wanted_) return;  // stopped; the caller's fsync makes the file durable
      flush_wanted_ = false;
    }
    const int e = ::fdatasync(fd_) == 0 ? 0 : errno;
    if (e == EIO || e == ENOSPC) {
      std::lock_guard lock(mutex_);
      if (!failure_) {
        try {
          throw_write_failure(path_, e);
        } catch (...) {
          failure_ = std::current_exception();
        }
      }
    }
    changed_.notify_all();
  }
}

void SequentialSink::write_job(const Job& job) {
  const uint8_t* p = buffer(job.buffer);
  size_t done = 0;
  while (done < job.size) {
    const ssize_t n = ::pwrite(fd_, p + done, job.size - done, static_cast<off_t>(job.offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_write_failure(path_, errno);
    }
    done += static_cast<size_t>(n);
  }
  // Start this range's write-back now. Pacing, not durability (the caller's fsync makes the file
  // durable): where there is no write-back to start (tmpfs, a device file) the call fails or
  // does nothing, and the bytes are written all the same.
  ::sync_file_range(fd_, static_cast<off_t>(job.offset), static_cast<off_t>(job.size), SYNC_FILE_RANGE_WRITE);
  if (job.offset < kWriteBehind) return;
  // Wait for the range kWriteBehind back and let its pages go. A write-back error found here is
  // the write's error.
  const off_t behind = static_cast<off_t>(job.offset - kWriteBehind);
  if (::sync_file_range(fd_, behind, static_cast<off_t>(job.size), SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER) != 0) {
    const int e = errno;
    if (e == EIO || e == ENOSPC) throw_write_failure(path_, e);
  }
  ::posix_fadvise(fd_, behind, static_cast<off_t>(job.size), POSIX_FADV_DONTNEED);
}

}  // namespace moepack
