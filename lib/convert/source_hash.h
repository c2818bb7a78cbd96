// The manifest's source identity, source.files[].xxh3 (XXH3-128 of each whole source shard, as
// docs/ARTIFACT.md defines it), computed without reading again the bytes that the conversion
// already brings into memory.
//
// A streaming XXH3 takes a file's bytes in file order, and the conversion does not read a shard
// in file order (it follows the output's tensor order). So each shard is cut into segments:
//
//   file:  [hdr][ lm_head      ][ embed        ][gap][attn ...][ experts (gap) ........ ]
//   who:   reader  consumer 0     consumer 1    reader consumer  reader
//
// A consumer segment is a range that the conversion will hold in memory anyway (a pass-through
// tensor, hashed from the same cache-hot pieces as the output file's own hash); everything else
// is read by one background reader thread (pread, 1 MiB). Whoever holds the frontier of a file
// hashes the next bytes: the reader waits at a consumer segment until its consumer has hashed it,
// and a consumer that arrives before the frontier reaches its segment leaves it to the reader
// (`claim` says so). Every byte is hashed exactly once and in order whatever the timing, so the
// value is the whole file's XXH3-128; only the speed depends on the timing.
//
// Which ranges become consumer segments is chosen up front (see the .cpp): taking a range late in
// the output's order would hold the reader behind it, so a range is taken only when the rest of
// its file can still be read while the rest of the output is written.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <limits>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "formats/artifact/manifest.h"
#include "lib/core/hash.h"

namespace moepack::convert {

class SourceHasher {
 public:
  struct File {
    std::string path;
    std::string name;  // as the manifest records it
    uint64_t size = 0; // the size seen when the source was opened
  };
  // A range of a file that the conversion will hold in memory, in the order it will do so;
  // `output_end`: bytes of output written once it is done (for the choice of ranges).
  struct Offer {
    size_t file = 0;
    uint64_t offset = 0;
    uint64_t length = 0;
    uint64_t output_end = 0;
  };
  static constexpr size_t kNotTaken = std::numeric_limits<size_t>::max();

  // Starts the reader thread.
  SourceHasher(std::vector<File> files, const std::vector<Offer>& offers, uint64_t output_bytes);
  // Stops the reader early (an error path) and joins it.
  ~SourceHasher();
  SourceHasher(const SourceHasher&) = delete;
  SourceHasher& operator=(const SourceHasher&) = delete;

  // The consumer of [offset, ...) of `file` is about to hold it: a segment id when it must hash
  // the range (then `feed` every byte of it, in order, and `release`), kNotTaken when the reader
  // does it (the range was not chosen, or the frontier has not reached it yet).
  size_t claim(size_t file, uint64_t offset);
  // The next bytes of a claimed segment (any piece sizes, in order).
  void feed(size_t segment, std::span<const uint8_t> bytes);
  // The consumer is done with the segment; what it did not feed (it failed half way) is left to
  // the reader.
  void release(size_t segment);
  // Waits for every byte to be hashed; the entries in file order. Error(io) when a shard ended
  // early or could not be read.
  std::vector<artifact::FileEntry> finish();

  // Bytes hashed by consumers and by the reader so far (for tests and the benchmark's notes).
  uint64_t consumer_bytes() const;
  uint64_t reader_bytes() const;

 private:
  enum class Who { reader, consumer };
  enum class State { waiting, claimed, left_to_reader, done };
  struct Segment {
    size_t file = 0;
    uint64_t begin = 0, end = 0;
    Who who = Who::reader;
    State state = State::waiting;
    size_t order = 0;  // consumer segments: position in the offer order
  };
  struct FileState {
    File file;
    std::vector<size_t> segments;  // ids into segments_, in file order, covering [0, size)
    size_t current = 0;            // index into `segments` of the one holding the frontier
    uint64_t frontier = 0;
    Xxh3Stream hash;
  };
  void run_reader();
  // Under the lock: the file the reader should advance now, or npos when none can move.
  size_t pick_file() const;
  void advance(FileState& f, uint64_t to);  // under the lock

  std::vector<Segment> segments_;
  std::vector<FileState> files_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool stop_ = false;
  bool finishing_ = false;
  std::exception_ptr error_;
  uint64_t consumer_bytes_ = 0;
  uint64_t reader_bytes_ = 0;
  std::thread reader_;
};

}  // namespace moepack::convert
