// sgl-kernel's CPU INT4 prepack, as vLLM's CPU W4A16 MoE (CPUExpertsInt4) holds GPTQ, AutoAWQ
// and compressed-tensors int4 experts after process_weights_after_loading.
//
// Upstream definitions followed (vllm-project/vllm @ e9d1398d9):
//   vllm/model_executor/layers/fused_moe/oracle/int_wna16.py `_process_weights_cpu` (AutoAWQConfig
//     -> CPUQuantAlgo.AWQ, AutoGPTQConfig / compressed-tensors -> CPUQuantAlgo.GPTQ)
//   vllm/model_executor/layers/fused_moe/experts/cpu_moe.py `prepare_int4_moe_layer_for_cpu`
//     (w13 and w2 each through convert_weight_packed_scale_zp)
//   csrc/cpu/sgl-kernels/gemm_int4.cpp `convert_weight_packed_scale_zp` (int4pack: AWQ's
//     shift order 0 4 1 5 2 6 3 7, or autogptq_to_int4pack -> unpack_4bit_to_32bit_signed; both
//     give an [N, K] byte per code and an [N, G] zero point, then the per-expert
//     `convert_int4_weight_packed_with_compensation`), csrc/cpu/sgl-kernels/gemm.h (TILE_N 16,
//     block_size_n() = BLOCK_N = 32, get_4bit_block_k_size: block_k = min(group_size, 128))
//   csrc/cpu/sgl-kernels/moe_int4.cpp `fused_experts_int4_w4a8_kernel_impl` (how it reads them)
// ("Adapted from sgl-project/sglang : sgl-kernel/csrc/cpu".)
//
// q[k][n] is the 4-bit code of input k, output n of one expert (K inputs, N outputs, G groups of
// K/G inputs). The canonical weight is the param as vLLM loads it, transposed (int32 words):
//   gptq  I32 [K/8, N]: q[k][n] = field k%8 of word (k/8, n)             (GPTQ, compressed-tensors)
//   awq   I32 [K, N/8]: q[k][n] = field AWQ[n%8] of word (k, n/8), AWQ = 0 4 1 5 2 6 3 7
// (field f = bits [4f, 4f+4)).
//
// ---- weight: U8 [N/32, K/B, B*16 + 128] per expert, B = block_k ----------------------------------
// Output rows are cut in blocks of 32 (nc), inputs in blocks of B (kc); block (nc, kc) takes
// B*16 bytes of codes, then 32 little-endian int32 compensation sums, at byte (nc*K/B + kc) *
// (B*16 + 128). In the codes, input kk = k % B and output j = n % 32 of the block go to
//   byte (kk/4)*64 + 4*c + kk%4,  c = 8*(j/16) + j%8,  high nibble iff (j/8) is odd
// i.e. four inputs in a row (VNNI-4) for 16 byte columns, each byte pairing outputs j and j+8:
//
//   block (nc, kc), inputs k0..k0+3 (one 64-byte row), outputs n = 32nc + j:
//     byte   0   1   2   3 |  4   5   6   7 | ... | 28 .. 31 | 32 .. 35 | ... | 60 .. 63
//     low   j0 (k0..k0+3)  | j1             | ... | j7       | j16      | ... | j23
//     high  j8             | j9             | ... | j15      | j24      | ... | j31
//   Worked example, q[k][n] = (k + n) % 16: bytes 0..3 = 80 91 A2 B3, bytes 4..7 = 91 A2 B3 C4,
//   bytes 32..35 = 80 91 A2 B3 (j16 = 0, j24 = 8); with B = 32, the second 64-byte row starts
//   C4 D5 E6 F7.
// The sums are values (compensation[j] = sum over the block's inputs of q - zero point, the
// kernel's correction for its uint8 activations with zero point 128): the index map leaves
// those 128 bytes to the derivation that writes them (lib/convert/cpu_int4.h).
// Needs N % 32 == 0 and K % B == 0 (the op's views); B is a multiple of 4 (VNNI-4 loop).
//
// ---- scales and zero points: [N/32, G, 32] per expert ---------------------------------------------
// The [G, N] param (scales, or the unpacked zero points) is cut in 32-output blocks, each
// transposed to [G, 32]: (g, n) -> (n/32)*32G + 32g + n%32.
//   G = 2, N = 64:  s<0,0> s<0,1> .. s<0,31> s<1,0> .. s<1,31> | s<0,32> .. s<0,63> s<1,32> .. s<1,63>
// Scales are widened to fp32 (`new_scales.to(at::kFloat)`, exact from bf16 / fp16); zero
// points move as int8 bytes (what value they carry is the derivation's: lib/convert/cpu_int4.h).
// Needs N % 32 == 0.
#pragma once

#include <array>

#include "packers/index_map.h"

namespace moepack::packers {

enum class CpuInt4Source { gptq, awq };  // gptq: packed along K (GPTQ, compressed-tensors); awq: along N, interleaved

inline constexpr uint64_t kCpuInt4BlockN = 32;              // BLOCK_N = block_size_n()
inline constexpr uint64_t kCpuInt4CompensationBytes = 128;  // 32 int32 sums per block

class CpuSglInt4WeightLayout final : public IndexMap<CpuSglInt4WeightLayout> {
 public:
  CpuSglInt4WeightLayout(CpuInt4Source source, uint64_t block_k) : source_(source), block_k_(block_k) {}
  std::string name() const override;
  DType packed_dtype(DType) const override { return DType::U8; }
  Accepts accepts() const override;
  Units units(DType) const override { return {.canonical_bits = 4, .packed_bits = 4}; }

  uint64_t block_k() const { return block_k_; }
  // Bytes of one (nc, kc) block: the codes, then the compensation sums.
  uint64_t block_bytes() const { return block_k_ * kCpuInt4BlockN / 2 + kCpuInt4CompensationBytes; }
  // Logical (K, N) of a canonical shape.
  std::pair<uint64_t, uint64_t> size_kn(std::span<const uint64_t> shape) const {
    return source_ == CpuInt4Source::gptq ? std::pair{shape[0] * 8, shape[1]} : std::pair{shape[0], shape[1] * 8};
  }
  // 4-bit unit index of q[k][n] in the canonical words.
  uint64_t canonical_unit(uint64_t k, uint64_t n, uint64_t size_n) const {
    static constexpr std::array<uint64_t, 8> kAwqField = {0, 4, 1, 5, 2, 6, 3, 7};
    if (source_ == CpuInt4Source::gptq) return ((k / 8) * size_n + n) * 8 + k % 8;
    return (k * (size_n / 8) + n / 8) * 8 + kAwqField[n % 8];
  }
  // Byte of the packed slab holding q[k][n], and whether it is that byte's high nibble.
  uint64_t packed_byte(uint64_t k, uint64_t n, uint64_t size_k) const {
    const uint64_t kc_count = size_k / block_k_, j = n % kCpuInt4BlockN, kk = k % block_k_;
    const uint64_t block = (n / kCpuInt4BlockN) * kc_count + k / block_k_;
    return block * block_bytes() + (kk / 4) * (2 * kCpuInt4BlockN) + 4 * (8 * (j / 16) + j % 8) + kk % 4;
  }
  static bool packed_high(uint64_t n) { return ((n % kCpuInt4BlockN) / 8) % 2 == 1; }
  // Byte of the compensation sum of output n in input block kc.
  uint64_t compensation_byte(uint64_t kc, uint64_t n, uint64_t size_k) const {
    const uint64_t block = (n / kCpuInt4BlockN) * (size_k / block_k_) + kc;
    return block * block_bytes() + block_k_ * kCpuInt4BlockN / 2 + 4 * (n % kCpuInt4BlockN);
  }

  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const auto [size_k, size_n] = size_kn(shape);
    for (uint64_t k = 0; k < size_k; ++k)
      for (uint64_t n = 0; n < size_n; ++n) fn(canonical_unit(k, n, size_n), 2 * packed_byte(k, n, size_k) + (packed_high(n) ? 1 : 0));
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override {
    const auto [size_k, size_n] = size_kn(shape);
    return {size_n / kCpuInt4BlockN, size_k / block_k_, block_bytes()};
  }

 private:
  CpuInt4Source source_;
  uint64_t block_k_;
};

enum class CpuInt4GroupRows { scales_f32, zero_points_i8 };

class CpuSglInt4GroupRowsLayout final : public IndexMap<CpuSglInt4GroupRowsLayout> {
 public:
  explicit CpuSglInt4GroupRowsLayout(CpuInt4GroupRows what) : what_(what) {}
  std::string name() const override;
  DType packed_dtype(DType canonical) const override { return what_ == CpuInt4GroupRows::scales_f32 ? DType::F32 : canonical; }
  Accepts accepts() const override;
  Units units(DType canonical) const override;

  // Index map in elements: (g, n) of [G, N] -> its slot of the 32-output block.
  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t groups = shape[0], n_size = shape[1];
    for (uint64_t g = 0; g < groups; ++g)
      for (uint64_t n = 0; n < n_size; ++n) fn(g * n_size + n, (n / kCpuInt4BlockN) * kCpuInt4BlockN * groups + g * kCpuInt4BlockN + n % kCpuInt4BlockN);
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override { return {shape[1] / kCpuInt4BlockN, shape[0], kCpuInt4BlockN}; }

 private:
  CpuInt4GroupRows what_;
};

}  // namespace moepack::packers
