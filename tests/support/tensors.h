// Small tensors for tests: F32 / BF16 / I32 from values, and F32 bytes back as floats.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "lib/core/codecs.h"
#include "lib/core/tensor.h"

namespace moepack::test {

inline OwnedTensor f32_tensor(std::vector<uint64_t> shape, const std::vector<float>& v) {
  OwnedTensor t(DType::F32, std::move(shape));
  std::memcpy(t.bytes.data(), v.data(), v.size() * 4);
  return t;
}

inline OwnedTensor bf16_tensor(std::vector<uint64_t> shape, const std::vector<float>& v) {
  OwnedTensor t(DType::BF16, std::move(shape));
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t b = float_to_bf16(v[i]);
    std::memcpy(t.bytes.data() + 2 * i, &b, 2);
  }
  return t;
}

inline OwnedTensor i32_tensor(std::vector<uint64_t> shape, const std::vector<uint32_t>& words) {
  OwnedTensor t(DType::I32, std::move(shape));
  std::memcpy(t.bytes.data(), words.data(), words.size() * 4);
  return t;
}

inline std::vector<float> f32_values(const OwnedTensor& t) {
  std::vector<float> v(t.bytes.size() / 4);
  std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  return v;
}

}  // namespace moepack::test
