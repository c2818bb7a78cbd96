// Replays every input under tests/fuzz/regressions/<target>/ through the fuzz target of that
// name, in the ordinary (g++, non-fuzz) test suite: a crash or hang the fuzzer once found stays
// fixed without a clang fuzz build. The targets are compiled in by the fuzz_replay_*.cpp
// wrappers next to this file (one line per target; tests/fuzz/README.md).
#include <gtest/gtest.h>

#include <filesystem>

#include "fuzz/fuzz_target.h"
#include "support/test_support.h"

namespace moepack::fuzz {
namespace {
namespace fs = std::filesystem;

fs::path regressions_root() { return fs::path(test::source_dir()) / "tests" / "fuzz" / "regressions"; }

TEST(FuzzRegressions, EveryRegressionDirectoryHasItsTarget) {
  ASSERT_TRUE(fs::is_directory(regressions_root()));
  for (const auto& dir : fs::directory_iterator(regressions_root())) {
    if (!dir.is_directory()) continue;
    EXPECT_TRUE(registered_targets().count(dir.path().filename().string()))
        << dir.path() << " has no fuzz target compiled into this binary (add tests/fuzz/replay/fuzz_replay_<name>.cpp)";
  }
}

TEST(FuzzRegressions, Replay) {
  ASSERT_GE(registered_targets().size(), 6u);
  size_t replayed = 0;
  for (const auto& [name, target] : registered_targets()) {
    fs::path dir = regressions_root() / name;
    if (!fs::is_directory(dir)) continue;
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (!entry.is_regular_file() || entry.path().filename().string().front() == '.') continue;
      std::vector<uint8_t> input = test::read_file(entry.path().string());
      SCOPED_TRACE(entry.path().string());
      try {
        target(input.data(), input.size());
      } catch (const std::exception& e) {
        ADD_FAILURE() << name << " on " << entry.path() << ": " << e.what();
      }
      ++replayed;
    }
  }
  EXPECT_GT(replayed, 0u);
}

// Each target also runs on a few fixed inputs (empty, one byte, all byte values), so a target
// that cannot even start in this build fails here rather than only under libFuzzer.
TEST(FuzzRegressions, TargetsRunOnTrivialInputs) {
  std::vector<uint8_t> all(256);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint8_t>(i);
  for (const auto& [name, target] : registered_targets()) {
    SCOPED_TRACE(name);
    for (const std::vector<uint8_t>& input : {std::vector<uint8_t>{}, std::vector<uint8_t>{'{'}, all}) {
      try {
        target(input.data(), input.size());
      } catch (const std::exception& e) {
        ADD_FAILURE() << name << ": " << e.what();
      }
    }
  }
}

}  // namespace
}  // namespace moepack::fuzz
