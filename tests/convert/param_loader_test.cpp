// vLLM's loader emulation on hand-computed cases: which source rows/columns land where in the
// padded per-rank parameter.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "lib/convert/param_loader.h"
#include "lib/core/codecs.h"
#include "lib/core/error.h"

namespace moepack::convert {
namespace {

// A U8 [rows, cols] tensor whose byte at (r, c) is a function of r and c.
OwnedTensor numbered(uint64_t rows, uint64_t cols) {
  OwnedTensor t(DType::U8, {rows, cols});
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t c = 0; c < cols; ++c) t.bytes[r * cols + c] = static_cast<uint8_t>(r * 7 + c + 1);
  return t;
}
uint8_t at(const OwnedTensor& t, uint64_t r, uint64_t c) { return t.bytes[r * t.shape[1] + c]; }

// One rank, no padding: the copying loader gives back the canonical tensor unchanged for every
// role, loader and gating, which is what lets the moving overload hand over the tensor itself.
TEST(ParamLoader, WholeUnpaddedLoadIsTheCanonicalTensorAndTheMoveTakesIt) {
  const uint64_t H = 64, I = 96;
  struct Case {
    std::string role;
    OwnedTensor t;
  };
  OwnedTensor bias13(DType::BF16, {2 * I}), bias13_up(DType::BF16, {I}), bias2(DType::BF16, {H}), scalar(DType::F32, {1});
  for (auto* t : {&bias13, &bias13_up, &bias2, &scalar})
    for (size_t i = 0; i < t->bytes.size(); ++i) t->bytes[i] = static_cast<uint8_t>(i * 13 + 5);
  for (bool interleaved : {false, true})
    for (bool gated : {true, false}) {
      RankGeometry g{.hidden = H, .intermediate = I, .padded_hidden = H, .padded_intermediate = I, .gpt_oss_interleaved = interleaved, .gated = gated};
      std::vector<Case> cases = {{"w13_weight", numbered(gated ? 2 * I : I, H / 2)}, {"w13_weight_scale", numbered(gated ? 2 * I : I, H / 32)},
                                 {"w2_weight", numbered(H, I / 2)},                  {"w2_weight_scale", numbered(H, I / 32)},
                                 {"w13_bias", gated ? bias13 : bias13_up},           {"w2_bias", bias2},
                                 {"w13_input_scale", scalar}};
      for (auto& c : cases) {
        const std::string where = c.role + (interleaved ? " interleaved" : " stacked") + (gated ? " gated" : " up only");
        const OwnedTensor copied = load_expert_param(c.role, c.t, g);
        EXPECT_EQ(copied.dtype, c.t.dtype) << where;
        EXPECT_EQ(copied.shape, c.t.shape) << where;
        EXPECT_EQ(copied.bytes, c.t.bytes) << where;
        OwnedTensor source = c.t;
        const uint8_t* storage = source.bytes.data();
        const OwnedTensor moved = load_expert_param(c.role, std::move(source), g);
        EXPECT_EQ(moved.bytes, c.t.bytes) << where;
        EXPECT_EQ(moved.bytes.data(), storage) << where << ": not moved";
      }
    }
  // Padding or several ranks: the moving overload copies as the other does.
  RankGeometry padded{.hidden = H, .intermediate = I, .padded_hidden = 2 * H, .padded_intermediate = I};
  OwnedTensor w2 = numbered(H, I / 2);
  const OwnedTensor by_copy = load_expert_param("w2_weight", w2, padded);
  const OwnedTensor by_move = load_expert_param("w2_weight", std::move(w2), padded);
  EXPECT_EQ(by_move.shape, (std::vector<uint64_t>{2 * H, I / 2}));
  EXPECT_EQ(by_move.bytes, by_copy.bytes);
}

TEST(ParamLoader, GptOssRankRangeRoundsBlocksUp) {
  RankGeometry g{.hidden = 64, .intermediate = 96, .tp_size = 2, .gpt_oss_mx_blocks = true};
  g.tp_rank = 0;
  EXPECT_EQ(gpt_oss_rank_range(g).begin, 0u);
  EXPECT_EQ(gpt_oss_rank_range(g).end, 64u);   // ceil(3 blocks / 2) = 2 blocks
  g.tp_rank = 1;
  EXPECT_EQ(gpt_oss_rank_range(g).begin, 64u);
  EXPECT_EQ(gpt_oss_rank_range(g).end, 96u);   // the last rank is clipped
  // gpt-oss-120b, tp 4: 90 blocks -> 23 per rank -> 736 rows; the last rank gets 672.
  RankGeometry big{.hidden = 2880, .intermediate = 2880, .tp_size = 4, .tp_rank = 3, .gpt_oss_mx_blocks = true};
  EXPECT_EQ(gpt_oss_rank_range(big).begin, 3u * 736u);
  EXPECT_EQ(gpt_oss_rank_range(big).end, 2880u);
}

// gpt-oss' other loaders (BF16, compressed-tensors, non-MXFP4 quark) take ceil(I / tp) rows per
// rank, not whole 32-element blocks (issue 20: I = 192 at TP 4 is 48 rows, where the block rule's
// 64 overran the 48-row parameter).
TEST(ParamLoader, GptOssNonMxRankRangeIsCeilOfIOverTp) {
  for (uint64_t rank = 0; rank < 4; ++rank) {
    RankGeometry g{.hidden = 192, .intermediate = 192, .tp_size = 4, .tp_rank = rank};
    EXPECT_EQ(gpt_oss_rank_range(g).begin, 48 * rank);
    EXPECT_EQ(gpt_oss_rank_range(g).end, 48 * rank + 48);
    g.gpt_oss_mx_blocks = true;  // ceil(6 blocks / 4) = 2 blocks: 64 rows, the last rank none
    EXPECT_EQ(gpt_oss_rank_range(g).begin, std::min<uint64_t>(64 * rank, 192));
    EXPECT_EQ(gpt_oss_rank_range(g).end, std::min<uint64_t>(64 * rank + 64, 192));
  }
  RankGeometry g16{.hidden = 192, .intermediate = 192, .tp_size = 16, .tp_rank = 15};
  EXPECT_EQ(gpt_oss_rank_range(g16).begin, 180u);
  EXPECT_EQ(gpt_oss_rank_range(g16).end, 192u);
}

TEST(ParamLoader, GptOssBf16W13AtTp4TakesItsInterleavedRowsAndBiasHalves) {
  // I = 192, H = 8 (BF16 [2I, H] canonical rows, interleaved): rank 2 of 4 takes rows [192, 288).
  RankGeometry g{.hidden = 8, .intermediate = 192, .padded_hidden = 8, .padded_intermediate = 48,
                 .tp_size = 4, .tp_rank = 2, .gpt_oss_interleaved = true, .w2_bias_first_rank_only = true};
  OwnedTensor w13(DType::BF16, {384, 8});
  for (size_t i = 0; i < w13.bytes.size(); ++i) w13.bytes[i] = static_cast<uint8_t>(i * 13 + i / 251);
  OwnedTensor out = load_expert_param("w13_weight", w13, g);
  ASSERT_EQ(out.shape, (std::vector<uint64_t>{96, 8}));
  const uint64_t row_bytes = 8 * 2;
  EXPECT_TRUE(std::equal(out.bytes.begin(), out.bytes.end(), w13.bytes.begin() + 192 * row_bytes));
  OwnedTensor bias(DType::BF16, {384});
  for (size_t i = 0; i < bias.bytes.size(); ++i) bias.bytes[i] = static_cast<uint8_t>(i + 3);
  OwnedTensor b = load_expert_param("w13_bias", bias, g);
  ASSERT_EQ(b.shape, (std::vector<uint64_t>{96}));
  EXPECT_TRUE(std::equal(b.bytes.begin(), b.bytes.end(), bias.bytes.begin() + 192 * 2));
  // w2 [H, I]: columns [96, 144).
  OwnedTensor w2(DType::BF16, {8, 192});
  for (size_t i = 0; i < w2.bytes.size(); ++i) w2.bytes[i] = static_cast<uint8_t>(i * 7 + 1);
  OwnedTensor o2 = load_expert_param("w2_weight", w2, g);
  ASSERT_EQ(o2.shape, (std::vector<uint64_t>{8, 48}));
  for (uint64_t r = 0; r < 8; ++r)
    EXPECT_TRUE(std::equal(o2.bytes.begin() + r * 96, o2.bytes.begin() + r * 96 + 96, w2.bytes.begin() + (r * 192 + 96) * 2)) << r;
}

// A rank range larger than the parameter it was planned for is an internal error naming the
// tensor, never a write past the buffer (issue 20's heap corruption).
TEST(ParamLoader, ARankRangeThatDoesNotFitTheParameterIsAnInternalError) {
  RankGeometry g{.hidden = 8, .intermediate = 192, .padded_hidden = 8, .padded_intermediate = 48,
                 .tp_size = 4, .tp_rank = 0, .gpt_oss_interleaved = true, .gpt_oss_mx_blocks = true};  // 64 rows into 48
  for (const char* role : {"w13_weight", "w13_bias", "w2_weight"}) {
    SCOPED_TRACE(role);
    const bool w13 = std::string(role).starts_with("w13");
    OwnedTensor t(DType::BF16, std::string(role) == "w13_bias" ? std::vector<uint64_t>{384} : w13 ? std::vector<uint64_t>{384, 8} : std::vector<uint64_t>{8, 192});
    try {
      load_expert_param(role, t, g);
      ADD_FAILURE() << "loaded";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::internal) << e.what();
      EXPECT_NE(std::string(e.what()).find(role), std::string::npos) << e.what();
    }
  }
}

TEST(ParamLoader, GptOssW13TakesOneInterleavedRowBlockAndPadsAtTheEnd) {
  // I = 96, H = 64: w13 U8 [192, 32]; rank 1 of 2 takes rows [128, 192).
  RankGeometry g{.hidden = 64, .intermediate = 96, .padded_hidden = 128, .padded_intermediate = 64,
                 .tp_size = 2, .tp_rank = 1, .gpt_oss_interleaved = true, .gpt_oss_mx_blocks = true, .w2_bias_first_rank_only = true};
  OwnedTensor w13 = numbered(192, 32);
  OwnedTensor out = load_expert_param("w13_weight", w13, g);
  ASSERT_EQ(out.shape, (std::vector<uint64_t>{128, 64}));
  EXPECT_EQ(at(out, 0, 0), at(w13, 128, 0));
  EXPECT_EQ(at(out, 63, 31), at(w13, 191, 31));
  EXPECT_EQ(at(out, 63, 32), 0);   // hidden padding
  EXPECT_EQ(at(out, 64, 0), 0);    // intermediate padding
  // Scales [192, 2] (H/32): same rows, padded to Hp/32 = 4 columns.
  OwnedTensor s = numbered(192, 2);
  OwnedTensor so = load_expert_param("w13_weight_scale", s, g);
  ASSERT_EQ(so.shape, (std::vector<uint64_t>{128, 4}));
  EXPECT_EQ(at(so, 5, 1), at(s, 133, 1));
}

TEST(ParamLoader, GptOssW2TakesTheMatchingColumnsAndBiasOnRankZero) {
  RankGeometry g{.hidden = 64, .intermediate = 96, .padded_hidden = 64, .padded_intermediate = 64,
                 .tp_size = 2, .tp_rank = 1, .gpt_oss_interleaved = true, .gpt_oss_mx_blocks = true, .w2_bias_first_rank_only = true};
  OwnedTensor w2 = numbered(64, 48);  // [H, I/2]
  OwnedTensor out = load_expert_param("w2_weight", w2, g);
  ASSERT_EQ(out.shape, (std::vector<uint64_t>{64, 32}));
  EXPECT_EQ(at(out, 3, 0), at(w2, 3, 32));   // columns [64/2, 96/2)
  EXPECT_EQ(at(out, 3, 15), at(w2, 3, 47));
  EXPECT_EQ(at(out, 3, 16), 0);
  OwnedTensor s = numbered(64, 3);           // [H, I/32]
  OwnedTensor so = load_expert_param("w2_weight_scale", s, g);
  ASSERT_EQ(so.shape, (std::vector<uint64_t>{64, 2}));
  EXPECT_EQ(at(so, 9, 0), at(s, 9, 2));
  EXPECT_EQ(at(so, 9, 1), 0);
  OwnedTensor bias(DType::BF16, {64});
  for (size_t i = 0; i < bias.bytes.size(); ++i) bias.bytes[i] = static_cast<uint8_t>(i + 1);
  EXPECT_EQ(load_expert_param("w2_bias", bias, g).bytes, std::vector<uint8_t>(128, 0));  // rank 1: zeros
  g.tp_rank = 0;
  EXPECT_EQ(load_expert_param("w2_bias", bias, g).bytes, bias.bytes);
}

TEST(ParamLoader, StackedGateAndUpGoToTheStartOfTheirPaddedHalves) {
  // I = 96 (floor(96/2) = 48 rows per rank), P = 64, H = 64 -> w13 [192, 32] -> [128, 32].
  RankGeometry g{.hidden = 64, .intermediate = 96, .padded_hidden = 64, .padded_intermediate = 64,
                 .tp_size = 2, .tp_rank = 1};
  OwnedTensor w13 = numbered(192, 32);
  OwnedTensor out = load_expert_param("w13_weight", w13, g);
  ASSERT_EQ(out.shape, (std::vector<uint64_t>{128, 32}));
  EXPECT_EQ(at(out, 0, 0), at(w13, 48, 0));     // gate rows [48, 96)
  EXPECT_EQ(at(out, 47, 5), at(w13, 95, 5));
  EXPECT_EQ(at(out, 48, 0), 0);                 // padding of the gate half
  EXPECT_EQ(at(out, 64, 0), at(w13, 96 + 48, 0));  // up rows [144, 192) at P
  EXPECT_EQ(at(out, 111, 31), at(w13, 191, 31));
  EXPECT_EQ(at(out, 112, 0), 0);
  OwnedTensor bias(DType::U8, {192});
  for (uint64_t i = 0; i < 192; ++i) bias.bytes[i] = static_cast<uint8_t>(i);
  OwnedTensor b = load_expert_param("w13_bias", bias, g);
  ASSERT_EQ(b.shape, (std::vector<uint64_t>{128}));
  EXPECT_EQ(b.bytes[0], 48);
  EXPECT_EQ(b.bytes[64], 144);
  EXPECT_EQ(b.bytes[112], 0);
}

TEST(ParamLoader, StackedW2NarrowsInStorageUnits) {
  // w2 U8 [H=64, I/2=48] -> per rank floor(48/2) = 24 bytes, padded to P/2 = 32.
  RankGeometry g{.hidden = 64, .intermediate = 96, .padded_hidden = 128, .padded_intermediate = 64,
                 .tp_size = 2, .tp_rank = 1};
  OwnedTensor w2 = numbered(64, 48);
  OwnedTensor out = load_expert_param("w2_weight", w2, g);
  ASSERT_EQ(out.shape, (std::vector<uint64_t>{128, 32}));
  EXPECT_EQ(at(out, 2, 0), at(w2, 2, 24));
  EXPECT_EQ(at(out, 2, 23), at(w2, 2, 47));
  EXPECT_EQ(at(out, 2, 24), 0);
  EXPECT_EQ(at(out, 64, 0), 0);  // hidden padding rows
}

TEST(ParamLoader, Fp6PacksFourElementsInThreeBytes) {
  // Quark MXFP6: w13 U8 [2I=128, 3H/4=48], w2 U8 [H=64, 3I/4=48]; EMULATION pads H and I to 32,
  // TP 2 gives rank 1 the second half of I: w2 bytes [24, 48) of each row, 3*32/4 = 24 per rank.
  RankGeometry g{.hidden = 64, .intermediate = 64, .padded_hidden = 96, .padded_intermediate = 32, .tp_size = 2, .tp_rank = 1};
  OwnedTensor w13 = numbered(128, 48);
  OwnedTensor a = load_expert_param("w13_weight", w13, g);
  ASSERT_EQ(a.shape, (std::vector<uint64_t>{64, 72}));  // 2P rows, 3*96/4 bytes
  EXPECT_EQ(at(a, 0, 0), at(w13, 32, 0));    // gate rows [32, 64) of rank 1
  EXPECT_EQ(at(a, 32, 47), at(w13, 96, 47)); // up rows start at P
  EXPECT_EQ(at(a, 0, 48), 0);                // hidden padding bytes
  OwnedTensor w2 = numbered(64, 48);
  OwnedTensor b = load_expert_param("w2_weight", w2, g);
  ASSERT_EQ(b.shape, (std::vector<uint64_t>{96, 24}));
  EXPECT_EQ(at(b, 5, 0), at(w2, 5, 24));
  EXPECT_EQ(at(b, 5, 23), at(w2, 5, 47));
  // A padded size that ends inside a 3-byte group is a planning bug, not a silent truncation.
  RankGeometry odd = g;
  odd.padded_hidden = 66;
  EXPECT_THROW(load_expert_param("w13_weight", w13, odd), std::exception);
}

TEST(ParamLoader, ScalarsPassThroughAndBadShapesAreInternalErrors) {
  RankGeometry g{.hidden = 64, .intermediate = 96, .padded_hidden = 64, .padded_intermediate = 96};
  OwnedTensor scalar(DType::F32, {2});
  scalar.bytes[0] = 9;
  EXPECT_EQ(load_expert_param("w13_weight_scale_2", scalar, g).bytes, scalar.bytes);
  EXPECT_THROW(load_expert_param("w13_weight", numbered(100, 32), g), std::exception);
  EXPECT_THROW(load_expert_param("w2_weight", numbered(64, 7), g), std::exception);
  EXPECT_THROW(load_expert_param("router", numbered(64, 32), g), std::exception);
}

// compressed-tensors' weight_shape lands in a parameter of the model dtype (torch.empty under
// vLLM's default dtype): the integers are rounded to it, 1407 -> 1408 in bf16, exact in f32.
TEST(ParamLoader, WeightShapeIsHeldInTheModelDtype) {
  for (uint64_t tp : {1u, 2u}) {
    RankGeometry g{.hidden = 2880, .intermediate = 1407, .padded_hidden = 2880, .padded_intermediate = 1407 / tp, .tp_size = tp};
    OwnedTensor shape(DType::I64, {2});
    const int64_t v[2] = {1407, 2880};
    std::memcpy(shape.bytes.data(), v, sizeof v);
    for (auto [dtype, first] : {std::pair{DType::BF16, 1408.0f}, std::pair{DType::F16, 1407.0f}, std::pair{DType::F32, 1407.0f}}) {
      g.params_dtype = dtype;
      const OwnedTensor held = load_expert_param("w13_weight_shape", shape, g);
      ASSERT_EQ(held.dtype, dtype);
      ASSERT_EQ(held.shape, (std::vector<uint64_t>{2}));
      EXPECT_EQ(float_element(held, 0), first) << dtype_name(dtype);  // the full sizes, on every rank
      EXPECT_EQ(float_element(held, 1), 2880.0f);
    }
  }
}

// WNA16 act-order (load_full_w2): at TP 2 the w2 group scales stay whole while the w2 codes are
// sliced; with the Marlin intermediate padding vLLM asserts, so the loader refuses; float scales
// land in the params dtype.
TEST(ParamLoader, Wna16ActOrderLoadsWholeW2ScalesAndRefusesPadding) {
  RankGeometry g{.hidden = 256, .intermediate = 512, .padded_hidden = 256, .padded_intermediate = 256, .tp_size = 2, .tp_rank = 1};
  g.int_transposed = true;
  g.wna16_full_w2 = true;
  g.params_dtype = DType::BF16;
  OwnedTensor scales(DType::F16, {4, 256});  // [I / 128, H]
  for (uint64_t i = 0; i < 4 * 256; ++i) {
    const uint16_t h = float_to_f16(static_cast<float>(i % 97) / 8.0f + 0.001f);
    std::memcpy(scales.bytes.data() + 2 * i, &h, 2);
  }
  const OwnedTensor w2_scales = load_expert_param("w2_scales", scales, g);
  EXPECT_EQ(w2_scales.dtype, DType::BF16);
  ASSERT_EQ(w2_scales.shape, (std::vector<uint64_t>{4, 256}));  // whole, not rank 1's 2 rows
  uint16_t first;
  std::memcpy(&first, w2_scales.bytes.data() + 2 * 300, 2);
  EXPECT_EQ(first, float_to_bf16(f16_to_float(float_to_f16(static_cast<float>(300 % 97) / 8.0f + 0.001f))));
  const OwnedTensor w2_codes = load_expert_param("w2_qweight", OwnedTensor(DType::I32, {64, 256}), g);  // [I / 8, H]
  EXPECT_EQ(w2_codes.shape, (std::vector<uint64_t>{32, 256}));
  g.padded_intermediate = 384;
  try {
    load_expert_param("w2_qweight", OwnedTensor(DType::I32, {64, 256}), g);
    ADD_FAILURE() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 3);
    EXPECT_NE(std::string(e.what()).find("unsupported with act-order"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moepack::convert
