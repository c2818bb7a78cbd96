// vLLM's CPU prepacks for the Arm and POWER experts (packers/cpu_prepack_moe.h):
// cpu_prepack_moe_weight(neon) and (vsx) for the unquantized experts, and
// cpu_prepack_moe_weight_int8(neon) for ArmCPUExpertsInt8. Each is checked against a
// loop-for-loop transliteration of its upstream pack_weight (csrc/cpu/micro_gemm @ e9d1398d9) run
// expert by expert over a stacked [E, O, K] weight as prepack_moe_weight(_int8)_impl does, on
// sizes that are multiples of the tiles but not powers of two; plus hand-drawn examples, round
// trips and the refusals of the upstream TORCH_CHECKs. (amx and vec: unquantized_layouts_test.cpp.)
#include <gtest/gtest.h>

#include <cstring>

#include "lib/core/error.h"
#include "packers/cpu_prepack_moe.h"
#include "packers/registry.h"
#include "tests/packers/triton_reference_ops.h"

namespace moepack::packers {
namespace {

using testing::pack_all;
using testing::random_tensor;

uint64_t elem_bytes(DType t) { return static_cast<uint64_t>(dtype_bits(t) / 8); }

// MicroGemm<NEON, BFloat16>::pack_weight (cpu_micro_gemm_neon.hpp), elements of `eb` bytes:
// per 8 output rows, per 4 input columns, the row pairs (0,1) (2,3) (4,5) (6,7), each written as
// four elements of the first row then four of the second.
void upstream_neon_pack(const uint8_t* weight, uint8_t* packed, uint64_t O, uint64_t K, uint64_t eb) {
  const uint64_t Nr = 8, Kt = 4, Cols = 2;
  for (uint64_t o_idx = 0; o_idx < O; o_idx += Nr) {
    uint8_t* dst = packed + o_idx * K * eb;
    for (uint64_t k_idx = 0; k_idx < K; k_idx += Kt)
      for (uint64_t pair = 0; pair < Nr; pair += Cols) {
        const uint8_t* row0 = weight + (o_idx + pair) * K * eb;
        const uint8_t* row1 = row0 + K * eb;
        for (uint64_t j = 0; j < Kt; ++j) std::memcpy(dst + j * eb, row0 + (k_idx + j) * eb, eb);
        for (uint64_t j = 0; j < Kt; ++j) std::memcpy(dst + (Kt + j) * eb, row1 + (k_idx + j) * eb, eb);
        dst += Kt * Cols * eb;
      }
  }
}

// MicroGemmINT8<NEON>::pack_weight (cpu_micro_gemm_int8_neon.hpp): the same walk with 8-byte runs
// (vst1q_s8 of vcombine_s8(vld1_s8(row0), vld1_s8(row1))).
void upstream_neon_int8_pack(const uint8_t* weight, uint8_t* packed, uint64_t O, uint64_t K) {
  const uint64_t Nr = 8, Kt = 8, Cols = 2;
  for (uint64_t o_idx = 0; o_idx < O; o_idx += Nr) {
    uint8_t* dst = packed + o_idx * K;
    for (uint64_t k_idx = 0; k_idx < K; k_idx += Kt)
      for (uint64_t pair = 0; pair < Nr; pair += Cols) {
        const uint8_t* row0 = weight + (o_idx + pair) * K + k_idx;
        const uint8_t* row1 = row0 + K;
        std::memcpy(dst, row0, Kt);
        std::memcpy(dst + Kt, row1, Kt);
        dst += Kt * Cols;
      }
  }
}

// MicroGemm<VSX, scalar_t>::pack_weight (cpu_micro_gemm_vsx.hpp): one running pointer; per 16
// output rows, per 2 input columns, per 4 rows the pairs (w[o+j][i], w[o+j][i+1]) for j = 0..3.
void upstream_vsx_pack(const uint8_t* weight, uint8_t* packed, uint64_t O, uint64_t K, uint64_t eb) {
  const uint64_t NSize = 16;
  uint8_t* pw = packed;
  auto put = [&](uint64_t row, uint64_t col) {
    std::memcpy(pw, weight + (row * K + col) * eb, eb);
    pw += eb;
  };
  for (uint64_t o_block = 0; o_block < O; o_block += NSize)
    for (uint64_t i = 0; i < K; i += 2)
      for (uint64_t o = o_block; o < o_block + NSize; o += 4)
        for (uint64_t j = 0; j < 4; ++j) {
          put(o + j, i);
          put(o + j, i + 1);
        }
}

// prepack_moe_weight(_int8)_impl: the expert loop over a stacked [E, O, K] weight with
// expert_stride = O * K elements, each expert packed on its own.
template <class PackOne>
std::vector<uint8_t> upstream_prepack(const OwnedTensor& stacked, PackOne&& pack_one) {
  const uint64_t E = stacked.shape[0], O = stacked.shape[1], K = stacked.shape[2], eb = elem_bytes(stacked.dtype);
  std::vector<uint8_t> out(stacked.bytes.size());
  for (uint64_t e = 0; e < E; ++e) pack_one(stacked.bytes.data() + e * O * K * eb, out.data() + e * O * K * eb, O, K, eb);
  return out;
}

// The layout applied to each expert slab of the stacked weight, concatenated (what convert writes).
std::vector<uint8_t> layout_prepack(const Layout& layout, const OwnedTensor& stacked) {
  const uint64_t E = stacked.shape[0], O = stacked.shape[1], K = stacked.shape[2], slab = O * K * elem_bytes(stacked.dtype);
  std::vector<uint8_t> out;
  for (uint64_t e = 0; e < E; ++e) {
    OwnedTensor one(stacked.dtype, {O, K});
    std::memcpy(one.bytes.data(), stacked.bytes.data() + e * slab, slab);
    const std::vector<uint8_t> p = pack_all(layout, one);
    out.insert(out.end(), p.begin(), p.end());
  }
  return out;
}

// Element (r, c) of a 16-bit tensor holds r * 256 + c, so a packed element names its source.
OwnedTensor tagged16(uint64_t rows, uint64_t cols) {
  OwnedTensor t(DType::BF16, {rows, cols});
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

std::string refusal_of(const Layout& layout, DType dtype, std::vector<uint64_t> shape) {
  OwnedTensor t(dtype, std::move(shape));
  std::vector<uint8_t> out(t.bytes.size());
  try {
    layout.pack(t.view(), out);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::bad_input);
    return e.what();
  }
  ADD_FAILURE() << layout.name() << " packed " << shape_string(t.shape);
  return "";
}

const CpuPrepackMoeWeightLayout kNeon(CpuMoeIsa::neon);
const CpuPrepackMoeWeightLayout kVsx(CpuMoeIsa::vsx);
const CpuPrepackMoeWeightInt8Layout kNeonInt8;

TEST(CpuPrepackMoeArmPower, NamesShapesAndRegistration) {
  EXPECT_EQ(kNeon.name(), "vllm.cpu_prepack_moe_weight(neon,e9d1398d9)");
  EXPECT_EQ(kVsx.name(), "vllm.cpu_prepack_moe_weight(vsx,e9d1398d9)");
  EXPECT_EQ(kNeonInt8.name(), "vllm.cpu_prepack_moe_weight_int8(neon,e9d1398d9)");
  const std::vector<uint64_t> shape = {96, 40};
  for (const Layout* l : std::initializer_list<const Layout*>{&kNeon, &kVsx, &kNeonInt8}) {
    EXPECT_EQ(l->packed_shape(shape), shape) << l->name();  // torch.empty_like: same shape and dtype
    ASSERT_NE(find_layout(l->name()), nullptr) << l->name();
    EXPECT_EQ(make_layout(l->name())->name(), l->name());
  }
  EXPECT_EQ(kNeonInt8.packed_dtype(DType::I8), DType::I8);
  EXPECT_EQ(kVsx.packed_dtype(DType::F32), DType::F32);
}

// Worked example (neon, O = 32, K = 8), drawn from pack_weight: [O/8][K/4][8][4].
TEST(CpuPrepackMoeArmPower, NeonPinnedExample) {
  const std::vector<uint8_t> p = pack_all(kNeon, tagged16(32, 8));
  for (uint64_t r = 0; r < 8; ++r)
    for (uint64_t j = 0; j < 4; ++j) {
      EXPECT_EQ(at16(p, r * 4 + j), tag(r, j));            // packed 0..31: rows 0..7, columns 0..3
      EXPECT_EQ(at16(p, 32 + r * 4 + j), tag(r, 4 + j));   // packed 32..63: the same rows, columns 4..7
      EXPECT_EQ(at16(p, 64 + r * 4 + j), tag(8 + r, j));   // group 1 (rows 8..15) starts at 8*K = 64
    }
  EXPECT_EQ(at16(p, 4), tag(1, 0));  // the pair (0, 1): row 1's run follows row 0's
  EXPECT_EQ(at16(p, 255), tag(31, 7));
}

// Worked example (vsx, O = 32, K = 4): [O/16][K/2][16][2].
TEST(CpuPrepackMoeArmPower, VsxPinnedExample) {
  const std::vector<uint8_t> p = pack_all(kVsx, tagged16(32, 4));
  for (uint64_t r = 0; r < 16; ++r) {
    EXPECT_EQ(at16(p, 2 * r), tag(r, 0));
    EXPECT_EQ(at16(p, 2 * r + 1), tag(r, 1));
    EXPECT_EQ(at16(p, 32 + 2 * r), tag(r, 2));
    EXPECT_EQ(at16(p, 32 + 2 * r + 1), tag(r, 3));
    EXPECT_EQ(at16(p, 64 + 2 * r), tag(16 + r, 0));  // group 1 starts at 16*K = 64
  }
}

// Worked example (neon int8, O = 32, K = 16): [O/8][K/8][8][8], bytes r*16 + c for rows < 16.
TEST(CpuPrepackMoeArmPower, NeonInt8PinnedExample) {
  OwnedTensor w(DType::I8, {32, 16});
  for (uint64_t r = 0; r < 32; ++r)
    for (uint64_t c = 0; c < 16; ++c) w.bytes[r * 16 + c] = static_cast<uint8_t>(r * 16 + c);
  const std::vector<uint8_t> p = pack_all(kNeonInt8, w);
  for (uint64_t r = 0; r < 8; ++r)
    for (uint64_t j = 0; j < 8; ++j) {
      EXPECT_EQ(p[r * 8 + j], r * 16 + j);             // bytes 0..63: rows 0..7, columns 0..7
      EXPECT_EQ(p[64 + r * 8 + j], r * 16 + 8 + j);    // bytes 64..127: columns 8..15
      EXPECT_EQ(p[128 + r * 8 + j], (8 + r) * 16 + j);  // group 1 starts at 8*K = 128
    }
}

TEST(CpuPrepackMoeArmPower, MatchUpstreamLoopsOnAwkwardSizes) {
  // [E, O, K] with several experts; O a multiple of 32 (prepack), K of the run, neither a power
  // of two where avoidable: e.g. I = 48 padded to P = 64 gives w13 [128, H], w2 [H, 64]; H = 96, 160.
  const std::vector<std::vector<uint64_t>> shapes = {{3, 32, 8}, {3, 96, 40}, {2, 160, 96}, {5, 224, 24}, {2, 64, 160}};
  uint64_t seed = 11;
  for (const auto& s : shapes) {
    SCOPED_TRACE(shape_string(s));
    const OwnedTensor bf = random_tensor(DType::BF16, s, seed++);
    EXPECT_EQ(layout_prepack(kNeon, bf), upstream_prepack(bf, upstream_neon_pack));
    for (DType t : {DType::BF16, DType::F16, DType::F32}) {
      const OwnedTensor w = random_tensor(t, s, seed++);
      EXPECT_EQ(layout_prepack(kVsx, w), upstream_prepack(w, upstream_vsx_pack)) << dtype_name(t);
      testing::expect_round_trip(kVsx, t, {s[1], s[2]}, seed);
    }
    const OwnedTensor i8 = random_tensor(DType::I8, s, seed++);
    EXPECT_EQ(layout_prepack(kNeonInt8, i8),
              upstream_prepack(i8, [](const uint8_t* w, uint8_t* p, uint64_t O, uint64_t K, uint64_t) { upstream_neon_int8_pack(w, p, O, K); }));
    testing::expect_round_trip(kNeon, DType::BF16, {s[1], s[2]}, seed);
    testing::expect_round_trip(kNeonInt8, DType::I8, {s[1], s[2]}, seed);
  }
  // Runs shorter than 8: K = 12 (neon), K = 6 (vsx).
  const OwnedTensor k12 = random_tensor(DType::BF16, {2, 64, 12}, 7);
  EXPECT_EQ(layout_prepack(kNeon, k12), upstream_prepack(k12, upstream_neon_pack));
  const OwnedTensor k6 = random_tensor(DType::F16, {2, 96, 6}, 8);
  EXPECT_EQ(layout_prepack(kVsx, k6), upstream_prepack(k6, upstream_vsx_pack));
}

TEST(CpuPrepackMoeArmPower, RefusesWhatUpstreamChecks) {
  // prepack_moe_weight(_int8): output size % 32 (VSX's own NSize of 16 is not enough).
  EXPECT_NE(refusal_of(kNeon, DType::BF16, {48, 64}).find("multiple of 32"), std::string::npos);
  EXPECT_NE(refusal_of(kVsx, DType::BF16, {48, 64}).find("multiple of 32"), std::string::npos);
  EXPECT_NE(refusal_of(kNeonInt8, DType::I8, {16, 64}).find("multiple of 32"), std::string::npos);
  // pack_weight's input-size checks: bfmmla K 4, VSX pairs, smmla K 8.
  EXPECT_NE(refusal_of(kNeon, DType::BF16, {64, 30}).find("multiple of 4"), std::string::npos);
  EXPECT_NE(refusal_of(kVsx, DType::F32, {64, 33}).find("multiple of 2"), std::string::npos);
  EXPECT_NE(refusal_of(kNeonInt8, DType::I8, {64, 12}).find("multiple of 8"), std::string::npos);
  // The NEON MicroGemm takes bfloat16 only; every other type's pack_weight raises.
  for (DType t : {DType::F16, DType::F32})
    EXPECT_NE(refusal_of(kNeon, t, {64, 64}).find("NEON BFMMLA MicroGemm only supports bfloat16."), std::string::npos) << dtype_name(t);
  // weight.data_ptr<int8_t>() takes int8 only.
  for (DType t : {DType::U8, DType::F8_E4M3, DType::BF16}) testing::expect_dtype_refused(kNeonInt8, t, {64, 64});
  testing::expect_refused(kVsx, DType::BF16, {64, 0});
}

}  // namespace
}  // namespace moepack::packers
