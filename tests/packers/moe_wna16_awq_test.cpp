// MoeWNA16's AutoAWQ layouts (packers/moe_wna16_awq.h) against vLLM's convert_awq_tensor
// (moe_wna16.py @ e9d1398d9) executed step by step on byte arrays (view as uint8, nibble split,
// the [0,4,1,5,2,6,3,7] gather, transpose, pair repack); pinned worked examples; round trips.
#include "packers/moe_wna16_awq.h"

#include <gtest/gtest.h>

#include <array>
#include <cstring>

#include "packers/registry.h"
#include "packers/unquantized_rows.h"
#include "tests/packers/triton_reference_ops.h"

namespace moepack::packers {
namespace {

using testing::pack_all;
using testing::random_tensor;

// convert_awq_tensor(tensor, kind) on a row-major [a, b] int32 tensor, one torch op at a time.
std::vector<uint8_t> convert_awq_tensor(const OwnedTensor& t, MoeWna16AwqTensor kind) {
  const uint64_t a = t.shape[0], b = t.shape[1];
  // 1. view(torch.uint8): [a, 4b]; 2. (tensor[:, :, None] >> [0, 4]) & 0xF: [a, 4b, 2].
  std::vector<uint8_t> nibbles(a * 8 * b);
  for (uint64_t i = 0; i < a * 4 * b; ++i) {
    nibbles[2 * i] = t.bytes[i] & 0xF;
    nibbles[2 * i + 1] = t.bytes[i] >> 4;
  }
  // 3. view(-1, 8)[:, [0, 4, 1, 5, 2, 6, 3, 7]], view(a, -1): [a, 8b].
  constexpr std::array<uint64_t, 8> reverse_awq_pack_order = {0, 4, 1, 5, 2, 6, 3, 7};
  std::vector<uint8_t> ordered(nibbles.size());
  for (uint64_t row = 0; row < nibbles.size() / 8; ++row)
    for (uint64_t j = 0; j < 8; ++j) ordered[row * 8 + j] = nibbles[row * 8 + reverse_awq_pack_order[j]];
  // 4. .T.contiguous(): [8b, a].
  const uint64_t n = 8 * b;
  std::vector<uint8_t> transposed(ordered.size());
  for (uint64_t r = 0; r < a; ++r)
    for (uint64_t c = 0; c < n; ++c) transposed[c * a + r] = ordered[r * n + c];
  // 5. qweight: tensor[:, 1::2] * 16 + tensor[:, ::2] -> [8b, a/2];
  //    qzeros:  tensor[1::2, :] * 16 + tensor[::2, :] -> [4b, a].
  std::vector<uint8_t> out(transposed.size() / 2);
  if (kind == MoeWna16AwqTensor::qweight) {
    for (uint64_t r = 0; r < n; ++r)
      for (uint64_t c = 0; c < a / 2; ++c) out[r * (a / 2) + c] = static_cast<uint8_t>(transposed[r * a + 2 * c + 1] * 16 + transposed[r * a + 2 * c]);
  } else {
    for (uint64_t r = 0; r < n / 2; ++r)
      for (uint64_t c = 0; c < a; ++c) out[r * a + c] = static_cast<uint8_t>(transposed[(2 * r + 1) * a + c] * 16 + transposed[2 * r * a + c]);
  }
  return out;
}

OwnedTensor words(std::vector<uint64_t> shape, std::initializer_list<uint32_t> values) {
  OwnedTensor t(DType::I32, std::move(shape));
  std::memcpy(t.bytes.data(), std::data(values), values.size() * 4);
  return t;
}

TEST(MoeWna16Awq, QweightIsConvertAwqTensorWorkedExample) {
  const MoeWna16AwqLayout layout(MoeWna16AwqTensor::qweight);
  EXPECT_EQ(layout.name(), "vllm.moe_wna16_awq_qweight(unpack,awq_order_undone,transpose,repack,e9d1398d9)");
  // K = 2, N = 8, code(k, n) = n + 3k. AutoAWQ stores columns 0,2,4,6,1,3,5,7 in nibbles 0..7:
  // row 0 = nibbles 0,2,4,6,1,3,5,7 = 0x75316420, row 1 = 3,5,7,9,4,6,8,10 = 0xA8649753.
  const OwnedTensor w = words({2, 1}, {0x75316420u, 0xA8649753u});
  EXPECT_EQ(layout.packed_shape(w.shape), (std::vector<uint64_t>{8, 1}));
  // Packed row n holds code(1, n) << 4 | code(0, n).
  const std::vector<uint8_t> want = {0x30, 0x41, 0x52, 0x63, 0x74, 0x85, 0x96, 0xA7};
  EXPECT_EQ(pack_all(layout, w), want);
  EXPECT_EQ(convert_awq_tensor(w, MoeWna16AwqTensor::qweight), want);
}

TEST(MoeWna16Awq, QzerosIsConvertAwqTensorWorkedExample) {
  const MoeWna16AwqLayout layout(MoeWna16AwqTensor::qzeros);
  EXPECT_EQ(layout.name(), "vllm.moe_wna16_awq_qzeros(unpack,awq_order_undone,transpose,repack,e9d1398d9)");
  // One group, N = 8, zero(0, n) = n: packed [4, 1], byte n/2 = zero(n + 1) << 4 | zero(n).
  const OwnedTensor z = words({1, 1}, {0x75316420u});
  EXPECT_EQ(layout.packed_shape(z.shape), (std::vector<uint64_t>{4, 1}));
  const std::vector<uint8_t> want = {0x10, 0x32, 0x54, 0x76};
  EXPECT_EQ(pack_all(layout, z), want);
  EXPECT_EQ(convert_awq_tensor(z, MoeWna16AwqTensor::qzeros), want);
}

TEST(MoeWna16Awq, BothFollowTheTorchOpSequenceAtAwkwardSizes) {
  for (const auto kind : {MoeWna16AwqTensor::qweight, MoeWna16AwqTensor::qzeros}) {
    const MoeWna16AwqLayout layout(kind);
    for (const auto& shape : std::vector<std::vector<uint64_t>>{{2, 1}, {128, 16}, {6, 3}, {34, 5}, {256, 24}}) {
      SCOPED_TRACE(layout.name() + " " + shape_string(shape));
      const OwnedTensor t = random_tensor(DType::I32, shape, shape[0] * 131 + shape[1]);
      EXPECT_EQ(pack_all(layout, t), convert_awq_tensor(t, kind));
      testing::expect_round_trip(layout, DType::I32, shape, 5);
    }
  }
  // Groups need no pairing: one or three groups pack.
  const MoeWna16AwqLayout zeros(MoeWna16AwqTensor::qzeros);
  const OwnedTensor z = random_tensor(DType::I32, {3, 2}, 77);
  EXPECT_EQ(pack_all(zeros, z), convert_awq_tensor(z, MoeWna16AwqTensor::qzeros));
}

TEST(MoeWna16Awq, RefusesWhatTheLoaderCannotPackAndAllIdsAreRegistered) {
  const MoeWna16AwqLayout qweight(MoeWna16AwqTensor::qweight);
  testing::expect_refused(qweight, DType::I32, {3, 2});  // an odd number of input rows
  testing::expect_dtype_refused(qweight, DType::U8, {4, 4});
  testing::expect_dtype_refused(MoeWna16AwqLayout(MoeWna16AwqTensor::qzeros), DType::I8, {4, 4});
  const XpuTransposeLayout scales(TransposeUse::moe_wna16_scales);
  EXPECT_EQ(scales.name(), "vllm.moe_wna16_scales(transpose,e9d1398d9)");
  for (const char* id : {"vllm.moe_wna16_scales(transpose,e9d1398d9)", "vllm.moe_wna16_awq_qweight(unpack,awq_order_undone,transpose,repack,e9d1398d9)",
                         "vllm.moe_wna16_awq_qzeros(unpack,awq_order_undone,transpose,repack,e9d1398d9)"})
    EXPECT_NE(find_layout(id), nullptr) << id;
}

}  // namespace
}  // namespace moepack::packers
