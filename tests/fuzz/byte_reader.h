// Structured values drawn from fuzz bytes, for targets whose input is a description (tensor
// lists, dimensions) rather than a file. Our own rather than clang's FuzzedDataProvider so the
// targets also compile with g++ for the regression replay. An exhausted input yields zeros and
// empty strings, so every byte string decodes to something.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace moepack::fuzz {

class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  uint64_t u64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | byte();
    return v;
  }
  // Uniform enough in [lo, hi] for fuzzing: reads only as many bytes as the range needs.
  uint64_t in_range(uint64_t lo, uint64_t hi) {
    uint64_t span = hi - lo, v = 0;
    for (uint64_t s = span; s != 0; s >>= 8) v = (v << 8) | byte();
    return span == ~uint64_t{0} ? v : lo + v % (span + 1);
  }
  bool boolean() { return byte() & 1; }
  // A length byte (capped at max_len), then that many raw bytes.
  std::string string(size_t max_len) {
    size_t n = static_cast<size_t>(in_range(0, max_len));
    std::string s;
    while (n-- > 0 && pos_ < size_) s.push_back(static_cast<char>(byte()));
    return s;
  }
  size_t remaining() const { return size_ - pos_; }

 private:
  uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace moepack::fuzz
