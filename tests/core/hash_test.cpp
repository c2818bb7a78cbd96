// XXH3-128 as the manifest uses it: canonical (big-endian) hex, high half first. The pinned
// values were computed once with libxxhash's XXH3_128bits + XXH128_canonicalFromHash.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "lib/core/hash.h"

namespace moepack {
namespace {

std::span<const uint8_t> bytes_of(const std::string& s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

std::vector<uint8_t> pattern(size_t n) {
  std::vector<uint8_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(i * 7);
  return out;
}

TEST(Xxh3, KnownVectors) {
  EXPECT_EQ(xxh3_128_hex({}), "99aa06d3014798d86001c324468d497f");
  EXPECT_EQ(xxh3_128_hex(bytes_of("abc")), "06b05ab6733a618578af5f94892f3950");
  EXPECT_EQ(xxh3_128_hex(pattern(1000)), "abee229cdadad76d10ad30264426c830");
}

TEST(Xxh3, StreamingEqualsOneShotForAnySplit) {
  std::vector<uint8_t> data = pattern(1000);
  const std::string expected = xxh3_128_hex(data);
  for (size_t chunk : {1, 7, 64, 240, 999, 1000}) {
    Xxh3Stream s;
    for (size_t i = 0; i < data.size(); i += chunk) s.update(std::span<const uint8_t>(data).subspan(i, std::min(chunk, data.size() - i)));
    EXPECT_EQ(s.hex(), expected) << chunk;
  }
  Xxh3Stream empty;
  EXPECT_EQ(empty.hex(), "99aa06d3014798d86001c324468d497f");
}

// Long inputs go through the block loop (AVX-512 where the processor has it): the values are
// pinned (computed with libxxhash's one-shot XXH3_128bits), for one shot and any streaming split,
// including splits that end inside a stripe or a block.
TEST(Xxh3, LongInputsPinnedForAnySplit) {
  const std::vector<uint8_t> data = pattern(3u << 20 | 4099);
  const std::string expected = "3fd6c880aec6970f5dfd9fdb479e31e9";
  EXPECT_EQ(xxh3_128_hex(data), expected);
  for (size_t chunk : {size_t{1} << 20, size_t{262144}, size_t{4096}, size_t{1000003}, size_t{63}, size_t{64 * 16 + 1}}) {
    Xxh3Stream s;
    for (size_t i = 0; i < data.size(); i += chunk) s.update(std::span<const uint8_t>(data).subspan(i, std::min(chunk, data.size() - i)));
    EXPECT_EQ(s.hex(), expected) << chunk;
  }
  // Around the one-shot/streaming switch (4096) and XXH3's own size classes.
  const std::pair<size_t, const char*> sizes[] = {{4095, "aad2b969cc4d58d4970024441879dbfd"}, {4096, "e0ef0909b1bdd88b8fb047a89e810965"},
                                                  {4097, "730e2c034cbbf3e60af1caf010aa20b3"}, {240, "89e3a0a2ee355d25d10beb4e0599e4b3"},
                                                  {241, "75f4da43f23cce5a541b19226f0052e8"}, {100000, "4fb78cd2670dad5801271d2740e5fca3"}};
  for (const auto& [n, hex] : sizes) {
    EXPECT_EQ(xxh3_128_hex(std::span<const uint8_t>(data).first(n)), hex) << n;
    Xxh3Stream s;
    s.update(std::span<const uint8_t>(data).first(n));
    EXPECT_EQ(s.hex(), hex) << n;
  }
}

}  // namespace
}  // namespace moepack
