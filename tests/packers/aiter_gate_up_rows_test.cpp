// vLLM's gpt-oss gate/up row de-interleave for AITER_MXFP4_BF16, and the whole AITER pipelines
// of the path table in packers/registry.cpp: pinned row map, torch-op emulation of the gpt-oss
// branch on [E, ...] tensors (de-interleave, then the a16w4 shuffles), the f32 bias, round trips
// of the pipelines, refusals, registration.
#include "packers/aiter_gate_up_rows.h"

#include <gtest/gtest.h>

#include <cstring>

#include "lib/core/codecs.h"
#include "packers/registry.h"
#include "tests/packers/triton_reference_ops.h"

namespace moepack::packers {
namespace {

using testing::pack_all;
using testing::random_tensor;

constexpr const char* kDeinterleave = "vllm.aiter_deinterleave_gate_up_rows(e9d1398d9)";
constexpr const char* kW13Shuffle = "aiter.shuffle_weight(layout=16x16,is_guinterleave=1,gate_up=1,v0.1.19)";
constexpr const char* kW13ScaleShuffle = "aiter.shuffle_scale(is_guinterleave=1,gate_up=1,v0.1.19)";

std::vector<uint8_t> expert_slice(const OwnedTensor& all, uint64_t e) {
  const uint64_t per = all.bytes.size() / all.shape[0];
  return {all.bytes.begin() + static_cast<std::ptrdiff_t>(e * per), all.bytes.begin() + static_cast<std::ptrdiff_t>((e + 1) * per)};
}

// Packs every expert of an [E, ...] tensor with `layout` and concatenates the slabs.
std::vector<uint8_t> pack_experts(const Layout& layout, const OwnedTensor& all) {
  std::vector<uint64_t> shape(all.shape.begin() + 1, all.shape.end());
  std::vector<uint8_t> out;
  for (uint64_t e = 0; e < all.shape[0]; ++e) {
    OwnedTensor one(all.dtype, shape);
    one.bytes = expert_slice(all, e);
    const std::vector<uint8_t> slab = pack_all(layout, one);
    out.insert(out.end(), slab.begin(), slab.end());
  }
  return out;
}

TEST(AiterDeinterleaveGateUpRows, NameAndPinnedRowMap) {
  const AiterDeinterleaveGateUpRowsLayout layout;
  EXPECT_EQ(layout.name(), kDeinterleave);
  // Rows g0 u0 g1 u1 g2 u2 -> g0 g1 g2 u0 u1 u2.
  const uint64_t expected_packed_row[6] = {0, 3, 1, 4, 2, 5};
  for (uint64_t r = 0; r < 6; ++r) EXPECT_EQ(AiterDeinterleaveGateUpRowsLayout::packed_row(6, r), expected_packed_row[r]);
  OwnedTensor w(DType::U8, {6, 2});
  w.bytes = {0x00, 0x01, 0x10, 0x11, 0x20, 0x21, 0x30, 0x31, 0x40, 0x41, 0x50, 0x51};
  EXPECT_EQ(pack_all(layout, w), (std::vector<uint8_t>{0x00, 0x01, 0x20, 0x21, 0x40, 0x41, 0x10, 0x11, 0x30, 0x31, 0x50, 0x51}));
  EXPECT_EQ(layout.packed_shape(w.shape), w.shape);
  EXPECT_EQ(layout.packed_dtype(DType::F32), DType::F32);
}

TEST(AiterDeinterleaveGateUpRows, RefusesOddRowsAndOtherRanks) {
  const AiterDeinterleaveGateUpRowsLayout layout;
  testing::expect_refused(layout, DType::U8, {3, 4});
  testing::expect_refused(layout, DType::F32, {5});
  testing::expect_refused(layout, DType::U8, {2, 4, 4});
  testing::expect_refused(layout, DType::U8, {0, 4});
  testing::expect_refused(layout, DType::U8, {4, 0});
  testing::expect_dtype_refused(layout, DType::F4, {4, 4});
}

// vLLM's gpt-oss AITER_MXFP4_BF16 branch on whole [E, 2I, ...] tensors, emulated with the torch
// ops, equals the per-expert pipelines concatenated.
TEST(AiterGptOssPipelines, W13WeightEqualsTorchOpsOnTheWholeParameter) {
  const std::string id = std::string(kDeinterleave) + " | " + kW13Shuffle;
  const std::unique_ptr<Layout> pipeline = make_layout(id);
  EXPECT_EQ(pipeline->name(), id);
  uint64_t seed = 20;
  for (const auto& [e, n, c] : std::vector<std::tuple<uint64_t, uint64_t, uint64_t>>{{1, 32, 64}, {3, 96, 192}, {2, 160, 64}}) {
    SCOPED_TRACE(std::to_string(e) + "x" + std::to_string(n) + "x" + std::to_string(c));
    const OwnedTensor w = random_tensor(DType::U8, {e, n, c}, seed++);
    // view(E, N/2, 2, C).permute(0, 2, 1, 3), then shuffle_weight_a16w4(w, 16, gate_up=True).
    const std::vector<uint8_t> rows = testing::permute_contiguous(w.bytes, {e, n / 2, 2, c}, {0, 2, 1, 3});
    const std::vector<uint8_t> expected =
        testing::permute_contiguous(rows, {e, 2, n / 32, 16, c / 64, 4, 16}, {0, 2, 1, 4, 5, 3, 6});
    EXPECT_EQ(pack_experts(*pipeline, w), expected);
    testing::expect_round_trip(*pipeline, DType::U8, {n, c}, seed++);
  }
}

TEST(AiterGptOssPipelines, W13WeightWorkedExample) {
  // N = 64 interleaved rows (g0 u0 g1 u1 ...), C = 64, byte (n, kb) = n: the first tile's
  // lanes read canonical rows 0 2 4 ... 30 (gate 0-15), the fifth tile's rows 1 3 ... 31
  // (up 0-15), the ninth's rows 32 34 ... 62 (gate 16-31), the thirteenth's 33 ... 63.
  OwnedTensor w(DType::U8, {64, 64});
  for (uint64_t n = 0; n < 64; ++n) std::memset(w.bytes.data() + n * 64, static_cast<int>(n), 64);
  const std::vector<uint8_t> p = pack_all(*make_layout(std::string(kDeinterleave) + " | " + kW13Shuffle), w);
  const uint64_t tile_first_row[4] = {0, 1, 32, 33};  // tiles 0, 4, 8, 12
  for (uint64_t t = 0; t < 4; ++t)
    for (uint64_t lane = 0; lane < 16; ++lane)
      for (uint64_t chunk = 0; chunk < 4; ++chunk)
        EXPECT_EQ(p[((4 * t + chunk) * 16 + lane) * 16], tile_first_row[t] + 2 * lane) << t << " " << lane << " " << chunk;
}

TEST(AiterGptOssPipelines, W13ScaleEqualsTorchOpsOnTheWholeParameter) {
  const std::string id = std::string(kDeinterleave) + " | " + kW13ScaleShuffle;
  const std::unique_ptr<Layout> pipeline = make_layout(id);
  uint64_t seed = 40;
  for (const auto& [e, n, g] : std::vector<std::tuple<uint64_t, uint64_t, uint64_t>>{{1, 32, 8}, {3, 96, 90}, {2, 160, 12}}) {
    SCOPED_TRACE(std::to_string(e) + "x" + std::to_string(n) + "x" + std::to_string(g));
    const OwnedTensor s = random_tensor(DType::U8, {e, n, g}, seed++);
    const uint64_t g8 = (g + 7) / 8 * 8;
    // view(E, N/2, 2, G).permute(0, 2, 1, 3), flatten to [E*N, G], shuffle_scale_a16w4(s, E, True).
    const std::vector<uint8_t> rows = testing::permute_contiguous(s.bytes, {e, n / 2, 2, g}, {0, 2, 1, 3});
    std::vector<uint8_t> padded(e * n * g8, 0x7F);
    for (uint64_t r = 0; r < e * n; ++r) std::memcpy(padded.data() + r * g8, rows.data() + r * g, g);
    const std::vector<uint8_t> expected =
        testing::permute_contiguous(padded, {e, 2, n / 32, 16, g8 / 8, 2, 4}, {0, 2, 4, 6, 3, 5, 1});
    EXPECT_EQ(pack_experts(*pipeline, s), expected);
    EXPECT_EQ(pipeline->parameter_shape(e, std::vector<uint64_t>{n, g}), (std::vector<uint64_t>{e * n, g8}));
    testing::expect_round_trip(*pipeline, DType::U8, {n, g}, seed++);
  }
}

TEST(AiterGptOssPipelines, W13BiasIsF32InGateThenUpOrder) {
  const std::unique_ptr<Layout> bias = make_layout(std::string("vllm.bias_f32 | ") + kDeinterleave);
  EXPECT_EQ(bias->packed_dtype(DType::BF16), DType::F32);
  // BF16 [g0, u0, g1, u1] = {1.0, -2.0, 0.5, 3.0} -> F32 [g0, g1, u0, u1] = {1.0, 0.5, -2.0, 3.0}.
  OwnedTensor b(DType::BF16, {4});
  const uint16_t in[4] = {float_to_bf16(1.0f), float_to_bf16(-2.0f), float_to_bf16(0.5f), float_to_bf16(3.0f)};
  std::memcpy(b.bytes.data(), in, sizeof in);
  const std::vector<uint8_t> packed = pack_all(*bias, b);
  ASSERT_EQ(packed.size(), 16u);
  float out[4];
  std::memcpy(out, packed.data(), sizeof out);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], 0.5f);
  EXPECT_EQ(out[2], -2.0f);
  EXPECT_EQ(out[3], 3.0f);
  EXPECT_EQ(bias->parameter_shape(32, std::vector<uint64_t>{5760}), (std::vector<uint64_t>{32, 5760}));
  testing::expect_round_trip(*bias, DType::F32, {5760}, 60);
}

TEST(AiterRegistry, EveryAiterIdAndPipelineOfThePathTableBuilds) {
  for (const char* id : {
           "aiter.shuffle_weight(layout=16x16,v0.1.19)",
           "aiter.shuffle_weight(layout=16x16,is_guinterleave=1,gate_up=0,v0.1.19)",
           "aiter.shuffle_weight(layout=16x16,is_guinterleave=1,gate_up=1,v0.1.19)",
           "aiter.shuffle_scale(is_guinterleave=1,gate_up=0,v0.1.19)",
           "aiter.shuffle_scale(is_guinterleave=1,gate_up=1,v0.1.19)",
           "aiter.e8m0_shuffle(param=2d,v0.1.19)",
           "aiter.e8m0_shuffle(param=3d,v0.1.19)",
           "vllm.aiter_deinterleave_gate_up_rows(e9d1398d9)",
           "torch.view(float8_e8m0fnu)",
       }) {
    ASSERT_NE(find_layout(id), nullptr) << id;
    EXPECT_EQ(make_layout(id)->name(), id);
  }
  for (const char* pipeline : {
           "vllm.aiter_deinterleave_gate_up_rows(e9d1398d9) | aiter.shuffle_weight(layout=16x16,is_guinterleave=1,gate_up=1,v0.1.19)",
           "vllm.aiter_deinterleave_gate_up_rows(e9d1398d9) | aiter.shuffle_scale(is_guinterleave=1,gate_up=1,v0.1.19)",
           "vllm.bias_f32 | vllm.aiter_deinterleave_gate_up_rows(e9d1398d9)",
           "torch.view(float8_e8m0fnu) | aiter.shuffle_scale(is_guinterleave=1,gate_up=1,v0.1.19)",
           "torch.view(float8_e8m0fnu) | aiter.e8m0_shuffle(param=2d,v0.1.19)",
       })
    EXPECT_EQ(make_layout(pipeline)->name(), pipeline);
}

}  // namespace
}  // namespace moepack::packers
