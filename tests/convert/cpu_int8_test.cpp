// The CPU INT8 pack with its s8s8 compensation sums (lib/convert/cpu_int8.h) against
// pack_vnni<int8_t> and s8s8_compensation written out as upstream loops.
#include "lib/convert/cpu_int8.h"

#include <gtest/gtest.h>

#include <cstring>

#include "support/test_support.h"

namespace moepack::convert {
namespace {

constexpr const char* kId = "cpu.sgl_s8s8_compensation(e9d1398d9) | cpu.sgl_convert_weight_packed(int8,vnni4)";

std::vector<uint8_t> upstream(const OwnedTensor& w) {
  const uint64_t rows = w.shape[0], K = w.shape[1];
  std::vector<uint8_t> out(rows * (K + 4), 0);
  for (uint64_t nb = 0; nb < rows / 32; ++nb) {
    uint8_t* packed = out.data() + nb * 32 * (K + 4);
    const auto* weight = reinterpret_cast<const int8_t*>(w.bytes.data() + nb * 32 * K);
    for (uint64_t n = 0; n < 32; ++n)
      for (uint64_t k = 0; k < K / 4; ++k)
        for (uint64_t d = 0; d < 4; ++d) packed[k * 32 * 4 + n * 4 + d] = static_cast<uint8_t>(weight[n * K + k * 4 + d]);
    // dpbusd(0x80 as u8, packed as s8) summed over K/4 steps, lane n.
    for (uint64_t n = 0; n < 32; ++n) {
      int32_t comp = 0;
      for (uint64_t k = 0; k < K / 4; ++k)
        for (uint64_t d = 0; d < 4; ++d) comp += 128 * static_cast<int8_t>(packed[k * 32 * 4 + n * 4 + d]);
      std::memcpy(packed + 32 * K + 4 * n, &comp, 4);
    }
  }
  return out;
}

TEST(CpuInt8Packed, WorkedExampleAndUpstreamLoops) {
  const auto d = make_cpu_int8_packed("w13_weight", kId);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(make_cpu_int8_packed("w13_weight", "vllm.unchanged"), nullptr);
  RankGeometry g;
  OwnedTensor ones(DType::I8, {32, 32});
  for (uint64_t i = 0; i < ones.bytes.size(); ++i) ones.bytes[i] = (i / 32) == 1 ? 0xFF : 1;  // row 1: -1s
  std::vector<OwnedTensor> in = {ones};
  std::vector<uint8_t> out(byte_size(DType::I8, d->slab_shape(in, g)));
  d->produce(in, g, out, "layer L expert 0");
  EXPECT_EQ(std::vector<uint8_t>(out.begin() + 1024, out.begin() + 1032), (std::vector<uint8_t>{0x00, 0x10, 0x00, 0x00, 0x00, 0xF0, 0xFF, 0xFF}));
  for (const auto& shape : std::vector<std::vector<uint64_t>>{{32, 32}, {64, 128}, {96, 64}}) {
    OwnedTensor w(DType::I8, shape);
    for (uint64_t i = 0; i < w.bytes.size(); ++i) w.bytes[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
    in = {w};
    out.assign(byte_size(DType::I8, d->slab_shape(in, g)), 0);
    d->produce(in, g, out, "x");
    EXPECT_EQ(out, upstream(w)) << shape_string(shape);
  }
}

}  // namespace
}  // namespace moepack::convert
