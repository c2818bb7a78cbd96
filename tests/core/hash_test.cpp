// XXH3-128 as the manifest uses it: canonical (big-endian) hex, high half first. The pinned
// values were computed once with libxxhash's XXH3_128bits + XXH128_canonicalFromHash.
#include <gtest/gtest.h>

#include <string>
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

}  // namespace
}  // namespace moepack
