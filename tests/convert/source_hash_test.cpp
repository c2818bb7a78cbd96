// SourceHasher: whatever mix of consumers and reader hashes a file, and in whatever timing, the
// value is the XXH3-128 of the whole file (the manifest's source.files[].xxh3).
#include <gtest/gtest.h>

#include <future>

#include <filesystem>
#include <thread>

#include "lib/convert/source_hash.h"
#include "lib/core/error.h"
#include "lib/core/hash.h"
#include "support/test_support.h"

namespace moepack::convert {
namespace {

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> out(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : out) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<uint8_t>(x);
  }
  return out;
}

// Feeds bytes [offset, offset + length) of `data` in awkward piece sizes, as a consumer does.
void feed_range(SourceHasher& h, size_t segment, const std::vector<uint8_t>& data, uint64_t offset, uint64_t length) {
  const size_t pieces[] = {1, 4095, 262144, 7, 1000003};
  uint64_t done = 0;
  for (size_t k = 0; done < length; ++k) {
    const uint64_t n = std::min<uint64_t>(pieces[k % 5], length - done);
    h.feed(segment, {data.data() + offset + done, static_cast<size_t>(n)});
    done += n;
  }
}

struct Source {
  test::TempDir dir;
  std::vector<std::vector<uint8_t>> data;
  std::vector<SourceHasher::File> files;
  void add(const std::string& name, size_t bytes, uint32_t seed) {
    data.push_back(pattern(bytes, seed));
    test::write_file(dir.file(name), data.back());
    files.push_back({dir.file(name), name, bytes});
  }
  void expect_whole_file_hashes(const std::vector<artifact::FileEntry>& got) const {
    ASSERT_EQ(got.size(), files.size());
    for (size_t i = 0; i < files.size(); ++i) {
      EXPECT_EQ(got[i].name, files[i].name);
      EXPECT_EQ(got[i].bytes, data[i].size());
      EXPECT_EQ(got[i].xxh3, xxh3_128_hex(data[i])) << files[i].name;
    }
  }
};

TEST(SourceHasher, ReaderAloneHashesWholeFiles) {
  Source s;
  s.add("a.safetensors", 3u << 20 | 12345, 1);  // several reader pieces and a tail
  s.add("empty.safetensors", 0, 2);
  s.add("b.safetensors", 17, 3);
  SourceHasher h(s.files, {}, 1000);
  s.expect_whole_file_hashes(h.finish());
  EXPECT_EQ(h.consumer_bytes(), 0u);
  EXPECT_EQ(h.reader_bytes(), (3u << 20 | 12345) + 17u);
}

// Ranges offered in file order, as early in the output as possible: each consumer gets its range
// (the reader has only a small gap before it, so the consumer waits for it) and hashes it.
TEST(SourceHasher, ConsumersHashTheirRangesInFileOrder) {
  Source s;
  const size_t size = 5u << 20;
  s.add("model.safetensors", size, 4);
  // [0, 4096) header (reader), [4096, 2 MiB) consumer, [2 MiB, 2 MiB + 100) reader gap,
  // [2 MiB + 100, 4 MiB) consumer, then the reader to the end.
  const std::vector<SourceHasher::Offer> offers = {{0, 4096, (2u << 20) - 4096, 2u << 20}, {0, (2u << 20) + 100, (2u << 20) - 100, 4u << 20}};
  SourceHasher h(s.files, offers, 100u << 20);
  for (const auto& o : offers) {
    const size_t seg = h.claim(0, o.offset);
    ASSERT_NE(seg, SourceHasher::kNotTaken);
    feed_range(h, seg, s.data[0], o.offset, o.length);
    h.release(seg);
  }
  s.expect_whole_file_hashes(h.finish());
  EXPECT_EQ(h.consumer_bytes(), (4u << 20) - 4096 - 100);
  EXPECT_EQ(h.reader_bytes(), size - h.consumer_bytes());
}

// A range offered after one further in the file is left to the reader (the frontier has passed it).
TEST(SourceHasher, OutOfOrderRangeGoesToTheReader) {
  Source s;
  s.add("model.safetensors", 1u << 20, 5);
  const std::vector<SourceHasher::Offer> offers = {{0, 600000, 100000, 100000}, {0, 1000, 5000, 105000}};
  SourceHasher h(s.files, offers, 10u << 20);
  const size_t late = h.claim(0, 600000);
  ASSERT_NE(late, SourceHasher::kNotTaken);
  feed_range(h, late, s.data[0], 600000, 100000);
  h.release(late);
  EXPECT_EQ(h.claim(0, 1000), SourceHasher::kNotTaken);
  s.expect_whole_file_hashes(h.finish());
  EXPECT_EQ(h.consumer_bytes(), 100000u);
}

// A consumer that fails half way: the reader hashes what it did not.
TEST(SourceHasher, ReleasedHalfWayTheReaderFinishesTheRange) {
  Source s;
  s.add("model.safetensors", 2u << 20, 6);
  const std::vector<SourceHasher::Offer> offers = {{0, 8, 1u << 20, 1u << 20}};
  SourceHasher h(s.files, offers, 10u << 20);
  const size_t seg = h.claim(0, 8);
  ASSERT_NE(seg, SourceHasher::kNotTaken);
  feed_range(h, seg, s.data[0], 8, 300001);
  h.release(seg);
  s.expect_whole_file_hashes(h.finish());
  EXPECT_EQ(h.consumer_bytes(), 300001u);
}

// A chosen range whose consumer never comes (or comes after finish) is read by the reader.
TEST(SourceHasher, UnclaimedRangeIsReadAtFinish) {
  Source s;
  s.add("a.safetensors", 70000, 7);
  s.add("b.safetensors", 90000, 8);
  const std::vector<SourceHasher::Offer> offers = {{0, 100, 60000, 60000}, {1, 0, 90000, 150000}};
  SourceHasher h(s.files, offers, 1u << 20);
  s.expect_whole_file_hashes(h.finish());
  EXPECT_EQ(h.consumer_bytes(), 0u);
  EXPECT_EQ(h.claim(1, 0), SourceHasher::kNotTaken);
}

// A consumer that arrives while the reader is far from its range does not wait: the reader takes it.
TEST(SourceHasher, ConsumerFarAheadOfTheReaderDoesNotWait) {
  Source s;
  const size_t size = 40u << 20;
  s.add("model.safetensors", size, 9);
  // One chosen range in front of a 30 MiB stretch that only the reader can hash; claimed
  // first, then the second range, more than the reader's few MiB away unless it is very fast.
  const std::vector<SourceHasher::Offer> offers = {{0, 0, 1000, 1000}, {0, 31u << 20, 1u << 20, 2u << 20}};
  SourceHasher h(s.files, offers, 1u << 30);
  const size_t first = h.claim(0, 0);
  ASSERT_NE(first, SourceHasher::kNotTaken);  // the frontier starts there
  feed_range(h, first, s.data[0], 0, 1000);
  h.release(first);
  const size_t second = h.claim(0, 31u << 20);  // taken or not depending on the reader: both are right
  if (second != SourceHasher::kNotTaken) {
    feed_range(h, second, s.data[0], 31u << 20, 1u << 20);
    h.release(second);
  }
  s.expect_whole_file_hashes(h.finish());
}

// A range late in the output with much of its file after it is not chosen: the reader would wait
// behind it and finish after the output.
TEST(SourceHasher, LateRangeWithMuchAfterItIsNotChosen) {
  Source s;
  s.add("model.safetensors", 1u << 20, 10);
  const std::vector<SourceHasher::Offer> offers = {{0, 0, 1000, 990000}};  // 1 MB left in the file, 10 kB of output
  SourceHasher h(s.files, offers, 1000000);
  EXPECT_EQ(h.claim(0, 0), SourceHasher::kNotTaken);
  s.expect_whole_file_hashes(h.finish());
  EXPECT_EQ(h.consumer_bytes(), 0u);
}

TEST(SourceHasher, ShardShorterThanAtOpenIsAnIoError) {
  Source s;
  s.add("model.safetensors", 5000, 11);
  s.files[0].size = 6000;  // as if it was truncated after it was opened
  SourceHasher h(s.files, {}, 1000);
  try {
    h.finish();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::io);
    EXPECT_NE(std::string(e.what()).find("model.safetensors"), std::string::npos) << e.what();
  }
}

TEST(SourceHasher, FeedingPastTheClaimedRangeIsABug) {
  Source s;
  s.add("model.safetensors", 5000, 12);
  SourceHasher h(s.files, {{0, 0, 100, 100}}, 1u << 20);
  const size_t seg = h.claim(0, 0);
  ASSERT_NE(seg, SourceHasher::kNotTaken);
  EXPECT_THROW(h.feed(seg, {s.data[0].data(), 101}), Error);
}

// Destroyed without finish (an error elsewhere), with a consumer range never claimed: the
// destructor stops the reader and returns (it waits for a range that will never be fed
// otherwise), and a new hasher over the same files still gives their hashes.
TEST(SourceHasher, AbandonedWithoutFinish) {
  Source s;
  s.add("model.safetensors", 3u << 20, 13);
  auto abandoned = std::async(std::launch::async, [&] {
    SourceHasher h(s.files, {{0, 1u << 20, 1000, 1000}}, 1u << 30);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  });
  // A bound on a hang, not a timing: the destructor returns at once when it works.
  ASSERT_EQ(abandoned.wait_for(std::chrono::seconds(120)), std::future_status::ready) << "~SourceHasher hangs when finish() never ran";
  abandoned.get();
  SourceHasher again(s.files, {}, 1u << 30);
  s.expect_whole_file_hashes(again.finish());
}

}  // namespace
}  // namespace moepack::convert
