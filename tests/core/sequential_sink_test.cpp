// SequentialSink: the file holds exactly the appended bytes, whichever thread wrote them (the
// background writer with its write-back pacing, or the caller), for awkward sizes and chunkings,
// past the write-behind distance too; a failing device surfaces as Error(io) from the background
// writes.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "lib/core/error.h"
#include "lib/core/sequential_sink.h"
#include "support/test_support.h"

namespace moepack {
namespace {

std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// Writes `data` in chunks of varying size (1 byte up to a few MiB) and reads the file back.
void round_trip(const std::string& path, const std::vector<uint8_t>& data, uint64_t threshold, bool* went_background) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  {
    SequentialSink sink(fd, path, data.size(), threshold);
    std::mt19937 rng(static_cast<uint32_t>(data.size()));
    size_t at = 0;
    while (at < data.size()) {
      const size_t n = std::min<size_t>(data.size() - at, 1 + rng() % (rng() % 2 ? 5000 : (3u << 20)));
      sink.append(std::span<const uint8_t>(data).subspan(at, n));
      at += n;
    }
    sink.finish();
    EXPECT_EQ(sink.bytes_appended(), data.size());
    *went_background = sink.background();
  }
  ::close(fd);
  EXPECT_EQ(file_bytes(path), data);
}

TEST(SequentialSink, FileHoldsExactlyTheBytesForAwkwardSizes) {
  test::TempDir dir;
  const size_t mib = 1u << 20;
  const size_t past_write_behind = static_cast<size_t>(SequentialSink::kWriteBehind) + 9 * mib + 777;
  for (size_t size : {size_t{0}, size_t{1}, size_t{4095}, size_t{4096}, size_t{4097}, 4 * mib - 1, 4 * mib, 4 * mib + 1, 13 * mib + 12345,
                      past_write_behind}) {
    for (uint64_t threshold : {uint64_t{0}, ~uint64_t{0}}) {
      if (size == past_write_behind && threshold != 0) continue;  // the caller's writes have no write-behind
      SCOPED_TRACE("size " + std::to_string(size) + (threshold == 0 ? ", background writes" : ", the caller's writes"));
      bool background = false;
      round_trip(dir.file("out.bin"), random_bytes(size, static_cast<uint32_t>(size)), threshold, &background);
      EXPECT_EQ(background, threshold == 0);
    }
  }
}

// /dev/full takes the open but fails every write with ENOSPC: the background
// write's error reaches the caller as the writer's usual disk-full Error(io).
TEST(SequentialSink, BackgroundWriteFailureIsAnIoError) {
  const int fd = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  if (fd < 0) GTEST_SKIP() << "no /dev/full here";
  for (uint64_t threshold : {uint64_t{0}, ~uint64_t{0}}) {
    try {
      SequentialSink sink(fd, "/dev/full", 16u << 20, threshold);
      const std::vector<uint8_t> data(16u << 20, 7);
      sink.append(data);
      sink.finish();
      ADD_FAILURE() << "expected a disk-full error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::io);
      EXPECT_NE(std::string(e.what()).find("disk full"), std::string::npos) << e.what();
    }
  }
  ::close(fd);
}

}  // namespace
}  // namespace moepack
