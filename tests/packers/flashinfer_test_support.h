// Test helpers shared by the FlashInfer / CUTLASS / Marlin / DeepGEMM packer tests: seeded
// random tensors, pack into a correctly sized buffer, round trip, refusal checks.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "lib/core/codecs.h"
#include "lib/core/error.h"
#include "lib/core/tensor.h"
#include "packers/layout.h"

namespace moepack::packers::fi_test {

inline OwnedTensor random_tensor(DType dtype, std::vector<uint64_t> shape, uint32_t seed) {
  OwnedTensor t(dtype, std::move(shape));
  std::mt19937 rng(seed);
  for (uint8_t& b : t.bytes) b = static_cast<uint8_t>(rng());
  return t;
}

inline OwnedTensor random_bf16_bias(uint64_t rows, uint32_t seed) {
  OwnedTensor t(DType::BF16, {rows});
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  for (uint64_t i = 0; i < rows; ++i) {
    const uint16_t h = float_to_bf16(dist(rng));
    std::memcpy(t.bytes.data() + 2 * i, &h, 2);
  }
  return t;
}

inline std::vector<uint8_t> pack(const Layout& layout, const OwnedTensor& canonical) {
  std::vector<uint8_t> out(static_cast<size_t>(
      byte_size(layout.packed_dtype(canonical.dtype), layout.packed_shape(canonical.shape))));
  layout.pack(canonical.view(), out);
  return out;
}

inline void expect_round_trip(const Layout& layout, const OwnedTensor& canonical) {
  const std::vector<uint8_t> packed = pack(layout, canonical);
  OwnedTensor back(canonical.dtype, canonical.shape);
  layout.unpack(packed, back);
  EXPECT_EQ(back.bytes, canonical.bytes) << layout.name() << " " << shape_string(canonical.shape);
}

// Refusals are bad_input errors naming the rule; a shape rule already fires in packed_shape.
inline void expect_refused(const Layout& layout, DType dtype, std::vector<uint64_t> shape, bool shape_rule = true) {
  if (shape_rule) {
    try {
      layout.packed_shape(shape);
      ADD_FAILURE() << layout.name() << " accepted " << shape_string(shape);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::bad_input);
    }
  }
  OwnedTensor t(dtype, shape);
  std::vector<uint8_t> out(1 << 16);
  try {
    layout.pack(t.view(), out);
    ADD_FAILURE() << layout.name() << " packed " << shape_string(shape);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::bad_input);
    EXPECT_NE(std::string(e.what()).find("refused"), std::string::npos) << e.what();
  }
}

}  // namespace moepack::packers::fi_test
