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

// The alignment direct I/O asks of memory, offsets and lengths: a page covers every block size
// Linux filesystems use.
constexpr size_t kBlock = 4096;
// Each background write: large enough for the device to stream, small enough that three of them
// add little to a conversion's memory.
constexpr size_t kBufferBytes = 4u << 20;
constexpr size_t kBuffers = 3;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// Direct-write buffers outlive their sink: one output file after another (a sharded artifact,
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
  return static_cast<uint8_t*>(std::aligned_alloc(kBlock, kBufferBytes));
}

}  // namespace

void SequentialSink::FreeAligned::operator()(uint8_t* p) const {
  BufferPool& pool = buffer_pool();
  std::lock_guard lock(pool.mutex);
  pool.buffers.push_back(p);
}

SequentialSink::SequentialSink(int fd, std::string path, uint64_t expected_bytes, uint64_t direct_threshold)
    : fd_(fd), path_(std::move(path)) {
  if (expected_bytes < direct_threshold) return;
  direct_fd_ = ::open(path_.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
  if (direct_fd_ < 0) return;  // refused (EINVAL on tmpfs): through the page cache
  for (size_t i = 0; i < kBuffers; ++i) {
    uint8_t* p = take_buffer();
    if (!p) throw_io(path_, "cannot allocate the direct-write buffers", ENOMEM);
    buffers_.emplace_back(p);
    if (i > 0) free_.push_back(i);
  }
  io_ = std::thread([this] { io_loop(); });
}

SequentialSink::~SequentialSink() {
  stop_io();
  if (direct_fd_ >= 0) ::close(direct_fd_);
}

void SequentialSink::stop_io() {
  if (!io_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  io_.join();
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
  // The tail, padded with zeros to whole blocks (cut back below).
  const size_t padded = round_up(filled_, kBlock);
  if (padded > 0) {
    std::memset(buffer(current_) + filled_, 0, padded - filled_);
    submit(padded);
  }
  {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return (queue_.empty() && !busy_) || failure_; });
  }
  stop_io();
  throw_if_failed();
  if (submitted_ != appended_ && ::ftruncate(fd_, static_cast<off_t>(appended_)) != 0) throw_io(path_, "cannot set the file's length", errno);
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
    }
    changed_.notify_all();
  }
}

void SequentialSink::write_job(const Job& job) {
  const uint8_t* p = buffer(job.buffer);
  size_t done = 0;
  while (done < job.size) {
    const bool direct = !fell_back_.load();
    const ssize_t n = ::pwrite(direct ? direct_fd_ : fd_, p + done, job.size - done, static_cast<off_t>(job.offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      // A filesystem that opened O_DIRECT but refuses this I/O: the same bytes through the page cache.
      if (errno == EINVAL && direct) {
        fell_back_.store(true);
        continue;
      }
      const int e = errno;
      throw_io(path_, e == ENOSPC ? "disk full while writing" : (e == EFBIG ? "file size limit reached while writing" : "write failed"), e);
    }
    done += static_cast<size_t>(n);
  }
}

}  // namespace moepack
