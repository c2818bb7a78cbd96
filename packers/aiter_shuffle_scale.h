// AITER E8M0 scale preshuffles for the MXFP4 MoE kernels on ROCm: `shuffle_scale` with
// `is_guinterleave` (= `shuffle_scale_a16w4`) and without it (= `e8m0_shuffle`), plus the
// dtype view vLLM's SiTU path applies first.
//
// Upstream definitions followed:
//   ROCm/aiter : aiter/ops/shuffle.py @ v0.1.19
//     `shuffle_scale(src [E*N, G], experts_cnt, is_guinterleave=True, gate_up)`: G padded to a
//       multiple of 8 (G8) with 0x7F (E8M0 1.0); view [E, N1, 2, 16, G8/8, 2, 4] permute
//       (0,1,4,6,3,5,2), or with gate_up view [E, 2, N1, 16, G8/8, 2, 4] permute
//       (0,2,4,6,3,5,1), N1 = N/32; result [E*N, G8]. `shuffle_scale_a16w4(src, E, gate_up)` is exactly this.
//     `shuffle_scale(src [M, G])` (is_guinterleave=False): allocates [round_up(M, 256),
//       round_up(G, 8)] with torch.empty (padding NOT initialised), copies src in, views
//       [M/32, 2, 16, G8/8, 2, 4], permutes (0,3,5,2,4,1).
//   ROCm/aiter : aiter/utility/fp4_utils.py @ v0.1.19 `e8m0_shuffle(scale)` = `shuffle_scale(scale)`.
//   vllm-project/vllm : vllm/_aiter_ops.py `shuffle_scale_a16w4`;
//     vllm/model_executor/layers/fused_moe/oracle/mxfp4.py @ e9d1398d9 (callers: the AITER path
//     table in registry.cpp).
//
// Both branches give the SAME byte order for the same [N, G] block (checked in the tests); they
// differ in padding and in how the result is shaped. Each 32-row block n1 and group of 8 scale
// columns k1 fill 256 bytes = 64 dwords; dword (kl, nl), kl in 0..3, nl in 0..15, holds
//   S(r0, 8k1+kl)  S(r1, 8k1+kl)  S(r0, 8k1+4+kl)  S(r1, 8k1+4+kl)
// where r0, r1 are the two rows that share lane nl:
//   gate_up=0 (and e8m0_shuffle): r0 = 32*n1 + nl,             r1 = 32*n1 + 16 + nl
//   gate_up=1:                    r0 = 16*n1 + nl (gate half), r1 = N/2 + 16*n1 + nl (up half)
// Index map (canonical scale (n, g) of one expert [N, G], G8 = round_up(G, 8)):
//   g = 8*k1 + 4*kp + kl;  n is r0 (np = 0) or r1 (np = 1) of lane nl in block n1
//   offset = n1*32*G8 + k1*256 + kl*64 + nl*4 + kp*2 + np
//
// Drawn example, one expert, N = 32, G = 8, gate_up=0 (gate_up=1 is identical at N = 32):
//   packed bytes 0..7    : S(0,0) S(16,0) S(0,4) S(16,4) | S(1,0) S(17,0) S(1,4) S(17,4)
//   packed bytes 60..63  : S(15,0) S(31,0) S(15,4) S(31,4)
//   packed bytes 64..67  : S(0,1) S(16,1) S(0,5) S(16,5)
//   packed bytes 252..255: S(15,3) S(31,3) S(15,7) S(31,7)
// With N = 64 and gate_up=1, bytes 0..3 are S(0,0) S(32,0) S(0,4) S(32,4) and the second
// 32-row block (bytes 256..) pairs gate rows 16..31 with up rows 48..63.
// With G = 4 the columns 4..7 are padding: 0x7F for is_guinterleave, 0x00 for e8m0_shuffle
// (vLLM leaves uninitialised memory there, so there is no exact value to match; zero is the
// deterministic choice).
//
// Canonical input: one expert's E8M0 scale bytes [N, K/32] (U8, or F8_E8M0 after
// `torch.view(float8_e8m0fnu)`; the dtype is kept), rows in the order of the matching weight
// (gate_up=1: [gate; up], gpt-oss after `vllm.aiter_deinterleave_gate_up_rows`), I and H
// padding applied. Every form needs N % 32 == 0 (torch's view for is_guinterleave; for
// e8m0_shuffle, so that 32-row blocks never straddle two experts).
//
// Packed per expert: [N, G8]. The whole parameter vLLM keeps:
//   is_guinterleave (both gate_up)   [E*N, G8]   (2-D, never reshaped back)
//   e8m0_shuffle param=2d            [E*N, G8]   (SiTU w2 scale, kept 2-D)
//   e8m0_shuffle param=3d            [E, N, G8]  (W4A4: `.view(s0, s1, -1)`)
// e8m0_shuffle pads the flattened E*N rows to a multiple of 256 with uninitialised rows that
// belong to no expert; per-expert slabs cannot express that, so parameter_shape refuses
// E*N % 256 != 0 (vLLM's own sizes never hit it: W4A4 pads I and H to 256, and the SiTU w2
// scale has N = H padded to 128, so only an odd expert count with H % 256 == 128 would).
#pragma once

#include "packers/identity.h"
#include "packers/index_map.h"

namespace moepack::packers {

enum class AiterScaleShuffle {
  guinterleave,          // shuffle_scale(is_guinterleave=True, gate_up=False)
  guinterleave_gate_up,  // shuffle_scale(is_guinterleave=True, gate_up=True)
  e8m0_param2d,          // e8m0_shuffle, parameter kept as [E*N, G8]
  e8m0_param3d,          // e8m0_shuffle, parameter viewed back to [E, N, G8]
};

class AiterShuffleScaleLayout final : public IndexMap<AiterShuffleScaleLayout> {
 public:
  static constexpr uint64_t kBlockRows = 32;  // N_Pack * N_Lane
  static constexpr uint64_t kLanes = 16;      // N_Lane
  static constexpr uint64_t kGroupPad = 8;    // K_Pack * K_Lane: scale columns per 256-byte tile

  explicit AiterShuffleScaleLayout(AiterScaleShuffle variant) : variant_(variant) {}

  std::string name() const override;
  DType packed_dtype(DType canonical) const override { return canonical; }
  Accepts accepts() const override;
  Units units(DType) const override { return {.pad_byte = pad_byte()}; }
  std::vector<uint64_t> parameter_shape(uint64_t num_experts, std::span<const uint64_t> canonical_shape) const override;

  // The byte vLLM leaves in padded scale columns (g >= G).
  uint8_t pad_byte() const;

  // Index map (the header's): row n is r0 (np = 0) or r1 (np = 1) of lane nl in block n1, and
  // g = 8*k1 + 4*kp + kl; offset = n1*32*G8 + k1*256 + kl*64 + nl*4 + kp*2 + np.
  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t rows = shape[0], groups = shape[1], padded_groups = round_up(groups, kGroupPad), half = rows / 2;
    for (uint64_t n = 0; n < rows; ++n) {
      const uint64_t n1 = gate_up() ? (n % half) / kLanes : n / kBlockRows;
      const uint64_t np = gate_up() ? n / half : (n / kLanes) % 2;
      const uint64_t row = n1 * kBlockRows * padded_groups + (n % kLanes) * 4 + np;
      for (uint64_t g = 0; g < groups; ++g) fn(n * groups + g, row + (g / kGroupPad) * 256 + (g % 4) * 64 + ((g / 4) % 2) * 2);
    }
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override {
    return {shape[0], round_up(shape[1], kGroupPad)};
  }

 private:
  bool gate_up() const { return variant_ == AiterScaleShuffle::guinterleave_gate_up; }

  AiterScaleShuffle variant_;
};

// torch `.view(torch.float8_e8m0fnu)` of a one-byte tensor: the bytes unchanged, the dtype
// F8_E8M0. vLLM's SiTU branch views both scale tensors this way before shuffling them, so the
// parameters it keeps are float8_e8m0fnu (upstream: the SITU branch of
// `convert_weight_to_mxfp4_moe_kernel_format`, vllm/.../fused_moe/oracle/mxfp4.py @ e9d1398d9).
// Canonical input: any one-byte tensor (E8M0 scale bytes); shape unchanged.
class E8m0ViewLayout final : public ByteIdentityLayout<E8m0ViewLayout> {
 public:
  std::string name() const override { return std::string(layout_id::view_e8m0); }
  DType packed_dtype(DType) const override { return DType::F8_E8M0; }
  Accepts accepts() const override;
};

}  // namespace moepack::packers
