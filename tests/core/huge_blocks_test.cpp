// huge_blocks: 2 MiB-aligned blocks of at least the size asked, reused after release when they
// fit without wasting half of themselves, a cache of released blocks that never exceeds its
// limit, and a release() that claims only its own blocks (operator delete relies on that).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "lib/core/huge_blocks.h"

namespace moepack::huge_blocks {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kHugePage == 0; }

TEST(HugeBlocks, BlocksAreAlignedWritableAndAtLeastTheSizeAsked) {
  for (size_t bytes : {kHugePage, kHugePage + 1, 5 * kMiB + 3, 13 * kMiB}) {
    void* p = acquire(bytes);
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_TRUE(aligned(p)) << bytes;
    std::memset(p, 0xA5, bytes);  // every byte asked for is usable
    EXPECT_EQ(static_cast<unsigned char*>(p)[bytes - 1], 0xA5);
    EXPECT_TRUE(release(p));
  }
  EXPECT_EQ(acquire(0), nullptr);
  EXPECT_EQ(acquire(SIZE_MAX), nullptr);
}

TEST(HugeBlocks, AReleasedBlockServesTheNextRequestItFits) {
  void* first = acquire(6 * kMiB);
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(release(first));
  const Stats before = stats();
  void* again = acquire(5 * kMiB + 1);  // rounds to 6 MiB: the same block
  EXPECT_EQ(again, first);
  EXPECT_EQ(stats().reused, before.reused + 1);
  EXPECT_EQ(stats().mapped, before.mapped);
  // A block more than twice the request is not handed out for it.
  void* small = acquire(2 * kMiB);
  ASSERT_NE(small, nullptr);
  EXPECT_NE(small, first);
  EXPECT_TRUE(release(small));
  EXPECT_TRUE(release(again));
}

TEST(HugeBlocks, ReleaseClaimsOnlyItsOwnBlocks) {
  EXPECT_FALSE(release(nullptr));
  void* heap = std::malloc(64);
  EXPECT_FALSE(release(heap));
  std::free(heap);
  void* huge_aligned = std::aligned_alloc(kHugePage, kHugePage);  // aligned like a block, but not one
  ASSERT_NE(huge_aligned, nullptr);
  EXPECT_FALSE(release(huge_aligned));
  std::free(huge_aligned);
  void* p = acquire(kHugePage);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(release(p));
  EXPECT_TRUE(release(p));  // a second release of a cached block is claimed and changes nothing
}

TEST(HugeBlocks, TheCacheOfReleasedBlocksStaysWithinItsLimit) {
  // More than the limit in distinct sizes (none fits another's request), released together.
  std::vector<void*> blocks;
  size_t total = 0;
  for (size_t mib = 2; total <= kCacheLimit + 64 * kMiB; mib += 2) {
    void* p = acquire(mib * kMiB);  // never touched: mapping costs no memory
    ASSERT_NE(p, nullptr);
    blocks.push_back(p);
    total += mib * kMiB;
  }
  for (void* p : blocks) EXPECT_TRUE(release(p));
  EXPECT_LE(stats().cached_bytes, kCacheLimit);
  EXPECT_GT(stats().cached_bytes, 0u);
}

TEST(HugeBlocks, ConcurrentAcquireAndReleaseKeepBlocksApart) {
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t, &failures] {
      for (int i = 0; i < 50; ++i) {
        const size_t bytes = (2 + (i + t) % 3) * kMiB;
        auto* p = static_cast<unsigned char*>(acquire(bytes));
        if (!p) {
          ++failures[t];
          continue;
        }
        std::memset(p, t, bytes);
        for (size_t at = 0; at < bytes; at += 4096) failures[t] += p[at] != t;  // nobody else wrote here
        if (!release(p)) ++failures[t];
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
}

}  // namespace
}  // namespace moepack::huge_blocks
