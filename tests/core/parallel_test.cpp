// parallel_for_each_index: every index runs once, and a failure is the one the lowest failing
// index raised, for any thread count (what makes verify's errors the same on every machine).
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

#include "lib/core/parallel.h"

namespace moepack {
namespace {

TEST(Parallel, EveryIndexOnceForAnyThreadCount) {
  for (int threads : {1, 2, 7}) {
    std::vector<std::atomic<int>> seen(1000);
    parallel_for_each_index(seen.size(), threads, [&](uint64_t i) { ++seen[i]; });
    for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i].load(), 1) << "threads " << threads << ", index " << i;
  }
  parallel_for_each_index(0, 4, [](uint64_t) { FAIL() << "no index to run"; });
}

TEST(Parallel, TheLowestFailingIndexIsRethrownAfterAllRan) {
  for (int threads : {1, 2, 7}) {
    std::atomic<int> ran{0};
    try {
      parallel_for_each_index(200, threads, [&](uint64_t i) {
        ++ran;
        if (i % 50 == 37) throw std::runtime_error("index " + std::to_string(i));
      });
      FAIL() << "threads " << threads;
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), "index 37") << "threads " << threads;
    }
    EXPECT_EQ(ran.load(), 200) << "every index still ran";
  }
}

}  // namespace
}  // namespace moepack
