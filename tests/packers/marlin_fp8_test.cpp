// The FP8 Marlin weight input (packers/marlin_fp8.h) against pack_fp8_to_int32's torch ops done
// on bytes (view int32 along K, then transpose), its drawn example, round trips, and the whole
// Marlin pipeline id.
#include "packers/marlin_fp8.h"

#include <gtest/gtest.h>

#include <cstring>

#include "packers/registry.h"
#include "tests/packers/triton_reference_ops.h"

namespace moepack::packers {
namespace {

using testing::pack_all;
using testing::random_tensor;

TEST(Fp8AsGptqInt32, DrawnExampleTorchOpsAndRoundTrips) {
  const Fp8AsGptqInt32Layout layout;
  EXPECT_EQ(layout.name(), "vllm.pack_fp8_to_int32(size_k_first=0,transposed,e9d1398d9)");
  OwnedTensor w(DType::F8_E4M3, {2, 8});  // rows a0..a7, b0..b7
  for (uint64_t i = 0; i < 16; ++i) w.bytes[i] = static_cast<uint8_t>(0xA0 + i);
  EXPECT_EQ(layout.packed_shape(w.shape), (std::vector<uint64_t>{2, 2}));
  EXPECT_EQ(pack_all(layout, w), (std::vector<uint8_t>{0xA0, 0xA1, 0xA2, 0xA3, 0xA8, 0xA9, 0xAA, 0xAB,  // words (0,0) (0,1)
                                                       0xA4, 0xA5, 0xA6, 0xA7, 0xAC, 0xAD, 0xAE, 0xAF}));
  for (const auto& shape : std::vector<std::vector<uint64_t>>{{64, 16}, {256, 128}, {4, 12}}) {
    SCOPED_TRACE(shape_string(shape));
    const uint64_t N = shape[0], K = shape[1];
    const OwnedTensor r = random_tensor(DType::F8_E4M3, shape, N + K);
    // fp8.view(int32): [N, K/4] words (bytes in place); .T.contiguous(): word (j, n) = word (n, j).
    std::vector<uint8_t> expected(r.bytes.size());
    for (uint64_t n = 0; n < N; ++n)
      for (uint64_t j = 0; j < K / 4; ++j) std::memcpy(expected.data() + 4 * (j * N + n), r.bytes.data() + 4 * (n * K / 4 + j), 4);
    EXPECT_EQ(pack_all(layout, r), expected);
    testing::expect_round_trip(layout, DType::F8_E4M3, shape, 2);
  }
  testing::expect_refused(layout, DType::F8_E4M3, {4, 6});
  EXPECT_NE(make_layout("vllm.pack_fp8_to_int32(size_k_first=0,transposed,e9d1398d9) | vllm.gptq_marlin_repack(num_bits=8,is_a_8bit=0,e9d1398d9)"), nullptr);
}

}  // namespace
}  // namespace moepack::packers
