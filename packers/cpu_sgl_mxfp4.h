// sgl-kernel CPU prepack of MXFP4 MoE weights and E8M0 scales, as vLLM's CPU MXFP4 W4A16 MoE
// (CPUExpertsMxfp4, PR #41922 lineage) uses them: `convert_weight_packed` (uint8 branch: the
// 32-way nibble split) and `convert_scale_packed`.
//
// Upstream definitions followed:
//   vllm-project/vllm : csrc/cpu/sgl-kernels/gemm.cpp @ e9d1398d9 (`pack_vnni<uint8_t>`,
//     `convert_weight_packed`, `convert_scale_packed`; "Adapted from" sgl-project/sglang :
//     sgl-kernel/csrc/cpu/gemm.cpp), csrc/cpu/sgl-kernels/gemm.h (TILE_N 16, TILE_K 32,
//     block_size_n() = BLOCK_N = 32, get_row_size<uint8_t>)
//   vllm-project/vllm : vllm/model_executor/layers/fused_moe/experts/cpu_moe.py
//     `prepare_mxfp4_moe_layer_for_cpu` @ e9d1398d9 (both ops on w13/w2 and their scales; only
//     the gpt-oss converter has the CPU branch, which pads I and H to 32)
//
// ---- convert_weight_packed (MXFP4 bytes) ----------------------------------------------------
// Each block of 32 output rows [32, Kb] is rewritten in place of the same byte range as
// [Kb, 32]: for byte column kb the 64 nibbles of the 32 rows are listed row by row (row r low
// nibble = FP4 element (r, 2kb) -> slot 2r, high nibble (r, 2kb+1) -> slot 2r+1) and byte j of
// the new row is  slot[j] | slot[j+32] << 4. So byte (kb, j) of block nb holds
//   low nibble : element (32*nb + j/2,      2*kb + j%2)
//   high nibble: element (32*nb + 16 + j/2, 2*kb + j%2)
// at offset 32*nb*Kb + 32*kb + j. The shape is unchanged ([OC, Kb]).
//
//   block rows 0..31, byte column kb = 0 (nibble <row,k>):
//     byte:   0             1             2             3          ...  31
//     low:  <0,0>         <0,1>         <1,0>         <1,1>        ... <15,1>
//     high: <16,0>        <16,1>        <17,0>        <17,1>       ... <31,1>
//   Example: W[n][0] = 0x10 | (n % 16) gives packed bytes 00 11 11 11 22 11 ... (layouts-marlin-vnni-e8m0.md 3.4)
//
// Requires OC % 32 == 0 (upstream checks only OC % 16 but then reads slot[j+32] of an
// uninitialised buffer for a 16-row tail, so a 16-row tail has no defined result) and
// K % 32 == 0, i.e. Kb % 16 == 0 (upstream TORCH_CHECK on 2*IC % TILE_K).
//
// ---- convert_scale_packed (E8M0 bytes) -----------------------------------------------------
// Each block of 32 rows [32, G] is transposed to [G, 32]: offset 32*nb*G + 32*g + n%32.
//
//   block of rows 0..31, G = 2:
//     canonical  s<0,0> s<0,1> / s<1,0> s<1,1> / ...      packed  s<0,0> s<1,0> ... s<31,0> s<0,1> s<1,1> ... s<31,1>
//
// Requires N % 32 == 0.
//
// Canonical inputs: one expert's w13/w2 FP4 weight U8 [OC, K/2] (checkpoint [N, K] orientation)
// and E8M0 scale bytes [N, K/32], with the CPU padding (I, H to 32) applied.
//
// ---- convert_weight_packed (FP8 E4M3 bytes: the generic pack_vnni, VNNI-2) -------------------
// vLLM's CPU FP8 W8A16 block MoE (CPUExpertsFp8; experts/cpu_moe.py
// `prepare_fp8_moe_layer_for_cpu` @ e9d1398d9) packs w13 and w2 with the same op, whose
// Float8_e4m3fn branch is the generic template: each block of up to 32 output rows (n_size =
// min(32, OC - 32*nb)) becomes [K/2, n_size, 2] in place of its byte range:
//   element (32*nb + n, 2*k + d) -> byte 32*nb*K + k*2*n_size + 2*n + d
//   block of rows 0..31, K = 4:  w<0,0> w<0,1> w<1,0> w<1,1> ... w<31,0> w<31,1> w<0,2> w<0,3> ...
// Requires OC % 16 == 0 (TILE_N; a 16-row tail block packs with n_size 16) and K % 32 == 0
// (TILE_K). The shape is unchanged ([OC, K]).
//
// ---- convert_weight_packed (INT8: pack_vnni<int8_t>, VNNI-4 with s8s8 compensation) ---------
// vLLM's CPU INT8 W8A8 MoE (CPUExpertsInt8.process_weights_after_loading @ e9d1398d9): each block
// of 32 rows (N == BLOCK_N is checked) becomes [K/4, 32, 4] followed by 32 int32 sums, so a row
// takes K + 4 bytes (get_row_size<int8_t>):
//   element (32*nb + n, 4*k + d) -> byte 32*nb*(K+4) + 128*k + 4*n + d
//   bytes 32*nb*(K+4) + 32*K + 4*n .. +3: comp[n] = sum over k of 128 * w[n][k] (s8s8_compensation:
//   dpbusd of 0x80 with the packed bytes), little-endian int32
// The index map covers the weight bytes; the sums are values (lib/convert/cpu_int8.h writes them).
// Requires OC % 32 == 0 and K % 32 == 0. The shape becomes [OC, K + 4].
#pragma once

#include <algorithm>

#include "packers/index_map.h"

namespace moepack::packers {

inline constexpr uint64_t kSglBlockN = 32;  // sgl-kernel block_size_n()

class CpuSglWeightPackedMxfp4Layout final : public IndexMap<CpuSglWeightPackedMxfp4Layout> {
 public:
  std::string name() const override { return std::string(layout_id::cpu_sgl_mxfp4_weight); }
  DType packed_dtype(DType) const override { return DType::U8; }
  Accepts accepts() const override;
  Units units(DType) const override { return {.canonical_bits = 4, .packed_bits = 4}; }
  void pack(const TensorView& canonical, std::span<uint8_t> packed) const override;  // bulk: whole bytes
  void unpack(std::span<const uint8_t> packed, OwnedTensor& canonical) const override;  // bulk inverse

  // Index map at nibble granularity: FP4 element (row, k) -> packed byte offset, and whether it
  // is that byte's high nibble.
  struct NibblePosition {
    uint64_t byte_offset;
    bool high;
  };
  static NibblePosition packed_position(std::span<const uint64_t> canonical_shape, uint64_t row, uint64_t k) {
    const uint64_t bytes_per_row = canonical_shape[1];
    const uint64_t block = row / kSglBlockN, r = row % kSglBlockN, kb = k / 2;
    const uint64_t j = 2 * (r % (kSglBlockN / 2)) + k % 2;
    return {block * kSglBlockN * bytes_per_row + kb * kSglBlockN + j, r >= kSglBlockN / 2};
  }

  // Units are FP4 codes: (row, k) is unit row*K + k, the packed unit 2*byte + high.
  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t rows = shape[0], k_elems = 2 * shape[1];
    for (uint64_t row = 0; row < rows; ++row)
      for (uint64_t k = 0; k < k_elems; ++k) {
        const NibblePosition p = packed_position(shape, row, k);
        fn(row * k_elems + k, 2 * p.byte_offset + (p.high ? 1 : 0));
      }
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override { return {shape[0], shape[1]}; }
};

class CpuSglScalePackedLayout final : public IndexMap<CpuSglScalePackedLayout> {
 public:
  std::string name() const override { return std::string(layout_id::cpu_sgl_e8m0_scale); }
  DType packed_dtype(DType canonical) const override { return canonical; }
  Accepts accepts() const override;

  // Index map: each 32-row block transposed, scale (n, g) -> (n/32)*32*G + 32*g + n%32.
  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t groups = shape[1];
    for (uint64_t n = 0; n < shape[0]; ++n) {
      const uint64_t row = (n / kSglBlockN) * kSglBlockN * groups + n % kSglBlockN;
      for (uint64_t g = 0; g < groups; ++g) fn(n * groups + g, row + g * kSglBlockN);
    }
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override { return {shape[0], shape[1]}; }
};

class CpuSglWeightPackedFp8Layout final : public IndexMap<CpuSglWeightPackedFp8Layout> {
 public:
  std::string name() const override { return std::string(layout_id::cpu_sgl_fp8_weight); }
  DType packed_dtype(DType canonical) const override { return canonical; }
  Accepts accepts() const override;
  void pack(const TensorView& canonical, std::span<uint8_t> packed) const override;  // bulk: byte pairs

  // Index map in bytes: (row, k) -> the VNNI-2 slot of its 32-row block.
  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t rows = shape[0], k = shape[1];
    for (uint64_t row = 0; row < rows; ++row) {
      const uint64_t n0 = row / kSglBlockN * kSglBlockN, n = row - n0, n_size = std::min(kSglBlockN, rows - n0);
      for (uint64_t c = 0; c < k; ++c) fn(row * k + c, n0 * k + (c / 2) * 2 * n_size + 2 * n + c % 2);
    }
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override { return {shape[0], shape[1]}; }
};

class CpuSglVnni4Int8Layout final : public IndexMap<CpuSglVnni4Int8Layout> {
 public:
  std::string name() const override { return std::string(layout_id::cpu_sgl_int8_weight); }
  DType packed_dtype(DType canonical) const override { return canonical; }
  Accepts accepts() const override;

  // Index map in bytes: (row, k) -> its VNNI-4 slot; the compensation bytes are not visited.
  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t rows = shape[0], k = shape[1];
    for (uint64_t row = 0; row < rows; ++row) {
      const uint64_t base = (row / kSglBlockN) * kSglBlockN * (k + 4), n = row % kSglBlockN;
      for (uint64_t c = 0; c < k; ++c) fn(row * k + c, base + (c / 4) * 4 * kSglBlockN + 4 * n + c % 4);
    }
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override { return {shape[0], shape[1] + 4}; }
};

}  // namespace moepack::packers
