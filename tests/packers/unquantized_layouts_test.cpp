// The unquantized (BF16/FP16) MoE layouts: vLLM's CPU prepack (amx, vec), the FlashInfer CUTLASS
// w13 swap, the XPU transpose and FlashInfer TRT-LLM-gen's BF16 BlockMajorK. Pinned worked
// examples drawn by hand from the upstream code, loop-for-loop emulations of the upstream
// routines (csrc/cpu/micro_gemm pack_weight; the torch/flashinfer index ops) on awkward sizes,
// round trips, refusals and registration.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "packers/cpu_prepack_moe.h"
#include "packers/flashinfer_trtllm_bf16.h"
#include "packers/registry.h"
#include "packers/unquantized_rows.h"
#include "tests/packers/triton_reference_ops.h"

namespace moepack::packers {
namespace {

using testing::pack_all;
using testing::random_tensor;

// A 16-bit tensor whose element (r, c) holds r * 256 + c (distinct for r, c < 256), so a packed
// element names where it came from.
OwnedTensor tagged16(DType dtype, uint64_t rows, uint64_t cols) {
  OwnedTensor t(dtype, {rows, cols});
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t c = 0; c < cols; ++c) {
      const uint16_t v = static_cast<uint16_t>(r * 256 + c);
      std::memcpy(t.bytes.data() + (r * cols + c) * 2, &v, 2);
    }
  return t;
}
uint16_t at16(const std::vector<uint8_t>& bytes, uint64_t i) {
  uint16_t v;
  std::memcpy(&v, bytes.data() + i * 2, 2);
  return v;
}
uint16_t tag(uint64_t r, uint64_t c) { return static_cast<uint16_t>(r * 256 + c); }

// ---- CPU prepack ------------------------------------------------------------------------------

// Loop-for-loop transliteration of MicroGemm<VEC>::pack_weight (cpu_micro_gemm_vec.hpp): each
// output row walks its inputs with a packed stride of 16.
std::vector<uint8_t> upstream_vec_pack(const OwnedTensor& w) {
  const uint64_t O = w.shape[0], K = w.shape[1], eb = static_cast<uint64_t>(dtype_bits(w.dtype) / 8);
  std::vector<uint8_t> out(w.bytes.size());
  for (uint64_t o = 0; o < O; ++o) {
    const uint8_t* cur = w.bytes.data() + o * K * eb;
    uint8_t* dst = out.data() + ((o / 16) * (16 * K) + o % 16) * eb;
    for (uint64_t i = 0; i < K; ++i, dst += 16 * eb, cur += eb) std::memcpy(dst, cur, eb);
  }
  return out;
}

// Loop-for-loop transliteration of MicroGemm<AMX>::pack_weight (cpu_micro_gemm_amx.hpp): 32-bit
// words, per group of 16 rows each row's words scattered with stride 16.
std::vector<uint8_t> upstream_amx_pack(const OwnedTensor& w) {
  const uint64_t O = w.shape[0], K = w.shape[1], eb = static_cast<uint64_t>(dtype_bits(w.dtype) / 8);
  const uint64_t words_per_row = K * eb / 4;
  std::vector<uint8_t> out(w.bytes.size());
  const uint8_t* weight = w.bytes.data();
  uint8_t* packed = out.data();
  for (uint64_t g = 0; g < O / 16; ++g) {
    const uint8_t* src = weight;
    uint8_t* dst = packed;
    for (uint64_t o = 0; o < 16; ++o) {
      for (uint64_t wo = 0, po = 0; wo < words_per_row; ++wo, po += 16) std::memcpy(dst + po * 4, src + wo * 4, 4);
      src += words_per_row * 4;
      dst += 4;
    }
    weight += 16 * K * eb;
    packed += 16 * K * eb;
  }
  return out;
}

TEST(CpuPrepackMoeWeight, NamesAndShapes) {
  const CpuPrepackMoeWeightLayout amx(CpuMoeIsa::amx), vec(CpuMoeIsa::vec);
  EXPECT_EQ(amx.name(), "vllm.cpu_prepack_moe_weight(amx,e9d1398d9)");
  EXPECT_EQ(vec.name(), "vllm.cpu_prepack_moe_weight(vec,e9d1398d9)");
  const std::vector<uint64_t> shape = {64, 96};
  EXPECT_EQ(amx.packed_shape(shape), shape);  // torch.empty_like: same shape and dtype
  EXPECT_EQ(vec.packed_dtype(DType::F16), DType::F16);
  EXPECT_EQ(amx.parameter_shape(3, shape), (std::vector<uint64_t>{3, 64, 96}));
}

// Worked example (vec, O = 32, K = 4), drawn from pack_weight: packed [O/16][K][16].
TEST(CpuPrepackMoeWeight, VecPinnedExample) {
  const CpuPrepackMoeWeightLayout vec(CpuMoeIsa::vec);
  const std::vector<uint8_t> p = pack_all(vec, tagged16(DType::BF16, 32, 4));
  for (uint64_t o = 0; o < 16; ++o) {
    EXPECT_EQ(at16(p, o), tag(o, 0));        // packed 0..15  = W[0..15][0]
    EXPECT_EQ(at16(p, 16 + o), tag(o, 1));   // packed 16..31 = W[0..15][1]
    EXPECT_EQ(at16(p, 48 + o), tag(o, 3));   // packed 48..63 = W[0..15][3]
    EXPECT_EQ(at16(p, 64 + o), tag(16 + o, 0));  // group 1 starts at 16*K = 64
  }
}

// Worked example (amx, O = 32, K = 32): word [g][kp][o] = (W[16g+o][2kp], W[16g+o][2kp+1]).
TEST(CpuPrepackMoeWeight, AmxPinnedExample) {
  const CpuPrepackMoeWeightLayout amx(CpuMoeIsa::amx);
  const std::vector<uint8_t> p = pack_all(amx, tagged16(DType::BF16, 32, 32));
  const uint16_t expected_first[8] = {tag(0, 0), tag(0, 1), tag(1, 0), tag(1, 1), tag(2, 0), tag(2, 1), tag(3, 0), tag(3, 1)};
  for (uint64_t i = 0; i < 8; ++i) EXPECT_EQ(at16(p, i), expected_first[i]) << i;
  EXPECT_EQ(at16(p, 30), tag(15, 0));
  EXPECT_EQ(at16(p, 31), tag(15, 1));
  EXPECT_EQ(at16(p, 32), tag(0, 2));   // word 16: the next pair of row 0
  EXPECT_EQ(at16(p, 33), tag(0, 3));
  EXPECT_EQ(at16(p, 511), tag(15, 31));
  EXPECT_EQ(at16(p, 512), tag(16, 0));  // group 1 starts at 16*K = 512
}

TEST(CpuPrepackMoeWeight, MatchesUpstreamLoopsOnAwkwardSizes) {
  // I = 40 padded to P = 64 per rank (w13 [2P, H], w2 [H, P]) with H = 96; and odd K for vec.
  const std::vector<std::vector<uint64_t>> shapes = {{128, 96}, {96, 64}, {32, 32}, {160, 224}};
  uint64_t seed = 1;
  for (const auto& s : shapes)
    for (DType t : {DType::BF16, DType::F16, DType::F32}) {
      SCOPED_TRACE(shape_string(s) + " " + std::string(dtype_name(t)));
      const OwnedTensor w = random_tensor(t, s, seed++);
      EXPECT_EQ(pack_all(CpuPrepackMoeWeightLayout(CpuMoeIsa::vec), w), upstream_vec_pack(w));
      EXPECT_EQ(pack_all(CpuPrepackMoeWeightLayout(CpuMoeIsa::amx), w), upstream_amx_pack(w));
      testing::expect_round_trip(CpuPrepackMoeWeightLayout(CpuMoeIsa::amx), t, s, seed);
      testing::expect_round_trip(CpuPrepackMoeWeightLayout(CpuMoeIsa::vec), t, s, seed);
    }
  const OwnedTensor odd = random_tensor(DType::BF16, {64, 17}, 99);  // vec takes any K
  EXPECT_EQ(pack_all(CpuPrepackMoeWeightLayout(CpuMoeIsa::vec), odd), upstream_vec_pack(odd));
}

TEST(CpuPrepackMoeWeight, RefusesWhatUpstreamChecks) {
  // prepack_moe_weight: output size % 32; AMX: input size % 32.
  testing::expect_refused(CpuPrepackMoeWeightLayout(CpuMoeIsa::vec), DType::U8, {48, 64});
  testing::expect_refused(CpuPrepackMoeWeightLayout(CpuMoeIsa::amx), DType::U8, {64, 48});
  testing::expect_dtype_refused(CpuPrepackMoeWeightLayout(CpuMoeIsa::amx), DType::U8, {64, 64});
}

// ---- FlashInfer CUTLASS swap and XPU transpose --------------------------------------------------

TEST(SwapW13ToW31, PinnedExampleAndRoundTrip) {
  const SwapW13ToW31Layout swap;
  EXPECT_EQ(swap.name(), "vllm.swap_w13_to_w31(e9d1398d9)");
  // rows g0 g1 u0 u1 -> u0 u1 g0 g1 (reshape(-1, 2, 2, K).flip(1)).
  const std::vector<uint8_t> p = pack_all(swap, tagged16(DType::BF16, 4, 2));
  const uint16_t expected[8] = {tag(2, 0), tag(2, 1), tag(3, 0), tag(3, 1), tag(0, 0), tag(0, 1), tag(1, 0), tag(1, 1)};
  for (uint64_t i = 0; i < 8; ++i) EXPECT_EQ(at16(p, i), expected[i]);
  testing::expect_round_trip(swap, DType::BF16, {80, 96}, 3);
  testing::expect_refused(swap, DType::BF16, {5, 4});
}

TEST(XpuTranspose, PinnedExampleAndRoundTrip) {
  const XpuTransposeLayout t;
  EXPECT_EQ(t.name(), "vllm.xpu_transpose(e9d1398d9)");
  // [2, 3] a b c / d e f -> [3, 2] a d / b e / c f
  const std::vector<uint8_t> p = pack_all(t, tagged16(DType::F16, 2, 3));
  const uint16_t expected[6] = {tag(0, 0), tag(1, 0), tag(0, 1), tag(1, 1), tag(0, 2), tag(1, 2)};
  for (uint64_t i = 0; i < 6; ++i) EXPECT_EQ(at16(p, i), expected[i]);
  EXPECT_EQ(t.packed_shape(std::vector<uint64_t>{2, 3}), (std::vector<uint64_t>{3, 2}));
  testing::expect_round_trip(t, DType::BF16, {80, 96}, 4);
}

// ---- FlashInfer TRT-LLM-gen BF16 --------------------------------------------------------------

// The upstream ops, emulated on index vectors as torch runs them: flashinfer's
// get_reorder_rows_for_gated_act_gemm_row_indices (top/bottom halves alternated),
// get_shuffle_matrix_a_row_indices (srcToDstBlk32RowMap, row_indices[new_rows] = old_rows),
// permute0[permute1], vLLM's (+ rows/2) % rows when gated, then view(rows, Kb/128, 128)
// .permute(1, 0, 2) and index_select(1, indices) on the uint8 view.
std::vector<uint8_t> upstream_trtllm_bf16(const OwnedTensor& w, bool gated) {
  const uint64_t M = w.shape[0], Kb = w.shape[1] * 2;
  std::vector<uint64_t> permute0(M);
  std::iota(permute0.begin(), permute0.end(), 0);
  if (gated)
    for (uint64_t i = 0; i < M / 2; ++i) {
      permute0[2 * i] = i;
      permute0[2 * i + 1] = M / 2 + i;
    }
  static const uint64_t kRowMap[32] = {0, 8, 16, 24, 1, 9, 17, 25, 2, 10, 18, 26, 3, 11, 19, 27,
                                       4, 12, 20, 28, 5, 13, 21, 29, 6, 14, 22, 30, 7, 15, 23, 31};
  std::vector<uint64_t> permute1(M);
  for (uint64_t old_row = 0; old_row < M; ++old_row) permute1[(old_row / 32) * 32 + kRowMap[old_row % 32]] = old_row;
  std::vector<uint64_t> indices(M);
  for (uint64_t r = 0; r < M; ++r) indices[r] = permute0[permute1[r]];
  if (gated)
    for (auto& i : indices) i = (i + M / 2) % M;
  std::vector<uint8_t> out(w.bytes.size());
  for (uint64_t kb = 0; kb < Kb / 128; ++kb)
    for (uint64_t r = 0; r < M; ++r) std::memcpy(out.data() + (kb * M + r) * 128, w.bytes.data() + indices[r] * Kb + kb * 128, 128);
  return out;
}

constexpr const char* kTrtllmGated = "flashinfer.trtllm_bf16_block_major_k(rows=w3w1_interleave,vllm e9d1398d9,v0.6.17)";
constexpr const char* kTrtllmPlain = "flashinfer.trtllm_bf16_block_major_k(rows=identity,vllm e9d1398d9,v0.6.17)";

TEST(FlashinferTrtllmBf16, NamesAndShapes) {
  const FlashinferTrtllmBf16Layout gated(RowOrder::w3w1_interleave), plain(RowOrder::identity);
  EXPECT_EQ(gated.name(), kTrtllmGated);
  EXPECT_EQ(plain.name(), kTrtllmPlain);
  EXPECT_EQ(gated.packed_shape(std::vector<uint64_t>{256, 128}), (std::vector<uint64_t>{2, 256, 64}));
  EXPECT_EQ(plain.parameter_shape(4, std::vector<uint64_t>{128, 256}), (std::vector<uint64_t>{4, 4, 128, 64}));
}

// The header's drawn example: gated, I = 16 (32 rows), K = 128.
TEST(FlashinferTrtllmBf16, GatedPinnedExample) {
  const FlashinferTrtllmBf16Layout gated(RowOrder::w3w1_interleave);
  const std::vector<uint8_t> p = pack_all(gated, tagged16(DType::BF16, 32, 128));
  const uint64_t expected_source[11] = {16, 18, 20, 22, 24, 26, 28, 30, 0, 2, 4};
  for (uint64_t r = 0; r < 11; ++r) {
    EXPECT_EQ(gated.source_row(r, 32), expected_source[r]) << r;
    EXPECT_EQ(at16(p, r * 64), tag(expected_source[r], 0)) << r;
    EXPECT_EQ(at16(p, r * 64 + 63), tag(expected_source[r], 63)) << r;
  }
  EXPECT_EQ(at16(p, 32 * 64), tag(16, 64));  // block kb = 1
  EXPECT_EQ(at16(p, 32 * 64 + 64), tag(18, 64));
}

TEST(FlashinferTrtllmBf16, MatchesUpstreamOpsOnSeveralSizes) {
  // Rows: 2I for I = 64 (TP split of Mixtral-like sizes), H = 96 is refused below; w2 [H, I].
  const std::vector<std::vector<uint64_t>> shapes = {{128, 128}, {256, 192}, {192, 64}, {96, 320}};
  uint64_t seed = 11;
  for (const auto& s : shapes)
    for (bool is_gated : {true, false}) {
      SCOPED_TRACE(shape_string(s) + (is_gated ? " gated" : " plain"));
      const FlashinferTrtllmBf16Layout layout(is_gated ? RowOrder::w3w1_interleave : RowOrder::identity);
      const OwnedTensor w = random_tensor(DType::BF16, s, seed++);
      EXPECT_EQ(pack_all(layout, w), upstream_trtllm_bf16(w, is_gated));
      testing::expect_round_trip(layout, DType::BF16, s, seed);
    }
}

TEST(FlashinferTrtllmBf16, RefusesWhatVllmFailsOn) {
  const FlashinferTrtllmBf16Layout layout(RowOrder::identity);
  testing::expect_refused(layout, DType::BF16, {80, 128});   // 2I = 80: not whole 32-row shuffle blocks
  testing::expect_refused(layout, DType::BF16, {128, 96});   // K = 96 (I or H % 64 != 0): 192 bytes, not 128-byte blocks
  testing::expect_dtype_refused(layout, DType::F16, {128, 128});  // "requires bfloat16 weights"
}

// FlashInfer's DeepSeek FP8 path, transliterated: swap_w13_to_w31 (gated), then
// shuffle_matrix_a(epilogue_tile_m=64) on the uint8 view (srcToDstBlk16RowMap, row_indices[new]
// = old), then convert_to_block_layout(128): view [M, K/128, 128].permute(1, 0, 2).
std::vector<uint8_t> upstream_trtllm_fp8_block(const OwnedTensor& w, bool gated) {
  const uint64_t M = w.shape[0], K = w.shape[1];
  std::vector<uint8_t> swapped = w.bytes;
  if (gated)
    for (uint64_t r = 0; r < M; ++r) std::memcpy(swapped.data() + r * K, w.bytes.data() + ((r + M / 2) % M) * K, K);
  static const uint64_t kRowMap16[16] = {0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15};
  std::vector<uint64_t> row_indices(M);
  for (uint64_t old_row = 0; old_row < M; ++old_row) row_indices[(old_row / 16) * 16 + kRowMap16[old_row % 16]] = old_row;
  std::vector<uint8_t> out(w.bytes.size());
  for (uint64_t kb = 0; kb < K / 128; ++kb)
    for (uint64_t r = 0; r < M; ++r) std::memcpy(out.data() + (kb * M + r) * 128, swapped.data() + row_indices[r] * K + kb * 128, 128);
  return out;
}

constexpr const char* kTrtllmFp8Gated = "flashinfer.trtllm_fp8_block_major_k(rows=swap_halves,epilogue_tile_m=64,block_k=128,vllm e9d1398d9,v0.6.17)";
constexpr const char* kTrtllmFp8Plain = "flashinfer.trtllm_fp8_block_major_k(rows=identity,epilogue_tile_m=64,block_k=128,vllm e9d1398d9,v0.6.17)";

// The header's drawn example: gated, I = 16 (32 rows), K = 128.
TEST(FlashinferTrtllmFp8Block, GatedPinnedExampleAndShapes) {
  const FlashinferTrtllmFp8BlockLayout gated(RowOrder::swap_halves), plain(RowOrder::identity);
  EXPECT_EQ(gated.name(), kTrtllmFp8Gated);
  EXPECT_EQ(plain.name(), kTrtllmFp8Plain);
  EXPECT_EQ(gated.packed_shape(std::vector<uint64_t>{256, 384}), (std::vector<uint64_t>{3, 256, 128}));
  const uint64_t expected_source[12] = {16, 18, 20, 22, 24, 26, 28, 30, 17, 19, 21, 23};
  for (uint64_t r = 0; r < 12; ++r) EXPECT_EQ(gated.source_row(r, 32), expected_source[r]) << r;
  EXPECT_EQ(gated.source_row(16, 32), 0u);
  EXPECT_EQ(gated.source_row(17, 32), 2u);
  EXPECT_EQ(plain.source_row(8, 32), 1u);
}

TEST(FlashinferTrtllmFp8Block, MatchesUpstreamOpsOnSeveralSizes) {
  const std::vector<std::vector<uint64_t>> shapes = {{256, 128}, {512, 256}, {48, 384}, {7168 / 28, 512}};
  uint64_t seed = 21;
  for (const auto& s : shapes)
    for (bool is_gated : {true, false}) {
      SCOPED_TRACE(shape_string(s) + (is_gated ? " gated" : " plain"));
      const FlashinferTrtllmFp8BlockLayout layout(is_gated ? RowOrder::swap_halves : RowOrder::identity);
      const OwnedTensor w = random_tensor(DType::F8_E4M3, s, seed++);
      EXPECT_EQ(pack_all(layout, w), upstream_trtllm_fp8_block(w, is_gated));
      testing::expect_round_trip(layout, DType::F8_E4M3, s, seed);
    }
}

TEST(FlashinferTrtllmFp8Block, RefusesWhatVllmFailsOn) {
  const FlashinferTrtllmFp8BlockLayout layout(RowOrder::identity);
  testing::expect_refused(layout, DType::F8_E4M3, {40, 128});  // not whole 16-row shuffle blocks
  testing::expect_refused(layout, DType::F8_E4M3, {64, 192});  // K % 128 != 0
  EXPECT_NE(packers::find_layout(kTrtllmFp8Gated), nullptr);
  EXPECT_NE(packers::find_layout(kTrtllmFp8Plain), nullptr);
}

TEST(UnquantizedLayouts, AreRegistered) {
  for (const char* id : {"vllm.cpu_prepack_moe_weight(amx,e9d1398d9)", "vllm.cpu_prepack_moe_weight(vec,e9d1398d9)", "vllm.swap_w13_to_w31(e9d1398d9)",
                         "vllm.xpu_transpose(e9d1398d9)", kTrtllmGated, kTrtllmPlain}) {
    ASSERT_NE(find_layout(id), nullptr) << id;
    EXPECT_EQ(make_layout(id)->name(), id);
  }
}

}  // namespace
}  // namespace moepack::packers
