#include "lib/convert/source_hash.h"

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

#include "lib/core/error.h"

namespace moepack::convert {
namespace {

// The reader's pieces: what pread brings in is hashed while it is still in the L2 cache.
constexpr uint64_t kReadPiece = 1u << 20;
// A consumer waits for the reader to reach its range when no more than this is left before it.
constexpr uint64_t kWaitForReader = 16u << 20;

// How much faster the reader gets through a file (pread from the page cache and XXH3) than the
// conversion writes output, with margin: a range is taken by its consumer only when the bytes of
// its file after it can be read by the reader in the time left for the rest of the output
// (bytes after <= 3/2 x output after), so holding the reader behind it does not add a tail.
// It changes only which thread hashes which bytes, never the value.
constexpr uint64_t kReaderSpeedNum = 3, kReaderSpeedDen = 2;

}  // namespace

SourceHasher::SourceHasher(std::vector<File> files, const std::vector<Offer>& offers, uint64_t output_bytes) {
  files_ = std::vector<FileState>(files.size());  // FileState holds a stream: built in place
  for (size_t i = 0; i < files.size(); ++i) files_[i].file = std::move(files[i]);
  // Which offers become consumer segments, per file in file order.
  std::vector<std::vector<Segment>> taken(files_.size());
  std::vector<uint64_t> sim_frontier(files_.size(), 0);
  for (size_t k = 0; k < offers.size(); ++k) {
    const Offer& o = offers[k];
    if (o.file >= files_.size() || o.length == 0) continue;
    const uint64_t size = files_[o.file].file.size;
    if (o.offset < sim_frontier[o.file] || o.offset > size || o.length > size - o.offset) continue;
    const uint64_t after_in_file = size - (o.offset + o.length);
    const uint64_t output_after = output_bytes > o.output_end ? output_bytes - o.output_end : 0;
    if (after_in_file / kReaderSpeedNum > output_after / kReaderSpeedDen) continue;
    taken[o.file].push_back({o.file, o.offset, o.offset + o.length, Who::consumer, State::waiting, k});
    sim_frontier[o.file] = o.offset + o.length;
  }
  for (size_t i = 0; i < files_.size(); ++i) {
    uint64_t at = 0;
    auto add = [&](Segment s) {
      files_[i].segments.push_back(segments_.size());
      segments_.push_back(s);
    };
    for (const Segment& c : taken[i]) {  // in file order: accepted offers only move forward
      if (c.begin > at) add({i, at, c.begin, Who::reader, State::waiting, 0});
      add(c);
      at = c.end;
    }
    if (files_[i].file.size > at) add({i, at, files_[i].file.size, Who::reader, State::waiting, 0});
  }
  reader_ = std::thread([this] { run_reader(); });
}

SourceHasher::~SourceHasher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  if (reader_.joinable()) reader_.join();
}

void SourceHasher::advance(FileState& f, uint64_t to) {
  f.frontier = to;
  while (f.current < f.segments.size() && segments_[f.segments[f.current]].end <= f.frontier) {
    segments_[f.segments[f.current]].state = State::done;
    ++f.current;
  }
  changed_.notify_all();
}

size_t SourceHasher::claim(size_t file, uint64_t offset) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (file >= files_.size()) return kNotTaken;
  FileState& f = files_[file];
  auto it = std::find_if(f.segments.begin(), f.segments.end(), [&](size_t id) {
    return segments_[id].who == Who::consumer && segments_[id].begin == offset;
  });
  if (it == f.segments.end()) return kNotTaken;
  const size_t index = static_cast<size_t>(it - f.segments.begin());
  Segment& s = segments_[*it];
  // When the reader is about to reach the range (a few MiB of its own before it, nothing that
  // waits on a consumer), waiting for it costs less than reading the range again.
  auto reader_close = [&] {
    if (s.begin - f.frontier > kWaitForReader) return false;
    for (size_t j = f.current; j < index; ++j) {
      const Segment& before = segments_[f.segments[j]];
      if (before.who != Who::reader && before.state != State::left_to_reader) return false;
    }
    return true;
  };
  for (;;) {
    if (s.state != State::waiting) return kNotTaken;
    if (f.frontier == s.begin && !stop_) {
      s.state = State::claimed;
      return *it;
    }
    if (stop_ || f.frontier > s.begin || !reader_close()) {
      s.state = State::left_to_reader;
      changed_.notify_all();
      return kNotTaken;
    }
    changed_.wait(lock);
  }
}

void SourceHasher::feed(size_t segment, std::span<const uint8_t> bytes) {
  Segment& s = segments_.at(segment);
  FileState& f = files_[s.file];
  uint64_t from;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (s.state != State::claimed || f.frontier + bytes.size() > s.end)
      throw_internal("source hash: bytes fed past the claimed range of " + f.file.path);
    from = f.frontier;
  }
  // Only the holder of the frontier touches the stream: the reader does not move this file
  // while its current segment is claimed.
  f.hash.update(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  consumer_bytes_ += bytes.size();
  advance(f, from + bytes.size());
}

void SourceHasher::release(size_t segment) {
  std::lock_guard<std::mutex> lock(mutex_);
  Segment& s = segments_.at(segment);
  if (s.state == State::claimed) s.state = State::left_to_reader;  // not fed to its end
  changed_.notify_all();
}

size_t SourceHasher::pick_file() const {
  size_t best = kNotTaken;
  size_t best_key = kNotTaken;
  for (size_t i = 0; i < files_.size(); ++i) {
    const FileState& f = files_[i];
    if (f.current == f.segments.size()) continue;
    const Segment& s = segments_[f.segments[f.current]];
    const bool ready = s.who == Who::reader || s.state == State::left_to_reader || (finishing_ && s.state == State::waiting);
    if (!ready) continue;
    // First the file whose next consumer comes soonest: its frontier must get there first.
    size_t key = kNotTaken - 1;
    for (size_t j = f.current + 1; j < f.segments.size(); ++j) {
      const Segment& n = segments_[f.segments[j]];
      if (n.who == Who::consumer && n.state == State::waiting) {
        key = n.order;
        break;
      }
    }
    if (key < best_key) {
      best = i;
      best_key = key;
    }
  }
  return best;
}

void SourceHasher::run_reader() {
  std::vector<int> fds(files_.size(), -1);
  std::vector<uint8_t> buffer(static_cast<size_t>(kReadPiece));
  try {
    for (;;) {
      std::unique_lock<std::mutex> lock(mutex_);
      size_t i = kNotTaken;
      auto all_done = [&] {
        return std::all_of(files_.begin(), files_.end(), [](const FileState& f) { return f.current == f.segments.size(); });
      };
      changed_.wait(lock, [&] { return stop_ || all_done() || (i = pick_file()) != kNotTaken; });
      if (stop_ || all_done()) break;
      FileState& f = files_[i];
      const uint64_t from = f.frontier;
      const uint64_t length = std::min(kReadPiece, segments_[f.segments[f.current]].end - from);
      lock.unlock();
      if (fds[i] < 0) {
        fds[i] = ::open(f.file.path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (fds[i] < 0) throw_io(f.file.path, "cannot open", errno);
      }
      size_t got = 0;
      while (got < length) {
        const ssize_t n = ::pread(fds[i], buffer.data() + got, static_cast<size_t>(length - got), static_cast<off_t>(from + got));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw_io(f.file.path, "read failed", errno);
        if (n == 0) throw Error(ErrorKind::io, f.file.path + " ends early: the file changed while it was being read");
        got += static_cast<size_t>(n);
      }
      f.hash.update({buffer.data(), got});
      lock.lock();
      reader_bytes_ += got;
      advance(f, from + got);
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = std::current_exception();
    stop_ = true;
    changed_.notify_all();
  }
  for (int fd : fds)
    if (fd >= 0) ::close(fd);
}

std::vector<artifact::FileEntry> SourceHasher::finish() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    finishing_ = true;  // a consumer range never claimed is the reader's now
    changed_.notify_all();
  }
  if (reader_.joinable()) reader_.join();
  if (error_) std::rethrow_exception(error_);
  std::vector<artifact::FileEntry> out;
  for (const FileState& f : files_) {
    if (f.current != f.segments.size()) throw_internal("source hash: " + f.file.path + " was not hashed to its end");
    out.push_back({f.file.name, f.file.size, f.hash.hex()});
  }
  return out;
}

uint64_t SourceHasher::consumer_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return consumer_bytes_;
}

uint64_t SourceHasher::reader_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reader_bytes_;
}

}  // namespace moepack::convert
