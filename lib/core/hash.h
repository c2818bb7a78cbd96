// XXH3-128, the hash of the artifact manifest: hex string of the 128-bit value, high half first
// (the canonical XXH128 representation).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace moepack {

std::string xxh3_128_hex(std::span<const uint8_t> bytes);

class Xxh3Stream {
 public:
  Xxh3Stream();
  ~Xxh3Stream();
  Xxh3Stream(const Xxh3Stream&) = delete;
  Xxh3Stream& operator=(const Xxh3Stream&) = delete;
  void update(std::span<const uint8_t> bytes);
  std::string hex() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace moepack
